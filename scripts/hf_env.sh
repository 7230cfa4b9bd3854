#!/usr/bin/env bash
# The Hugging Face reference environment: a Python virtual environment under the build folder
# with pinned torch (used on the CPU), transformers, tokenizers, safetensors, Pillow, torchvision,
# jinja2 and numpy. It is what `make test-hf` runs in; the library and `make test` never need it.
#
#   bash scripts/hf_env.sh            # makes or completes build/hf-venv (HF_VENV=DIR to move it)
#
# Idempotent: when the venv already holds exactly the pinned set it only checks it and says so.
# Only PyPI is used. PyPI has no CPU-only torch build for x86_64 Linux: its torch wheel depends on
# pinned NVIDIA runtime wheels (cuDNN, NCCL, cuSPARSELt, ...) that libtorch links against, so they
# are installed too (about 3 GB; nothing needs a GPU, torch falls back to the CPU). The full set,
# transitive dependencies included, is pinned in scripts/hf_requirements.txt.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${HF_VENV:-$ROOT/build/hf-venv}"
REQ="$ROOT/scripts/hf_requirements.txt"
PY="${HF_PYTHON:-python3}"

say() { echo "hf_env: $*"; }

if [ ! -x "$VENV/bin/python" ]; then
  command -v "$PY" >/dev/null || { say "no $PY (Debian: apt-get install python3 python3-venv)"; exit 2; }
  say "creating $VENV with $("$PY" --version 2>&1)"
  mkdir -p "$(dirname "$VENV")"
  "$PY" -m venv "$VENV" || { say "venv failed (Debian: apt-get install python3-venv)"; exit 2; }
else
  say "venv exists: $VENV ($("$VENV/bin/python" --version 2>&1))"
fi

# Already complete? Compare the installed set with the lock file (name==version, case-folded).
want=$(grep -Ev '^\s*(#|$)' "$REQ" | tr 'A-Z_' 'a-z-' | sed 's/\s.*//' | sort)
have=$("$VENV/bin/python" -m pip freeze --all 2>/dev/null | tr 'A-Z_' 'a-z-' | sort)
missing=$(comm -23 <(echo "$want") <(echo "$have") || true)
if [ -n "$missing" ]; then
  say "installing $(echo "$missing" | wc -l) pinned package(s) from scripts/hf_requirements.txt"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade "pip==25.3"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps -r "$REQ"
  # --no-deps keeps the lock exact; pip check then proves the set is complete and consistent
  # (triton, torch's compiler back end, is unused here but kept so that the set stays complete).
  "$VENV/bin/python" -m pip check >/dev/null 2>&1 || { "$VENV/bin/python" -m pip check; say "pip check found broken requirements (above)"; exit 1; }
else
  say "all $(echo "$want" | wc -l) pinned packages already installed"
fi

# Prove it works: imports, the model classes the fixtures name, a tiny forward on the CPU.
"$VENV/bin/python" - <<'EOF'
import os
os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch, torchvision, transformers, tokenizers, safetensors, PIL, jinja2, numpy
from transformers import Qwen3_5ForConditionalGeneration, Qwen3VLForConditionalGeneration  # noqa
from transformers.models.qwen2_vl import image_processing_qwen2_vl  # noqa: the slow processor
torch.manual_seed(0)
lin = torch.nn.Linear(8, 4)
y = lin(torch.ones(2, 8))
assert y.shape == (2, 4) and torch.isfinite(y).all()
print("hf_env: ok: torch %s (cuda available: %s), torchvision %s, transformers %s, tokenizers %s, "
      "safetensors %s, Pillow %s, jinja2 %s, numpy %s" % (
      torch.__version__, torch.cuda.is_available(), torchvision.__version__, transformers.__version__,
      tokenizers.__version__, safetensors.__version__, PIL.__version__, jinja2.__version__,
      numpy.__version__))
EOF
say "python: $VENV/bin/python   (make test-hf uses it)"
