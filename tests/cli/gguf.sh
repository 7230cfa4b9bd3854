#!/usr/bin/env bash
# GGUF files: the reader and the reference dequantization against the `gguf` Python package
# (lib/gguf_oracle.py: a file written by gguf's GGUFWriter with every value type and every
# weight type qhexrt reads, listed by `qhx inspect --json` as gguf's reader lists it, each
# tensor dequantized bit for bit as gguf.quants.dequantize does), then damaged copies of that
# file through `qhx inspect`: one line naming the problem, exit 1.
# The package comes from PyPI into a virtual environment under the build folder
# (build/gguf-venv); without PyPI the test is skipped (exit 77), saying so.
# Usage: gguf.sh BIN_DIR DATA_DIR SOURCE_DIR
set -u
BIN=$1 SRC=$3
QHX=$BIN/qhx
DUMP=$(cd "$BIN/.." && pwd)/tests/gguf_dump
VENV=$(cd "$BIN/.." && pwd)/gguf-venv
[ -x "$DUMP" ] || { echo "FAIL: $DUMP is missing (built with the tests)" >&2; exit 1; }
if ! "$VENV/bin/python" -c "import gguf, numpy" 2>/dev/null; then
  python3 -m venv "$VENV" || { echo "FAIL: python3 -m venv failed (scripts/deps.sh installs python3-venv)" >&2; exit 1; }
  if ! timeout 300 "$VENV/bin/pip" install -q --disable-pip-version-check "gguf>=0.10" >"$VENV/pip.log" 2>&1; then
    echo "SKIP: the gguf package could not be installed from PyPI (unreachable?); see $VENV/pip.log"
    exit 77
  fi
fi
tmp=$(mktemp -d /tmp/qhx_gguf.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
"$VENV/bin/python" -W ignore::RuntimeWarning "$SRC/tests/cli/lib/gguf_oracle.py" "$QHX" "$DUMP" "$tmp" || fail=1
F=$tmp/types.gguf
[ -s "$F" ] || { echo "FAIL: the oracle wrote no file"; exit 1; }

# the text listing names every tensor type
out=$("$QHX" inspect "$F") || { echo "FAIL: qhx inspect exit $?"; fail=1; }
for t in F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_NL IQ4_XS; do
  grep -q " $t " <<<"$out" || { echo "FAIL: qhx inspect lists no $t tensor"; fail=1; }
done

# damaged copies: exit 1, one line, naming the problem
check() { # NAME NEEDLE
  "$QHX" inspect "$tmp/$1" >/dev/null 2>"$tmp/err"; local rc=$?
  if [ $rc != 1 ] || [ "$(wc -l <"$tmp/err")" != 1 ] || ! grep -qF -- "$2" "$tmp/err"; then
    echo "FAIL: $1: exit $rc, want 1 with '$2': $(head -c 300 "$tmp/err")"; fail=1
  else echo "ok: $1: $(cat "$tmp/err")"; fi
}
size=$(stat -c %s "$F")
head -c $((size - 100)) "$F" >"$tmp/cut_data.gguf"; check cut_data.gguf "a truncated file?"
head -c 200 "$F" >"$tmp/cut_meta.gguf"; check cut_meta.gguf "a truncated file?"
head -c 10 "$F" >"$tmp/cut_header.gguf"; check cut_header.gguf "the file ends inside the header"
: >"$tmp/empty.gguf"; check empty.gguf "the file ends inside the header"
patch() { # NAME OFFSET HEXBYTES: a copy of F with bytes replaced
  cp "$F" "$tmp/$1"; printf "$3" | dd of="$tmp/$1" bs=1 seek="$2" conv=notrunc status=none
}
patch v1.gguf 4 '\x01\x00\x00\x00'; check v1.gguf "version 1"
patch v9.gguf 4 '\x09\x00\x00\x00'; check v9.gguf "version 9 is not supported"
patch magic.gguf 0 'GGML'; check magic.gguf "not a GGUF file"
patch kv_count.gguf 16 '\xff\xff\xff\xff\xff\x00\x00\x00'; check kv_count.gguf "metadata keys"
patch tensors.gguf 8 '\xff\xff\xff\x7f\x00\x00\x00\x00'; check tensors.gguf "tensors (the cap is"
# the first tensor description's type: find it after its name, then make it unknown
off=$("$VENV/bin/python" - "$F" <<'PY'
import sys, gguf
r = gguf.GGUFReader(sys.argv[1])
f = r.tensors[0].field
print(int(f.offset) + sum(p.nbytes for p in f.parts[:-2]))
PY
)
patch type.gguf "$off" '\x63\x00\x00\x00'; check type.gguf "unknown tensor type 99"
patch offset.gguf $((off + 4)) '\x04\x00\x00\x00\x00\x00\x00\x00'; check offset.gguf "is not a multiple of the alignment"
# the tokenizer from the file: the golden ids of both tokenizers' texts (lib/gguf_tokenizer.py)
TOK=$2/fixtures/tokenizer
"$VENV/bin/python" "$SRC/tests/cli/lib/gguf_tokenizer.py" "$QHX" "$TOK/qwen3" qwen2 "$tmp" || fail=1
"$VENV/bin/python" "$SRC/tests/cli/lib/gguf_tokenizer.py" "$QHX" "$TOK/qwen3_5" qwen35 "$tmp" || fail=1
tok_refused() { # WHAT NEEDLE GGUF
  echo hi | "$QHX" tokenize --tokenizer "$3" >/dev/null 2>"$tmp/err"; local rc=$?
  if [ $rc != 1 ] || [ "$(wc -l <"$tmp/err")" != 1 ] || ! grep -qF -- "$2" "$tmp/err"; then
    echo "FAIL: $1: exit $rc, want 1 with '$2': $(head -c 300 "$tmp/err")"; fail=1
  else echo "ok: $1: $(cat "$tmp/err")"; fi
}
g=$("$VENV/bin/python" "$SRC/tests/cli/lib/gguf_tokenizer.py" "$QHX" "$TOK/qwen3" qwen2 "$tmp" --model llama --write-only)
tok_refused "a SentencePiece model" "tokenizer.ggml.model 'llama' is not supported" "$g"
g=$("$VENV/bin/python" "$SRC/tests/cli/lib/gguf_tokenizer.py" "$QHX" "$TOK/qwen3" gpt-4o "$tmp" --write-only)
tok_refused "a pre-tokenizer of another model" "tokenizer.ggml.pre 'gpt-4o' is not a pre-tokenizer qhexrt knows" "$g"
tok_refused "no tokenizer at all" "the key 'tokenizer.ggml.model' is missing" "$F"
mkdir "$tmp/folder.gguf"; "$QHX" inspect "$tmp/folder.gguf" >/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 1 ] && [ "$(wc -l <"$tmp/err")" = 1 ] || { echo "FAIL: a folder named .gguf: exit $rc: $(cat "$tmp/err")"; fail=1; }
exit $fail
