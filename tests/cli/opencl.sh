#!/usr/bin/env bash
# The OpenCL device end to end (on PoCL in CI): every parity fixture through --device opencl
# (greedy-exact and teacher-forced logits within the fixture tolerances, image prompts
# included; qhx parity's gates), the f16 and q8 caches greedy-exact, the demo model's greedy text
# the same as on the CPU, an image prompt, qhx serve on the device, the one-line errors (no such
# device, no platform), the op harness at work-groups of 16, and the program cache (made,
# reused, a corrupt entry rebuilt and replaced, an unwritable folder no error), and a failing op
# (injected) as the command's one-line error.
# Skipped (77) when the build or the machine has no OpenCL, unless QHX_REQUIRE_OPENCL=1.
# Run as: bash opencl.sh BIN_DIR DATA_DIR SOURCE_DIR
set -uo pipefail
BIN=$1
DATA=$2
SRC=$3
QHX=$BIN/qhx
FX=$DATA/fixtures/parity
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; [ -n "${srv:-}" ] && kill "$srv" 2>/dev/null' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
command -v python3 >/dev/null || { echo "FAIL: no python3 (scripts/deps.sh installs it)"; exit 1; }

devs=$("$QHX" devices 2>&1)
drc=$?
if [ $drc -ne 0 ] || ! grep -q '^  opencl:0' <<<"$devs"; then
  if [ "${QHX_REQUIRE_OPENCL:-}" = 1 ]; then echo "FAIL: opencl: QHX_REQUIRE_OPENCL=1 but: $devs"; exit 1; fi
  echo "skipped: no OpenCL device ($devs)"
  exit 77
fi
export QHX_OPENCL_CACHE_DIR=$tmp/cache

# ---- parity fixtures ------------------------------------------------------------------------
for fx in "$FX"/*/; do
  [ -f "$fx/golden.json" ] || continue
  name=$(basename "$fx")
  out=$("$QHX" parity -m "$fx" --golden "$fx" --device opencl 2>&1) || bad "$name (tolerant gate): $out"
  case $name in
    qwen35-*) out=$("$QHX" parity -m "$fx" --golden "$fx" --device opencl --gate exact 2>&1) || bad "$name (exact gate): $out" ;;
  esac
done
ls "$tmp"/cache/*.bin >/dev/null 2>&1 || bad "no program binary cached under $tmp/cache"
for kv in f16 q8; do
  out=$("$QHX" parity -m "$FX/qwen35-tiny-f32" --golden "$FX/qwen35-tiny-f32" --device opencl --kv $kv --gate exact 2>&1) ||
    bad "qwen35-tiny-f32 --kv $kv (exact gate): $out"
done

# ---- the demo model: the same greedy text on both devices ------------------------------------
demo=$SRC/models/shakespeare
if [ -f "$demo/model.safetensors" ]; then
  a=$("$QHX" generate -m "$demo" -p "ROMEO:" -n 24 --greedy --quiet 2>/dev/null)
  b=$("$QHX" generate -m "$demo" -p "ROMEO:" -n 24 --greedy --quiet --device opencl 2>/dev/null)
  [ -n "$a" ] && [ "$a" = "$b" ] || bad "demo model: cpu '$a' vs opencl '$b'"
fi

# ---- an image prompt (Qwen3-VL): the same greedy ids on both devices; embed-image within 1e-5 --
vl=$FX/qwen3vl-tiny-f32
a=$("$QHX" generate -m "$vl" --chat --image "$vl/image-64x64.png" -p "Describe" -n 8 --greedy --print-ids --quiet 2>/dev/null)
b=$("$QHX" generate -m "$vl" --chat --image "$vl/image-64x64.png" -p "Describe" -n 8 --greedy --print-ids --quiet --device opencl 2>/dev/null)
[ -n "$a" ] && [ "$a" = "$b" ] || bad "image prompt: cpu '$a' vs opencl '$b'"
"$QHX" embed-image -m "$vl" --image "$vl/image-64x64.png" --out "$tmp/e_cpu.f32" >/dev/null 2>&1 &&
  "$QHX" embed-image -m "$vl" --image "$vl/image-64x64.png" --out "$tmp/e_ocl.f32" --device opencl >/dev/null 2>&1 ||
  bad "embed-image --device opencl failed"
cmp -s <(od -An -v -tf4 -w4 "$tmp/e_cpu.f32" | wc -l) <(od -An -v -tf4 -w4 "$tmp/e_ocl.f32" | wc -l) || bad "embed-image: sizes differ"
worst=$(paste <(od -An -v -tf4 -w4 "$tmp/e_cpu.f32") <(od -An -v -tf4 -w4 "$tmp/e_ocl.f32") |
  awk '{d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d} END {print (m <= 1e-5) ? "ok" : m}')
[ "$worst" = ok ] || bad "embed-image: max |cpu - opencl| $worst > 1e-5"

# ---- errors: one line, exit 1 (no such device) or 2 (not a device name) -----------------------
out=$("$QHX" generate -m "$FX/qwen35-tiny-f32" --device opencl:99 -p hi -n 1 2>&1 >/dev/null); rc=$?
[ $rc = 1 ] && [ "$(wc -l <<<"$out")" = 1 ] && grep -q "opencl:99: no such device" <<<"$out" || bad "opencl:99: rc $rc: $out"
out=$("$QHX" generate -m "$FX/qwen35-tiny-f32" --device opencl:x -p hi -n 1 2>&1 >/dev/null); rc=$?
[ $rc = 2 ] || bad "opencl:x: rc $rc: $out"
# a device op that fails (QHX_OPENCL_FAIL injects it: a kernel launch, a read, a write): the
# command fails with the device's one line, exit 1, and the device prints nothing of its own
for f in launch:1 launch:7 read:1 write:1 buffer:40; do
  out=$(QHX_OPENCL_FAIL=$f "$QHX" generate -m "$FX/qwen35-tiny-f32" --device opencl -p "Hello there" -n 4 2>&1 >/dev/null); rc=$?
  [ $rc = 1 ] && [ "$(wc -l <<<"$out")" = 1 ] && grep -Eq "^qhx generate: device opencl:[0-9]+ \(.*\): .* failed: CL_[A-Z_]+ \(-[0-9]+\)$" <<<"$out" ||
    bad "QHX_OPENCL_FAIL=$f: rc $rc: $out"
done
out=$(QHX_OPENCL_FAIL=launch:3 "$QHX" logits -m "$FX/qwen35-tiny-f32" --device opencl --ids 1,2,3 --out "$tmp/fail.f32" 2>&1 >/dev/null); rc=$?
[ $rc = 1 ] && [ "$(wc -l <<<"$out")" = 1 ] && grep -q "^qhx logits: device opencl:.*a kernel launch failed" <<<"$out" || bad "logits, a launch failing: rc $rc: $out"
# a machine without a platform (the ICD loader pointed at an empty folder): one line, exit 1,
# and the op harness skips the device unless QHX_REQUIRE_OPENCL=1
mkdir -p "$tmp/no-icd"
out=$(OCL_ICD_VENDORS=$tmp/no-icd "$QHX" generate -m "$FX/qwen35-tiny-f32" --device opencl -p hi -n 1 2>&1 >/dev/null); rc=$?
[ $rc = 1 ] && [ "$(wc -l <<<"$out")" = 1 ] && grep -q "no OpenCL platform found" <<<"$out" || bad "no platform: rc $rc: $out"
ops=$(dirname "$BIN")/tests/test_device_ops
if [ -x "$ops" ]; then
  out=$(OCL_ICD_VENDORS=$tmp/no-icd QHX_TEST_DEVICE=opencl QHX_REQUIRE_OPENCL= "$ops" 2>&1) || bad "op harness without a platform: $out"
  grep -q "opencl: skipped: device opencl: no OpenCL platform found" <<<"$out" || bad "op harness without a platform said: $out"
  OCL_ICD_VENDORS=$tmp/no-icd QHX_TEST_DEVICE=opencl QHX_REQUIRE_OPENCL=1 "$ops" >/dev/null 2>&1 &&
    bad "op harness without a platform passed under QHX_REQUIRE_OPENCL=1"
  # the kernels at the smallest work-group a device may fall back to (test_device_ops runs 64)
  out=$(QHX_OPENCL_WG=16 QHX_TEST_DEVICE=opencl "$ops" 2>&1) || bad "op harness at work-groups of 16: $(tail -5 <<<"$out")"
fi

# ---- the cache: a corrupt entry is rebuilt and replaced; an unwritable folder is no error -----
# one entry from here on: the default program's (the harness above built others, at other
# work-group sizes, whose names may sort first)
rm -f "$tmp"/cache/*
"$QHX" generate -m "$FX/qwen35-tiny-f32" --device opencl -p hi -n 1 >/dev/null 2>&1 || bad "opencl generate to fill the cache"
entry=$(ls "$tmp"/cache/*.bin | head -1)
head -c 4096 /dev/urandom > "$entry"
garbage=$(sha256sum < "$entry")
out=$("$QHX" parity -m "$FX/qwen35-tiny-f32" --golden "$FX/qwen35-tiny-f32" --device opencl --gate exact 2>&1) || bad "after a corrupt cache entry: $out"
[ "$(sha256sum < "$entry")" != "$garbage" ] || bad "the corrupt cache entry was not replaced"

# Hostile entries (docs/backends.md, "The program cache"): none may reach the driver (PoCL aborts
# on a binary cut short), each is rebuilt from source and rewritten whole, and the text is the
# CPU's. The demo model's kernels are the same program, so one entry serves every run here.
gen_ocl() { "$QHX" generate -m "$demo" -p "ROMEO:" -n 4 --greedy --quiet --device opencl; }
ref=$("$QHX" generate -m "$demo" -p "ROMEO:" -n 4 --greedy --quiet)
gen_ocl >/dev/null 2>&1
cp "$entry" "$tmp/good.bin"
cp "${entry%.bin}.sum" "$tmp/good.sum" 2>/dev/null || bad "no .sum beside the cache entry $entry"
sum=${entry%.bin}.sum
valid_entry() { # the .bin is a whole entry of this format and the .sum vouches for it
  python3 - "$entry" "$sum" <<'PY'
import hashlib, struct, sys
b = open(sys.argv[1], "rb").read(); s = open(sys.argv[2], "rb").read()
n = struct.unpack("<Q", b[8:16])[0]
ok = (b[:8] == b"QHXOCL02" and n == len(b) - 80 and n > 0 and hashlib.sha256(b[80:]).digest() == b[48:80]
      and s == b"QHXOCLS1" + hashlib.sha256(b).digest())
sys.exit(0 if ok else 1)
PY
}
valid_entry || bad "the cache entry written is not whole"
# hostile NAME PYTHON: the good entry (b: .bin bytes, s: .sum bytes) changed by PYTHON
hostile() {
  local name=$1
  rm -rf "$entry" "$sum"
  python3 - "$tmp/good.bin" "$tmp/good.sum" "$entry" "$sum" "$2" <<'PY'
import hashlib, struct, sys
b = bytearray(open(sys.argv[1], "rb").read()); s = bytearray(open(sys.argv[2], "rb").read())
def header(binary, key):  # a header made consistent with a binary, as a careful forger would
    return b"QHXOCL02" + struct.pack("<Q", len(binary)) + key + hashlib.sha256(binary).digest()
key = bytes(b[16:48])
exec(sys.argv[5])
if b is not None: open(sys.argv[3], "wb").write(b)
if s is not None: open(sys.argv[4], "wb").write(s)
PY
  out=$(gen_ocl 2>&1)
  local rc=$?
  [ $rc = 0 ] && [ "$out" = "$ref" ] || bad "cache entry '$name': exit $rc, '$out' (the CPU's: '$ref')"
  valid_entry || bad "cache entry '$name' was not rewritten whole"
}
hostile "binary cut short, header recomputed" 'c = b[80:80 + (len(b) - 80) // 2]; b = bytearray(header(c, key) + c)'
hostile "binary cut to 1 byte, header recomputed" 'c = b[80:81]; b = bytearray(header(c, key) + c)'
hostile "binary cut short, header kept" 'del b[len(b) // 2:]'
hostile "one bit flipped in the binary" 'b[len(b) // 2] ^= 0x10'
hostile "one bit flipped in the header's size" 'b[9] ^= 0x01'
hostile "one bit flipped in the key" 'b[20] ^= 0x01'
hostile "one bit flipped in the .sum" 's[-1] ^= 0x01'
hostile "zero-length .bin" 'b = bytearray()'
hostile "zero-length .sum" 's = bytearray()'
hostile "a .bin without its .sum (a torn write)" 's = None'
hostile "a .sum without its .bin" 'b = None'
hostile "a .bin padded" 'b += b"\0" * 64'
hostile "the first format (QHXOCL01)" 'c = b[80:]; b = bytearray(b"QHXOCL01" + struct.pack("<Q", len(c)) + hashlib.sha256(c).digest() + c)'
hostile "a header from a different device, .bin and .sum consistent" \
  'k = hashlib.sha256(b"another device").digest(); c = b[80:]; b = bytearray(header(c, k) + c); s = b"QHXOCLS1" + hashlib.sha256(b).digest()'
hostile "another driver's binary: key and size of this one, its .sum consistent, the binary other" \
  'c = bytes(80) + b[80:]; b = bytearray(header(c, hashlib.sha256(b"driver 2.0").digest()) + c); s = b"QHXOCLS1" + hashlib.sha256(b).digest()'
# not regular files where the entry belongs: never waited on, no crash
rm -f "$entry" "$sum"; mkfifo "$entry"
out=$(timeout 60 bash -c "$(declare -f gen_ocl); QHX='$QHX' demo='$demo' gen_ocl" 2>&1) && [ "$out" = "$ref" ] ||
  bad "a FIFO as the cache entry: $out"
rm -f "$entry"; mkdir "$entry"
out=$(gen_ocl 2>&1) && [ "$out" = "$ref" ] || bad "a folder as the cache entry: $out"
rmdir "$entry"
out=$(QHX_OPENCL_CACHE_DIR=/proc/qhx-no-such-dir "$QHX" generate -m "$demo" -p "ROMEO:" -n 4 --greedy --quiet --device opencl 2>&1) ||
  bad "unwritable cache folder: $out"
out=$(QHX_OPENCL_CACHE=0 "$QHX" generate -m "$demo" -p "ROMEO:" -n 4 --greedy --quiet --device opencl 2>&1) ||
  bad "cache turned off: $out"

# ---- qhx serve on the device -------------------------------------------------------------------
if command -v curl >/dev/null; then
  "$QHX" serve -m "$FX/qwen35-tiny-f32" --device opencl --port 0 --parallel 2 > "$tmp/serve.out" 2> "$tmp/serve.err" &
  srv=$!
  for _ in $(seq 100); do grep -q listening "$tmp/serve.out" && break; sleep 0.2; done
  port=$(sed -n 's/.*:\([0-9][0-9]*\) (model.*/\1/p' "$tmp/serve.out")
  if [ -n "$port" ]; then
    resp=$(curl -s -m 60 "http://127.0.0.1:$port/v1/completions" -d '{"prompt":"Hello","max_tokens":8,"temperature":0}')
    grep -q '"text"' <<<"$resp" || bad "serve --device opencl: $resp"
  else
    bad "serve --device opencl did not start: $(cat "$tmp/serve.err")"
  fi
  kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null; srv=
fi

[ $fail = 0 ] && echo "opencl: ok"
exit $fail
