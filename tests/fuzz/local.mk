# SPDX-License-Identifier: BSD-3-Clause
# libFuzzer targets (clang): `make fuzz FUZZ_SECONDS=60` builds and runs each.
FUZZ_SECONDS = 60
fuzz:
	$(SHELL) $(top_srcdir)/tests/fuzz/run.sh $(top_builddir) $(FUZZ_SECONDS)
.PHONY: fuzz
EXTRA_DIST += tests/fuzz/run.sh tests/fuzz/targets.sh tests/fuzz/fuzz_transfers.c \
	tests/fuzz/corpus/transfers
