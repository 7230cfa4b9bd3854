#!/usr/bin/env python3
"""The quantization quality table of BENCHMARKS.md: held-out perplexity and KL divergence from
float32 of the shipped demo model (models/shakespeare) in each qhexrt bundle precision, beside
llama.cpp's formats of the same model when a llama.cpp build is given.

    python3 scripts/quant_table.py [--model models/shakespeare] [--text tests/data/demo/heldout.txt]
        [--ctx 256] [--chunks 64] [--work build/quant]
        [--llama LLAMA_CPP_DIR --anchors ANCHORS_DIR --python build/hf-venv/bin/python]

qhexrt: the checkpoint folder run in float32 (KV cache f32) is the base (qhx perplexity
--kl-base); each bundle (qhx forge --precision P [--lmhead H]) is compared against it
(--kl-divergence), KV cache f32 too, so only the weights differ. llama.cpp (built outside the
tree; ANCHORS_DIR holds convert_shim.py, which runs the converter): the checkpoint converted by its own converter
(convert_shim.py, the pre-tokenizer pinned to qwen35: this tokenizer has no known hash,
--no-mtp), quantized by llama-quantize, its F32 GGUF the base of llama-perplexity
--kl-divergence-base, KV cache f32 (-ctk f32 -ctv f32), one thread. Both count the same windows
(--ctx tokens each, the loss over the second half) over the same tokens (the tokenizer is the
same and neither adds a BOS). Bytes: the weight files (bundle safetensors; GGUF file).
Prints the Markdown table on stdout; the logs stay in --work.
"""
import argparse
import glob
import os
import re
import subprocess
import sys

QHX_ROWS = [("f16", ["--precision", "f16"]), ("bf16", ["--precision", "bf16"]), ("w8", ["--precision", "w8"]),
            ("w8, q6 head", ["--precision", "w8", "--lmhead", "q6"]), ("q4 (q6 head, default)", ["--precision", "q4"]),
            ("q4, w8 head", ["--precision", "q4", "--lmhead", "w8"]), ("q4, q4 head", ["--precision", "q4", "--lmhead", "q4"]),
            ("q4a (role policy, default)", ["--precision", "q4a"])]
LLAMA_ROWS = ["F16", "Q8_0", "Q6_K", "Q5_K_M", "Q4_0", "Q4_K_M"]


def sh(cmd, log, env=None):
    with open(log, "w") as f:
        r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env)
    with open(log, encoding="utf-8", errors="replace") as f:
        text = f.read()
    if r.returncode:
        sys.exit("quant_table: %s failed (exit %d), log %s:\n%s" % (" ".join(cmd), r.returncode, log, text[-2000:]))
    return text


def num(pat, text, what, log):
    m = re.search(pat, text)
    if not m:
        sys.exit("quant_table: no %s in %s" % (what, log))
    return [float(x) for x in m.groups()]


def last_chunk_row(text, log):
    """llama-perplexity --kl-divergence's last per-chunk line: chunk, PPL, ln ratio, KLD, dp RMS,
    same top; each 'x ± y'. When three runs in a row ended there without the summary block, the
    table reads this line (marked *; its PPL column is not the summary's estimator)."""
    rows = re.findall(r"^\s*\d+\s+([0-9.]+) ±\s+([0-9.]+)\s+\S+ ±\s+\S+\s+([0-9.eE+-]+) ±\s+([0-9.eE+-]+)\s+"
                      r"\S+ ±\s+\S+ %\s+([0-9.]+) ±\s+([0-9.]+) %", text, re.M)
    if not rows:
        sys.exit("quant_table: no per-chunk line in %s" % log)
    r = [float(x) for x in rows[-1]]
    return {"ppl": r[0:2], "kld": r[2:4], "top": r[4:6]}


def parse(text, log, kl=True, llama=False):
    if llama and kl and "Mean    KLD" not in text:
        r = last_chunk_row(text, log)
        r["note"] = "*"
        return r
    # llama-perplexity --kl-divergence prints "Mean PPL(Q) : x ± y" instead of a final estimate
    row = {"ppl": num(r"(?:Final estimate: PPL =|Mean PPL\(Q\)\s*:)\s*([0-9.]+)\s*(?:\+/-|±)\s*([0-9.]+)", text, "PPL", log)}
    if kl:
        row["kld"] = num(r"Mean\s+KLD\s*:\s*([0-9.eE+-]+)\s*(?:\+/-|±)\s*([0-9.eE+-]+)", text, "mean KLD", log)
        row["top"] = num(r"Same top p\s*:\s*([0-9.]+)\s*(?:\+/-|±)\s*([0-9.]+)", text, "same top p", log)
    return row


def weight_bytes(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(f) for f in glob.glob(os.path.join(path, "*.safetensors")))


def qhexrt_rows(a, qhx):
    w = a.work
    common = ["-f", a.text, "--ctx", str(a.ctx), "--chunks", str(a.chunks), "--kv", "f32", "--threads", "1"]
    base = os.path.join(w, "qhx-base.kl")
    log = os.path.join(w, "qhx-f32.log")
    rows = [("qhexrt", "checkpoint, f32 compute (base)", weight_bytes(a.model), parse(sh([qhx, "perplexity", "-m", a.model, *common,
                                                                         "--kl-base", base], log), log, kl=False))]
    for name, opts in QHX_ROWS:
        tag = re.sub(r"[^a-z0-9]+", "-", name).strip("-")
        b = os.path.join(w, "bundle-" + tag)
        if not os.path.isdir(b):
            sh([qhx, "forge", a.model, b, *opts, "--quiet"], os.path.join(w, "forge-%s.log" % tag))
        log = os.path.join(w, "qhx-%s.log" % tag)
        text = sh([qhx, "perplexity", "-m", b, *common, "--kl-base", base, "--kl-divergence"], log)
        rows.append(("qhexrt", name, weight_bytes(b), parse(text, log)))
    return rows


def llama_rows(a):
    w, binf = a.work, os.path.join(a.llama, "build", "bin")
    f32 = os.path.join(w, "demo-F32.gguf")
    if not os.path.isfile(f32):
        env = dict(os.environ, LLAMA_SRC=a.llama, QHX_PIN_PRE="qwen35")
        sh([a.python, os.path.join(a.anchors, "convert_shim.py"), a.model, "--no-mtp", "--outtype", "f32",
            "--outfile", f32], os.path.join(w, "convert.log"), env=env)
    common = ["-f", a.text, "-c", str(a.ctx), "-b", str(a.ctx), "--chunks", str(a.chunks), "-t", "1",
              "-ctk", "f32", "-ctv", "f32"]
    base = os.path.join(w, "llama-base.kld")
    log = os.path.join(w, "llama-F32.log")
    ppl = os.path.join(binf, "llama-perplexity")
    rows = [("llama.cpp", "F32 (base)", weight_bytes(f32),
             parse(sh([ppl, "-m", f32, *common, "--kl-divergence-base", base], log), log, kl=False))]
    for q in LLAMA_ROWS:
        g = os.path.join(w, "demo-%s.gguf" % q)
        if not os.path.isfile(g):
            sh([os.path.join(binf, "llama-quantize"), f32, g, q, "1"], os.path.join(w, "quantize-%s.log" % q))
        log = os.path.join(w, "llama-%s.log" % q)
        # its log lines go through a worker thread; a run now and then exits before the summary
        # block is written out: run it again (at most three times) before reading the last line
        for _ in range(3):
            text = sh([ppl, "-m", g, *common, "--kl-divergence-base", base, "--kl-divergence"], log)
            if "Mean    KLD" in text:
                break
        rows.append(("llama.cpp", q, weight_bytes(g), parse(text, log, llama=True)))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="models/shakespeare")
    ap.add_argument("--text", default="tests/data/demo/heldout.txt")
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--chunks", type=int, default=64)
    ap.add_argument("--work", default="build/quant")
    ap.add_argument("--qhx", default="build/bin/qhx")
    ap.add_argument("--llama", help="a llama.cpp source folder with build/bin (outside the tree)")
    ap.add_argument("--anchors", help="the folder of convert_shim.py (llama.cpp's converter wrapper); needed with --llama")
    ap.add_argument("--python", default="build/hf-venv/bin/python", help="the interpreter of llama.cpp's converter")
    a = ap.parse_args()
    if a.llama and not a.anchors:
        ap.error("--llama needs --anchors (the folder of convert_shim.py)")
    os.makedirs(a.work, exist_ok=True)
    rows = qhexrt_rows(a, a.qhx)
    if a.llama:
        rows += llama_rows(a)
    print("| runtime | weights | bytes | PPL | mean KLD vs its f32 | same top-1 |")
    print("|---|---|---:|---:|---:|---:|")
    for rt, name, nbytes, r in rows:
        kld = "%.6f ± %.6f" % tuple(r["kld"]) if "kld" in r else "(base)"
        top = "%.2f ± %.2f %%" % tuple(r["top"]) if "top" in r else ""
        print("| %s | %s%s | %s | %.4f ± %.4f | %s | %s |" % (rt, name, r.get("note", ""), format(nbytes, ","),
                                                              r["ppl"][0], r["ppl"][1], kld, top))
    if any("note" in r for *_, r in rows):
        print("\n\\* llama-perplexity ended after its per-chunk lines without the summary block; the row is"
              " its last per-chunk line.")


if __name__ == "__main__":
    main()
