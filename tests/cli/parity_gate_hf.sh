#!/usr/bin/env bash
# parity_gate.py --golden: the Hugging Face golden sets (CASE/hf/) are really what the gate reads.
# For each case, the llama.cpp goldens laid out as a run pass against the HF set (the two agree,
# fixtures README §7); the same run fails against a copy of the HF set with one logit moved by
# 1e-3 and against a copy with one greedy token changed; a missing HF logits file fails.
# Run as: bash parity_gate_hf.sh BIN_DIR DATA_DIR SOURCE_DIR
set -uo pipefail
DATA=$2
gate=$DATA/oracle/parity_gate.py py=
for p in python3 /usr/bin/python3; do
  if "$p" -c 'import numpy' 2>/dev/null; then py=$p; break; fi
done
[ -n "$py" ] || { echo "FAIL: python3 with numpy is missing (scripts/deps.sh installs it)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0 n=0
for fx in "$DATA"/fixtures/parity/*/; do
  c=$(basename "$fx")
  [ -d "$fx/hf" ] || { echo "FAIL $c: no hf/ golden set"; fail=1; continue; }
  n=$((n + 1))
  skip=()
  case $c in qwen35vl-*) skip=(--skip-image-prompts);; esac
  run=$tmp/$c.run
  mkdir -p "$run"
  "$py" - "$fx" "$run" "$tmp/$c" <<'PY'
import json, os, shutil, sys
import numpy as np
fx, run, bad = sys.argv[1:4]
g = json.load(open(os.path.join(fx, "golden.json")))["prompts"]
for p in json.load(open(os.path.join(fx, "prompts.json"))):
    n = p["name"]
    json.dump({"greedy": g[n]["greedy"]}, open(os.path.join(run, n + ".greedy.json"), "w"))
    shutil.copy(os.path.join(fx, n + ".logits.f32"), os.path.join(run, n + ".logits.f32"))
    if "image_embd_file" in g[n]:
        shutil.copy(os.path.join(fx, g[n]["image_embd_file"]), os.path.join(run, n + ".image_embd.f32"))
first = json.load(open(os.path.join(fx, "prompts.json")))[0]["name"]
for kind in ("logit", "greedy", "missing"):
    d = bad + "." + kind
    shutil.copytree(os.path.join(fx, "hf"), d)
    if kind == "logit":
        a = np.fromfile(os.path.join(d, first + ".logits.f32"), dtype="<f4")
        a[a.size // 2] += np.float32(1e-3)
        a.tofile(os.path.join(d, first + ".logits.f32"))
    elif kind == "greedy":
        h = json.load(open(os.path.join(d, "golden.json")))
        e = h["prompts"][first]
        e["greedy"][5] = (e["greedy"][5] + 1) % 900
        e["greedy_margins"][5] = 1.0
        json.dump(h, open(os.path.join(d, "golden.json"), "w"))
    else:
        os.remove(os.path.join(d, first + ".logits.f32"))
PY
  if "$py" "$gate" --fixture "$fx" --golden "$fx/hf" --run "$run" "${skip[@]}" >"$tmp/out" 2>&1; then
    echo "ok   $c: llama.cpp goldens pass against the HF set"
  else
    echo "FAIL $c: llama.cpp goldens against the HF set"; cat "$tmp/out"; fail=1
  fi
  for kind in logit greedy missing; do
    if "$py" "$gate" --fixture "$fx" --golden "$tmp/$c.$kind" --run "$run" "${skip[@]}" >"$tmp/out" 2>&1; then
      echo "FAIL $c: a HF set with a bad $kind still passes"; cat "$tmp/out"; fail=1
    else
      echo "ok   $c: a HF set with a bad $kind fails"
    fi
  done
done
[ "$n" -gt 0 ] || { echo "FAIL: no parity fixtures under $DATA/fixtures/parity" >&2; exit 1; }
exit $fail
