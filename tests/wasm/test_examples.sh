#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The committed example modules are what their .wat assembles to.
set -eu
fail=0
for e in counter trap; do
    built="$top_builddir/examples/wasm/$e/$e.wasm.built"
    committed="$top_srcdir/examples/wasm/$e/$e.wasm"
    if [ ! -f "$built" ]; then
        # Built with wabt, as this script is: its absence is a failure.
        echo "FAIL: $built was not assembled"
        exit 1
    fi
    if ! cmp -s "$built" "$committed"; then
        echo "FAIL: $committed differs from its .wat; run wat2wasm again"
        fail=1
    fi
done
exit $fail
