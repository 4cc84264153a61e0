# SPDX-License-Identifier: BSD-3-Clause
# src/mesh/wasm: the wasm backend, filled in by its issue.
