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

With --llama-kl it runs bench/kl_vs_llama.sh on each checkpoint instead of the gate (the prompts
and greedy goldens above are its sequences; set LLAMA_DUMP, LLAMA_QUANTIZE and CONVERT as that
script says; --formats and the forge options become its QHX_FORMATS and QHX_FORGE_ARGS) and prints
bytes, KL mean, KL p99.9 and top-1 per checkpoint and format, their medians, and on how many
checkpoints qhx w8 / q4 has a KL mean at or below llama.cpp's Q8_0 / Q4_0:

    LLAMA_DUMP=... LLAMA_QUANTIZE=... CONVERT="..." python3 bench/quant_sweep.py --qhx build/bin/qhx \
        --make-tiny tests/data/oracle/make_tiny.py --work /tmp/qsweep --seeds 36001-36030 --llama-kl
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
KL_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kl_vs_llama.sh")
KL_PAIRS = [("qhx-w8", "llama-Q8_0"), ("qhx-q4", "llama-Q4_0")]  # counted: qhx KL mean <= llama's


def run(*argv, ok=(0,), env=None):
    r = subprocess.run(argv, capture_output=True, text=True, env=env)
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


def llama_kl(args, ckpt, seed):
    """{test: [bytes, KL mean, KL p99.9, top-1]} from bench/kl_vs_llama.sh on this checkpoint."""
    env = dict(os.environ, QHX=args.qhx, QHX_FORMATS=args.formats, QHX_FORGE_ARGS=" ".join(args.forge))
    out = run("bash", KL_SCRIPT, ckpt, os.path.join(args.work, "kl-%d" % seed), env=env)
    fig = {}
    for f in map(str.split, out.splitlines()):
        if len(f) == 7 and f[1].isdigit():  # test rows mean p99 p99.9 max top-1
            fig[f[0]] = [float(f[2]), float(f[4]), float(f[6])]
        elif len(f) == 2 and f[0] in fig:  # test bytes
            fig[f[0]].insert(0, int(f[1]))
    return fig


def llama_kl_sweep(args, seeds):
    print("%-6s %-12s %10s %10s %10s %7s" % ("seed", "test", "bytes", "KL mean", "KL p99.9", "top-1"), flush=True)
    figs = {}
    for seed in seeds:
        figs[seed] = llama_kl(args, make_case(args, seed), seed)
        for name, (size, mean, p999, top1) in figs[seed].items():
            print("%-6d %-12s %10d %10.3e %10.3e %7.4f" % (seed, name, size, mean, p999, top1), flush=True)
    with open(os.path.join(args.work, "llama-kl-%s.json" % args.seeds), "w") as f:
        json.dump({"formats": args.formats, "forge": args.forge, "figures": figs}, f, indent=1)
    print("median over %d checkpoints (forge %s):" % (len(seeds), " ".join(args.forge) or "defaults"))
    for name in figs[seeds[0]]:
        m = np.median([figs[s][name] for s in seeds], axis=0)
        print("%-6s %-12s %10d %10.3e %10.3e %7.4f" % ("median", name, m[0], m[1], m[2], m[3]))
    for ours, theirs in KL_PAIRS:
        if ours in figs[seeds[0]] and theirs in figs[seeds[0]]:
            n = sum(figs[s][ours][1] <= figs[s][theirs][1] for s in seeds)
            print("%s KL mean <= %s on %d/%d checkpoints" % (ours, theirs, n, len(seeds)))


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
    ap.add_argument("--llama-kl", action="store_true", help="KL against llama.cpp's quantizations instead")
    ap.add_argument("--formats", default="w8 q4", help="with --llama-kl: qhx precisions compared")
    ap.add_argument("forge", nargs=argparse.REMAINDER, help="-- then qhx forge options")
    args = ap.parse_args()
    args.forge = [a for a in args.forge if a != "--"]
    os.makedirs(args.work, exist_ok=True)
    if args.llama_kl:
        return llama_kl_sweep(args, parse_seeds(args.seeds))
    args.forge = args.forge or ["--precision", "w8"]
    args.tag = "_".join(a.lstrip("-") for a in args.forge)
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
