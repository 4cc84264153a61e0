#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# src/check_layers.sh: proves src/README.md's layering from the build, as a
# test of `make check`.
#
# For every folder of librig it reads
#   - the symbols its objects use (nm -u of the objects its .lo files
#     name) and finds who defines each: another folder of librig, libc
#     (libc.so.6's own symbols: POSIX threads are in it since glibc 2.34),
#     MPI, UCX, hwloc, CUDA, jansson or xxHash; and
#   - the headers its sources include: a header of another folder, a
#     public header (include/rig/, include/mesh/), or a library's;
# and fails when a folder uses a folder or a library its rule below does
# not allow, or includes another folder's *_internal.h (src/util/ is the
# one folder every layer includes).  The uses found must form no cycle
# (tsort): no two folders import each other in a circle.  An unknown
# symbol or an include that resolves nowhere fails too: the rules must
# name every library.  Objects whose source is gone (left by a build
# before a file moved) are not librig's and are skipped.
#
# Environment: top_srcdir, top_builddir (set by `make check`); NM, CC
# (nm, cc); KEEP_TMP=1 keeps the facts it gathered, for reading.
set -u
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
: "${top_builddir:=.}"
NM=${NM:-nm}
src=$top_srcdir/src
bld=$top_builddir/src

# ---- the rules --------------------------------------------------------------
# layer | layers it may use | libraries its symbols may come from |
# libraries whose headers it may include besides | public headers it may
# include (prefixes of include/).  A layer is a folder of src/ (mesh/ and
# remote/ with their subfolders); rail/* is every transport's folder, the
# first rule that matches a layer is its rule.
abi_h='rig/api.h rig/remote_abi.h rig/settings.h rig/provider.h rig/wait.h'
rules="
util|-|libc|-|-
abi|util|libc|-|$abi_h
rail/base|abi util|libc mpi|-|$abi_h
rail/*|rail/base abi util|libc mpi ucx hwloc|cuda|$abi_h
rail|rail/* abi util|libc|-|$abi_h
job|rail rail/base abi util|libc mpi|-|rig/
mesh|abi util|libc hwloc jansson xxhash|cuda|$abi_h mesh/
remote|job mesh abi util|libc mpi hwloc jansson xxhash|-|rig/ mesh/
"

fails=0
fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}

# The layer a folder under src/ belongs to: mesh/ and remote/ are one layer
# each with their subfolders; rail/ has one per transport and its base.
layer_of() {
    case $1 in
        util | util/*) echo util ;;
        abi | abi/*) echo abi ;;
        rail) echo rail ;;
        rail/*) echo "$1" | cut -d/ -f1-2 ;;
        job | job/*) echo job ;;
        mesh | mesh/*) echo mesh ;;
        remote | remote/*) echo remote ;;
        *) echo "?$1" ;;
    esac
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/check_layers.XXXXXX") || exit 99
[ -n "${KEEP_TMP:-}" ] || trap 'rm -rf "$tmp"' EXIT

# ---- objects and their symbols ----------------------------------------------
# Every folder's library objects (.lo: the PIC object, else the plain one).
find "$bld" -name '*.lo' 2>/dev/null | sort | while read -r lo; do
    dir=$(dirname "$lo")
    rel=${dir#"$bld"/}
    [ "$dir" = "$bld" ] && continue # librig itself
    layer=$(layer_of "$rel")
    obj=$(sed -n "s/^pic_object='\(.*\)'/\1/p" "$lo")
    [ -n "$obj" ] && [ "$obj" != none ] ||
        obj=$(sed -n "s/^non_pic_object='\(.*\)'/\1/p" "$lo")
    [ -f "$dir/$obj" ] || continue
    # An object whose source is gone (a file moved since the last build)
    # is left over, not part of librig; a source the build made (the
    # keeper's image) sits beside its object.
    base=$(basename "$lo" .lo)
    base=${base#*_la-}
    [ -f "$src/$rel/$base.c" ] || [ -f "$dir/$base.c" ] || continue
    echo "$layer $dir/$obj" >>"$tmp/objects"
done
if [ ! -s "$tmp/objects" ]; then
    echo "SKIP: no objects under $bld (build first)"
    exit 77
fi

# Who defines what, inside librig.
while read -r layer obj; do
    "$NM" --defined-only "$obj" 2>/dev/null |
        awk -v l="$layer" 'NF == 3 && $2 ~ /[TDBRVWGS]/ { print $3, l }'
done <"$tmp/objects" | sort -u >"$tmp/defined"

# libc's own symbols: from the libc.so.6 librig loads, else the compiler's.
libc=$(ldd "$bld/.libs/librig.so" 2>/dev/null |
    awk '$1 == "libc.so.6" { print $3 }')
[ -n "$libc" ] || libc=$(${CC:-cc} -print-file-name=libc.so.6 2>/dev/null)
if [ -f "$libc" ]; then
    {
        "$NM" -D --defined-only "$libc" | awk '{ sub(/@.*/, "", $3); print $3 }'
        # What libc links statically into each program (atexit ...).
        ns=$(${CC:-cc} -print-file-name=libc_nonshared.a 2>/dev/null)
        [ -f "$ns" ] && "$NM" --defined-only "$ns" 2>/dev/null |
            awk 'NF == 3 { print $3 }'
    } | sort -u >"$tmp/libc"
else
    echo "note: no libc.so.6 found: libc symbols are told by exclusion"
    : >"$tmp/libc"
fi

# The library an undefined symbol comes from (librig's own are found
# first, in $tmp/defined).
classify='
function lib(s) {
    if (s in libc) return "libc"
    if (s ~ /^(P?MPI_|MPIX_|ompi_|opal_|OMPI_)/) return "mpi"
    if (s ~ /^(ucp_|uct_|ucs_)/) return "ucx"
    if (s ~ /^hwloc_/) return "hwloc"
    if (s ~ /^(cu[A-Z]|cuda|nvJitLink)/) return "cuda"
    if (s ~ /^(json_|jansson_)/) return "jansson"
    if (s ~ /^XXH/) return "xxhash"
    if (s ~ /^(__|_GLOBAL_OFFSET_TABLE_$|_ITM_)/) return "runtime"
    if (nolibc) return "libc"
    return "unknown"
}'

while read -r layer obj; do
    "$NM" -u "$obj" 2>/dev/null | awk -v l="$layer" -v o="$obj" \
        '{ print l, o, $NF }'
done <"$tmp/objects" | sort -u >"$tmp/used"

awk -v nolibc="$([ -s "$tmp/libc" ] || echo 1)" "$classify"'
FILENAME == ARGV[1] { libc[$1] = 1; next }
FILENAME == ARGV[2] { def[$1] = $2; next }
{
    layer = $1; obj = $2; s = $3
    if (s in def) { if (def[s] != layer) print "use", layer, def[s], s, obj }
    else print "lib", layer, lib(s), s, obj
}' "$tmp/libc" "$tmp/defined" "$tmp/used" >"$tmp/uses"

# ---- includes ---------------------------------------------------------------
find "$src" -name '*.c' -o -name '*.h' | sort | while read -r f; do
    rel=${f#"$src"/}
    layer=$(layer_of "$(dirname "$rel")")
    dir=$(dirname "$f")
    sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*\([<"]\)\([^>"]*\)[>"].*/\1 \2/p' "$f" |
        while read -r kind name; do
            if [ "$kind" = '"' ] && [ -f "$dir/$name" ]; then
                t=$(cd "$(dirname "$dir/$name")" && pwd)/$(basename "$name")
                case $t in
                    "$(cd "$src" && pwd)"/*)
                        trel=${t#"$(cd "$src" && pwd)"/}
                        tdir=$(dirname "$trel")
                        echo "inc $layer $(layer_of "$tdir") $trel $rel"
                        ;;
                    *) echo "bad $layer - $name $rel" ;;
                esac
            elif [ -f "$top_srcdir/include/$name" ]; then
                echo "pub $layer - $name $rel"
            elif [ "$name" = config.h ]; then
                :
            elif [ "$kind" = '"' ]; then
                echo "bad $layer - $name $rel"
            else
                case $name in
                    mpi.h) l=mpi ;;
                    ucp/* | uct/* | ucs/*) l=ucx ;;
                    hwloc.h | hwloc/*) l=hwloc ;;
                    cuda*.h | nvJitLink*.h) l=cuda ;;
                    jansson.h) l=jansson ;;
                    xxhash.h) l=xxhash ;;
                    *) l=libc ;;
                esac
                echo "hdr $layer $l $name $rel"
            fi
        done
done >"$tmp/includes"

# ---- the verdicts -----------------------------------------------------------
nuses=$(wc -l <"$tmp/uses")
nincs=$(wc -l <"$tmp/includes")
nobj=$(wc -l <"$tmp/objects")
sed "s|^\([a-z]*\) \([^ ]*\) \([^ ]*\) \([^ ]*\) $bld/|\1 \2 \3 \4 |" \
    "$tmp/uses" | cat - "$tmp/includes" >"$tmp/facts"
echo "$rules" | awk -F'|' -v edges="$tmp/edges" '
# A rule key or a use is a glob with at most "*" for one folder name.
function re(g) { gsub(/\*/, "[^/]*", g); return "^" g "$" }
function matches(w, list,    n, a, i) {
    n = split(list, a, " ")
    for (i = 1; i <= n; i++) if (w ~ re(a[i])) return 1
    return 0
}
function rule(layer,    i) {
    for (i = 1; i <= nr; i++) if (layer ~ re(key[i])) return i
    return 0
}
function fail(msg) { print "FAIL: " msg; fails++ }
FILENAME == "-" {
    if (NF < 5) next
    nr++; key[nr] = $1; uses[nr] = $2; libs[nr] = $3 " runtime"
    hdrs[nr] = $3 " " $4; pubs[nr] = $5
    next
}
{
    split($0, f, " ")
    kind = f[1]; layer = f[2]; what = f[3]; name = f[4]; where = f[5]
    r = rule(layer)
    if (!r) {
        if (!(layer in told)) fail("src/" where " is in a folder (" layer \
            ") that src/README.md gives no rule")
        told[layer] = 1
        next
    }
    if (kind == "use") {
        if (matches(what, uses[r])) print layer, what > edges
        else fail("src/" layer " uses src/" what "'"'"'s " name " (" where ")")
    } else if (kind == "lib") {
        if (what == "unknown")
            fail("src/" layer " uses " name ", which no rule names (" where ")")
        else if (!matches(what, libs[r]))
            fail("src/" layer " uses " what ": " name " (" where ")")
    } else if (kind == "inc") {
        if (what == layer) next
        if (!matches(what, uses[r])) {
            fail("src/" where " includes src/" name ": src/" layer \
                 " may not use src/" what)
            next
        }
        print layer, what > edges
        if (name !~ /^util\// && name ~ /_internal\.h$/)
            fail("src/" where " includes another folder'"'"'s private src/" name)
    } else if (kind == "pub") {
        n = split(pubs[r], p, " ")
        for (i = 1; i <= n; i++) if (index(name, p[i]) == 1) next
        fail("src/" where " includes <" name ">, a public header above src/" layer)
    } else if (kind == "hdr") {
        if (!matches(what, hdrs[r]))
            fail("src/" where " includes <" name "> (" what \
                 "), which src/" layer " may not use")
    } else if (kind == "bad") {
        fail("src/" where " includes \"" name \
             "\", which resolves to no file of src/ or include/")
    }
}
END { exit fails > 0 }
' - "$tmp/facts" >"$tmp/verdicts"
verdict=$?
cat "$tmp/verdicts"
fails=$((fails + $(grep -c '^FAIL' "$tmp/verdicts")))
[ -f "$tmp/edges" ] || : >"$tmp/edges"
if ! sort -u "$tmp/edges" | tsort >/dev/null 2>&1; then
    fail "the folders' uses form a cycle: $(sort -u "$tmp/edges" | tr '\n' ';')"
fi
if [ "$fails" -gt 0 ] || [ "$verdict" -ne 0 ]; then
    echo "check_layers: $fails violation(s) in $nobj objects, $nuses symbol uses, $nincs includes"
    exit 1
fi
echo "ok: $nobj objects ($nuses uses of symbols outside their folder) and $nincs includes keep src/README.md's layering"
echo "ok: folder uses: $(sort -u "$tmp/edges" | awk '{ printf "%s%s -> %s", s, $1, $2; s = ", " }')"
echo "ok: libraries used: $(awk '$1 == "lib" && $3 != "runtime" { print $2, $3 }' "$tmp/facts" |
    sort -u | awk '$1 != l { printf "%s%s:", l == "" ? "" : "; ", $1; l = $1 }
        { printf " %s", $2 } END { print "" }')"
exit 0
