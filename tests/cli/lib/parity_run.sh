# Shared by parity.sh and parity_vl.sh (sourced, not run): the qhx commands on every parity
# fixture whose folder matches a pattern, judged by the oracle (parity_gate.py:
# greedy-exact, teacher-forced logits and, for image prompts, image embeddings within
# tolerance). Each case is judged twice when it carries the Hugging Face golden set (CASE/hf/,
# made by tests/hf/hf_golden_set.py): against the llama.cpp goldens and against transformers.
# Needs BIN and DATA set; fails without numpy, the oracle or fixtures.
#   parity_run LABEL PATTERN [text-only]   e.g. parity_run parity 'qwen35-*'
# text-only: the image prompts are left out (and the gate says so).
parity_run() {
  local label=$1 pattern=$2 text_only=${3:-}
  local qhx=$BIN/qhx gate=$DATA/oracle/parity_gate.py py=
  # the first python3 on PATH may lack numpy (pyenv shims); fall back to the system one
  for p in python3 /usr/bin/python3; do
    if "$p" -c 'import numpy' 2>/dev/null; then py=$p; break; fi
  done
  [ -n "$py" ] || { echo "FAIL: $label: python3 with numpy is missing (scripts/deps.sh installs it)" >&2; exit 1; }
  [ -f "$gate" ] || { echo "FAIL: $label: $gate is missing (the test data is part of the tree, under tests/data)" >&2; exit 1; }

  local tmp status=0 found=0
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  for fx in "$DATA"/fixtures/parity/$pattern/; do
    [ -f "$fx/prompts.json" ] || continue
    found=1
    local case_name out
    case_name=$(basename "$fx")
    out=$tmp/$case_name
    mkdir -p "$out"
    # one line per prompt: NAME, n_prompt, n_gen, image file or "-", prompt ids, prompt ids +
    # golden greedy[0..n-2] (teacher forcing)
    "$py" - "$fx" "$text_only" > "$tmp/$case_name.plan" <<'PY'
import json, os, sys
fx = sys.argv[1]
golden = json.load(open(os.path.join(fx, "golden.json")))["prompts"]
for p in json.load(open(os.path.join(fx, "prompts.json"))):
    if sys.argv[2] == "text-only" and "image" in p:
        continue
    ids = p["ids"]
    g = golden[p["name"]]["greedy"]
    print("%s\t%d\t%d\t%s\t%s\t%s" % (p["name"], len(ids), len(g), p.get("image", "-"),
                                      ",".join(map(str, ids)), ",".join(map(str, ids + g[:-1]))))
PY
    while IFS=$'\t' read -r name n_prompt n_gen image prompt forced; do
      local img=()
      if [ "$image" != "-" ]; then
        img=(--image "$fx/$image")
        "$qhx" embed-image -m "$fx" --image "$fx/$image" --out "$out/$name.image_embd.f32"
      fi
      # an f32 KV cache for the logits (the oracle's tolerance is below the f16 cache's ~1e-3);
      # generate keeps the default (f16), which must stay greedy-exact
      "$qhx" logits -m "$fx" --ids "$forced" --prefill "$n_prompt" --kv f32 "${img[@]}" --out "$out/$name.logits.f32"
      local gen
      gen=$("$qhx" generate -m "$fx" --ids "$prompt" "${img[@]}" -n "$n_gen" --greedy --ignore-eos --print-ids)
      "$py" -c 'import json, sys; print(json.dumps({"greedy": [int(x) for x in sys.argv[1].split()]}))' \
        "$gen" > "$out/$name.greedy.json"
    done < "$tmp/$case_name.plan"
    local skip=()
    [ "$text_only" = text-only ] && skip=(--skip-image-prompts)
    echo "== $case_name (llama.cpp goldens)"
    "$py" "$gate" --fixture "$fx" --run "$out" "${skip[@]}" || status=1
    if [ -d "$fx/hf" ]; then
      echo "== $case_name (Hugging Face goldens, $fx/hf)"
      "$py" "$gate" --fixture "$fx" --golden "$fx/hf" --run "$out" "${skip[@]}" || status=1
    fi
  done
  [ "$found" = 1 ] || { echo "FAIL: $label: no $pattern fixtures under $DATA/fixtures/parity (the test data is part of the tree, under tests/data)" >&2; exit 1; }
  exit $status
}
