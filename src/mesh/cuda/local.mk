# SPDX-License-Identifier: BSD-3-Clause
# src/mesh/cuda: the CUDA backend, filled in by its issue.
