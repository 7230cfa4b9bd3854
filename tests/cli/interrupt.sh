#!/usr/bin/env bash
# Ctrl-C: qhx generate interrupted while it generates keeps what it printed and exits 130 with one
# stderr line; interrupted while it reads a long prompt it prints nothing and exits 130; qhx logits
# interrupted leaves no output file. (qhx forge interrupted: tests/cli/forge.sh.) A mapped weight
# file truncated by another process mid-run: one stderr line and exit 1, not a core dump.
# Run as: bash interrupt.sh BIN_DIR DATA_DIR SOURCE_DIR
set -uo pipefail
QHX=$1/qhx
FX=$2/fixtures/parity/qwen35-tiny-f32
[ -d "$FX" ] || { echo "FAIL: interrupt: $FX is missing (the test data is part of the tree, under tests/data)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/qhx_interrupt.XXXXXX)
pid=
trap '[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# interrupt NAME WAIT_FOR_OUTPUT ARGS...: start qhx ARGS, wait until it has printed something on
# stdout (the handler is installed by then) or until its SIGINT handler is installed, send SIGINT, and wait for the exit (at most
# 60 s). Leaves rc, and the outputs in $tmp/NAME.out / .err.
interrupt() {
  local name=$1 wait_out=$2
  shift 2
  "$QHX" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" </dev/null &
  pid=$!
  if [ "$wait_out" = 1 ]; then
    for _ in $(seq 1 600); do [ -s "$tmp/$name.out" ] || ! kill -0 "$pid" 2>/dev/null && break; sleep 0.1; done
  else
    # once the SIGINT handler is installed (bit 2 of SigCgt), give it 0.2 s to start working
    for _ in $(seq 1 100); do
      cgt=$(awk '/^SigCgt:/ {print $2}' "/proc/$pid/status" 2>/dev/null)
      [ -n "$cgt" ] && (( 0x$cgt & 2 )) && break
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    sleep 0.2
  fi
  kill -INT "$pid" 2>/dev/null
  for _ in $(seq 1 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid"
    bad "qhx $* did not stop within 60 s of SIGINT"
  fi
  wait "$pid"
  rc=$?
  pid=
}

# one_line NAME NEEDLE: exactly one stderr line, containing NEEDLE
one_line() {
  [ "$(wc -l <"$tmp/$1.err")" = 1 ] && grep -qF -- "$2" "$tmp/$1.err" ||
    bad "$1: stderr was: $(head -c 400 "$tmp/$1.err")"
}

# ---- while generating: what was generated stays printed ------------------------------------------
interrupt gen 1 generate -m "$FX" -p "Once upon a time" -n 4000 --ctx 4096 --ignore-eos --greedy
[ "$rc" = 130 ] || bad "interrupted generate exited $rc, expected 130"
one_line gen "interrupted"
[ -s "$tmp/gen.out" ] || bad "interrupted generate printed nothing"
[ "$(tail -c 1 "$tmp/gen.out" | od -An -c | tr -d ' ')" = '\n' ] || bad "interrupted generate: output does not end its line"

interrupt ids 1 generate -m "$FX" --ids 1,2,3 -n 4000 --ctx 4096 --ignore-eos --greedy --print-ids
[ "$rc" = 130 ] || bad "interrupted generate --print-ids exited $rc, expected 130"
one_line ids "interrupted"
grep -qE '^[0-9]+( [0-9]+)*$' "$tmp/ids.out" || bad "interrupted --print-ids printed: $(head -c 200 "$tmp/ids.out")"

# ---- while reading a long prompt one token at a time ---------------------------------------------
ids=$(seq -s, 1 900)
ids="$ids,$ids,$ids,$ids,$(seq -s, 1 480)" # 4080 tokens: the checkpoint's context is 4096
# (reference kernels on one thread: seconds of prompt even on a fast idle machine)
interrupt pre 0 generate -m "$FX" --ids "$ids" -n 4 --prefill decode --greedy --isa ref --threads 1
if [ "$rc" = 0 ]; then
  echo "interrupt: the prompt was read within 1 s: the prompt case is not checked"
else
  [ "$rc" = 130 ] || bad "generate interrupted in its prompt exited $rc, expected 130"
  one_line pre "interrupted"
  [ -s "$tmp/pre.out" ] && bad "generate interrupted in its prompt printed: $(head -c 200 "$tmp/pre.out")"
fi

# ---- logits: no output file ----------------------------------------------------------------------
interrupt logits 0 logits -m "$FX" --ids "$ids" --prefill 0 --out "$tmp/l.f32"
if [ "$rc" = 0 ]; then
  echo "interrupt: logits finished within 1 s: not checked"
else
  [ "$rc" = 130 ] || bad "interrupted logits exited $rc, expected 130: $(cat "$tmp/logits.err")"
  one_line logits "interrupted"
fi
[ "$rc" != 0 ] && [ -e "$tmp/l.f32" ] && bad "interrupted logits left its output file"
ls "$tmp"/l.f32.tmp* >/dev/null 2>&1 && bad "interrupted logits left a temporary file"
# ---- a second Ctrl-C exits at once: still no output file -----------------------------------------
"$QHX" logits -m "$FX" --ids "$ids" --prefill 0 --out "$tmp/l2.f32" >/dev/null 2>"$tmp/l2.err" </dev/null &
pid=$!
sleep 1
kill -INT "$pid" 2>/dev/null
kill -INT "$pid" 2>/dev/null
wait "$pid"
rc=$?
pid=
[ "$rc" = 0 ] || [ "$rc" = 130 ] || bad "logits after two SIGINTs exited $rc: $(cat "$tmp/l2.err")"
[ "$rc" != 0 ] && [ -e "$tmp/l2.f32" ] && bad "logits after two SIGINTs left its output file"
ls "$tmp"/l2.f32.tmp* >/dev/null 2>&1 && bad "logits after two SIGINTs left a temporary file"
# ---- a mapped weight file truncated under a running model (SIGBUS) -------------------------------
mkdir "$tmp/trunc"
cp "$FX"/* "$tmp/trunc/"
"$QHX" bench -m "$tmp/trunc" --weights mmap --pp 0 --tg 4000 --ctx 4096 --reps 50 >"$tmp/bus.out" 2>"$tmp/bus.err" </dev/null &
pid=$!
# truncate once the weights are mapped (the bandwidth probe runs first)
for _ in $(seq 1 600); do grep -q 'trunc/model.safetensors' "/proc/$pid/maps" 2>/dev/null || ! kill -0 "$pid" 2>/dev/null && break; sleep 0.1; done
sleep 0.5
truncate -s 4096 "$tmp/trunc/model.safetensors"
for _ in $(seq 1 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null && { kill -KILL "$pid"; bad "bench on a truncated mapping did not stop within 60 s"; }
wait "$pid"
rc=$?
pid=
if [ "$rc" = 0 ]; then
  echo "interrupt: bench finished before the truncation: the SIGBUS case is not checked"
else
  [ "$rc" = 1 ] || bad "bench on a truncated mapping exited $rc, expected 1: $(head -c 300 "$tmp/bus.err")"
  one_line bus "shrank while it was mapped"
  [ -s "$tmp/bus.out" ] && bad "bench on a truncated mapping printed: $(head -c 200 "$tmp/bus.out")"
fi
exit $fail
