#!/usr/bin/env bash
# qhx logits + qhx generate on every qwen35-* parity fixture, checked by the shared oracle
# (parity_gate.py: greedy-exact and teacher-forced logits within tolerance).
# Run as: bash parity.sh BIN_DIR SHARED_DIR SOURCE_DIR
set -euo pipefail
BIN=$1
SHARED=$2
QHX=$BIN/qhx
GATE=$SHARED/oracle/parity_gate.py

# the first python3 on PATH may lack numpy (pyenv shims); fall back to the system one
PY=
for p in python3 /usr/bin/python3; do
  if "$p" -c 'import numpy' 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || { echo "parity: python3 with numpy is missing: skipped"; exit 77; }
[ -f "$GATE" ] || { echo "parity: $GATE is missing: skipped"; exit 77; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
found=0
for fx in "$SHARED"/fixtures/parity/qwen35-*/; do
  [ -f "$fx/prompts.json" ] || continue
  found=1
  case_name=$(basename "$fx")
  out=$tmp/$case_name
  mkdir -p "$out"
  # one line per prompt: NAME<TAB>prompt ids<TAB>prompt ids + golden greedy[0..n-2] (teacher forcing)
  "$PY" - "$fx" > "$tmp/$case_name.plan" <<'PY'
import json, os, sys
fx = sys.argv[1]
golden = json.load(open(os.path.join(fx, "golden.json")))["prompts"]
for p in json.load(open(os.path.join(fx, "prompts.json"))):
    ids = p["ids"]
    g = golden[p["name"]]["greedy"]
    print("%s\t%d\t%d\t%s\t%s" % (p["name"], len(ids), len(g), ",".join(map(str, ids)),
                                  ",".join(map(str, ids + g[:-1]))))
PY
  while IFS=$'\t' read -r name n_prompt n_gen prompt forced; do
    "$QHX" logits -m "$fx" --ids "$forced" --prefill "$n_prompt" --out "$out/$name.logits.f32"
    gen=$("$QHX" generate -m "$fx" --ids "$prompt" -n "$n_gen" --greedy --ignore-eos --print-ids)
    "$PY" -c 'import json, sys; print(json.dumps({"greedy": [int(x) for x in sys.argv[1].split()]}))' \
      "$gen" > "$out/$name.greedy.json"
  done < "$tmp/$case_name.plan"
  echo "== $case_name"
  "$PY" "$GATE" --fixture "$fx" --run "$out" || status=1
done
[ "$found" = 1 ] || { echo "parity: no qwen35-* fixtures under $SHARED/fixtures/parity: skipped"; exit 77; }
exit $status
