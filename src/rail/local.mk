# SPDX-License-Identifier: BSD-3-Clause
# src/rail: filled in by its issue.
