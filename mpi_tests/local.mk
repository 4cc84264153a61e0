# SPDX-License-Identifier: BSD-3-Clause
# mpi_tests: filled in by its issue.
