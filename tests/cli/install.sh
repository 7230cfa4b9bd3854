#!/usr/bin/env bash
# make install's layout: the commands, the library (SONAME, static), qhx.h and a relocatable
# qhx.pc; examples/simple.c built from the installed tree with pkg-config runs without
# LD_LIBRARY_PATH; the version macros agree with the library. Run as: install.sh BIN_DIR DATA_DIR SOURCE_DIR
set -uo pipefail
BIN=$1 DATA=$2 SRC=$3
BUILD=$(cd "$BIN/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
command -v pkg-config >/dev/null || { echo "FAIL: pkg-config missing (scripts/deps.sh installs it)" >&2; exit 1; }

# a sanitized build installs an instrumented library: programs built against it need the runtime
CC_SAN=
grep -q '^QHX_SANITIZE:BOOL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null && CC_SAN="-fsanitize=address,undefined"
grep -q '^QHX_TSAN:BOOL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null && CC_SAN="-fsanitize=thread"
cc() { command cc $CC_SAN "$@"; }

cmake --install "$BUILD" --prefix "$tmp/p" >"$tmp/log" 2>&1 || { cat "$tmp/log"; echo "FAIL: cmake --install"; exit 1; }
for f in bin/qhx bin/qhx_generate include/qhx.h lib/libqhx.a; do
  [ -f "$tmp/p/$f" ] || bad "$f not installed"
done
pc=$(find "$tmp/p" -name qhx.pc | head -1)
[ -n "$pc" ] || { echo "FAIL: qhx.pc not installed"; exit 1; }
so=$(find "$tmp/p" -name 'libqhx.so.*.*.*' | head -1)
[ -n "$so" ] || bad "no versioned libqhx.so.X.Y.Z"
soname=$(objdump -p "$so" 2>/dev/null | awk '/SONAME/ {print $2}')
case $soname in libqhx.so.[0-9]*) ;; *) bad "SONAME is '$soname'" ;; esac
# nothing but the user's commands in bin/
extra=$(ls "$tmp/p/bin" | grep -v -x -e qhx -e qhx_generate)
[ -z "$extra" ] || bad "bin/ holds more than the commands: $extra"

export PKG_CONFIG_PATH=$(dirname "$pc")
cc "$SRC/examples/simple.c" $(pkg-config --cflags --libs qhx) -o "$tmp/simple" 2>"$tmp/cc" || { cat "$tmp/cc"; bad "simple.c does not build with pkg-config"; }
if [ -x "$tmp/simple" ]; then
  # ldd's output taken whole first: with pipefail, `ldd | grep -q` fails whenever grep exits on
  # its match before ldd has written the rest (SIGPIPE), which made this check flaky
  libs=$(ldd "$tmp/simple" 2>&1)
  grep -q "$tmp/p/.*libqhx.so" <<<"$libs" || bad "simple does not find the installed libqhx.so by itself: $(grep qhx <<<"$libs")"
  out=$(env -u LD_LIBRARY_PATH "$tmp/simple" "$DATA/fixtures/parity/qwen35-tiny-f32" "Hello" 2>&1) || bad "simple failed: $out"
  echo "$out" | grep -q "32 tokens" || bad "simple printed: $out"
fi
# static linking through pkg-config --static alone: libqhx.a, not libqhx.so
cc "$SRC/examples/simple.c" $(pkg-config --static --cflags --libs qhx) -o "$tmp/simple_static" 2>"$tmp/cc" || { cat "$tmp/cc"; bad "simple.c does not link with pkg-config --static"; }
if [ -x "$tmp/simple_static" ]; then
  libs=$(ldd "$tmp/simple_static" 2>&1)
  ! grep -q "libqhx" <<<"$libs" || bad "pkg-config --static linked the shared library: $(grep qhx <<<"$libs")"
  out=$(env -u LD_LIBRARY_PATH "$tmp/simple_static" "$DATA/fixtures/parity/qwen35-tiny-f32" "Hello" 2>&1) || bad "simple_static failed: $out"
  echo "$out" | grep -q "32 tokens" || bad "simple_static printed: $out"
fi
# the shared link records libqhx.so once, and nothing of the archive
pkg-config --libs qhx | grep -q 'libqhx\.a' && bad "pkg-config --libs (not static) names libqhx.a: $(pkg-config --libs qhx)"

# the header's version macros against the library's run-time answer and the .pc's
cat >"$tmp/ver.c" <<'C'
#include <qhx.h>
#include <stdio.h>
#include <string.h>
int main(void) {
    char s[32];
    snprintf(s, sizeof s, "%d.%d.%d", QHX_VERSION_MAJOR, QHX_VERSION_MINOR, QHX_VERSION_PATCH);
    if (strcmp(s, QHX_VERSION) || strcmp(s, qhx_version())) return 1;
    if (qhx_version_number() != QHX_VERSION_NUMBER || !QHX_VERSION_COMPATIBLE(qhx_version_number())) return 1;
    if (QHX_VERSION_COMPATIBLE(QHX_VERSION_NUMBER + 1000)) return 1; /* another minor: refused */
    puts(s);
    return 0;
}
C
cc "$tmp/ver.c" $(pkg-config --cflags --libs qhx) -o "$tmp/ver" && v=$("$tmp/ver") || bad "version macros disagree with the library"
[ "${v:-}" = "$(pkg-config --modversion qhx)" ] || bad "qhx.pc says $(pkg-config --modversion qhx), the library ${v:-?}"
# relocatable: the .pc moved with its tree still points at itself
mv "$tmp/p" "$tmp/moved"
PKG_CONFIG_PATH=${PKG_CONFIG_PATH/$tmp\/p/$tmp\/moved} pkg-config --cflags qhx | grep -q "$tmp/moved" || bad "qhx.pc is not relocatable"

# make install / make uninstall through the Makefile, into a DESTDIR: every file it wrote goes,
# qhx.pc and the library's links included, even after another cmake --install from the same
# build folder has rewritten cmake's own manifest (as the lines above just did)
if [ -f "$SRC/Makefile" ] && command -v make >/dev/null; then
  mk() { make --no-print-directory -C "$SRC" BUILD_DIR="$BUILD" INSTALLED="$tmp/installed.txt" "$@"; }
  dest=$tmp/dest
  mk install-only DESTDIR="$dest" >"$tmp/mk" 2>&1 || { cat "$tmp/mk"; bad "make install DESTDIR= failed"; }
  n=$(find "$dest" -type f -o -type l | wc -l)
  [ "$n" -ge 8 ] || bad "make install wrote $n files: $(find "$dest" -type f -o -type l)"
  find "$dest" -name qhx.pc | grep -q . || bad "make install wrote no qhx.pc"
  cmake --install "$BUILD" --prefix "$tmp/other" >/dev/null 2>&1
  mk uninstall >"$tmp/mk" 2>&1 || { cat "$tmp/mk"; bad "make uninstall failed"; }
  left=$(find "$dest" -type f -o -type l)
  [ -z "$left" ] || bad "make uninstall left: $left"
  grep -q "removed $n files" "$tmp/mk" || bad "make uninstall said: $(cat "$tmp/mk")"
  mk uninstall >"$tmp/mk" 2>&1 && bad "a second make uninstall succeeded: $(cat "$tmp/mk")"
  [ -d "$tmp/other/bin" ] && [ -f "$tmp/other/bin/qhx" ] || bad "make uninstall removed another prefix's files"
fi
[ $fail = 0 ] && echo "install: ok"
exit $fail
