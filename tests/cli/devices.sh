#!/usr/bin/env bash
# qhx devices and --device, from the library's device listing (qhx_devices_list): the CPU with
# its memory; every name listed is one --device takes (the tiny fixture's logits on each, the
# CPU's the same bytes as without --device); a name of no device of the build is a usage error
# (exit 2, one line) naming the build's choices, the same choices every command's --help gives;
# a kind of the build with no device here (OpenCL without a platform: the ICD loader pointed at an
# empty folder) is one line on stderr and exit 1, the other devices still listed.
# Run as: bash devices.sh BIN_DIR DATA_DIR SOURCE_DIR
set -uo pipefail
BIN=$1
DATA=$2
QHX=$BIN/qhx
FX=$DATA/fixtures/parity/qwen35-tiny-f32
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

"$QHX" devices >"$tmp/out" 2>"$tmp/err"; rc=$?
grep -Eq '^  cpu +the host CPU: ' "$tmp/out" || bad "no cpu line: $(cat "$tmp/out")"
grep -Eq '^ +memory [0-9.]+ GiB, [0-9.]+ GiB free$' "$tmp/out" || bad "no memory line for the cpu: $(cat "$tmp/out")"
# exit 1 exactly when a kind of the build has no device here, one line each
n_err=$(grep -c . "$tmp/err")
if [ $rc = 0 ]; then [ "$n_err" = 0 ] || bad "exit 0 but stderr: $(cat "$tmp/err")"
elif [ $rc = 1 ]; then grep -vq '^qhx devices: [a-z]*: ' "$tmp/err" && bad "exit 1, stderr: $(cat "$tmp/err")"
else bad "qhx devices: exit $rc"; fi

# the choices, as the build gives them
choices=$("$QHX" devices --help | sed -n 's/.*(this build names them \(.*\)),$/\1/p')
[ -n "$choices" ] || bad "qhx devices --help names no choices"

# every device listed runs the fixture
"$QHX" logits -m "$FX" --ids 1,2,3,4 --out "$tmp/default.f32" 2>"$tmp/lerr" || bad "logits: $(cat "$tmp/lerr")"
names=$(sed -n 's/^  \([a-z0-9:]*\)  .*/\1/p' "$tmp/out")
[ -n "$names" ] || bad "no names listed"
for d in $names; do
  "$QHX" logits -m "$FX" --ids 1,2,3,4 --out "$tmp/$d.f32" --device "$d" 2>"$tmp/lerr" || bad "--device $d: $(cat "$tmp/lerr")"
done
cmp -s "$tmp/default.f32" "$tmp/cpu.f32" || bad "--device cpu differs from the default"

# names of no device of the build: a usage error naming the choices
for d in gpu CPU cpu:0 opencl:x opencl:1234 "opencl:" "" " cpu"; do
  out=$("$QHX" logits -m "$FX" --ids 1 --out "$tmp/x.f32" --device "$d" 2>&1 >/dev/null); rc=$?
  [ $rc = 2 ] && [ "$(wc -l <<<"$out")" = 1 ] && grep -qF "is not a device of this build ($choices;" <<<"$out" ||
    bad "--device '$d': rc $rc: $out"
done
# every command's --help gives the same choices
for cmd in generate chat serve logits parity perplexity embed-image; do
  "$QHX" $cmd --help 2>&1 | grep -- '--device D' | grep -qF "$choices" || bad "$cmd --help: no '$choices' for --device"
done

# a kind of the build with no device here: said on stderr, the rest listed
if grep -q opencl <<<"$choices"; then
  mkdir -p "$tmp/no-icd"
  OCL_ICD_VENDORS=$tmp/no-icd "$QHX" devices >"$tmp/out2" 2>"$tmp/err2"; rc=$?
  [ $rc = 1 ] && [ "$(grep -c . "$tmp/err2")" = 1 ] && grep -q '^qhx devices: opencl: .*no OpenCL platform found' "$tmp/err2" ||
    bad "no platform: rc $rc: $(cat "$tmp/err2")"
  grep -Eq '^  cpu ' "$tmp/out2" && ! grep -q 'opencl:' "$tmp/out2" || bad "no platform, listed: $(cat "$tmp/out2")"
fi

[ $fail = 0 ] && echo "devices: ok"
exit $fail
