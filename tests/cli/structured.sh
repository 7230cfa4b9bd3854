#!/usr/bin/env bash
# Constrained output from the command line: --grammar, --json-schema (a file or inline JSON) and
# --json-object; every output under a corpus of schemas (hand-written and random) validates with
# python3-jsonschema (lib/structured_corpus.py); bad grammars and schemas are one clear line.
# Run as: bash structured.sh BIN_DIR DATA_DIR SOURCE_DIR
set -uo pipefail
QHX=$1/qhx
FX=$2/fixtures/parity
A=$FX/qwen35-tiny-f32
B=$FX/qwen3vl-tiny-f32
[ -d "$A" ] && [ -d "$B" ] || { echo "FAIL: structured: fixtures missing under $2" >&2; exit 1; }
tmp=$(mktemp -d /tmp/qhx_structured.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# a GBNF file: the output is one of its sentences, and the stop says it ended by itself
printf 'root ::= answer "."\nanswer ::= "yes" | "no" | "maybe"\n' >"$tmp/yn.gbnf"
for seed in 1 2 3; do
  out=$("$QHX" generate -m "$A" -p "Well?" -n 20 --grammar "$tmp/yn.gbnf" --temp 1.5 --seed $seed --quiet)
  case "$out" in yes.|no.|maybe.) echo "ok: --grammar seed $seed: $out" ;; *) bad "--grammar seed $seed: '$out'" ;; esac
done
# --json-object: one object (parsed by python); --ignore-eos: it ends by the grammar alone
# (cut by -n, it exits 3: tests/cli/structured_cut.sh)
"$QHX" generate -m "$B" -p "{" -n 600 --json-object --greedy --json --quiet >"$tmp/o.json"
orc=$?
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); rc=int(sys.argv[2]); assert (j['stop'], rc) in (('eos',0),('grammar complete',0),('length',3)), (j['stop'], rc); print('ok: --json-object stop', j['stop'])" "$tmp/o.json" $orc || bad "--json-object output (exit $orc)"
out=$("$QHX" generate -m "$A" -p "n" -n 50 --json-schema '{"enum": [12, 345]}' --ignore-eos --temp 1 --seed 5 --json --quiet)
python3 -c "import json,sys; j=json.loads(sys.argv[1]); assert j['stop']=='grammar complete' and json.loads(j['text']) in (12,345), j; print('ok: inline schema, --ignore-eos ends by the grammar:', j['text'])" "$out" || bad "inline schema: $out"

# errors: one line, exit 1 (runtime) or 2 (usage)
check() { # WHAT CODE NEEDLE -- ARGS...
  local what=$1 code=$2 needle=$3; shift 4
  "$QHX" generate -m "$A" -p x -n 4 "$@" >/dev/null 2>"$tmp/err"; local rc=$?
  if [ $rc != "$code" ] || [ "$(wc -l <"$tmp/err")" != 1 ] || ! grep -qF -- "$needle" "$tmp/err"; then
    bad "$what: exit $rc, want $code with '$needle': $(head -c 300 "$tmp/err")"
  else echo "ok: $what: $(cat "$tmp/err")"; fi
}
printf 'root ::= root "a" | "b"\n' >"$tmp/left.gbnf"
check "left recursion" 1 "left-recursive" -- --grammar "$tmp/left.gbnf"
printf 'root ::= "a\n' >"$tmp/bad.gbnf"
check "bad grammar" 1 "bad.gbnf: grammar:1:" -- --grammar "$tmp/bad.gbnf"
check "unsupported keyword" 1 "'multipleOf'" -- --json-schema '{"type": "integer", "multipleOf": 2}'
check "ref cycle" 1 "'\$ref's lead back into themselves" -- --json-schema '{"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}'
check "missing schema file" 1 "nope.json" -- --json-schema "$tmp/nope.json"
# grammars and schemas that no text satisfies: refused before anything is generated, naming why
check "const against type" 1 "'const' 5 is not of 'type'" -- --json-schema '{"type":"string","const":5}'
check "required, no extras" 1 "'required' names 'x'" -- --json-schema '{"type":"object","required":["x"],"additionalProperties":false}'
check "false schema" 1 "the schema is false" -- --json-schema false
check "false property" 1 "#/properties/a: the schema is false" -- --json-schema '{"properties":{"a":false},"required":["a"]}'
check "min above max" 1 "no number lies between" -- --json-schema '{"type":"number","minimum":3,"exclusiveMaximum":3}'
check "integer between" 1 "no integer lies between 'minimum' 0.5" -- --json-schema '{"type":"integer","minimum":0.5,"maximum":0.7}'
check "ref to itself" 1 "no finite value" -- --json-schema '{"$ref":"#"}'
check "null schema" 1 "a schema must be an object or a boolean" -- --json-schema null
check "number schema" 1 "a schema must be an object or a boolean" -- --json-schema ' 5 '
check "broken inline schema" 1 "invalid JSON at line 1" -- --json-schema '{"type":'
check "spaced false" 1 "the schema is false" -- --json-schema ' false'

printf 'root ::= [^\\x00-\\U0010FFFF]\n' >"$tmp/empty.gbnf"
check "empty class" 1 "empty.gbnf: grammar: no text matches the grammar: rule 'root'" -- --grammar "$tmp/empty.gbnf"
printf 'root ::= "a" loop\nloop ::= "b" loop\n' >"$tmp/loop.gbnf"
check "no way to finish" 1 "rule 'root' -> rule 'loop'" -- --grammar "$tmp/loop.gbnf"
# schemas that were refused and are fine: what comes out validates
vcheck() { # WHAT SCHEMA PYTHON-CHECK-ON-v
  local out
  out=$("$QHX" generate -m "$A" -p x -n 60 --json-schema "$2" --temp 1 --seed 7 --json --quiet) || { bad "$1: exit $?"; return; }
  python3 -c "import json,re,sys; j=json.loads(sys.argv[1]); v=json.loads(j['text']); assert j['stop'] in ('eos','grammar complete'), j['stop']; assert $3, v; print('ok: $1:', j['text'], j['stop'])" "$out" || bad "$1: $out"
}
vcheck "boolean schema true" true "True"
vcheck "percent-encoded ref" '{"$ref":"#/$defs/my%20def~1x","$defs":{"my def/x":{"type":"integer","minimum":-3,"maximum":3}}}' "type(v) is int and -3 <= v <= 3"
vcheck "nested star pattern" '{"type":"string","pattern":"(a*)*b"}' "re.fullmatch('(a*)*b', v)"
vcheck "decimal bounds" '{"type":"number","minimum":0.5,"exclusiveMaximum":0.75}' "0.5 <= v < 0.75"
vcheck "const filtered by type" '{"type":"integer","enum":["1",1.5,7]}' "v == 7"
# a file named true is ./true
printf '{"type":"null"}' >"$tmp/true"
qabs=$(realpath "$QHX"); aabs=$(realpath "$A")
(cd "$tmp" && "$qabs" generate -m "$aabs" -p x -n 10 --json-schema ./true --quiet) | grep -qx null && echo "ok: ./true is a file" || bad "./true as a file"
# 10000 alternatives with one parse each are not "too ambiguous"
python3 -c "print('root ::= ' + ' | '.join('\"w%05d\"' % i for i in range(10000)))" >"$tmp/words.gbnf"
out=$("$QHX" generate -m "$A" -p x -n 20 --grammar "$tmp/words.gbnf" --temp 1 --seed 3 --json --quiet) || bad "10000 alternatives: exit $?"
python3 -c "import json,re,sys; j=json.loads(sys.argv[1]); assert re.fullmatch('w[0-9]{5}', j['text']) and j['stop'] in ('eos','grammar complete'), j; print('ok: 10000 alternatives:', j['text'])" "$out" || bad "10000 alternatives: $out"
check "two constraints" 2 "choose one" -- --json-object --grammar "$tmp/yn.gbnf"

# the corpus
python3 "$3/tests/cli/lib/structured_corpus.py" "$QHX" "$A" "$B" --random 110 --seed 2026
rc=$?
[ $rc = 77 ] && { echo "SKIP: python3-jsonschema missing"; exit 77; }
[ $rc = 0 ] || fail=1
exit $fail
