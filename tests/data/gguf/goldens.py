#!/usr/bin/env python3
"""Run llama.cpp's greedy decode on one GGUF over a case's text prompts; write its goldens.

    goldens.py GREEDY MODEL.gguf PROMPTS.json OUTDIR [--logits p007,p064] [-n 31] [-t 2]

GREEDY is the llama_greedy_ids runner (libllama; token ids in, no BOS, argmax with the lowest id
on ties, F32 KV cache, flash attention off). For every prompt without an "image" key it runs
`GREEDY -m MODEL --ids ... -n N -t T --kv f32` and parses stdout ("ids: a,b,...") and the per-step
stderr lines ("step k: top1 I (L) top2 J (L) margin M"). For the prompts named by --logits it
runs again with --logits-out OUTDIR/<prompt>.logits.f32 (float32 [n_prompt + N, vocab]) and
checks that this second run generated the same ids with the same margins (to 1e-5).

OUTDIR/greedy.json: {"model", "settings", "greedy": {prompt: [N ids]},
"margins": {prompt: [N top1-top2 logit margins]}, "min_margin": {prompt: min of those},
"logits": {prompt: {"file", "rows", "vocab"}}}. Standard library only.
"""
import argparse
import json
import os
import re
import subprocess
import sys

STEP = re.compile(r"^step\s+(\d+): top1\s+(\d+) \((\S+)\) top2\s+(\d+) \((\S+)\) margin (\S+)$")


def run(greedy, model, ids, n, threads, logits_out=None):
    cmd = [greedy, "-m", model, "--ids", ",".join(str(i) for i in ids),
           "-n", str(n), "-t", str(threads), "--kv", "f32"]
    if logits_out:
        cmd += ["--logits-out", logits_out]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("goldens: %s failed (%d): %s" % (" ".join(cmd[:3]), p.returncode, p.stderr.strip()[-400:]))
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("ids:")]
    if len(line) != 1:
        sys.exit("goldens: no 'ids:' line from %s on %s" % (greedy, model))
    out = [int(x) for x in line[0][4:].strip().split(",")]
    steps = [STEP.match(ln) for ln in p.stderr.splitlines()]
    steps = [m for m in steps if m]
    margins = [float(m.group(6)) for m in steps]
    top1 = [int(m.group(2)) for m in steps]
    if len(out) != n or top1 != out or len(margins) != n:
        sys.exit("goldens: %s: ids and step lines disagree" % model)
    return out, margins


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("greedy")
    ap.add_argument("model")
    ap.add_argument("prompts")
    ap.add_argument("outdir")
    ap.add_argument("--logits", default="p007,p064")
    ap.add_argument("-n", type=int, default=31)
    ap.add_argument("-t", type=int, default=2)
    a = ap.parse_args()
    with open(a.prompts, encoding="utf-8") as f:
        prompts = [p for p in json.load(f) if "image" not in p]
    want_logits = [x for x in a.logits.split(",") if x]
    os.makedirs(a.outdir, exist_ok=True)
    doc = {
        "model": os.path.basename(a.model),
        "settings": {"runner": "llama_greedy_ids", "n_predict": a.n, "threads": a.t, "kv": "f32",
                     "flash_attn": False, "bos": False, "ties": "lowest id", "eos_stops": False},
        "greedy": {}, "margins": {}, "min_margin": {}, "logits": {},
    }
    for p in prompts:
        name, ids = p["name"], p["ids"]
        out, margins = run(a.greedy, a.model, ids, a.n, a.t)
        doc["greedy"][name] = out
        doc["margins"][name] = margins
        doc["min_margin"][name] = min(margins)
        if name in want_logits:
            fn = name + ".logits.f32"
            path = os.path.join(a.outdir, fn)
            out2, margins2 = run(a.greedy, a.model, ids, a.n, a.t, logits_out=path)
            # All-position logits change the prefill's output matmul from one row to many; for F32
            # weights that may move a logit by float32 noise, never an id.
            if out2 != out or max(abs(x - y) for x, y in zip(margins, margins2)) > 1e-5:
                sys.exit("goldens: %s %s: the --logits-out run differs from the plain run" % (a.model, name))
            rows = len(ids) + a.n
            size = os.path.getsize(path)
            if size % (4 * rows):
                sys.exit("goldens: %s has %d bytes, not a multiple of %d rows" % (path, size, rows))
            doc["logits"][name] = {"file": fn, "rows": rows, "vocab": size // (4 * rows)}
    with open(os.path.join(a.outdir, "greedy.json"), "w", encoding="utf-8") as f:
        f.write(dump(doc))


def dump(doc):
    """JSON with one prompt per line inside the per-prompt maps (short diffs, easy to read)."""
    lines = ["{"]
    keys = list(doc)
    for i, k in enumerate(keys):
        v = doc[k]
        comma = "," if i + 1 < len(keys) else ""
        if isinstance(v, dict) and v and k != "settings":
            lines.append("  %s: {" % json.dumps(k))
            sub = list(v)
            for j, s in enumerate(sub):
                lines.append("    %s: %s%s" % (json.dumps(s), json.dumps(v[s]), "," if j + 1 < len(sub) else ""))
            lines.append("  }" + comma)
        else:
            lines.append("  %s: %s%s" % (json.dumps(k), json.dumps(v), comma))
    lines.append("}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
