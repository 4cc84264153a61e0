# SPDX-License-Identifier: BSD-3-Clause
# mpi_tests/failure: failure, bad input and soak tests (hardening issue).
