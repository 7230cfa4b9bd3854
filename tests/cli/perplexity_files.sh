#!/usr/bin/env bash
# qhx perplexity's files are what they claim, or refused with one line (exit 1, nothing on stdout):
# the --kl-base file carries a SHA-256 of its content, so one flipped bit anywhere (header, tokens,
# rows, the checksum itself), a cut or padded file, a zero-length file, a file of the first format
# (no checksum) or something that is not a regular file never gives a table; the text is a
# regular UTF-8 file, named with the byte offset when it is not. On the demo model.
# Usage: perplexity_files.sh BIN_DIR DATA_DIR SOURCE_DIR
set -u
BIN=$1/qhx
M=$3/models/shakespeare
command -v python3 >/dev/null || { echo "FAIL: no python3 (scripts/deps.sh installs it)" >&2; exit 1; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
check() { if ! eval "$1"; then echo "FAIL: $2"; fail=1; fi; }
head -c 3000 "$2/demo/heldout_excerpt.txt" >"$T/t.txt"
ppl() { "$BIN" perplexity -m "$M" -f "$@" --ctx 64 --kv f32; }

ppl "$T/t.txt" --kl-base "$T/base" >/dev/null 2>"$T/err"
check '[ $? = 0 ] && [ -s "$T/base" ]' "--kl-base writes the base: $(cat "$T/err")"
ppl "$T/t.txt" --kl-base "$T/base" --kl-divergence >"$T/out" 2>"$T/err"
check '[ $? = 0 ] && grep -q "Same top p *: *100.000" "$T/out"' "the model against its own base: $(cat "$T/err")"

# refused BASE WANT: exit 1, one stderr line holding WANT, nothing on stdout
refused() {
  local file=$1 want=$2
  ppl "$T/t.txt" --kl-base "$file" --kl-divergence >"$T/out" 2>"$T/err"
  local rc=$?
  check '[ $rc = 1 ] && [ ! -s "$T/out" ] && [ "$(wc -l <"$T/err")" = 1 ] && grep -qF -- "$want" "$T/err"' \
    "base $file: want exit 1 and '$want' (rc $rc: $(cat "$T/err") / stdout $(head -c 200 "$T/out"))"
}
# mutate NAME PYTHON: a copy of the base changed by PYTHON on the bytes b (a bytearray)
mutate() {
  python3 - "$T/base" "$T/$1" "$2" <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
exec(sys.argv[3])
open(sys.argv[2], "wb").write(b)
PY
}
size=$(stat -c %s "$T/base")
tok_at=64                      # first token (after the 56-byte header)
row_at=$((tok_at + 945 * 4))   # some byte of the rows (945 tokens in this text)
mutate flip_row "b[$row_at + 1001] ^= 0x04"
mutate flip_last_row "b[-33] ^= 0x80"
mutate flip_sum "b[-1] ^= 0x01"
mutate flip_token "b[$tok_at + 10] ^= 0x01"
mutate flip_header "b[20] ^= 0x01"
mutate cut "del b[-4096:]"
mutate cut_sum "del b[-32:]"
mutate padded "b += b'\\0' * 16"
mutate zero "del b[:]"
mutate magic_only "del b[8:]"
mutate v1 "b[0:8] = b'QHXPPLB1'; del b[-32:]"
mutate not_base "b[0:8] = b'QHXSTATE'"
for f in flip_row flip_last_row flip_sum flip_token cut cut_sum padded; do
  refused "$T/$f" "$T/$f: checksum mismatch (a corrupt or truncated base file): make it again"
done
refused "$T/flip_header" "$T/flip_header: checksum mismatch"
refused "$T/zero" "$T/zero: not a qhx perplexity base file"
refused "$T/magic_only" "$T/magic_only: not a qhx perplexity base file"
refused "$T/v1" "$T/v1: a base file of an earlier qhexrt, without a checksum: make it again"
refused "$T/not_base" "$T/not_base: not a qhx perplexity base file"
# a valid base of another text (same size): its checksum holds, the tokens differ
tail -c 3000 "$2/demo/heldout.txt" >"$T/other.txt"
ppl "$T/other.txt" --kl-base "$T/other_base" >/dev/null 2>&1
check '[ -s "$T/other_base" ]' "the base of another text"
refused "$T/other_base" "$T/other_base: its window count is"
# not regular files: what they are, never waited on
mkfifo "$T/fifo"
refused "$T/fifo" "$T/fifo: not a regular file (a FIFO)"
refused /dev/zero "/dev/zero: not a regular file (a character device)"
refused "$T" "$T: not a regular file (a folder)"
refused "$T/missing" "$T/missing: cannot open: No such file or directory"

# the text: named, with the byte offset
printf 'To be, or not to be\n\xff that is the question\n' >"$T/bad.txt"
ppl "$T/bad.txt" >"$T/out" 2>"$T/err"
rc=$?
check '[ $rc = 1 ] && [ ! -s "$T/out" ] && [ "$(wc -l <"$T/err")" = 1 ] &&
       grep -qF "$T/bad.txt: byte 20 (0xFF) is not well-formed UTF-8" "$T/err"' "non-UTF-8 text: rc $rc, $(cat "$T/err")"
printf 'abc\xc3' >"$T/cut.txt"
ppl "$T/cut.txt" >"$T/out" 2>"$T/err"
check 'grep -qF "$T/cut.txt: byte 3 (0xC3) is not well-formed UTF-8" "$T/err"' "a text cut mid-sequence: $(cat "$T/err")"
printf '\xff' | ppl - >"$T/out" 2>"$T/err"
check 'grep -qF "stdin: byte 0 (0xFF) is not well-formed UTF-8" "$T/err"' "non-UTF-8 stdin: $(cat "$T/err")"
ppl "$T/fifo" >"$T/out" 2>"$T/err"
check 'grep -qF "$T/fifo: not a regular file (a FIFO)" "$T/err"' "a FIFO as the text: $(cat "$T/err")"
ppl /dev/zero >"$T/out" 2>"$T/err"
check 'grep -qF "/dev/zero: not a regular file (a character device)" "$T/err"' "/dev/zero as the text: $(cat "$T/err")"

[ $fail = 0 ] && echo "perplexity_files: ok"
exit $fail
