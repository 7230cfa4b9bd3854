#!/usr/bin/env python3
"""Greedy parity of qhexrt with llama.cpp on the GGUF files of tests/data/gguf.

For every <stem>.gguf with a <stem>/greedy.json (llama.cpp's greedy continuation of each
prompt of the case's prompts.json, its top-1/top-2 margin per step, and for some prompts its
logits after every position), qhx logits is fed the prompt and llama.cpp's continuation
(teacher forcing, f32 KV cache): the argmax after the prompt and after each fed token must be
llama.cpp's next token, except at a step where llama.cpp's own margin is below TAU (a near
tie that float rounding may flip). Where the logits are kept, every row must be within the
file's tolerance of llama.cpp's (TOLERANCE below: derived per weight type in
tests/data/gguf/README.md). Prints one line per file and prompt; exit 1 on any failure.

    gguf_parity.py QHX DATA_DIR [STEM...]
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

TAU = 2.5e-2
# max |logit - llama.cpp's| per row, by the file's main weight type (README.md, "Tolerances")
TOLERANCE = {"F32": 1e-4, "F16": 3e-2}
DEFAULT_TOLERANCE = 1.5e-1

CASE_OF = {"qwen35-tiny": "qwen35-tiny-f32", "qwen35-k256": "qwen35-tiny-f32", "qwen35-tiny-vrep": "qwen35-tiny-vrep-f32",
           "qwen3vl-tiny": "qwen3vl-tiny-f32", "qwen35vl-tiny": "qwen35vl-tiny-f32",
           "qwen35-tiny-untied": "qwen35-tiny-untied-f32"}


def prompts_of(data, stem, golden):
    case = golden.get("prompts_from")
    if not case:
        base = stem.rsplit("-", 1)[0]
        case = CASE_OF.get(base)
    path = os.path.join(data, "fixtures", "parity", case, "prompts.json") if case else None
    if not path or not os.path.exists(path):
        path = os.path.join(data, "gguf", stem, "prompts.json")
    return {p["name"]: p["ids"] for p in json.load(open(path)) if "image" not in p}


def read_rows(path, vocab):
    raw = open(path, "rb").read()
    n = len(raw) // (4 * vocab)
    return [struct.unpack_from("<%df" % vocab, raw, 4 * vocab * r) for r in range(n)]


def argmax(row):
    best = 0
    for i, v in enumerate(row):
        if v > row[best]:
            best = i
    return best


def run_prompt(qhx, model, ids, greedy, out):
    feed = ids + greedy[:-1]
    cmd = [qhx, "logits", "-m", model, "--kv", "f32", "--ids", ",".join(map(str, feed)),
           "--prefill", str(len(ids)), "--out", out]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("qhx logits failed: " + r.stderr.strip())


def check_file(qhx, data, stem):
    gdir = os.path.join(data, "gguf", stem)
    golden = json.load(open(os.path.join(gdir, "greedy.json")))
    model = os.path.join(data, "gguf", stem + ".gguf")
    wtype = golden.get("main_type", stem.rsplit("-", 1)[-1])
    tol = TOLERANCE.get(wtype, DEFAULT_TOLERANCE)
    prompts = prompts_of(data, stem, golden)
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, greedy in golden["greedy"].items():
            ids = prompts[name]
            out = os.path.join(tmp, name + ".f32")
            run_prompt(qhx, model, ids, greedy, out)
            vocab = os.path.getsize(out) // 4 // (len(ids) + len(greedy) - 1)
            rows = read_rows(out, vocab)
            margins = golden["margins"][name]
            flips = [k for k in range(len(greedy)) if argmax(rows[len(ids) - 1 + k]) != greedy[k]]
            if os.environ.get("GGUF_PARITY_MARGINS"):
                for k in flips:
                    print("FLIPMARGIN %s %g" % (stem, margins[k]))
            bad = [k for k in flips if margins[k] >= TAU]
            ties = len(flips) - len(bad)
            line = "%s %s: %d/%d steps agree" % (stem, name, len(greedy) - len(bad) - ties, len(greedy))
            if ties:
                line += " (%d near-tie flips, llama.cpp margin < %g)" % (ties, TAU)
            lg = golden.get("logits", {}).get(name)
            if lg:
                ref = read_rows(os.path.join(gdir, lg["file"]), vocab)
                dmax = max(abs(a - b) for ra, rb in zip(rows, ref) for a, b in zip(ra, rb))
                line += "; max|dlogit| %.3g (tol %g)" % (dmax, tol)
                if dmax > tol:
                    bad.append(-1)
            print(line + ("  FAIL" if bad else "  ok"))
            failed += bool(bad)
    return failed


def main():
    qhx, data = sys.argv[1], sys.argv[2]
    gdir = os.path.join(data, "gguf")
    stems = sys.argv[3:] or sorted(f[:-5] for f in os.listdir(gdir)
                                   if f.endswith(".gguf") and os.path.exists(os.path.join(gdir, f[:-5], "greedy.json")))
    if not stems:
        print("no GGUF goldens under %s" % gdir)
        return 1
    failed = sum(check_file(qhx, data, s) for s in stems)
    print("%d files, %d prompt failures" % (len(stems), failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
