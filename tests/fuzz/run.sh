#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds every libFuzzer target in tests/fuzz with clang (-fsanitize=fuzzer,
# address,undefined) and runs each for SECONDS on its seed corpus.
# usage: run.sh BUILD_DIR SECONDS   (BUILD_DIR: a configured build, for
# config.h).  Fails on any crash, leak or sanitizer report.
set -euo pipefail
build=$(cd "$1" && pwd)
seconds=${2:-60}
src=$(cd "$(dirname "$0")/../.." && pwd)
out=$build/tests/fuzz
mkdir -p "$out"
cc=${FUZZ_CC:-clang}
flags=(-g -O1 -std=gnu11 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined
    -fno-sanitize-recover=all -I"$src/include" -I"$build/include" -I"$build"
    -pthread)

run_target() { # name corpus sources... -- extra flags
    local name=$1 corpus=$2
    shift 2
    local work=$out/corpus-$name
    mkdir -p "$work"
    "$cc" "${flags[@]}" "$@" -o "$out/$name"
    echo "fuzz: $name for ${seconds}s"
    "$out/$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 "$work" "$src/tests/fuzz/corpus/$corpus" \
        2>"$out/$name.log" || { tail -n 40 "$out/$name.log"; exit 1; }
    grep -E '^stat::number_of_executed_units' "$out/$name.log" || true
}

abi=("$src"/src/abi/*.c "$src"/src/util/*.c)
run_target fuzz_transfers transfers "$src/tests/fuzz/fuzz_transfers.c" \
    "${abi[@]}"
if [ -f "$src/tests/fuzz/targets.sh" ]; then
    # shellcheck source=/dev/null
    . "$src/tests/fuzz/targets.sh"
fi
