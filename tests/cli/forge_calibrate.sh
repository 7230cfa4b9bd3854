#!/usr/bin/env bash
# qhx forge --calibrate: a q4a (and a q4) bundle of the tiny Qwen3.5 fixture made with and without
# a calibration text differ in their decoder matrices and record the calibration in their
# metadata; every bundle loads and generates; a bundle made twice with the same text is the same
# bytes; bad calibration inputs (missing file, empty file, a folder, NUL bytes, invalid UTF-8)
# give one error line and exit 1, leaving no output folder.
# Run as: bash forge_calibrate.sh BIN_DIR DATA_DIR SOURCE_DIR
set -uo pipefail
BIN=$1
DATA=$2
SRC_DIR=$3
QHX=$BIN/qhx
FX=$DATA/fixtures/parity/qwen35-tiny-f32
TEXT=$SRC_DIR/tests/data/demo/heldout_excerpt.txt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# one stderr line naming the problem, exit 1, no output folder
expect_error() { # needle calibrate-file
  local needle=$1 file=$2 out rc
  out=$("$QHX" forge "$FX" "$tmp/bad" --precision q4a --quiet --calibrate "$file" 2>&1 >/dev/null)
  rc=$?
  [ "$rc" = 1 ] || bad "--calibrate $file exited $rc, expected 1: $out"
  [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] || bad "--calibrate $file: not one line: $out"
  case "$out" in *"$needle"*) ;; *) bad "--calibrate $file said '$out', expected '$needle'" ;; esac
  [ -e "$tmp/bad" ] && bad "--calibrate $file left $tmp/bad" && rm -rf "$tmp/bad"
  ls -d "$tmp"/bad.tmp-* >/dev/null 2>&1 && bad "--calibrate $file left a staging folder"
}

# ---- bad calibration inputs --------------------------------------------------------------------
: >"$tmp/empty.txt"
printf 'text\0more' >"$tmp/nul.txt"
printf 'caf\xe9 au lait\n' >"$tmp/latin1.txt"
mkdir "$tmp/folder"
mkfifo "$tmp/fifo"
ln -s "$tmp/fifo" "$tmp/to-fifo"
ln -s "$tmp/nowhere" "$tmp/dangling"
printf 'ok \xe2\x82' >"$tmp/cut.txt"          # a sequence cut by the end of the file
printf 'over \xc0\x80 long' >"$tmp/overlong.txt"
printf 'half \xed\xa0\x80 pair' >"$tmp/surrogate.txt"
# the file's own words (src/core/file.c): what it is, never "no such file" for one that exists
expect_error "--calibrate $tmp/missing.txt: cannot open: No such file or directory" "$tmp/missing.txt"
expect_error "--calibrate $tmp/dangling: cannot open: No such file or directory" "$tmp/dangling"
expect_error "empty" "$tmp/empty.txt"
expect_error "--calibrate $tmp/folder: not a regular file (a folder)" "$tmp/folder"
expect_error "--calibrate $tmp/fifo: not a regular file (a FIFO)" "$tmp/fifo"
expect_error "--calibrate $tmp/to-fifo: not a regular file (a FIFO)" "$tmp/to-fifo"
expect_error "--calibrate /dev/zero: not a regular file (a character device)" /dev/zero
expect_error "--calibrate /dev/null: not a regular file (a character device)" /dev/null
if command -v python3 >/dev/null; then
  python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$tmp/sock"
  expect_error "--calibrate $tmp/sock: not a regular file (a socket)" "$tmp/sock"
fi
expect_error "--calibrate $tmp/nul.txt: byte 4 is a NUL" "$tmp/nul.txt"
expect_error "--calibrate $tmp/latin1.txt: byte 3 (0xE9) is not well-formed UTF-8" "$tmp/latin1.txt"
expect_error "--calibrate $tmp/cut.txt: byte 3 (0xE2) is not well-formed UTF-8" "$tmp/cut.txt"
expect_error "--calibrate $tmp/overlong.txt: byte 5 (0xC0) is not well-formed UTF-8" "$tmp/overlong.txt"
expect_error "--calibrate $tmp/surrogate.txt: byte 5 (0xED) is not well-formed UTF-8" "$tmp/surrogate.txt"
out=$("$QHX" forge "$FX" "$tmp/bad" --precision q4a --calibrate-tokens 64 2>&1)
[ $? = 2 ] || bad "--calibrate-tokens without --calibrate was not a usage error: $out"
out=$("$QHX" forge "$FX" "$tmp/bad" --precision q4a --calibrate "$TEXT" --calibrate-tokens 0 2>&1)
[ $? = 2 ] || bad "--calibrate-tokens 0 was not a usage error: $out"

# ---- with and without ---------------------------------------------------------------------------
for p in q4a q4; do
  "$QHX" forge "$FX" "$tmp/plain-$p" --precision $p --quiet || bad "forge --precision $p"
  log=$("$QHX" forge "$FX" "$tmp/cal-$p" --precision $p --threads 2 --calibrate "$TEXT" --calibrate-tokens 1500 2>&1) ||
    bad "forge --precision $p --calibrate: $log"
  case "$log" in *"calibration: 1500 / 1500 tokens"*) ;; *) bad "no calibration progress line: $log" ;; esac
  case "$log" in *"statistics of "*" matrices"*) ;; *) bad "no calibration summary line: $log" ;; esac
  # every q4a / q4 / q6 matrix of the fixture is weighted (the pass sees every decoder matrix)
  w=$(printf '%s\n' "$log" | sed -n 's/.*calibration: \([0-9]*\) of the \([0-9]*\) q4a .*/\1 \2/p')
  set -- $w
  [ $# = 2 ] && [ "$1" -gt 0 ] && [ "$1" = "$2" ] || bad "$p: not every grouped matrix was weighted: '$w'"
  dec=decoder-$p.safetensors
  [ -f "$tmp/cal-$p/$dec" ] || { bad "no $dec in the calibrated $p bundle"; continue; }
  cmp -s "$tmp/plain-$p/$dec" "$tmp/cal-$p/$dec" && bad "$p: the calibrated decoder is the uncalibrated one"
  grep -aq "qhexrt.calibration" "$tmp/cal-$p/$dec" || bad "$p: no qhexrt.calibration metadata"
  grep -aq "qhexrt.calibration" "$tmp/plain-$p/$dec" && bad "$p: an uncalibrated bundle says it was calibrated"
  for b in plain-$p cal-$p; do
    "$QHX" generate -m "$tmp/$b" -p "hello" -n 4 >/dev/null 2>&1 || bad "the $b bundle does not generate"
  done
done
# the same text, the same bytes, at 2 threads and at 1
"$QHX" forge "$FX" "$tmp/cal-again" --precision q4a --quiet --threads 1 --calibrate "$TEXT" --calibrate-tokens 1500 ||
  bad "forge --calibrate again"
cmp -s "$tmp/cal-q4a/decoder-q4a.safetensors" "$tmp/cal-again/decoder-q4a.safetensors" ||
  bad "two calibrations over the same text gave different bytes"
# another text, other statistics: other bytes
head -c 2000 "$SRC_DIR/README.md" >"$tmp/other.txt"
"$QHX" forge "$FX" "$tmp/cal-other" --precision q4a --quiet --calibrate "$tmp/other.txt" || bad "forge --calibrate other"
cmp -s "$tmp/cal-q4a/decoder-q4a.safetensors" "$tmp/cal-other/decoder-q4a.safetensors" &&
  bad "two different calibration texts gave the same bytes"

[ "$fail" = 0 ] && echo "forge_calibrate: ok"
exit $fail
