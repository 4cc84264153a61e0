#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Soak, long form: 10^6 runs over the 3 rails of 3 ranks (test_soak), run
# once by CI.  Usage: soak.sh BUILDDIR [RUNS]; exits as mpitest.sh does.
set -u
build=${1:?usage: soak.sh BUILDDIR [RUNS]}
runs=${2:-1000000}
here=$(cd "$(dirname "$0")" && pwd)
spec=$(mktemp "${TMPDIR:-/tmp}/soak.XXXXXX.mpi") || exit 99
trap 'rm -f "$spec"' EXIT
printf 'np=3\nprog=mpi_tests/failure/test_soak\nargs=--runs %s\ntimeout=1800\n' \
    "$runs" > "$spec"
top_builddir=$build sh "$here/../mpitest.sh" "$spec"
