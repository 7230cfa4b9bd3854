#!/usr/bin/env bash
# Where results go: output files that are links, devices or FIFOs are written in place, never
# replaced (chat /save, tokenize --save-binary, logits --out); a failed write to stdout (a full
# device, a pipe closed early while SIGPIPE is ignored) ends the command with exit 1 and one
# line instead of a success; signals during forge and logits --out leave no temporary file or
# staging folder. docs/robustness.md lists the behaviour.
# Run as: bash outputs.sh BIN_DIR DATA_DIR SOURCE_DIR
set -uo pipefail
QHX=$1/qhx
FX=$2/fixtures/parity/qwen35-tiny-f32
[ -d "$FX" ] || { echo "FAIL: outputs: fixtures missing under $2 (the test data is part of the tree)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/qhx_outputs.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# one_line CODE NEEDLE: the last command ($rc, $tmp/err) exited CODE with one stderr line holding NEEDLE
one_line() {
  local lines
  lines=$(wc -l <"$tmp/err")
  if [ "$rc" != "$1" ]; then bad "$what -> exit $rc, want $1: $(head -c 300 "$tmp/err")"; return; fi
  if [ "$lines" != 1 ]; then bad "$what -> $lines stderr lines, want 1: $(head -c 600 "$tmp/err")"; return; fi
  grep -qF -- "$2" "$tmp/err" || { bad "$what -> '$(cat "$tmp/err")' lacks '$2'"; return; }
  echo "ok: $what: $(cat "$tmp/err")"
}

# no_temp DIR: no *.tmp-* file or folder left in DIR
no_temp() {
  local left
  left=$(find "$1" -maxdepth 1 -name '*.tmp*' | head -3)
  [ -z "$left" ] || bad "$what left $left"
}

# ---- links, devices and FIFOs as output files ---------------------------------------------------
cd "$tmp" || exit 1
echo old >real
ln -s real link
ln -s missing dangling
what="tokenize --save-binary LINK"
"$QHX" tokenize --tokenizer "$FX" --save-binary link 2>"$tmp/err"
rc=$?
[ "$rc" = 0 ] || bad "$what -> exit $rc: $(cat "$tmp/err")"
[ -L link ] || bad "$what replaced the link"
[ "$(head -c 3 real)" != old ] || bad "$what did not write the link's target"
no_temp "$tmp"
what="tokenize --save-binary DANGLING"
"$QHX" tokenize --tokenizer "$FX" --save-binary dangling 2>"$tmp/err"
rc=$?
one_line 1 "symbolic link to nothing"
[ -L dangling ] || bad "$what replaced the link"
what="logits --out LINK"
"$QHX" logits -m "$FX" --ids 1,2 --out link 2>"$tmp/err"
rc=$?
[ "$rc" = 0 ] || bad "$what -> exit $rc: $(cat "$tmp/err")"
[ -L link ] && [ "$(stat -c %s real)" -gt 0 ] || bad "$what replaced the link or wrote nothing"
what="logits --out /dev/null"
"$QHX" logits -m "$FX" --ids 1,2 --out /dev/null 2>"$tmp/err"
rc=$?
[ "$rc" = 0 ] && [ -c /dev/null ] || bad "$what -> exit $rc, /dev/null $(stat -c %F /dev/null)"
mkfifo fifo
what="logits --out FIFO (no reader)"
timeout 60 "$QHX" logits -m "$FX" --ids 1,2 --out fifo 2>"$tmp/err"
rc=$?
one_line 1 "FIFO with no reader"
[ -p fifo ] || bad "$what replaced the FIFO"
what="chat /save LINK, /save FIFO, /save /dev/null"
printf 'hi\n/save link\n/save fifo\n/save /dev/null\n' | timeout 60 "$QHX" chat -m "$FX" -n 2 --quiet >/dev/null 2>"$tmp/err"
rc=$?
[ "$rc" = 0 ] || bad "$what -> exit $rc: $(cat "$tmp/err")"
grep -q "saved link" "$tmp/err" && grep -q "FIFO with no reader" "$tmp/err" && grep -q "saved /dev/null" "$tmp/err" ||
  bad "$what -> $(cat "$tmp/err")"
[ -L link ] && [ -p fifo ] && [ -c /dev/null ] || bad "$what replaced a link, a FIFO or /dev/null"
no_temp "$tmp"
no_temp /dev
cd / || exit 1

# ---- stdout that cannot be written --------------------------------------------------------------
if [ -w /dev/full ]; then
  for args in "generate -m $FX -p hi -n 4 --quiet" "generate -m $FX -p hi -n 4 --print-ids" "inspect $FX"; do
    what="qhx $args >/dev/full"
    # shellcheck disable=SC2086
    "$QHX" $args >/dev/full 2>"$tmp/err"
    rc=$?
    one_line 1 "stdout: write failed: No space left on device"
  done
  what="qhx generate (with the speed line) >/dev/full"
  "$QHX" generate -m "$FX" -p hi -n 4 >/dev/full 2>"$tmp/err"
  rc=$?
  one_line 1 "stdout: write failed"
  what="qhx tokenize >/dev/full"
  echo hello | "$QHX" tokenize --tokenizer "$FX" >/dev/full 2>"$tmp/err"
  rc=$?
  one_line 1 "write"
  what="qhx detokenize >/dev/full"
  echo 1 2 3 | "$QHX" detokenize --tokenizer "$FX" >/dev/full 2>"$tmp/err"
  rc=$?
  one_line 1 "write"
  what="qhx chat >/dev/full"
  echo hi | "$QHX" chat -m "$FX" -n 2 --quiet >/dev/full 2>"$tmp/err"
  rc=$?
  one_line 1 "stdout: write failed"
  what="qhx --help >/dev/full"
  "$QHX" --help >/dev/full 2>"$tmp/err"
  rc=$?
  one_line 1 "stdout: write failed"
fi
# SIGPIPE ignored (as under systemd): a closed pipe is EPIPE, and generation stops at once
what="qhx generate -n 3000 | head -c 1, SIGPIPE ignored"
( trap '' PIPE; "$QHX" generate -m "$FX" -p hi -n 3000 --ignore-eos --greedy 2>"$tmp/err" | head -c 1 >/dev/null; exit "${PIPESTATUS[0]}" )
rc=$?
one_line 1 "stdout: write failed: Broken pipe"

# ---- signals and a truncated input leave no staging folder or temporary file -------------------
# A random demo checkpoint (~100 MB) converts in about a second: signals are sent as soon as the
# staging folder (forge) or the temporary file (logits --out) appears; a run that finished first
# is reported, not failed.
"$QHX" forge --random qwen3_5 "$tmp/ck" --preset demo --quiet || bad "forge --random demo failed"
# wait_for GLOB PID: until a path matches GLOB or PID is gone (at most 30 s)
wait_for() {
  for _ in $(seq 1 3000); do
    compgen -G "$1" >/dev/null && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.01
  done
  return 1
}
for sig in HUP QUIT TERM INT; do
  what="forge, SIG$sig"
  "$QHX" forge "$tmp/ck" "$tmp/b_$sig" --precision f16 --quiet 2>"$tmp/err" &
  pid=$!
  if wait_for "$tmp/b_$sig.tmp-*/*" "$pid"; then kill -"$sig" "$pid"; fi
  wait "$pid"
  rc=$?
  if [ "$rc" = 0 ]; then
    echo "outputs: $what: forge finished before the signal: not checked"
  else
    one_line 130 "interrupted"
    [ -e "$tmp/b_$sig" ] && bad "$what left the bundle"
  fi
  no_temp "$tmp"
  rm -rf "$tmp/b_$sig"
done
mkdir "$tmp/ck2"
cp "$tmp/ck"/* "$tmp/ck2/"
what="forge of a checkpoint truncated under it"
"$QHX" forge "$tmp/ck2" "$tmp/b_trunc" --precision f16 --quiet 2>"$tmp/err" &
pid=$!
for _ in $(seq 1 3000); do
  grep -q 'ck2/model.safetensors' "/proc/$pid/maps" 2>/dev/null || ! kill -0 "$pid" 2>/dev/null && break
  sleep 0.01
done
truncate -s 4096 "$tmp/ck2/model.safetensors"
wait "$pid"
rc=$?
if [ "$rc" = 0 ]; then
  echo "outputs: $what: forge finished before the truncation: not checked"
else
  one_line 1 "nothing written"
  [ -e "$tmp/b_trunc" ] && bad "$what left the bundle"
fi
no_temp "$tmp"
for sig in HUP QUIT TERM INT; do
  what="logits --out, SIG$sig"
  ids=$(seq -s, 1 400)
  "$QHX" logits -m "$tmp/ck" --ids "$ids" --out "$tmp/l_$sig.f32" 2>"$tmp/err" &
  pid=$!
  if wait_for "$tmp/l_$sig.f32.tmp-*" "$pid"; then kill -"$sig" "$pid"; fi
  wait "$pid"
  rc=$?
  if [ "$rc" = 0 ]; then
    echo "outputs: $what: logits finished before the signal: not checked"
  else
    one_line 130 "interrupted"
    [ -e "$tmp/l_$sig.f32" ] && bad "$what left the output"
  fi
  no_temp "$tmp"
  rm -f "$tmp/l_$sig.f32"
done

exit $fail
