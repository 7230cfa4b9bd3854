#!/usr/bin/env bash
# --spec mtp's report against plain decoding, on the demo model (models/shakespeare, whose MTP
# block is trained): the speed line says how much faster or slower the run was than plain
# decoding measured in the same process (16 plain steps after the run, same prompt), in words
# that match the two figures, and says when the adaptive rule retired drafting; --json carries
# tok_s, plain_tok_s, speedup (their ratio) and retired. A run that forces drafting
# (--draft-fixed) never retires; --quiet measures nothing.
# Usage: spec_speed.sh BIN_DIR DATA_DIR SOURCE_DIR
set -uo pipefail
QHX=$1/qhx
M=$3/models/shakespeare
[ -f "$M/model.safetensors" ] || { echo "FAIL: $M missing" >&2; exit 1; }
tmp=$(mktemp -d /tmp/qhx_spec_speed.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

for args in "--draft 3 --draft-fixed" "--draft 2"; do
  timeout 300 "$QHX" generate -m "$M" -p "KING HENRY:" -n 80 --greedy --ignore-eos --spec mtp $args >/dev/null 2>"$tmp/err" ||
    { bad "--spec mtp $args: $(cat "$tmp/err")"; continue; }
  line=$(grep "^qhx: load" "$tmp/err")
  python3 - "$line" <<'PY' || bad "--spec mtp $args: speed line: $line"
import re, sys
line = sys.argv[1]
gen = float(re.search(r"generated \d+ tokens \(([0-9.]+) tok/s\)", line).group(1))
m = re.search(r", (\d+)% (faster|slower) than plain decoding \(([0-9.]+) tok/s over 16 plain steps\)", line)
assert m, "no comparison"
pct, word, plain = int(m.group(1)), m.group(2), float(m.group(3))
assert plain > 0
want = 100 * abs(gen / plain - 1)
assert abs(pct - want) <= 1.5, (pct, want)
assert (word == "faster") == (gen >= plain), (word, gen, plain)
PY
  case "$args" in *fixed*) ! grep -q "drafting retired" "$tmp/err" || bad "--draft-fixed retired: $line" ;; esac
done

timeout 300 "$QHX" generate -m "$M" -p "KING HENRY:" -n 40 --greedy --spec mtp --json >"$tmp/j" 2>/dev/null || bad "--json failed"
python3 - "$tmp/j" <<'PY' || bad "--json spec: $(cat "$tmp/j")"
import json, sys
s = json.load(open(sys.argv[1]))["spec"]
assert isinstance(s["retired"], bool)
assert s["tok_s"] > 0 and s["plain_tok_s"] > 0
assert abs(s["speedup"] - s["tok_s"] / s["plain_tok_s"]) <= 0.011, s
PY

# a retired rule is said: forced by a run long enough for the rule to give up where drafting
# loses; when it retires, --json agrees with the line
timeout 300 "$QHX" generate -m "$M" -p "KING HENRY:" -n 400 --temp 1.5 --seed 7 --spec mtp --draft 8 --json >"$tmp/j2" 2>"$tmp/err2" || bad "long run failed"
r=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["spec"]["retired"])' "$tmp/j2")
if [ "$r" = True ]; then grep -q "drafting retired" "$tmp/err2" || bad "retired in --json, not in the line: $(cat "$tmp/err2")"
else ! grep -q "drafting retired" "$tmp/err2" || bad "the line says retired, --json not"; fi

# --quiet: no speed line, and no plain measurement (nothing to report it)
timeout 300 "$QHX" generate -m "$M" -p "KING HENRY:" -n 10 --greedy --spec mtp --quiet >/dev/null 2>"$tmp/err" || bad "--quiet failed"
[ ! -s "$tmp/err" ] || bad "--quiet printed: $(cat "$tmp/err")"

[ $fail = 0 ] && echo "spec_speed: ok"
exit $fail
