# SPDX-License-Identifier: BSD-3-Clause
# src/mesh: filled in by its issue.
