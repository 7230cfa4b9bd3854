#!/usr/bin/env bash
# The Hugging Face cache shared with huggingface_hub, both ways, against the mock hub on
# 127.0.0.1 (tests/cli/lib/hub_mock.py; no other address is reached):
#  - huggingface_hub (HF_ENDPOINT at the mock) downloads the tiny Qwen3-VL checkpoint; qhx then
#    runs it with -hf and with -m ORG/NAME without a single request, with the fixture's ids;
#  - qhx pull writes the tiny Qwen3.5 checkpoint; huggingface_hub reads it offline
#    (hf_hub_download and snapshot_download with HF_HUB_OFFLINE=1) and finds every file;
#  - both write the same blob names and the same links for the same repository.
# huggingface_hub comes from PyPI into a virtual environment under the build folder
# (build/hub-venv); without PyPI the test is skipped (exit 77), saying so.
# Run as: bash hub_interop.sh BIN_DIR DATA_DIR SOURCE_DIR
set -uo pipefail
BIN=$1 DATA=$2 SRC=$3
QHX=$BIN/qhx
FX=$DATA/fixtures/parity
MOCK=$SRC/tests/cli/lib/hub_mock.py
VENV=$(cd "$BIN/.." && pwd)/hub-venv
command -v python3 >/dev/null || { echo "FAIL: no python3 (scripts/deps.sh installs it)" >&2; exit 1; }
command -v curl >/dev/null || { echo "FAIL: no curl (scripts/deps.sh installs it)" >&2; exit 1; }
if ! "$VENV/bin/python" -c "import huggingface_hub" 2>/dev/null; then
  python3 -m venv "$VENV" || { echo "FAIL: python3 -m venv failed (scripts/deps.sh installs python3-venv)" >&2; exit 1; }
  if ! timeout 300 "$VENV/bin/pip" install -q --disable-pip-version-check huggingface_hub >"$VENV/pip.log" 2>&1; then
    echo "SKIP: huggingface_hub could not be installed from PyPI (unreachable?); see $VENV/pip.log"
    exit 77
  fi
fi
PY=$VENV/bin/python
tmp=$(mktemp -d /tmp/qhx_hubx.XXXXXX)
mock=
trap '[ -n "$mock" ] && kill "$mock" 2>/dev/null; rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

python3 "$MOCK" serve --port-file "$tmp/ports" --repo tiny/qwen35=$FX/qwen35-tiny-f32 \
  --repo tiny/qwen3vl=$FX/qwen3vl-tiny-f32 >"$tmp/mock.log" 2>&1 &
mock=$!
for _ in $(seq 1 100); do [ -s "$tmp/ports" ] && break; sleep 0.1; done
read -r HP SP <"$tmp/ports" || { echo "FAIL: the mock hub did not start: $(cat "$tmp/mock.log")"; exit 1; }
EP=http://127.0.0.1:$HP
unset HF_TOKEN HUGGING_FACE_HUB_TOKEN HF_HUB_CACHE HUGGINGFACE_HUB_CACHE HF_HUB_OFFLINE TRANSFORMERS_OFFLINE XDG_CACHE_HOME
# HF_HUB_DISABLE_XET: plain HTTP downloads (the mock serves no Xet storage); no telemetry
export HF_ENDPOINT=$EP HF_HOME=$tmp/hf HOME=$tmp/home HF_HUB_DISABLE_XET=1 HF_HUB_DISABLE_TELEMETRY=1 \
  HF_HUB_DISABLE_PROGRESS_BARS=1 DO_NOT_TRACK=1
mocklog() { curl -sf "$EP/_mock/log"; }
clearlog() { curl -sf "$EP/_mock/clear" >/dev/null; }
ids() { "$QHX" generate "$@" -p "Hello world" -n 8 --print-ids 2>"$tmp/gen.err" | tr -d '\n'; }

# ---- huggingface_hub writes, qhx reads without a request ----
"$PY" - <<'PY' >"$tmp/hf1.out" 2>&1 || bad "huggingface_hub snapshot_download: $(cat "$tmp/hf1.out")"
from huggingface_hub import snapshot_download
print(snapshot_download("tiny/qwen3vl"))
PY
clearlog
want=$(ids -m "$FX/qwen3vl-tiny-f32")
got=$(ids -hf tiny/qwen3vl)
[ -n "$want" ] && [ "$got" = "$want" ] || bad "-hf on huggingface_hub's cache: '$got', the fixture '$want' ($(cat "$tmp/gen.err"))"
got=$(ids -m tiny/qwen3vl)
[ "$got" = "$want" ] || bad "-m ORG/NAME on huggingface_hub's cache: '$got', expected '$want'"
[ -z "$(mocklog)" ] || bad "qhx made requests for a model huggingface_hub had cached: $(mocklog)"
# huggingface_hub fetched only some files: still no request
rm -rf "$tmp/hf"
"$PY" -c "from huggingface_hub import snapshot_download; snapshot_download('tiny/qwen3vl', allow_patterns=['*.json', '*.safetensors'])" >/dev/null 2>&1 \
  || bad "huggingface_hub snapshot_download with allow_patterns failed"
clearlog
got=$(ids -hf tiny/qwen3vl)
[ "$got" = "$want" ] || bad "-hf on a partial huggingface_hub snapshot: '$got' ($(cat "$tmp/gen.err"))"
[ -z "$(mocklog)" ] || bad "qhx made requests for a model huggingface_hub had cached: $(mocklog)"

# ---- qhx writes, huggingface_hub reads offline ----
snap=$("$QHX" pull -q tiny/qwen35) || bad "qhx pull tiny/qwen35"
clearlog
HF_HUB_OFFLINE=1 "$PY" - "$snap" <<'PY' >"$tmp/hf2.out" 2>&1 || bad "huggingface_hub offline on qhx's cache: $(cat "$tmp/hf2.out")"
import os, sys
from huggingface_hub import hf_hub_download, snapshot_download, scan_cache_dir
snap = sys.argv[1]
for f in ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors"]:
    p = hf_hub_download("tiny/qwen35", f)
    assert os.path.realpath(p) == os.path.realpath(os.path.join(snap, f)), (p, f)
assert snapshot_download("tiny/qwen35") == snap, snapshot_download("tiny/qwen35")
info = {r.repo_id: r for r in scan_cache_dir().repos}
r = info["tiny/qwen35"]
assert r.nb_files == 5 and not scan_cache_dir().warnings, (r.nb_files, scan_cache_dir().warnings)
assert [rev.refs for rev in r.revisions] == [frozenset({"main"})], [rev.refs for rev in r.revisions]
print("ok")
PY
[ -z "$(mocklog)" ] || bad "huggingface_hub offline made requests: $(mocklog)"

# ---- the same blobs and links from both ----
rm -rf "$tmp/hfa" "$tmp/hfb"
HF_HOME=$tmp/hfa "$QHX" pull -q tiny/qwen35 >/dev/null || bad "qhx pull into hfa"
HF_HOME=$tmp/hfb "$PY" -c "from huggingface_hub import snapshot_download as s; s('tiny/qwen35', allow_patterns=['config.json', 'generation_config.json', 'tokenizer.json', 'tokenizer_config.json', 'model.safetensors'])" >/dev/null 2>&1 \
  || bad "huggingface_hub into hfb"
layout() { (cd "$1/hub/models--tiny--qwen35" && find blobs snapshots refs \( -type f -o -type l \) -printf '%p %l\n' | sort); }
[ "$(layout "$tmp/hfa")" = "$(layout "$tmp/hfb")" ] || bad "the layouts differ:
qhx:
$(layout "$tmp/hfa")
huggingface_hub:
$(layout "$tmp/hfb")"
exit $fail
