#!/usr/bin/env bash
# What each role's matrices cost in KL at Q4A, on one checkpoint: a q4a bundle with every decoder
# matrix at Q4A (the default policy turned off), then the same with one role at Q6, each against
# the unquantized checkpoint over the fixture's prompts (qhx parity --against: KL mean and
# p99.9 over all teacher-forced rows), with the data bytes of the bundle; last, the default
# policy. The KL bought per byte spent ranks the roles for docs/bundle.md's policy.
#
#   QHX=build/bin/qhx bash bench/q4a_roles.sh FIXTURE_DIR WORK_DIR [ROLE...]
#
# FIXTURE_DIR: a parity fixture (tests/data/fixtures/parity/NAME); ROLE: the middle of a tensor
# name, e.g. mlp.down_proj (default: the Qwen3.5 text roles).
set -euo pipefail
FX=$1 WORK=$2
shift 2
: "${QHX:?}"
HERE=$(cd "$(dirname "$0")" && pwd)
ROLES=("$@")
[ ${#ROLES[@]} -gt 0 ] || ROLES=(linear_attn.in_proj_qkv linear_attn.in_proj_z linear_attn.in_proj_a
  linear_attn.in_proj_b linear_attn.out_proj self_attn.q_proj self_attn.k_proj self_attn.v_proj
  self_attn.o_proj mlp.gate_proj mlp.up_proj mlp.down_proj)
PY=/usr/bin/python3
mkdir -p "$WORK"
# every default rule, undone: all decoder matrices Q4A, the head Q6 (the wide-row default)
NONE='*.weight=q4a'
one() { # label forge-options...
  local out=$WORK/$1
  shift
  rm -rf "$out"
  "$QHX" forge "$FX" "$out" --precision q4a --quiet "$@"
  local kl
  # parity exits 1 when prompts miss its agreement bar; only the summary line is wanted here
  kl=$({ "$QHX" parity -m "$out" --golden "$FX" --against "$FX" 2>&1 || true; } | grep 'over all' |
    sed 's/.*KL mean \([^ ]*\) .*p99.9 <= \([^ ]*\) .*/\1 \2/')
  printf '%-28s %9s %s\n' "$label" "$("$PY" "$HERE/data_bytes.py" "$out"/*.safetensors)" "$kl"
  rm -rf "$out"
}
printf '%-28s %9s %s\n' role "data bytes" "KL mean, p99.9 (upper bound)"
label="all q4a, q6 head" one all --lmhead q6 --tensor-precision "$NONE"
label="all q4a, w8 head" one allw8 --lmhead w8 --tensor-precision "$NONE"
for r in "${ROLES[@]}"; do
  label="$r at q6" one "$r" --lmhead q6 --tensor-precision "$NONE,*.$r.weight=q6"
done
label="default policy" one default
