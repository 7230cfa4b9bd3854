#!/usr/bin/env bash
# CLI test of qhx tokenize / detokenize against the Qwen3 goldens.
# usage: bash tokenize.sh BIN_DIR DATA_DIR SOURCE_DIR
set -u
BIN=$1/qhx
DATA=$2
FIX=$DATA/fixtures/tokenizer/qwen3
GOLDEN=$FIX/golden.jsonl
command -v python3 >/dev/null || { echo "FAIL: python3 not found (scripts/deps.sh installs it)" >&2; exit 1; }
[ -f "$GOLDEN" ] || { echo "FAIL: no goldens at $GOLDEN (the test data is part of the tree, under tests/data)" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }

# expect CODE DESCRIPTION -- command...: exit status and exactly one stderr line when failing
expect() {
    local want=$1 what=$2
    shift 3
    "$@" >"$TMP/out" 2>"$TMP/err"
    local got=$?
    local lines
    lines=$(wc -l <"$TMP/err")
    if [ "$got" -ne "$want" ]; then
        bad "$what: exit $got, expected $want ($(head -c 300 "$TMP/err"))"
    elif [ "$want" -ne 0 ] && [ "$lines" -lt 1 ]; then
        bad "$what: no message on stderr"
    elif [ "$want" -eq 1 ] && [ "$lines" -ne 1 ]; then
        bad "$what: $lines stderr lines, expected one"
    else
        ok "$what (exit $got)"
    fi
}

# 1. --jsonl over all golden texts, JSON written two ways: raw UTF-8 (U+0085, U+2028, ... as
#    they are) and all-ASCII escapes (\u0000, surrogate pairs)
python3 - "$GOLDEN" "$TMP" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
with open(sys.argv[2] + "/raw.jsonl", "w", encoding="utf-8", newline="\n") as f:
    for d in lines:
        f.write(json.dumps({"text": d["text"]}, ensure_ascii=False) + "\n")
with open(sys.argv[2] + "/ascii.jsonl", "w", encoding="utf-8", newline="\n") as f:
    for d in lines:
        f.write(json.dumps({"text": d["text"]}, ensure_ascii=True) + "\n")
PY
compare_jsonl() { # OUTPUT LABEL
    python3 - "$GOLDEN" "$1" "$2" <<'PY'
import json, sys
want = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
got = [json.loads(l) for l in open(sys.argv[2], encoding="utf-8")]
good = 0
for k, d in enumerate(want):
    g = got[k]["ids"] if k < len(got) else None
    if g == d["ids"]:
        good += 1
        continue
    if g is None:
        print("  %s: no output line" % d["name"])
        continue
    i = next((i for i, (a, b) in enumerate(zip(g, d["ids"])) if a != b), min(len(g), len(d["ids"])))
    print("  %s: first difference at position %d: got %s, want %s" % (d["name"], i, g[i:i + 4], d["ids"][i:i + 4]))
print("%s: %d/%d lines identical" % (sys.argv[3], good, len(want)))
sys.exit(0 if good == len(want) and len(got) == len(want) else 1)
PY
}
for form in raw ascii; do
    if "$BIN" tokenize --tokenizer "$FIX/tokenizer.json" --jsonl <"$TMP/$form.jsonl" >"$TMP/$form.out" 2>"$TMP/err"; then
        compare_jsonl "$TMP/$form.out" "--jsonl ($form JSON)" && ok "--jsonl golden ($form JSON)" || bad "--jsonl golden ($form JSON)"
    else
        bad "--jsonl ($form JSON) failed: $(cat "$TMP/err")"
    fi
done

# 2. stdin mode and detokenize on some lines (one text per run; a model folder as --tokenizer)
python3 - "$GOLDEN" "$TMP" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
pick = [d for d in lines if d["name"] in ("whitespace_000", "english_000", "special_tokens_000", "chat_000")]
pick += [d for d in lines if "\x00" in d["text"]][:1] + [d for d in lines if "\n" in d["text"]][:2]
for cat in ("emoji", "normalization", "chinese", "long", "code_python", "random"):
    pick += [d for d in lines if d["category"] == cat][:1]
for k, d in enumerate(pick):
    open("%s/in%d.txt" % (sys.argv[2], k), "wb").write(d["text"].encode("utf-8"))
    open("%s/ids%d.txt" % (sys.argv[2], k), "w").write(" ".join(map(str, d["ids"])) + "\n")
    open("%s/dec%d.txt" % (sys.argv[2], k), "wb").write(d["decoded"].encode("utf-8"))
    open("%s/name%d.txt" % (sys.argv[2], k), "w").write(d["name"])
PY
k=0
while [ -f "$TMP/in$k.txt" ]; do
    name=$(cat "$TMP/name$k.txt")
    if "$BIN" tokenize --tokenizer "$FIX" <"$TMP/in$k.txt" >"$TMP/got$k.txt" 2>"$TMP/err" &&
        cmp -s "$TMP/got$k.txt" "$TMP/ids$k.txt"; then
        ok "stdin: $name"
    else
        bad "stdin: $name: got '$(head -c 200 "$TMP/got$k.txt")' ($(cat "$TMP/err"))"
    fi
    if "$BIN" detokenize --tokenizer "$FIX/tokenizer.json" <"$TMP/ids$k.txt" >"$TMP/back$k.txt" 2>"$TMP/err" &&
        cmp -s "$TMP/back$k.txt" "$TMP/dec$k.txt"; then
        ok "detokenize: $name"
    else
        bad "detokenize: $name ($(cat "$TMP/err"))"
    fi
    k=$((k + 1))
done

# 3. the binary form gives the same ids
if "$BIN" tokenize --tokenizer "$FIX" --save-binary "$TMP/t.qhxtok" 2>"$TMP/err" &&
    "$BIN" tokenize --tokenizer "$TMP/t.qhxtok" --jsonl <"$TMP/raw.jsonl" >"$TMP/bin.out" 2>>"$TMP/err" &&
    cmp -s "$TMP/bin.out" "$TMP/raw.out"; then
    ok "--save-binary, then --tokenizer FILE.qhxtok: same ids"
else
    bad "binary form: $(cat "$TMP/err")"
fi

# 4. errors: usage -> exit 2, runtime -> exit 1, one line on stderr
printf 'x' >"$TMP/x.txt"
printf '\xff\xfe' >"$TMP/badutf8.txt"
printf '{"text": "ok"}\n{"txt": 1}\n' >"$TMP/badline.jsonl"
printf '12 x3' >"$TMP/badids.txt"
printf '{"model":' >"$TMP/broken.json"
expect 2 "bad flag" -- "$BIN" tokenize --bogus
expect 2 "missing --tokenizer" -- "$BIN" tokenize
expect 2 "--tokenizer without a value" -- "$BIN" tokenize --tokenizer
expect 2 "detokenize bad flag" -- "$BIN" detokenize --tokenizer "$FIX" --nope
expect 1 "missing tokenizer file" -- "$BIN" tokenize --tokenizer "$TMP/nonexistent.json" <"$TMP/x.txt"
expect 1 "folder without tokenizer.json" -- "$BIN" tokenize --tokenizer "$TMP" <"$TMP/x.txt"
expect 1 "malformed tokenizer.json" -- "$BIN" tokenize --tokenizer "$TMP/broken.json" <"$TMP/x.txt"
expect 1 "invalid UTF-8 on stdin" -- "$BIN" tokenize --tokenizer "$FIX" <"$TMP/badutf8.txt"
expect 1 "bad --jsonl line" -- "$BIN" tokenize --tokenizer "$FIX" --jsonl <"$TMP/badline.jsonl"
expect 1 "detokenize: not an id" -- "$BIN" detokenize --tokenizer "$FIX" <"$TMP/badids.txt"
expect 0 "tokenize --help" -- "$BIN" tokenize --help
grep -q "usage: qhx tokenize" "$TMP/out" || bad "tokenize --help prints no usage"
expect 0 "detokenize --help" -- "$BIN" detokenize --help

# -m MODEL as the other commands take it; --pieces; the ids go back into generate --ids
MODEL=$DATA/fixtures/parity/qwen35-tiny-f32
if [ -d "$MODEL" ]; then
  printf 'Hello world\n\tx' >"$TMP/p.txt"
  "$BIN" tokenize -m "$MODEL" <"$TMP/p.txt" >"$TMP/m.ids" || bad "tokenize -m"
  "$BIN" tokenize --tokenizer "$MODEL/tokenizer.json" <"$TMP/p.txt" >"$TMP/t.ids" || bad "tokenize --tokenizer"
  cmp -s "$TMP/m.ids" "$TMP/t.ids" || bad "tokenize -m and --tokenizer differ"
  "$BIN" tokenize --model "$MODEL" --pieces <"$TMP/p.txt" >"$TMP/pieces" || bad "tokenize --pieces"
  [ "$(cut -f1 "$TMP/pieces" | tr '\n' ' ' | sed 's/ $//')" = "$(cat "$TMP/m.ids")" ] || bad "--pieces ids: $(cat "$TMP/pieces")"
  [ "$(cut -f2 "$TMP/pieces" | tr -d '\n')" = 'Hello world\n\tx' ] || bad "--pieces texts: $(cat "$TMP/pieces")"
  "$BIN" generate -m "$MODEL" --ids "$(cat "$TMP/m.ids")" -n 2 --greedy --quiet >/dev/null 2>"$TMP/err" || bad "--ids of tokenize's output: $(cat "$TMP/err")"
  expect 2 "-m and --tokenizer" -- "$BIN" tokenize -m "$MODEL" --tokenizer "$MODEL"
  expect 2 "--pieces with --jsonl" -- "$BIN" tokenize -m "$MODEL" --pieces --jsonl
  expect 2 "did you mean --pieces" -- "$BIN" tokenize -m "$MODEL" --piece
  grep -q "did you mean '--pieces'" "$TMP/err" || bad "tokenize --piece: $(cat "$TMP/err")"
else
  bad "$MODEL is missing"
fi

exit $fail
