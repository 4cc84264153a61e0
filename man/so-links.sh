#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# man/so-links.sh install|uninstall MANDIR SRCDIR SOURCE...: for every name in the
# NAME line of each page source (man/<page>.<section>.scd) other than the
# page itself, installs (or removes) MANDIR/man<section>/<name>.<section>
# holding ".so man<section>/<page>.<section>", so that `man <name>` shows
# the family's page.
set -eu
mode=$1
mandir=$2
srcdir=$3
shift 3
for s in "$@"; do
    src=$srcdir/$s
    base=$(basename "$src" .scd)      # rig_job.3
    page=${base%.*}                   # rig_job
    sec=${base##*.}                   # 3
    # The first line after "# NAME": "a, b, c - what they do".
    names=$(awk '/^# NAME/ { f = 1; next } f && NF { print; exit }' "$src" | sed 's/ - .*//; s/,/ /g')
    for n in $names; do
        [ "$n" = "$page" ] && continue
        f=$mandir/man$sec/$n.$sec
        case $mode in
            install)
                mkdir -p "$mandir/man$sec"
                echo ".so man$sec/$page.$sec" > "$f"
                ;;
            uninstall) rm -f "$f" ;;
            *) echo "so-links.sh: unknown mode $mode" >&2; exit 2 ;;
        esac
    done
done
