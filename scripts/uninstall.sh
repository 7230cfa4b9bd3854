#!/usr/bin/env bash
# make uninstall: removes every file that the last make install wrote, as listed in MANIFEST
# (make install's copy of cmake's install_manifest.txt: the library's versioned name and its
# links, the commands, qhx.h, qhx.pc and qhx-shared.pc). Folders are left: they may hold others'
# files. Exit 1 when a listed file could not be removed.
#   scripts/uninstall.sh MANIFEST
set -uo pipefail
manifest=$1
[ -f "$manifest" ] || { echo "uninstall: $manifest is missing (nothing was installed with make install from this build)" >&2; exit 1; }
removed=0 gone=0 failed=0
while IFS= read -r f; do
  [ -n "$f" ] || continue
  if [ -e "$f" ] || [ -L "$f" ]; then
    if rm -f -- "$f"; then removed=$((removed + 1)); else failed=$((failed + 1)); fi
  else
    gone=$((gone + 1))
  fi
done < <(cat "$manifest"; echo) # cmake's manifest ends without a newline: the last file counts too
msg="uninstall: removed $removed files"
[ $gone = 0 ] || msg+=" ($gone listed were already gone)"
echo "$msg"
[ $failed = 0 ] || { echo "uninstall: $failed files could not be removed (permissions?)" >&2; exit 1; }
rm -f "$manifest"
