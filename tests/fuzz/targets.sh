# SPDX-License-Identifier: BSD-3-Clause
# Sourced by run.sh: the fuzz targets beyond check_transfers, each with the
# sources it needs.
# Every file of libmesh (src/mesh/*.c but the mesh_target program) and of
# the layers below it (abi, util: nodes reach rail ends), so a
# new one is not forgotten here.
mesh=()
for f in "$src"/src/mesh/*.c; do
    case $f in */print_target.c) ;; *) mesh+=("$f") ;; esac
done
# The keeper's image, which librig carries (src/mesh/local.mk makes it).
make -s -C "$build" src/mesh/keeper/keeper_embed.c
mesh+=("$src"/src/mesh/native/*.c "$build/src/mesh/keeper/keeper_embed.c"
    -I"$src/src/mesh/keeper" "${abi[@]}")
run_target fuzz_manifest manifest "$src/tests/fuzz/fuzz_manifest.c" \
    "${mesh[@]}" -I"$src/src" -ljansson -lxxhash -lhwloc
run_target fuzz_wasm wasm "$src/tests/fuzz/fuzz_wasm.c" "$src"/src/mesh/wasm/*.c \
    "${mesh[@]}" -I"$src/src" -ljansson -lxxhash -lhwloc -ldl
