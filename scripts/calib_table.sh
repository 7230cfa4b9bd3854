#!/usr/bin/env bash
# The table of BENCHMARKS.md, "Calibrated quantization": q4a and q4 bundles of the demo model
# (models/shakespeare) forged without and with --calibrate (on The Tempest, held out of training
# and outside the 64 scored windows, and on docs/*.md, text unlike the plays), their held-out
# perplexity and KL against the f32 checkpoint. Run from the top of the tree after a build;
# W (default build/calib) holds the bundles and texts.
set -euo pipefail
Q=build/bin/qhx H=tests/data/demo/heldout.txt W=${W:-build/calib}
mkdir -p $W
sed -n '/^The Tempest$/,$p' $H >$W/tempest.txt  # The Tempest: held out of training, not in the 64 scored windows
cat docs/*.md >$W/docs.txt                 # text unlike the plays
common="-f $H --ctx 256 --chunks 64 --kv f32 --threads 1"
$Q perplexity -m models/shakespeare $common --kl-base $W/base.kl >/dev/null 2>&1
for p in q4a q4; do
  for cal in none tempest docs; do
    b=$W/$p-$cal
    [ -d $b ] || $Q forge models/shakespeare $b --precision $p --quiet $([ $cal = none ] || echo --calibrate $W/$cal.txt)
    out=$($Q perplexity -m $b $common --kl-base $W/base.kl --kl-divergence 2>&1)
    printf '| %s | %s | %s | %s | %s | %s | %s |\n' $p $cal "$(cat $b/*.safetensors | wc -c)" \
      "$(echo "$out" | sed -n 's/^Final estimate: PPL = \([0-9.]*\) +\/- \([0-9.]*\).*/\1 ± \2/p')" \
      "$(echo "$out" | sed -n 's/^Mean    KLD *: *\([0-9.]*\) +\/- *\([0-9.]*\)/\1 ± \2/p')" \
      "$(echo "$out" | sed -n 's/^99.0%   KLD *: *\([0-9.]*\)/\1/p')" \
      "$(echo "$out" | sed -n 's/^Same top p *: *\([0-9.]*\) +\/- *\([0-9.]*\) %/\1 ± \2 %/p')"
  done
done
