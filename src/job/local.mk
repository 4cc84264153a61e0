# SPDX-License-Identifier: BSD-3-Clause
# src/job: filled in by its issue.
