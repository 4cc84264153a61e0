#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# man/check-pages.sh: fails when a public function has no manual page.
#
# The public functions are those the installed headers (RIG_MAN_HEADERS,
# paths under include/) declare with a rig_ or mesh_ name, RIG_API or in a
# visibility block, inline wrappers too: gcc's -aux-info lists every
# declaration of a translation unit with the header it came from, so no
# guess is made at C syntax.  A function has a page when a section-3
# source man/*.3.scd names it in its NAME line (what so-links.sh installs)
# and has an entry for it, a line starting with *<name>*(.  Every page
# source must also be one that is installed (RIG_MAN_PAGES), and every
# setting of the table rig_settings() returns (src/abi/settings.c, a
# {"NAME", ...} line each) must be named in bold, *NAME*, in
# rig_settings(3); every installed program (RIG_MAN_PROGRAMS) must be
# named in the NAME line of a section-1 page.
#
# Environment (from AM_TESTS_ENVIRONMENT): top_srcdir, top_builddir,
# RIG_MAN_CC, RIG_MAN_CPPFLAGS (MPI's and CUDA's flags), RIG_MAN_HEADERS,
# RIG_MAN_PAGES, RIG_MAN_PROGRAMS.  Exit 0 all documented, 1 not, 77 when the compiler has
# no -aux-info (clang): say so rather than pass.
set -u
src=${top_srcdir:-.}
bld=${top_builddir:-.}
cc=${RIG_MAN_CC:-cc}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/check-pages.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT

for h in ${RIG_MAN_HEADERS:-}; do
    echo "#include \"${h#include/}\""
done > "$tmp/all.c"
[ -s "$tmp/all.c" ] || { echo "check-pages: RIG_MAN_HEADERS is empty"; exit 99; }
if ! echo 'int x;' > "$tmp/probe.c" ||
    ! $cc -fsyntax-only -aux-info "$tmp/probe.aux" "$tmp/probe.c" 2>/dev/null; then
    echo "SKIP: $cc has no -aux-info (gcc lists declarations; clang cannot)"
    exit 77
fi
# shellcheck disable=SC2086
$cc -std=gnu11 -fsyntax-only -aux-info "$tmp/aux" -I"$bld/include" \
    -I"$src/include" ${RIG_MAN_CPPFLAGS:-} "$tmp/all.c" || exit 99
perl -ne 'print "$1\n" if m{/include/(?:rig|mesh)/\S+:\d+:\S+ \*/.*?\b((?:rig|mesh)_\w+) \(}' \
    "$tmp/aux" | sort -u > "$tmp/public"
npub=$(wc -l < "$tmp/public")
[ "$npub" -gt 0 ] || { echo "check-pages: no public function found"; exit 99; }

: > "$tmp/named"
fail=0
for s in "$src"/man/*.scd; do
    base=$(basename "$s" .scd)
    case " ${RIG_MAN_PAGES:-} " in
        *" man/$base "*) ;;
        *) echo "check-pages: man/$base.scd is not in man/local.mk's pages"; fail=1 ;;
    esac
    case $base in *.3) ;; *) continue ;; esac
    awk '/^# NAME/ { f = 1; next } f && NF { print; exit }' "$s" | sed 's/ - .*//; s/,/ /g' | tr ' ' '\n' |
        grep . | while read -r n; do
            if grep -Eq "(^|, )\*$n\*\(" "$s"; then
                echo "$n"
            elif [ "$n" != "${base%.3}" ]; then # a family's own name
                echo "check-pages: man/$base.scd names $n but has no entry *$n*(...)" >&2
                echo "!$n"
            fi
        done >> "$tmp/named"
done
grep -q '^!' "$tmp/named" && fail=1
missing=$(sort -u "$tmp/named" | comm -23 "$tmp/public" -)
for f in $missing; do
    echo "check-pages: $f has no page: add it to the NAME line of its family's man/*.3.scd and an entry *$f*(...)"
    fail=1
done
table="$src/src/abi/settings.c"
[ -f "$table" ] || { echo "check-pages: no $table"; exit 99; }
sed -n 's/^ *{"\([A-Z][A-Z0-9_]*\)",.*/\1/p' "$table" > "$tmp/settings"
while read -r v; do
    if ! grep -q "\*$v\*" "$src/man/rig_settings.3.scd"; then
        echo "check-pages: setting $v (src/abi/settings.c) is not in man/rig_settings.3.scd: add *$v* (default) to its SETTINGS"
        fail=1
    fi
done < "$tmp/settings"
nset=$(wc -l < "$tmp/settings")
[ "$nset" -gt 0 ] || { echo "check-pages: no setting found in $table"; exit 99; }
# Every installed program is named by a section-1 page.
for s in "$src"/man/*.1.scd; do
    awk '/^# NAME/ { f = 1; next } f && NF { print; exit }' "$s" | sed 's/ - .*//; s/,/ /g' | tr ' ' '\n'
done | grep . | sort -u > "$tmp/named1"
nprog=0
for p in ${RIG_MAN_PROGRAMS:-}; do
    p=$(basename "$p" "${EXEEXT:-}")
    nprog=$((nprog + 1))
    if ! grep -qxF "$p" "$tmp/named1"; then
        echo "check-pages: installed program $p has no page: add it to the NAME line of a man/*.1.scd"
        fail=1
    fi
done
echo "check-pages: $npub public functions, $(grep -vc '^!' "$tmp/named") page entries, $nset settings, $nprog programs"
exit $fail
