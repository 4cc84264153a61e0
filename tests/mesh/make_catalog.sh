#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Lays out one program of a catalog: make_catalog.sh ROOT MANIFEST TRIPLE
# [BINARY ENTRY] makes ROOT/<name>/manifest.json (name = MANIFEST's base
# name without .json) and, when BINARY is given, ROOT/<name>/TRIPLE/ENTRY.
set -e
root=$1 manifest=$2 triple=$3 binary=$4 entry=$5
name=`basename "$manifest" .json`
mkdir -p "$root/$name"
cp "$manifest" "$root/$name/manifest.json"
if test -n "$binary"; then
    mkdir -p "$root/$name/$triple"
    rm -f "$root/$name/$triple/$entry"
    cp "$binary" "$root/$name/$triple/$entry"
    chmod +x "$root/$name/$triple/$entry"
fi
