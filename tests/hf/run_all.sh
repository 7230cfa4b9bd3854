#!/usr/bin/env bash
# make test-hf: every check that needs Hugging Face itself (torch + transformers on the CPU), in
# the environment of scripts/hf_env.sh. Run from the repository root after `make build`.
#   1. hf_goldens.py --check on every parity fixture: transformers against the llama.cpp goldens
#   2. hf_golden_set.py --compare: that run reproduces the committed HF golden set (CASE/hf/)
#   3. qhexrt against both golden sets (the parity CLI tests, which read CASE/hf/ too)
#   4. image_compare.py: qhexrt's pixels against the torchvision and PIL processors
#   4b. video_golden.py: qhexrt's video pixels against Qwen3VLVideoProcessor (torchcodec reader)
#   5. chat templates: apply_chat_template over the conversation matrix equals the stored renders
#   6. the shipped demo model (models/shakespeare): transformers reproduces the stored goldens of
#      tests/data/demo (demo_model.py --check), and qhexrt matches a fresh transformers set
#      (tests/cli/demo_model.sh with DEMO_GOLDEN: perplexity, greedy, tokenizer, MTP draft logits)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VENV=${HF_VENV:-$ROOT/build/hf-venv}
PY=$VENV/bin/python
BIN=${BIN:-$ROOT/build/bin}
OUT=${HF_OUT:-$ROOT/build/hf-out}
DATA=$ROOT/tests/data
if [ ! -x "$PY" ] || ! "$PY" -c 'import torch, transformers' 2>/dev/null; then
  echo "test-hf: no Hugging Face environment at $VENV: run scripts/hf_env.sh first" >&2
  exit 2
fi
PIXELS=${PIXELS:-$ROOT/build/tools/qhx_pixels}
[ -x "$BIN/qhx" ] && [ -x "$PIXELS" ] || { echo "test-hf: $BIN/qhx or qhx_pixels missing: run make build first" >&2; exit 2; }
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
mkdir -p "$OUT"
pass=0 fail=0
step() { # NAME command...
  local name=$1; shift
  if "$@" > "$OUT/$name.log" 2>&1; then echo "ok   $name"; pass=$((pass + 1))
  else echo "FAIL $name (log: $OUT/$name.log)"; tail -n 30 "$OUT/$name.log"; fail=$((fail + 1)); fi
}
for fx in "$DATA"/fixtures/parity/*/; do
  c=$(basename "$fx")
  step "hf_goldens_$c" "$PY" "$DATA/oracle/hf_goldens.py" --fixture "$fx" --out "$OUT/$c" --check --threads 1
  if [ -d "$fx/hf" ]; then
    step "hf_set_$c" "$PY" "$ROOT/tests/hf/hf_golden_set.py" --fixture "$fx" --hf-out "$OUT/$c" --compare "$fx/hf"
  else
    echo "FAIL hf_set_$c: $fx/hf is missing (tests/hf/hf_golden_set.py --write makes it)"; fail=$((fail + 1))
  fi
done
for t in parity parity_vl parity_qwen35vl; do
  step "qhexrt_$t" bash "$ROOT/tests/cli/$t.sh" "$BIN" "$DATA" "$ROOT"
done
step image_compare "$PY" "$ROOT/tests/hf/image_compare.py" --pixels "$PIXELS" --json "$OUT/image_compare.json"
step video_compare "$PY" "$ROOT/tests/hf/video_golden.py" --pixels "$PIXELS"
step video_model "$PY" "$ROOT/tests/hf/video_model_golden.py" --check "$DATA/video/model"
step chat_templates "$PY" "$ROOT/tests/hf/chat_templates.py" --check
step chat_harness "$PY" "$ROOT/tests/hf/chat_harness_check.py"
step qwen3_5_tokenizer_goldens "$PY" "$ROOT/tests/hf/qwen3_5_tokenizer_golden.py" --check
step demo_goldens "$PY" "$ROOT/tests/hf/demo_model.py" --model "$ROOT/models/shakespeare" --data "$DATA/demo" --check
step demo_fresh "$PY" "$ROOT/tests/hf/demo_model.py" --model "$ROOT/models/shakespeare" --data "$DATA/demo" --write --out "$OUT/demo"
step qhexrt_demo env DEMO_GOLDEN="$OUT/demo" bash "$ROOT/tests/cli/demo_model.sh" "$BIN" "$DATA" "$ROOT"
echo "test-hf: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
