# SPDX-License-Identifier: BSD-3-Clause
# src: the layering check of src/README.md, run by `make check` once the
# library is built (it reads the objects' symbols and the sources'
# includes).
TESTS += src/check_layers.sh
dist_noinst_SCRIPTS += src/check_layers.sh
