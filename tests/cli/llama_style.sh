#!/usr/bin/env bash
# qhx generate as llama.cpp users type it: the llama.cpp option spellings and --opt=value forms,
# "did you mean", prompts from a file or stdin, --ids with spaces, --stop strings (never
# printed, across token boundaries), presence/frequency penalties, the random default seed,
# --json, the context policy (-n -1, --ctx up to the trained context on checkpoints and
# bundles), --stop-id, the image-token budget, the refusals (GGUF, a single .safetensors, --isa of another
# architecture, --think on Qwen3-VL, a 17th --image) and the speed line.
# Run as: bash llama_style.sh BIN_DIR DATA_DIR SOURCE_DIR
set -uo pipefail
QHX=$1/qhx
FX=$2/fixtures/parity/qwen35-tiny-f32
VL=$2/fixtures/parity/qwen3vl-tiny-f32
[ -d "$FX" ] && [ -d "$VL" ] || { echo "FAIL: llama_style: fixtures missing under $2 (the test data is part of the tree)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "FAIL: llama_style: python3 missing (scripts/deps.sh installs it)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/qhx_llama_style.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
# same NAME CMD_A CMD_B: both succeed with the same stdout
same() {
  local name=$1
  eval "$2" >"$tmp/a" 2>"$tmp/ea" || { bad "$name: $2: $(head -c 300 "$tmp/ea")"; return; }
  eval "$3" >"$tmp/b" 2>"$tmp/eb" || { bad "$name: $3: $(head -c 300 "$tmp/eb")"; return; }
  cmp -s "$tmp/a" "$tmp/b" || bad "$name: outputs differ: '$(head -c 100 "$tmp/a")' vs '$(head -c 100 "$tmp/b")'"
}
# refuse CODE NEEDLE ARGS...: exit CODE, one stderr line holding NEEDLE, nothing on stdout
refuse() {
  local want=$1 needle=$2
  shift 2
  timeout 120 "$QHX" "$@" </dev/null >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ "$rc" = "$want" ] || { bad "qhx $* -> exit $rc, want $want: $(head -c 300 "$tmp/err")"; return; }
  [ "$(wc -l <"$tmp/err")" = 1 ] || { bad "qhx $* -> $(wc -l <"$tmp/err") stderr lines: $(head -c 400 "$tmp/err")"; return; }
  grep -qF -- "$needle" "$tmp/err" || bad "qhx $* -> '$(cat "$tmp/err")' lacks '$needle'"
  [ -s "$tmp/out" ] && bad "qhx $* -> wrote to stdout: $(head -c 200 "$tmp/out")"
  return 0
}
# json FILE EXPR: the one JSON line in FILE, as j, makes EXPR true
json() { python3 -c "import json,sys; j=json.loads(open(sys.argv[1]).read()); sys.exit(0 if ($2) else 1)" "$1"; }

G="$QHX generate -m $FX"
# ---- spellings --------------------------------------------------------------------------------
same "llama.cpp aliases" "$G -p 'Once upon' --threads 1 --ctx 64 --seed 3 -n 6 --temp 0.7 --quiet" \
     "$G -p 'Once upon' -t 1 -c 64 -s 3 --n-predict 6 --temperature 0.7 --quiet"
same "--opt=value" "$G -p 'Once upon' --seed 3 -n 6 --temp 0.7 --ctx-size 64 --quiet" \
     "$G -p 'Once upon' --seed=3 -n 6 --temp=0.7 --ctx-size=64 --quiet"
same "-r is --stop" "$G -p 'Once upon' -n 12 --greedy --stop zz --quiet" "$G -p 'Once upon' -n 12 --greedy -r zz --quiet"
$G -p 'a --x=1 prompt' -n 2 --greedy --quiet >/dev/null 2>"$tmp/err" || bad "a prompt holding --x=1 was split: $(cat "$tmp/err")"
refuse 2 "did you mean '--ctx-size'" generate -m "$FX" -p hi --ctx-siz 10
refuse 2 "did you mean '--temp'" generate -m "$FX" -p hi --tmp 1
refuse 2 "did you mean '--repeat-penalty'" chat -m "$FX" --repeat-penalt 1.1
refuse 2 "did you mean 'generate'" genrate -m "$FX"
refuse 2 "did you mean 'qwen3_5'" forge --random qwen3 "$tmp/rnd" --preset tiny
refuse 2 "unknown option '--frobnicate'" generate -m "$FX" -p hi --frobnicate
# ---- prompts from a file, stdin; ids ------------------------------------------------------------
printf 'The capital of France is' >"$tmp/prompt.txt"
P="-n 6 --greedy --quiet"
same "-f FILE" "$G -p 'The capital of France is' $P" "$G -f $tmp/prompt.txt $P"
same "--file FILE" "$G -p 'The capital of France is' $P" "$G --file $tmp/prompt.txt $P"
same "-p -" "$G -p 'The capital of France is' $P" "$G -p - $P <$tmp/prompt.txt"
same "stdin" "$G -p 'The capital of France is' $P" "$G $P <$tmp/prompt.txt"
head -c 300000 /dev/zero | tr '\0' 'a' >"$tmp/long.txt" # past the 128 KiB argument limit
"$QHX" generate -m "$FX" -f "$tmp/long.txt" --print-prompt >"$tmp/long.out" 2>"$tmp/err" && cmp -s "$tmp/long.txt" "$tmp/long.out" ||
  bad "-f with a 300 KB prompt: $(cat "$tmp/err")"
refuse 2 "the prompt is empty" generate -m "$FX" -p ''
: >"$tmp/empty.txt"
refuse 2 "is empty" generate -m "$FX" -f "$tmp/empty.txt"
refuse 2 "is empty" generate -m "$FX" -n 2
refuse 1 "No such file" generate -m "$FX" -f "$tmp/none.txt"
refuse 2 "once" generate -m "$FX" -p hi -f "$tmp/prompt.txt"
ids=$(printf 'The capital of France is' | "$QHX" tokenize -m "$FX")
same "--ids takes tokenize's output" "$G --ids '$ids' $P" "$G --ids '${ids// /,}' $P"
same "--ids = the prompt" "$G --ids '$ids' $P" "$G -p 'The capital of France is' $P"
refuse 2 "--ids: id 2" generate -m "$FX" --ids "39 x"
refuse 2 "--ids: id 1" generate -m "$FX" --ids " , "
refuse 2 "--ids: id 2" generate -m "$FX" --ids "1,,2"
# ---- stop strings --------------------------------------------------------------------------------
"$QHX" generate -m "$FX" -p 'Once upon a time' -n 40 --greedy --json --ignore-eos >"$tmp/full.json" 2>/dev/null || bad "--json"
json "$tmp/full.json" 'set(j) >= {"text", "ids", "stop", "seed", "n_prompt", "n_generated", "load_ms", "first_token_ms", "prompt_ms", "generate_ms"} and j["stop"] == "length" and len(j["ids"]) == 40' ||
  bad "--json fields: $(head -c 400 "$tmp/full.json")"
full=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['text'], end='')" "$tmp/full.json")
# a stop string spanning tokens: from the middle of the 3rd token's text to the middle of the 6th
python3 - "$FX" "$tmp/full.json" "$tmp/stop" <<'PY'
import json, sys
fx, js, out = sys.argv[1:]
j = json.load(open(js))
text = j["text"]
# 7 characters from a third of the way in: tokens of this model are 1 to 4 characters long,
# so the string spans token boundaries
start = len(text) // 3
stop = text[start:start + 7]
while not stop.strip() or "\n" in stop:
    start += 1
    stop = text[start:start + 7]
open(out, "w").write(stop)
open(out + ".before", "w").write(text[:text.index(stop)])
PY
stop=$(cat "$tmp/stop")
"$QHX" generate -m "$FX" -p 'Once upon a time' -n 40 --greedy --ignore-eos --stop "$stop" --json >"$tmp/s.json" 2>/dev/null || bad "--stop"
json "$tmp/s.json" 'j["stop"] == "stop string" and j["text"] == open(sys.argv[1].replace("s.json", "stop.before")).read()' ||
  bad "--stop '$stop': $(head -c 400 "$tmp/s.json")"
"$QHX" generate -m "$FX" -p 'Once upon a time' -n 40 --greedy --ignore-eos --stop "$stop" >"$tmp/s.txt" 2>"$tmp/s.err"
[ "$(cat "$tmp/s.txt")" = "$(cat "$tmp/stop.before")" ] || bad "--stop streamed: '$(cat "$tmp/s.txt")' vs '$(cat "$tmp/stop.before")'"
grep -q "stop: stop string" "$tmp/s.err" || bad "--stop speed line: $(cat "$tmp/s.err")"
"$QHX" generate -m "$FX" -p 'Once upon a time' -n 40 --greedy --ignore-eos --stop 'never-in-this-text' --stop "${stop:2}" >"$tmp/s2.txt" 2>/dev/null
[ "$(wc -c <"$tmp/s2.txt")" -lt "$(printf '%s\n' "$full" | wc -c)" ] || bad "a second --stop was not used"
# ---- --stop-id: a token that ends the answer too, under --ignore-eos, never printed ---------------
sid=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['ids'][5])" "$tmp/full.json")
"$QHX" generate -m "$FX" -p 'Once upon a time' -n 40 --greedy --ignore-eos --stop-id "$sid" --json >"$tmp/sid.json" 2>/dev/null || bad "--stop-id"
python3 - "$tmp/full.json" "$tmp/sid.json" "$sid" <<'PY' || bad "--stop-id $sid: $(head -c 400 "$tmp/sid.json")"
import json, sys
a, b, sid = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
first = a["ids"].index(sid)
sys.exit(0 if b["stop"] == "eos" and b["ids"] == a["ids"][:first] and b["n_generated"] == first else 1)
PY
refuse 2 "--stop-id: 'x'" generate -m "$FX" -p hi --stop-id x
# ---- penalties, seeds ----------------------------------------------------------------------------
"$QHX" generate -m "$FX" -p 'Once upon a time' -n 40 --temp 0 --presence-penalty 3 --frequency-penalty 1 --repeat-last-n 32 --json --ignore-eos >"$tmp/pen.json" 2>"$tmp/err" || bad "penalties: $(cat "$tmp/err")"
python3 -c "import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); sys.exit(0 if a['ids']!=b['ids'] else 1)" "$tmp/pen.json" "$tmp/full.json" ||
  bad "presence/frequency penalties changed nothing"
refuse 2 "--presence-penalty" generate -m "$FX" -p hi --presence-penalty 1000
"$QHX" generate -m "$FX" -p 'Once upon' -n 8 --temp 1 --json >"$tmp/r1.json" 2>/dev/null
"$QHX" generate -m "$FX" -p 'Once upon' -n 8 --temp 1 --json >"$tmp/r2.json" 2>/dev/null
python3 -c "import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); sys.exit(0 if a['seed']!=b['seed'] and a['sampling'] else 1)" "$tmp/r1.json" "$tmp/r2.json" ||
  bad "--temp 1 without --seed: the same seed twice"
seed=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['seed'])" "$tmp/r1.json")
"$QHX" generate -m "$FX" -p 'Once upon' -n 8 --temp 1 --seed "$seed" --json >"$tmp/r3.json" 2>/dev/null
python3 -c "import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); sys.exit(0 if a['ids']==b['ids'] else 1)" "$tmp/r1.json" "$tmp/r3.json" ||
  bad "--seed of the printed seed does not give the same text"
"$QHX" generate -m "$FX" -p 'Once upon' -n 2 --temp 1 -v >/dev/null 2>"$tmp/v.err"
grep -q "seed [0-9]" "$tmp/v.err" || bad "--verbose shows no seed: $(cat "$tmp/v.err")"
# ---- context ------------------------------------------------------------------------------------
"$QHX" generate -m "$FX" -p 'Once upon a time' -n -1 --ctx 40 --greedy --ignore-eos --json >"$tmp/full40.json" 2>"$tmp/err" || bad "-n -1: $(cat "$tmp/err")"
json "$tmp/full40.json" 'j["n_prompt"] + j["n_generated"] == 40 and j["stop"] == "context"' || bad "-n -1 --ctx 40: $(head -c 300 "$tmp/full40.json")"
"$QHX" generate -m "$FX" -p hi -n 2 --ctx 8192 --greedy --quiet >/dev/null 2>"$tmp/err" || bad "--ctx 8192 on a checkpoint: $(cat "$tmp/err")"
refuse 1 "exceeds the 262144 tokens the model was trained for" generate -m "$FX" -p hi -n 2 --ctx 300000
"$QHX" forge "$FX" "$tmp/bundle" --precision f16 --max-context 64 --quiet || bad "forge"
man=$(cd "$tmp/bundle" && ls *.json | grep -v -e config -e index | head -1)
"$QHX" generate -m "$tmp/bundle/$man" -p hi -n 100 --ctx 2048 --greedy --ignore-eos --quiet >/dev/null 2>"$tmp/err" || bad "--ctx above a bundle's context: $(cat "$tmp/err")"
refuse 1 "--ctx can go up to 262144" generate -m "$tmp/bundle/$man" --ids "$(seq -s, 1 64)" -n 1
# -n beyond the bundle's context: generation stops at its end, one line says so and how to go further
"$QHX" generate -m "$tmp/bundle/$man" -p hi -n 100 --greedy --ignore-eos --json >"$tmp/cap.json" 2>"$tmp/err" || bad "-n 100 beyond 64: $(cat "$tmp/err")"
json "$tmp/cap.json" 'j["n_prompt"] + j["n_generated"] == 64 and j["stop"] == "context"' || bad "-n 100 in 64: $(head -c 300 "$tmp/cap.json")"
grep -q "goes beyond the context of 64 tokens.*stop: context (--ctx can go up to 262144)" "$tmp/err" || bad "-n 100 in 64: $(cat "$tmp/err")"
# ---- a chat stops at its turn end (<|im_end|> = 962), whatever the run plan's stop ids ------------
python3 -c "import json,sys; m=json.load(open(sys.argv[1])); m['special_tokens']['stop_ids']=[960]; json.dump(m,open(sys.argv[1],'w'))" "$tmp/bundle/$man"
plan=$("$QHX" inspect "$tmp/bundle/$man")
case $plan in *"stop [960],"*) ;; *) bad "the edited plan: $(echo "$plan" | grep stop)" ;; esac
found=
for seed in $(seq 1 40); do # a seed whose sampled answer holds <|im_end|> (before <|endoftext|>)
  ids=$("$QHX" generate -m "$tmp/bundle/$man" -p hi --chat -n 40 --temp 5 --seed "$seed" --ignore-eos --print-ids --quiet 2>/dev/null)
  k=$(echo "$ids" | tr ' ' '\n' | grep -n -m1 -E '^96[02]$')
  [ "${k#*:}" = 962 ] && { found=$seed; k=${k%%:*}; break; }
done
if [ -z "$found" ]; then
  bad "no seed in 1..40 samples <|im_end|>: the turn-end stop is not checked"
else
  want=$(echo "$ids" | cut -d' ' -f1-$((k - 1)))
  got=$("$QHX" generate -m "$tmp/bundle/$man" -p hi --chat -n 40 --temp 5 --seed "$found" --print-ids 2>"$tmp/err")
  [ "$got" = "$want" ] && grep -q "stop: eos" "$tmp/err" || bad "--chat did not stop at <|im_end|>: '$got' vs '$want' ($(cat "$tmp/err"))"
  printf 'hi\n' | "$QHX" chat -m "$tmp/bundle/$man" -n 40 --temp 5 --seed "$found" --verbose >/dev/null 2>"$tmp/err"
  grep -q "generated $((k - 1)) tokens .*stop: eos" "$tmp/err" || bad "chat did not stop at <|im_end|>: $(cat "$tmp/err")"
fi
# ---- images --------------------------------------------------------------------------------------
"$QHX" generate -m "$VL" -p hi --chat --image "$VL/image-64x96.png" --image-max-tokens 2 -n 2 --greedy --json >"$tmp/i.json" 2>"$tmp/err" || bad "--image-max-tokens: $(cat "$tmp/err")"
"$QHX" generate -m "$VL" -p hi --chat --image "$VL/image-64x96.png" -n 2 --greedy --json >"$tmp/i6.json" 2>/dev/null
python3 -c "import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); sys.exit(0 if a['n_prompt'] < b['n_prompt'] <= a['n_prompt'] + 6 else 1)" "$tmp/i.json" "$tmp/i6.json" ||
  bad "--image-max-tokens 2 did not shrink the image: $(head -c 200 "$tmp/i.json") / $(head -c 200 "$tmp/i6.json")"
"$QHX" generate -m "$VL" -p hi --chat --image "$VL/image-64x96.png" -c 20 -n 2 --greedy --json >"$tmp/i20.json" 2>"$tmp/err" || bad "image fitted to --ctx 20: $(cat "$tmp/err")"
json "$tmp/i20.json" 'j["n_prompt"] + 2 <= 20' || bad "image fitted to --ctx 20: $(head -c 200 "$tmp/i20.json")"
refuse 1 "leave no room for the image" generate -m "$VL" -p "hi there, a long prompt that does not leave room" --chat --image "$VL/image-64x96.png" -c 18 -n 2
# two images in one turn: the 64x64 one adds its 4 tokens and its vision_start / vision_end
"$QHX" generate -m "$VL" -p hi --chat --image "$VL/image-64x96.png" --image "$VL/image-64x64.png" -n 2 --greedy --json >"$tmp/i2.json" 2>"$tmp/err" || bad "two images: $(cat "$tmp/err")"
python3 -c "import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); sys.exit(0 if a['n_prompt'] == b['n_prompt'] + 6 else 1)" "$tmp/i2.json" "$tmp/i6.json" ||
  bad "two images: $(head -c 200 "$tmp/i2.json") / $(head -c 200 "$tmp/i6.json")"
# --image-max-tokens bounds both together (6 + 4 tokens into 6)
"$QHX" generate -m "$VL" -p hi --chat --image "$VL/image-64x96.png" --image "$VL/image-64x64.png" --image-max-tokens 6 -n 2 --greedy --json >"$tmp/i2c.json" 2>"$tmp/err" || bad "two images, capped: $(cat "$tmp/err")"
python3 -c "import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); sys.exit(0 if a['n_prompt'] <= b['n_prompt'] - 4 else 1)" "$tmp/i2c.json" "$tmp/i2.json" ||
  bad "two images, --image-max-tokens 6: $(head -c 200 "$tmp/i2c.json") / $(head -c 200 "$tmp/i2.json")"
many=()
for k in $(seq 17); do many+=(--image "$VL/image-64x64.png"); done
refuse 2 "more than 16 images" generate -m "$VL" -p hi --chat "${many[@]}"
# ---- refusals ------------------------------------------------------------------------------------
printf 'GGUF\003\000\000\000' >"$tmp/m.gguf"
refuse 1 "m.gguf: GGUF: " generate -m "$tmp/m.gguf" -p hi
refuse 1 "m.gguf: GGUF: " chat -m "$tmp/m.gguf"
printf 'JUNK' >"$tmp/junk.gguf"
refuse 1 "not a GGUF file" generate -m "$tmp/junk.gguf" -p hi
refuse 1 "pass its folder" generate -m "$FX/model.safetensors" -p hi
case $(uname -m) in
  x86_64) refuse 2 "--isa neon: this is an x86-64 build" generate -m "$FX" -p hi --isa neon ;;
  aarch64) refuse 2 "this is an aarch64 build" generate -m "$FX" -p hi --isa avx2 ;;
esac
refuse 2 "the Qwen3-VL chat format has no thinking mode" generate -m "$VL" -p hi --chat --think
refuse 2 "the Qwen3-VL chat format has no thinking mode" chat -m "$VL" --no-think
# ---- the speed line, weights -----------------------------------------------------------------------
for w in mmap read; do
  "$QHX" generate -m "$FX" -p 'Once upon' -n 4 --greedy --weights $w >/dev/null 2>"$tmp/speed" || bad "--weights $w: $(cat "$tmp/speed")"
  grep -qE '^qhx: load [0-9.]+ s, first token [0-9.]+ ms, prompt [0-9]+ tokens \([0-9.]+ tok/s\), generated 4 tokens \([0-9.]+ tok/s\), stop: length$' "$tmp/speed" ||
    bad "speed line: $(cat "$tmp/speed")"
done
refuse 2 "--weights: 'disk'" generate -m "$FX" -p hi --weights disk
# ---- --help names the new options ----------------------------------------------------------------
"$QHX" generate --help >"$tmp/help"
for o in -t -c --ctx-size -s -f --file --n-predict -r --stop --repeat-last-n --presence-penalty --frequency-penalty \
         --verbose --json --image-max-tokens --weights --print-prompt --stop-id; do
  grep -qe " $o[ ,]" "$tmp/help" || bad "generate --help lacks $o"
done
exit $fail
