#!/usr/bin/env bash
# qhx chat as an interactive program, on a pseudo-terminal (python3's pty module): line editing
# and history (libedit: the up arrow brings the last line back), Ctrl-C stops the answer and
# returns to the prompt with a speed line saying "interrupted", a second Ctrl-C at the prompt
# quits; /help, usage errors of /save and /load, "did you mean" for commands; and over a pipe:
# multi-line messages ("""...""" and a trailing \), a bad line (invalid UTF-8) that is an error
# and not the end, /bye and /clear, /image on Qwen3-VL, the turn end, --stop-id, the chat template
# note.
# Run as: bash chat_repl.sh BIN_DIR DATA_DIR SOURCE_DIR
set -uo pipefail
QHX=$1/qhx
FX=$2/fixtures/parity/qwen35-tiny-f32
VL=$2/fixtures/parity/qwen3vl-tiny-f32
[ -d "$FX" ] && [ -d "$VL" ] || { echo "FAIL: chat_repl: fixtures missing under $2 (the test data is part of the tree)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "FAIL: chat_repl: python3 missing (scripts/deps.sh installs it)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/qhx_chat_repl.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# ---- on a terminal ---------------------------------------------------------------------------------
python3 - "$QHX" "$FX" <<'PY' || fail=1
import os, pty, select, sys, time
qhx, fx = sys.argv[1:]
pid, fd = pty.fork()
if pid == 0:
    os.execv(qhx, [qhx, "chat", "-m", fx, "-n", "-1", "--ctx", "100000", "--greedy", "--ignore-eos", "--isa", "ref", "--threads", "1"])
buf = b""
def read_until(needle, timeout=60):
    global buf
    end = time.time() + timeout
    while needle not in buf:
        left = end - time.time()
        if left <= 0:
            raise SystemExit("FAIL: chat on a terminal: no %r within %d s; got: %r" % (needle, timeout, buf[-600:]))
        r, _, _ = select.select([fd], [], [], left)
        if r:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                raise SystemExit("FAIL: chat ended early waiting for %r; got: %r" % (needle, buf[-600:]))
            buf += chunk
    i = buf.index(needle) + len(needle)
    seen, buf = buf[:i], buf[i:]
    return seen
def send(b):
    os.write(fd, b)
def drain(quiet=0.3):
    """Read whatever the terminal still shows (prompt redraws) until it is quiet."""
    global buf
    while select.select([fd], [], [], quiet)[0]:
        buf += os.read(fd, 4096)
    buf = b""
def answer_started(echo_tail=b"\r\n", timeout=60):
    """The line is echoed (up to echo_tail) and the first bytes of the answer are out: only then
    is a Ctrl-C one that stops an answer (a loaded machine may take seconds to get there)."""
    read_until(echo_tail, timeout)
    global buf
    end = time.time() + timeout
    while not buf:
        left = end - time.time()
        if left <= 0:
            raise SystemExit("FAIL: chat on a terminal: no answer within %d s" % timeout)
        r, _, _ = select.select([fd], [], [], left)
        if r:
            buf += os.read(fd, 4096)
read_until(b"> ")
send(b"/hlep\r")
read_until(b"did you mean /help?")
read_until(b"> ")
send(b"\x1b[A\r")                    # history: the up arrow brings "/hlep" back
read_until(b"unknown command '/hlep'")
read_until(b"> ")
send(b"/help\r")
read_until(b"/bye")
read_until(b"> ")
send(b"/save\r")
read_until(b"usage: /save FILE")
read_until(b"> ")
drain()
send(b"Tell me a long story\r")
answer_started(b"story\r\n")                     # the answer is being written (until the context is full)
send(b"\x03")                        # Ctrl-C: stop the answer, back to the prompt
read_until(b"stop: interrupted")
read_until(b"> ")
drain()
send(b"hi\x1b[D\x1b[DX\r")           # line editing: the cursor moves left, X goes in the middle
answer_started()
send(b"\x03")
read_until(b"stop: interrupted")
read_until(b"> ")
send(b"\x03")                        # at the prompt: the first Ctrl-C asks
read_until(b"Ctrl-C again")
send(b"\x03")                        # the second quits
_, status = os.waitpid(pid, 0)
code = os.waitstatus_to_exitcode(status)
if code != 130:
    raise SystemExit("FAIL: chat after two Ctrl-C at the prompt exited %d, expected 130" % code)
print("ok: chat on a terminal: history, /help, Ctrl-C in an answer and at the prompt")
PY

# ---- over a pipe ---------------------------------------------------------------------------------------
printf '%s\n' 'Hello' '"""' 'line one' 'line two"""' 'three \' 'four' $'bad \xff line' '/clear' '/image x.png' 'again' '/bye' 'never read' |
  "$QHX" chat -m "$FX" -n 4 --greedy --verbose >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" = 0 ] || bad "chat over a pipe exited $rc: $(head -c 400 "$tmp/err")"
n_answers=$(grep -c "stop: " "$tmp/err")
[ "$n_answers" = 4 ] || bad "chat over a pipe: $n_answers answers, expected 4 (Hello, the two multi-line messages, again): $(cat "$tmp/err")"
grep -q "not valid UTF-8" "$tmp/err" || bad "a line of invalid UTF-8 gave no error: $(cat "$tmp/err")"
grep -q "(new conversation)" "$tmp/err" || bad "/clear: $(cat "$tmp/err")"
grep -q "/image needs a model whose run plan takes images" "$tmp/err" || bad "/image on Qwen3.5: $(cat "$tmp/err")"
# the prompt of the multi-line turns holds their lines (prompt tokens: Hello 1 line < 2 lines)
p1=$(grep -o 'prompt [0-9]* tokens' "$tmp/err" | sed -n 2p | tr -dc 0-9)
[ "${p1:-0}" -gt 8 ] || bad "the \"\"\" message looks cut: $(cat "$tmp/err")"
# /image twice on Qwen3-VL, then a turn with both (6 + 4 image tokens, two vision_start/end pairs)
printf '/image %s\n/image %s\nWhat is this?\n/image %s/none.png\n/bye\n' "$VL/image-64x96.png" "$VL/image-64x64.png" "$tmp" |
  "$QHX" chat -m "$VL" -n 2 --greedy --verbose >"$tmp/vl.out" 2>"$tmp/vl.err"
[ $? = 0 ] || bad "chat with /image: $(cat "$tmp/vl.err")"
grep -q "comes with 2 images" "$tmp/vl.err" || bad "a second /image: $(cat "$tmp/vl.err")"
grep -q "No such file" "$tmp/vl.err" || bad "/image of a missing file: $(cat "$tmp/vl.err")"
p=$(grep -o 'prompt [0-9]* tokens' "$tmp/vl.err" | head -1 | tr -dc 0-9)
[ "${p:-0}" -ge 20 ] || bad "the /image turn lacks image tokens: $(cat "$tmp/vl.err")"
# /image on Qwen3.5 with its tower (the checkpoint folder opens for images in chat)
Q35VL=$2/fixtures/parity/qwen35vl-tiny-f32
printf '/image %s\nWhat is this?\n/bye\n' "$Q35VL/image-64x96.png" |
  "$QHX" chat -m "$Q35VL" -n 2 --greedy --verbose >"$tmp/q.out" 2>"$tmp/q.err"
[ $? = 0 ] || bad "Qwen3.5 chat with /image: $(cat "$tmp/q.err")"
p=$(grep -o 'prompt [0-9]* tokens' "$tmp/q.err" | head -1 | tr -dc 0-9)
[ "${p:-0}" -ge 14 ] || bad "the Qwen3.5 /image turn lacks image tokens: $(cat "$tmp/q.err")"
# --stop-id ends a chat answer at that token, as in generate: the same turn, the same text
"$QHX" generate -m "$FX" -p hi --chat -n 16 --greedy --ignore-eos --json >"$tmp/g.json" 2>/dev/null || bad "generate --chat --json"
sid=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['ids'][4])" "$tmp/g.json")
"$QHX" generate -m "$FX" -p hi --chat -n 16 --greedy --ignore-eos --stop-id "$sid" --json >"$tmp/gs.json" 2>/dev/null ||
  bad "generate --chat --stop-id"
printf 'hi\n' | "$QHX" chat -m "$FX" -n 16 --greedy --ignore-eos --stop-id "$sid" --verbose >"$tmp/cs.out" 2>"$tmp/cs.err" ||
  bad "chat --stop-id: $(cat "$tmp/cs.err")"
grep -q "stop: eos" "$tmp/cs.err" || bad "chat --stop-id $sid did not stop there: $(cat "$tmp/cs.err")"
python3 - "$tmp/gs.json" "$tmp/cs.out" <<'PY' || bad "chat --stop-id: '$(cat "$tmp/cs.out")' vs $(head -c 300 "$tmp/gs.json")"
import json, sys
g = json.load(open(sys.argv[1]))
sys.exit(0 if g["stop"] == "eos" and open(sys.argv[2]).read().rstrip("\n") == g["text"] else 1)
PY
# --weights on chat as on generate
for w in mmap read; do
  printf 'hi\n' | "$QHX" chat -m "$FX" -n 2 --greedy --weights $w --verbose >/dev/null 2>"$tmp/w.err" && grep -q "stop: " "$tmp/w.err" ||
    bad "chat --weights $w: $(cat "$tmp/w.err")"
done
# usage errors of /load, unknown commands with a suggestion
printf '/load\n/lod x\n/bye\n' | "$QHX" chat -m "$FX" -n 2 --greedy >/dev/null 2>"$tmp/u.err"
grep -q "usage: /load FILE" "$tmp/u.err" && grep -q "did you mean /load?" "$tmp/u.err" || bad "/load usage: $(cat "$tmp/u.err")"
exit $fail
