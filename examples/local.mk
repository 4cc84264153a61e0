# SPDX-License-Identifier: BSD-3-Clause
# examples: filled in by its issue.
