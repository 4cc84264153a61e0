#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The README's quick start: install what is missing (Debian 12), build, then
#   bench: run the main job, the OSU-style comparison of rails against MPI
#          and raw UCX on 2 ranks, writing benchmarks/results/;
#   test:  run every test (`make check`) and print one summary line.
# Settings: BUILD_DIR (default _build/quickstart), CONFIGURE_FLAGS (default
# --enable-werror), JOBS (default: the number of cores), NO_INSTALL=1 skips
# the package step.
set -euo pipefail

what=${1:-}
case "$what" in
    bench | test) ;;
    *)
        echo "usage: $0 bench|test" >&2
        exit 2
        ;;
esac

top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/_build/quickstart}
jobs=${JOBS:-$(nproc)}

# Debian 12 packages rig builds and tests with.
packages=(
    autoconf automake libtool pkg-config make gcc git
    libopenmpi-dev openmpi-bin libucx-dev libhwloc-dev hwloc
    libcunit1-dev libjansson-dev libxxhash-dev wabt
    gnuplot-nox clang libclang-rt-14-dev lld clang-format valgrind strace
    mpich libmpich-dev scdoc man-db iproute2
)

install_packages() {
    local missing=()
    for p in "${packages[@]}"; do
        if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
            grep -q 'install ok installed'; then
            missing+=("$p")
        fi
    done
    if [ ${#missing[@]} -eq 0 ]; then
        return 0
    fi
    echo "quickstart: installing ${missing[*]}"
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        sudo=(sudo)
    fi
    "${sudo[@]}" apt-get update
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y \
        --no-install-recommends "${missing[@]}"
}

if [ "${NO_INSTALL:-0}" != 1 ]; then
    install_packages
fi

# Open MPI refuses root without these; CI and containers run as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

cd "$top"
if [ ! -x configure ] || [ configure.ac -nt configure ]; then
    autoreconf -fi
fi
mkdir -p "$build"
cd "$build"
# shellcheck disable=SC2086
"$top/configure" ${CONFIGURE_FLAGS---enable-werror}
make -j"$jobs"

case "$what" in
    test)
        status=0
        make -j"$jobs" check || status=$?
        # One line any CI reads: the harness's counts.
        log=test-suite.log
        if [ -f "$log" ]; then
            pass=$(sed -n 's/^# PASS: *//p' "$log" | head -n1)
            fail=$(sed -n 's/^# FAIL: *//p' "$log" | head -n1)
            err=$(sed -n 's/^# ERROR: *//p' "$log" | head -n1)
            skip=$(sed -n 's/^# SKIP: *//p' "$log" | head -n1)
            if [ "$status" -ne 0 ]; then
                cat "$log"
            fi
            grep -h '^SKIP:' ./*/*.log ./*/*/*.log 2>/dev/null | sort -u || true
            echo "tests: ${pass:-0} passed, $(( ${fail:-0} + ${err:-0} )) failed, ${skip:-0} skipped"
        fi
        exit "$status"
        ;;
    bench)
        if [ -x "$top/benchmarks/run.sh" ]; then
            exec bash "$top/benchmarks/run.sh" "$build"
        fi
        ./tools/rig_info
        ;;
esac
