#!/usr/bin/env python3
"""Quantization gate over many random tiny Qwen3.5 checkpoints (a benchmark, not a test).

The parity fixtures hold three Qwen3.5 checkpoints with 6 prompts each, so one prompt moves a
pass rate by 6 %. This script makes N more checkpoints of the same kind (the fixtures' generator,
tests/data/oracle/make_tiny.py, with other seeds; odd seeds get 8 value heads as in the vrep case),
6 prompts each of the fixtures' lengths (random BPE ids with ChatML specials and newlines), and
goldens in the fixture format computed by qhexrt's own f32 path (which passes the greedy-exact
gate on the fixtures). Then it forges each checkpoint with the given options and counts the
prompts that pass the tolerant gate of `qhx parity --gate tol`.

    python3 bench/quant_sweep.py --qhx build/bin/qhx --make-tiny ../tests/data/oracle/make_tiny.py \
        --work /tmp/qsweep --seeds 36001-36030 --tau 0.02 -- --precision w8

Needs python3 + numpy (Debian python3-numpy). Prints one line per checkpoint and a total.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

PROMPT_LENGTHS = [1, 7, 33, 64, 150, 300]
N_STEPS = 32
N_BPE, IM_START, IM_END, NEWLINE = 960, 961, 962, 198


def run(*argv, ok=(0,)):
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode not in ok:
        sys.exit("%s: exit %d: %s" % (" ".join(argv), r.returncode, r.stderr.strip()))
    return r.stdout


def random_prompt(rng, length):
    ids = [int(x) for x in rng.integers(0, N_BPE, length)]
    for j in range(length):
        r = rng.random()
        if r < 0.05:
            ids[j] = IM_START
        elif r < 0.10:
            ids[j] = IM_END
        elif r < 0.18:
            ids[j] = NEWLINE
    return ids


def golden_for_prompt(qhx, ckpt, name, ids):
    """Greedy continuation and per-row top-1 / top-2 margins from the checkpoint's f32 path."""
    out = run(qhx, "generate", "-m", ckpt, "--ids", ",".join(map(str, ids)), "--greedy", "--print-ids",
              "-n", str(N_STEPS), "--ignore-eos", "--quiet", "--threads", "1")
    greedy = [int(x) for x in out.split()]
    if len(greedy) != N_STEPS:
        sys.exit("%s %s: expected %d greedy ids, got %r" % (ckpt, name, N_STEPS, out))
    n = len(ids)
    logits_file = os.path.join(ckpt, name + ".logits.f32")
    run(qhx, "logits", "-m", ckpt, "--ids", ",".join(map(str, ids + greedy[:-1])), "--prefill", str(n),
        "--out", logits_file)
    rows = np.fromfile(logits_file, "<f4").reshape(n + N_STEPS - 1, -1)
    top1 = rows.argmax(1)
    ordered = np.sort(rows, 1)
    margins = (ordered[:, -1] - ordered[:, -2]).astype(float)
    if any(int(top1[n - 1 + k]) != greedy[k] for k in range(N_STEPS)):
        sys.exit("%s %s: generate and logits disagree on the greedy path" % (ckpt, name))
    return {"n_prompt": n, "n_rows": n + N_STEPS - 1, "greedy": greedy,
            "greedy_margins": [float(margins[n - 1 + k]) for k in range(N_STEPS)],
            "row_top1": [int(x) for x in top1], "row_margins": [float(x) for x in margins]}


def make_case(args, seed):
    ckpt = os.path.join(args.work, "ckpt-%d" % seed)
    if os.path.exists(os.path.join(ckpt, "golden.json")):
        return ckpt
    os.makedirs(ckpt, exist_ok=True)
    spec_file = ckpt + ".spec.json"
    with open(spec_file, "w") as f:
        json.dump({"base": "qwen3_5", "seed": seed, "lin_v_heads": 8 if seed % 2 else 4}, f)
    run(sys.executable, args.make_tiny, "--spec", spec_file, "--out", ckpt)
    rng = np.random.default_rng(seed * 7 + 1)
    prompts, golden = [], {}
    for length in PROMPT_LENGTHS:
        name = "p%03d" % length
        ids = random_prompt(rng, length)
        prompts.append({"name": name, "ids": ids})
        golden[name] = golden_for_prompt(args.qhx, ckpt, name, ids)
    with open(os.path.join(ckpt, "prompts.json"), "w") as f:
        json.dump(prompts, f)
    with open(os.path.join(ckpt, "golden.json"), "w") as f:
        json.dump({"prompts": golden}, f)
    return ckpt


def gate_passes(args, ckpt, seed):
    """Prompts whose free-running greedy passes the tolerant gate's greedy part."""
    bundle = os.path.join(args.work, "bundle-%s-%d" % (args.tag, seed))
    if not os.path.isdir(bundle):
        run(args.qhx, "forge", ckpt, bundle, "--quiet", *args.forge)
    out = run(args.qhx, "parity", "-m", bundle, "--golden", ckpt, "--gate", "tol", "--tau", str(args.tau),
              ok=(0, 1))  # 1 = some prompt failed
    lines = [l for l in out.splitlines() if l.startswith("p")]
    return sum(("greedy %d/%d match" % (N_STEPS, N_STEPS)) in l or "< tau)" in l for l in lines), len(lines)


def parse_seeds(text):
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--qhx", required=True)
    ap.add_argument("--make-tiny", required=True)
    ap.add_argument("--work", required=True, help="folder for checkpoints and bundles (reused)")
    ap.add_argument("--seeds", default="36001-36030", help="A-B, inclusive")
    ap.add_argument("--tau", type=float, default=0.02)
    ap.add_argument("forge", nargs=argparse.REMAINDER, help="-- then qhx forge options")
    args = ap.parse_args()
    args.forge = [a for a in args.forge if a != "--"] or ["--precision", "w8"]
    args.tag = "_".join(a.lstrip("-") for a in args.forge)
    os.makedirs(args.work, exist_ok=True)
    passed = total = 0
    for seed in parse_seeds(args.seeds):
        ckpt = make_case(args, seed)
        p, n = gate_passes(args, ckpt, seed)
        passed, total = passed + p, total + n
        print("seed %d: %d/%d" % (seed, p, n), flush=True)
    print("forge %s, tau %g: %d/%d prompts pass = %.1f %%" % (" ".join(args.forge), args.tau, passed, total,
                                                             100.0 * passed / max(total, 1)))


if __name__ == "__main__":
    main()
