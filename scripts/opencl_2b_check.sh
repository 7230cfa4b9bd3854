#!/usr/bin/env bash
# The OpenCL device on 2B shapes (not part of make test: minutes and ~6 GB of disk): a random
# Qwen3.5-2B-shaped checkpoint forged into w8 and q4 bundles, then greedy ids of several
# prompts on the CPU device and on the OpenCL device, which must be identical; prints the
# time and peak RSS of each run (host-unified devices wrap the weights in place, so both
# devices' RSS should be about the weights once).
#   scripts/opencl_2b_check.sh [BIN_DIR [WORK_DIR]]   (defaults: build/bin, a temporary folder)
set -euo pipefail
BIN=${1:-build/bin}
WORK=${2:-$(mktemp -d)}
mkdir -p "$WORK"
QHX=$BIN/qhx
[ -x "$QHX" ] || { echo "no $QHX: build first (make build)" >&2; exit 1; }
"$QHX" devices | grep -q '^  opencl:' || { echo "no OpenCL device (qhx devices)" >&2; exit 1; }
[ -d "$WORK/r2b" ] || "$QHX" forge --random qwen3_5 "$WORK/r2b" --preset 2b --dtype bf16 >/dev/null
fail=0
for prec in w8 q4; do
  [ -d "$WORK/r2b-$prec" ] || "$QHX" forge "$WORK/r2b" "$WORK/r2b-$prec" --precision $prec --text-only >/dev/null
  for ids in 9707,11,1879 785,6722,315,9625,374 40,1079,264; do
    for dev in cpu opencl; do
      # f32 activations on the CPU: the OpenCL kernels' arithmetic (the CPU's default int8
      # activations for q4 round differently, enough to flip a random model's near ties)
      /usr/bin/time -f "%e %M" -o "$WORK/time" "$QHX" generate -m "$WORK/r2b-$prec" --device $dev --ids $ids -n 4 \
        --greedy --ignore-eos --print-ids --quiet --prefill-math f32 --decode-math f32 > "$WORK/ids.$dev"
      read -r secs kb < "$WORK/time"
      echo "$prec ids $ids on $dev: $(tr '\n' ' ' < "$WORK/ids.$dev")($secs s, peak RSS $((kb / 1024)) MiB)"
    done
    cmp -s "$WORK/ids.cpu" "$WORK/ids.opencl" || { echo "FAIL: $prec ids $ids: the devices' greedy ids differ"; fail=1; }
  done
done
[ $fail = 0 ] && echo "2B shapes: greedy ids identical on cpu and opencl"
exit $fail
