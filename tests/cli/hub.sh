#!/usr/bin/env bash
# qhx pull, -hf, -m ORG/NAME, -m ollama:NAME and qhx list against a mock hub on 127.0.0.1
# (tests/cli/lib/hub_mock.py: a hub server and a storage server on another port, with faults on
# request). Nothing here reaches any other address: the workspace's network is not used.
# The repositories served: the tiny Qwen3.5 and Qwen3-VL checkpoints of tests/data, a GGUF
# repository written here (two quantizations, a split one, an mmproj), a private and a gated one.
# Checked: pull and -hf give the same ids as -m on the fixture folder; a cached model is run
# without a request; GGUF by QUANT with its mmproj; a download cut twice resumes to the right
# sha256; Ctrl-C keeps the partial file and the next pull resumes it with a range request; a
# wrong hash, 401, 403 (gated), 404 (repository, revision, file), 429 with Retry-After, 5xx, a
# full disk, HF_HUB_OFFLINE, the token never sent to the storage host; ollama's store in place.
# Run as: bash hub.sh BIN_DIR DATA_DIR SOURCE_DIR
set -uo pipefail
BIN=$1 DATA=$2 SRC=$3
QHX=$BIN/qhx
FX=$DATA/fixtures/parity
MOCK=$SRC/tests/cli/lib/hub_mock.py
command -v curl >/dev/null || { echo "FAIL: no curl (scripts/deps.sh installs it)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/qhx_hub.XXXXXX)
mock=
trap '[ -n "$mock" ] && kill "$mock" 2>/dev/null; rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# The GGUF repository: Q4_K_M and Q8_0 files, a Q2_K split in two, projectors in F16 and Q8_0.
G=$tmp/repo-gguf
mkdir -p "$G"
python3 "$MOCK" gguf "$G/Tiny-Q4_K_M.gguf" qwen35 15 0.8B 600000
python3 "$MOCK" gguf "$G/Tiny-Q8_0.gguf" qwen35 7 0.8B 2500000
python3 "$MOCK" gguf "$G/Tiny-Q2_K-00001-of-00002.gguf" qwen35 10 0.8B 1000
python3 "$MOCK" gguf "$G/Tiny-Q2_K-00002-of-00002.gguf" qwen35 10 0.8B 1000
python3 "$MOCK" gguf "$G/mmproj-Tiny-F16.gguf" clip 1 0.1B 1000
python3 "$MOCK" gguf "$G/mmproj-Tiny-Q8_0.gguf" clip 7 0.1B 1000
echo "# Tiny" >"$G/README.md"
# A GGUF repository that runs: llama.cpp's Q8_0 file of the tiny Qwen3-VL and its tower.
R=$tmp/repo-real
mkdir -p "$R"
cp "$DATA/gguf/qwen3vl-tiny-Q8_0.gguf" "$R/Tiny-VL-Q8_0.gguf"
cp "$DATA/gguf/mmproj-qwen3vl-tiny-F16.gguf" "$R/mmproj-Tiny-VL-F16.gguf"

python3 "$MOCK" serve --port-file "$tmp/ports" \
  --repo tiny/qwen35=$FX/qwen35-tiny-f32 --repo tiny/qwen3vl=$FX/qwen3vl-tiny-f32 --repo tiny/gguf=$G --repo tiny/real-gguf=$R \
  --repo tiny/private=$FX/qwen35-tiny-f32 --private tiny/private=tok-private \
  --repo tiny/gated=$FX/qwen35-tiny-f32 --gated tiny/gated=tok-gated >"$tmp/mock.log" 2>&1 &
mock=$!
for _ in $(seq 1 100); do [ -s "$tmp/ports" ] && break; sleep 0.1; done
read -r HP SP <"$tmp/ports" || { echo "FAIL: the mock hub did not start: $(cat "$tmp/mock.log")"; exit 1; }
EP=http://127.0.0.1:$HP
unset HF_TOKEN HUGGING_FACE_HUB_TOKEN HF_HUB_CACHE HUGGINGFACE_HUB_CACHE HF_HUB_OFFLINE TRANSFORMERS_OFFLINE HF_TOKEN_PATH XDG_CACHE_HOME
export HF_ENDPOINT=$EP HF_HOME=$tmp/hf QHX_HUB_RETRY_MS=50 OLLAMA_MODELS=$tmp/ollama HOME=$tmp/home
CACHE=$tmp/hf/hub
fault() { curl -sf "$EP/_mock/fault?$1" >/dev/null || bad "could not set the fault $1"; }
mocklog() { curl -sf "$EP/_mock/log"; }
clearlog() { curl -sf "$EP/_mock/clear" >/dev/null; }
sha_of() { sha256sum "$1" | cut -d' ' -f1; }
ids() { "$QHX" generate "$@" -p "Hello world" -n 8 --print-ids 2>"$tmp/gen.err" | tr -d '\n'; }
# expect_fail NAME EXIT PATTERN ARGS...: qhx ARGS exits EXIT with one stderr line matching PATTERN
expect_fail() {
  local name=$1 want=$2 pat=$3
  shift 3
  "$QHX" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
  local rc=$?
  [ "$rc" = "$want" ] || bad "$name: exit $rc, expected $want ($(cat "$tmp/$name.err"))"
  grep -Eq -- "$pat" "$tmp/$name.err" || bad "$name: stderr lacks /$pat/: $(cat "$tmp/$name.err")"
  # one line for the error (besides the lines of the files fetched before it, "... ok", and
  # -hf's "fetching ..." line)
  [ "$(grep -v ' ok$' "$tmp/$name.err" | grep -vc ': fetching ')" -le 1 ] || bad "$name: more than one error line on stderr: $(cat "$tmp/$name.err")"
}

# ---- safetensors repositories of each family: pull, -hf, -m ORG/NAME give the fixture's ids ----
for pair in qwen35:qwen35-tiny-f32 qwen3vl:qwen3vl-tiny-f32; do
  repo=tiny/${pair%%:*} fx=$FX/${pair#*:}
  snap=$("$QHX" pull "$repo" 2>"$tmp/pull.err") || bad "pull $repo: $(cat "$tmp/pull.err")"
  case "$snap" in "$CACHE/models--tiny--${pair%%:*}/snapshots/"*) ;; *) bad "pull $repo printed '$snap'";; esac
  for f in config.json generation_config.json tokenizer.json tokenizer_config.json model.safetensors; do
    cmp -s "$snap/$f" "$fx/$f" || bad "pull $repo: $f differs from the fixture's"
    [ -L "$snap/$f" ] || bad "pull $repo: $f is not a link into blobs/"
  done
  [ "${pair%%:*}" = qwen3vl ] && { cmp -s "$snap/preprocessor_config.json" "$fx/preprocessor_config.json" || bad "pull $repo: no preprocessor_config.json"; }
  [ -e "$snap/golden.json" ] && bad "pull $repo: fetched golden.json, which a model does not need"
  blob=$(readlink "$snap/model.safetensors")
  [ "$blob" = "../../blobs/$(sha_of "$fx/model.safetensors")" ] || bad "pull $repo: model.safetensors links to '$blob', not ../../blobs/SHA256"
  [ "$(cat "$CACHE/models--tiny--${pair%%:*}/refs/main")" = "$(basename "$snap")" ] || bad "pull $repo: refs/main is not the commit"
  want=$(ids -m "$fx")
  [ -n "$want" ] || bad "generate -m $fx: no ids ($(cat "$tmp/gen.err"))"
  clearlog
  got=$(ids -hf "$repo")
  [ "$got" = "$want" ] || bad "generate -hf $repo: ids '$got', -m on the fixture '$want'"
  got=$(ids -m "$repo")
  [ "$got" = "$want" ] || bad "generate -m $repo: ids '$got', expected '$want'"
  [ -z "$(mocklog)" ] || bad "-hf $repo with the model cached made requests: $(mocklog)"
done
# -hf on a model not cached yet fetches it first, then runs
rm -rf "$CACHE/models--tiny--qwen35"
got=$(ids -hf tiny/qwen35)
grep -q "fetching tiny/qwen35" "$tmp/gen.err" || bad "-hf that fetches does not say so: $(cat "$tmp/gen.err")"
[ "$got" = "$(ids -m "$FX/qwen35-tiny-f32")" ] || bad "generate -hf tiny/qwen35 on an empty cache: '$got' ($(cat "$tmp/gen.err"))"
"$QHX" chat -hf tiny/qwen35 -n 4 </dev/null >/dev/null 2>"$tmp/chat.err" || bad "chat -hf tiny/qwen35: $(cat "$tmp/chat.err")"

# ---- GGUF: the file QUANT names (default Q4_K_M) and its mmproj ----
out=$("$QHX" pull tiny/gguf --dry-run)
echo "$out" | grep -q "^Tiny-Q4_K_M.gguf" || bad "gguf default: not Q4_K_M: $out"
echo "$out" | grep -q "^mmproj-Tiny-F16.gguf" || bad "gguf default: no F16 mmproj: $out"
[ "$(echo "$out" | grep -c '\.gguf')" = 2 ] || bad "gguf default: more than the model and its mmproj: $out"
out=$("$QHX" pull tiny/gguf:q8_0 --dry-run)
echo "$out" | grep -q "^Tiny-Q8_0.gguf" && echo "$out" | grep -q "^mmproj-Tiny-Q8_0.gguf" || bad "gguf :q8_0: $out"
out=$("$QHX" pull tiny/gguf:Q2_K --dry-run)
[ "$(echo "$out" | grep -c 'Tiny-Q2_K-0000[12]-of-00002.gguf')" = 2 ] || bad "gguf :Q2_K: not both parts of the split file: $out"
expect_fail gguf_q4k 1 "no GGUF file for quantization 'Q4_K'.*Tiny-Q4_K_M.gguf" pull tiny/gguf:Q4_K
expect_fail st_quant 1 "no GGUF file" pull tiny/qwen35:Q4_K_M
path=$("$QHX" pull tiny/gguf) || bad "pull tiny/gguf"
[ "$(basename "$path")" = Tiny-Q4_K_M.gguf ] || bad "pull tiny/gguf printed $path"
[ "$(sha_of "$path")" = "$(sha_of "$G/Tiny-Q4_K_M.gguf")" ] || bad "pull tiny/gguf: wrong bytes"
[ -e "$(dirname "$path")/mmproj-Tiny-F16.gguf" ] || bad "pull tiny/gguf: no mmproj"
expect_fail gguf_run 1 "Tiny-Q4_K_M.gguf" generate -hf tiny/gguf -p hi -n 1
# a GGUF repository runs: the same ids as the file itself, and its mmproj comes along for images
want=$(ids -m "$DATA/gguf/qwen3vl-tiny-Q8_0.gguf")
[ -n "$want" ] && [ "$(ids -hf tiny/real-gguf:Q8_0)" = "$want" ] || bad "generate -hf on a GGUF repository: '$(ids -hf tiny/real-gguf:Q8_0)' vs '$want' ($(cat "$tmp/gen.err"))"
[ "$(ids -m tiny/real-gguf:Q8_0)" = "$want" ] || bad "generate -m ORG/NAME of a GGUF repository: $(cat "$tmp/gen.err")"
"$QHX" generate -m tiny/real-gguf:Q8_0 --image "$FX/qwen3vl-tiny-f32/image-64x64.png" -p "What is it?" --chat -n 4 >/dev/null 2>"$tmp/img.err" ||
  bad "generate -m ORG/NAME --image: the repository's mmproj was not used: $(cat "$tmp/img.err")"

# ---- a download cut twice resumes, with range requests, to the right sha256 ----
q8=$(sha_of "$G/Tiny-Q8_0.gguf")
clearlog
fault "match=/lfs/$q8&kind=close&after=700000&times=2"
path=$("$QHX" pull tiny/gguf:Q8_0 2>"$tmp/cut.err") || bad "pull after two cuts: $(cat "$tmp/cut.err")"
[ "$(sha_of "$path")" = "$q8" ] || bad "pull after two cuts: wrong sha256"
n=$(mocklog | grep -c "storage GET /lfs/$q8")
[ "$n" = 3 ] || bad "pull after two cuts: $n storage requests, expected 3: $(mocklog)"
mocklog | grep "storage GET /lfs/$q8" | tail -1 | grep -q "bytes=1400000-" || bad "the third request did not resume at 1400000: $(mocklog)"
ls "$CACHE/models--tiny--gguf/blobs/" | grep -q incomplete && bad "a .incomplete file is left after a good pull"

# ---- Ctrl-C keeps the partial file; the same command resumes it ----
rm -rf "$CACHE/models--tiny--gguf"
fault "match=/lfs/$q8&kind=trickle&rate=200000&times=1"
"$QHX" pull tiny/gguf:Q8_0 >"$tmp/int.out" 2>"$tmp/int.err" &
pid=$!
part=$CACHE/models--tiny--gguf/blobs/$q8.incomplete
for _ in $(seq 1 200); do [ "$(stat -c %s "$part" 2>/dev/null || echo 0)" -gt 100000 ] && break; sleep 0.05; done
kill -INT $pid
wait $pid
rc=$?
[ "$rc" = 130 ] || bad "pull interrupted: exit $rc, expected 130 ($(cat "$tmp/int.err"))"
grep -q "interrupted: .*partial file is kept" "$tmp/int.err" || bad "pull interrupted: $(cat "$tmp/int.err")"
have=$(stat -c %s "$part" 2>/dev/null || echo 0)
[ "$have" -gt 0 ] || bad "pull interrupted: no partial file kept"
[ -e "$CACHE/models--tiny--gguf/blobs/$q8" ] && bad "pull interrupted: a complete-looking blob exists"
clearlog
path=$("$QHX" pull tiny/gguf:Q8_0 2>"$tmp/res.err") || bad "pull resumed: $(cat "$tmp/res.err")"
[ "$(sha_of "$path")" = "$q8" ] || bad "pull resumed: wrong sha256"
mocklog | grep "storage GET /lfs/$q8" | grep -q "bytes=$have-" || bad "pull resumed: no range request from $have: $(mocklog)"

# ---- on a terminal: one progress line (bytes, rate, time left), not a line per file ----
if command -v script >/dev/null; then
  rm -rf "$CACHE/models--tiny--gguf"
  fault "match=/lfs/$q8&kind=trickle&rate=2000000&times=1"
  script -qec "'$QHX' pull tiny/gguf:Q8_0" /dev/null >"$tmp/tty.out" 2>&1 || bad "pull on a terminal: $(cat "$tmp/tty.out")"
  grep -aq '\] 100% 2.50 MB / 2.50 MB, [0-9.]* [kM]B/s' "$tmp/tty.out" || bad "pull on a terminal: no progress bar: $(cat -v "$tmp/tty.out")"
  grep -aq 'left' "$tmp/tty.out" || bad "pull on a terminal: no time left shown: $(cat -v "$tmp/tty.out")"
  grep -aq ' ok$' "$tmp/tty.out" && bad "pull on a terminal printed the plain per-file lines"
fi

# ---- a blob cut short (a power loss after the rename): the next pull sees its size and repairs it ----
truncate -s 1000 "$CACHE/models--tiny--gguf/blobs/$q8"
path=$("$QHX" pull -q tiny/gguf:Q8_0 2>"$tmp/short.err") || bad "pull over a short blob: $(cat "$tmp/short.err")"
[ "$(sha_of "$path")" = "$q8" ] || bad "pull over a short blob: not repaired"

# ---- a wrong hash: no blob, no partial file, one line ----
rm -rf "$CACHE/models--tiny--gguf"
fault "match=/lfs/$q8&kind=badhash&times=1"
expect_fail badhash 1 "sha256 mismatch.*removed" pull tiny/gguf:Q8_0
ls "$CACHE/models--tiny--gguf/blobs/" 2>/dev/null | grep -q "$q8" && bad "badhash: a blob or partial file of the bad download is left"
"$QHX" pull -q tiny/gguf:Q8_0 >/dev/null 2>&1 || bad "pull after a bad hash did not recover"

# ---- a hostile or broken server: more bytes than the listing's size, a path out of the
# snapshot folder, a redirect loop ----
rm -rf "$CACHE/models--tiny--gguf"
fault "match=/lfs/$q8&kind=long&times=1"
expect_fail long 1 "Tiny-Q8_0.gguf: the server sent more bytes than the file's announced size; the partial file was removed" pull tiny/gguf:Q8_0
ls "$CACHE/models--tiny--gguf/blobs/" 2>/dev/null | grep -q "$q8" && bad "long: a blob or partial file is left"
fault "match=/tree/&kind=unsafe&times=1"
expect_fail unsafe 1 "tiny/qwen35: the hub listed a file with an unsafe path \('../escape'\)" pull tiny/qwen35
[ -e "$CACHE/models--tiny--qwen35/escape" ] || [ -e "$CACHE/escape" ] && bad "unsafe: a file was written out of the snapshot"
rm -rf "$CACHE/models--tiny--qwen3vl"
fault "match=/resolve/&kind=loop&times=100"
expect_fail loop 1 "tiny/qwen3vl: .*redirects" pull tiny/qwen3vl
curl -sf "$EP/_mock/clear" >/dev/null
"$QHX" pull -q tiny/qwen3vl >/dev/null || bad "pull tiny/qwen3vl after the redirect loop"

# ---- 401 / 403 (private, gated), 404 (repository, revision, file) ----
expect_fail private 1 "tiny/private: repository not found, or private \(HTTP 401\).*token" pull tiny/private
snap=$("$QHX" pull --token tok-private tiny/private 2>"$tmp/priv.err") || bad "pull --token: $(cat "$tmp/priv.err")"
rm -rf "$CACHE/models--tiny--private"
clearlog
HF_TOKEN=tok-private "$QHX" pull tiny/private >/dev/null 2>&1 || bad "pull with HF_TOKEN failed"
mocklog | grep -q "^storage .* auth" && bad "the token was sent to the storage host: $(mocklog)"
mocklog | grep -q "^hub GET /api/models/tiny/private/revision/main auth" || bad "the token was not sent to the hub: $(mocklog)"
mocklog | grep -q LEAK && bad "token leak: $(mocklog)"
rm -rf "$CACHE/models--tiny--private"
mkdir -p "$tmp/hf" && printf 'tok-private\n' >"$tmp/hf/token"
"$QHX" pull tiny/private >/dev/null 2>&1 || bad "pull with the token file HF_HOME/token failed"
rm -f "$tmp/hf/token"
expect_fail gated 1 "tiny/gated is a gated repository \(HTTP 401\): accept its licence at $EP/tiny/gated" pull tiny/gated
expect_fail gated_tok 1 "gated repository \(HTTP 403\).*token given was refused" pull --token wrong tiny/gated
expect_fail norepo 1 "tiny/nothere: no such repository \(HTTP 404\)" pull --token t tiny/nothere
expect_fail norev 1 "tiny/qwen35: no revision 'v9' \(HTTP 404\)" pull tiny/qwen35@v9
rm -rf "$CACHE/models--tiny--qwen35"
fault "match=/resolve/&kind=status&code=404&error_code=EntryNotFound&times=1"
expect_fail nofile 1 "tiny/qwen35: no file '[a-z_.]+' in the repository \(HTTP 404\)" pull tiny/qwen35

# ---- 429 with Retry-After, then success; 5xx past the bound ----
fault "match=/revision/&kind=status&code=429&retry_after=1&times=2"
t0=$(date +%s)
"$QHX" pull -q tiny/qwen35 >/dev/null 2>"$tmp/429.err" || bad "pull after two 429: $(cat "$tmp/429.err")"
[ $(( $(date +%s) - t0 )) -ge 2 ] || bad "Retry-After: 1 (twice) was not honoured"
fault "match=/revision/&kind=status&code=503&times=50"
expect_fail s503 1 "keeps answering HTTP 503 \(a server error\) after [0-9]+ tries" pull tiny/qwen35
clearlog

# ---- HF_HUB_OFFLINE: the cache only, and one clear line when it lacks the model ----
clearlog
HF_HUB_OFFLINE=1 "$QHX" generate -hf tiny/qwen35 -p hi -n 2 >/dev/null 2>"$tmp/off.err" || bad "offline -hf of a cached model: $(cat "$tmp/off.err")"
HF_HUB_OFFLINE=1 expect_fail offline 1 "tiny/qwen3vl-absent .*not in the Hugging Face cache.*HF_HUB_OFFLINE=1" generate -hf tiny/qwen3vl-absent -p hi
[ -z "$(mocklog)" ] || bad "HF_HUB_OFFLINE=1 made requests: $(mocklog)"
# no network (nothing listens on 127.0.0.1:1): a cached model runs, an absent one is one line
got=$(HF_ENDPOINT=http://127.0.0.1:1 ids -hf tiny/qwen35)
[ "$got" = "$(ids -m "$FX/qwen35-tiny-f32")" ] || bad "-hf of a cached model without a network: '$got' ($(cat "$tmp/gen.err"))"
HF_ENDPOINT=http://127.0.0.1:1 expect_fail nonet 1 "tiny/absent: cannot fetch from http://127.0.0.1:1: .*HF_HUB_OFFLINE=1 runs from the cache only" generate -hf tiny/absent -p hi
expect_fail m_absent 1 "tiny/absent: no such file or folder.*qhx pull tiny/absent" generate -m tiny/absent -p hi

# ---- a full disk: one line, exit 1, no complete-looking blob ----
rm -rf "$CACHE/models--tiny--gguf"
( trap '' XFSZ; ulimit -f 1000; exec "$QHX" pull tiny/gguf:Q8_0 ) >"$tmp/full.out" 2>"$tmp/full.err"
rc=$?
[ "$rc" = 1 ] || bad "full disk: exit $rc ($(cat "$tmp/full.err"))"
grep -q "the disk is full" "$tmp/full.err" || bad "full disk: $(cat "$tmp/full.err")"
[ -e "$CACHE/models--tiny--gguf/blobs/$q8" ] && bad "full disk: a complete-looking blob exists"
# with room again, the same command resumes what was written
clearlog
path=$("$QHX" pull tiny/gguf:Q8_0 2>"$tmp/full2.err") || bad "pull after a full disk: $(cat "$tmp/full2.err")"
[ "$(sha_of "$path")" = "$q8" ] || bad "pull after a full disk: wrong sha256"
mocklog | grep "storage GET /lfs/$q8" | grep -q "bytes=[1-9]" || bad "pull after a full disk did not resume: $(mocklog)"

# ---- --include / --exclude ----
out=$("$QHX" pull tiny/qwen35 --dry-run --include '*.json' --exclude 'golden.json')
echo "$out" | grep -q "^config.json" && ! echo "$out" | grep -q "safetensors\|^golden.json" || bad "--include/--exclude: $out"
out=$("$QHX" pull tiny/qwen35 --dry-run --exclude generation_config.json)
echo "$out" | grep -q generation_config && bad "--exclude: $out"

# ---- bad references: usage errors ----
expect_fail badref 2 "not a repository id" pull ../etc
expect_fail badrev 2 "bad revision" pull 'tiny/qwen35@../../x'
expect_fail hf_and_m 2 "give the model once" generate -m x -hf tiny/qwen35 -p hi
expect_fail hf_noval 2 "needs a value" generate -p hi -hf
# a prompt that reads like an option is text, not a model reference
"$QHX" generate -hf tiny/qwen35 -p "-hf" -n 1 >/dev/null 2>"$tmp/ptext.err" || bad "-p -hf: $(cat "$tmp/ptext.err")"

# ---- ollama's store, read in place ----
O=$tmp/ollama
mkdir -p "$O/blobs" "$O/manifests/registry.ollama.ai/library/tiny" "$O/manifests/registry.ollama.ai/someone/other"
python3 "$MOCK" gguf "$tmp/m.gguf" qwen35 15 0.8B 4000
python3 "$MOCK" gguf "$tmp/p.gguf" clip 1 0.1B 1000
ms=$(sha_of "$tmp/m.gguf") ps=$(sha_of "$tmp/p.gguf")
mv "$tmp/m.gguf" "$O/blobs/sha256-$ms"
mv "$tmp/p.gguf" "$O/blobs/sha256-$ps"
printf '{"mediaType":"x","size":10}' >"$O/blobs/sha256-$(printf '{"mediaType":"x","size":10}' | sha256sum | cut -d' ' -f1)"
cat >"$O/manifests/registry.ollama.ai/library/tiny/2b" <<JSON
{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json",
 "config":{"mediaType":"application/vnd.docker.container.image.v1+json","digest":"sha256:$(printf '{"mediaType":"x","size":10}' | sha256sum | cut -d' ' -f1)","size":27},
 "layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:$ms","size":$(stat -c %s "$O/blobs/sha256-$ms")},
           {"mediaType":"application/vnd.ollama.image.projector","digest":"sha256:$ps","size":$(stat -c %s "$O/blobs/sha256-$ps")},
           {"mediaType":"application/vnd.ollama.image.template","digest":"sha256:$(printf x | sha256sum | cut -d' ' -f1)","size":1}]}
JSON
cp "$O/manifests/registry.ollama.ai/library/tiny/2b" "$O/manifests/registry.ollama.ai/library/tiny/latest"
sed "s/$ms/$(printf 'gone' | sha256sum | cut -d' ' -f1)/" "$O/manifests/registry.ollama.ai/library/tiny/2b" >"$O/manifests/registry.ollama.ai/someone/other/latest"
expect_fail ollama_run 1 "$O/blobs/sha256-$ms: GGUF: the key 'qwen35.embedding_length' is missing" generate -m ollama:tiny:2b -p hi
expect_fail ollama_latest 1 "sha256-$ms: GGUF: the key" generate -m ollama:tiny -p hi
# a real model in the store (llama.cpp's Q8_0 file of the tiny Qwen3-VL and its tower): it runs,
# the same ids as the file, and the projector layer is its tower
vs=$(sha_of "$DATA/gguf/qwen3vl-tiny-Q8_0.gguf") vp=$(sha_of "$DATA/gguf/mmproj-qwen3vl-tiny-F16.gguf")
cp "$DATA/gguf/qwen3vl-tiny-Q8_0.gguf" "$O/blobs/sha256-$vs"
cp "$DATA/gguf/mmproj-qwen3vl-tiny-F16.gguf" "$O/blobs/sha256-$vp"
sed "s/$ms/$vs/; s/$ps/$vp/; s/\"size\":$(stat -c %s "$O/blobs/sha256-$ms")/\"size\":$(stat -c %s "$O/blobs/sha256-$vs")/; s/\"size\":$(stat -c %s "$O/blobs/sha256-$ps")/\"size\":$(stat -c %s "$O/blobs/sha256-$vp")/" \
  "$O/manifests/registry.ollama.ai/library/tiny/2b" >"$O/manifests/registry.ollama.ai/library/tiny/vl"
want=$(ids -m "$DATA/gguf/qwen3vl-tiny-Q8_0.gguf")
[ "$(ids -m ollama:tiny:vl)" = "$want" ] || bad "generate -m ollama:tiny:vl: $(cat "$tmp/gen.err")"
"$QHX" generate -m ollama:tiny:vl --image "$FX/qwen3vl-tiny-f32/image-64x64.png" -p "What is it?" --chat -n 4 >/dev/null 2>"$tmp/img.err" ||
  bad "generate -m ollama:tiny:vl --image: the projector was not used: $(cat "$tmp/img.err")"
expect_fail ollama_missing 1 "ollama:nothing:1b: not in ollama's store" generate -m ollama:nothing:1b -p hi
expect_fail ollama_blob 1 "its blob .* is missing" generate -m ollama:someone/other -p hi
expect_fail ollama_bad 1 "not a model name" generate -m 'ollama:../../x' -p hi

# ---- qhx list ----
"$QHX" list >"$tmp/list.out" 2>"$tmp/list.err" || bad "qhx list: $(cat "$tmp/list.err")"
sed -n '/^runs/,/^$/p' "$tmp/list.out" >"$tmp/list.runs"
grep -Eq "^tiny/qwen35 +Qwen3.5 +[0-9.]+[KMB] +float32" "$tmp/list.runs" || bad "qhx list: no runnable tiny/qwen35 line: $(cat "$tmp/list.out")"
grep -Eq "^tiny/qwen3vl +Qwen3-VL" "$tmp/list.runs" || bad "qhx list: no runnable tiny/qwen3vl line: $(cat "$tmp/list.out")"
grep -Eq "^tiny/gguf:Q8_0 +qwen35 +0.8B +Q8_0 .*GGUF" "$tmp/list.out" || bad "qhx list: the GGUF line: $(cat "$tmp/list.out")"
grep -Eq "^ollama:tiny:2b +qwen35 +0.8B +Q4_K_M .*GGUF" "$tmp/list.out" || bad "qhx list: the ollama line: $(cat "$tmp/list.out")"
grep -Eq "^ollama:someone/other:latest .*missing" "$tmp/list.out" || bad "qhx list: the broken ollama manifest: $(cat "$tmp/list.out")"
grep -q "ollama:tiny:2b" "$tmp/list.runs" && bad "qhx list: a GGUF without its keys listed as runnable"
grep -Eq "^ollama:tiny:vl +Qwen3-VL .*Q8_0" "$tmp/list.runs" || bad "qhx list: the runnable ollama GGUF: $(cat "$tmp/list.out")"
grep -Eq "^tiny/real-gguf:Q8_0 +Qwen3-VL" "$tmp/list.runs" || bad "qhx list: the runnable GGUF repository: $(cat "$tmp/list.out")"

exit $fail
