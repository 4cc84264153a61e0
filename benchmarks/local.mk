# SPDX-License-Identifier: BSD-3-Clause
# benchmarks: filled in by its issue.
