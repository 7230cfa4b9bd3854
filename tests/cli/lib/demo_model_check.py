#!/usr/bin/env python3
"""qhexrt on the shipped demo model against the goldens transformers made (tests/hf/demo_model.py).

    demo_model_check.py QHX MODEL_DIR GOLDEN_DIR DATA_DIR TMP

Checks, each printed as one ok / FAIL line (exit 1 if any fails):
  - qhx tokenize of the held-out excerpt gives the tokenizers library's ids;
  - qhx perplexity (f32 KV) of the excerpt equals transformers' within a relative 1e-4, and so
    with a smaller --batch; the trained model's figure is far below the vocabulary size while a
    random-weight model of the same shapes and tokenizer scores near it;
  - --kl-base / --kl-divergence: the model against itself gives KL 0 and top-1 agreement 100 %,
    the random model against the trained base a large KL; a truncated base file is refused;
  - greedy continuations of the prompts equal transformers' token for token;
  - the multi-token-prediction block's draft logits (qhx logits --mtp-out) equal the torch
    reference's within an f32 tolerance, with the same argmax on every row.
Only the standard library (make test has no numpy on every machine).
"""
import array
import json
import os
import random
import re
import struct
import subprocess
import sys

QHX, MODEL, GOLD, DATA, TMP = sys.argv[1:6]
fails = 0


def check(ok, what):
    global fails
    print(("ok   " if ok else "FAIL ") + what)
    fails += 0 if ok else 1


def run(*args, stdin=None):
    r = subprocess.run([QHX, *args], input=stdin, capture_output=True)
    return r.returncode, r.stdout.decode("utf-8", "replace"), r.stderr.decode("utf-8", "replace")


def final_ppl(out):
    m = re.search(r"Final estimate: PPL = ([0-9.eE+-]+) \+/- ([0-9.eE+-]+) \((\d+) tokens scored", out)
    return (float(m.group(1)), float(m.group(2)), int(m.group(3))) if m else None


def read_f32(path):
    a = array.array("f")
    with open(path, "rb") as f:
        a.frombytes(f.read())
    if sys.byteorder != "little":
        a.byteswap()
    return a


def random_model(src, dst, seed=7):
    """The demo checkpoint's config and tokenizer with random weights of the same shapes:
    matrices N(0, 0.02), the zero-centred norms 0 (scale 1), GDN's A_log / dt_bias kept."""
    os.makedirs(dst, exist_ok=True)
    for f in ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"):
        with open(os.path.join(src, f), "rb") as i, open(os.path.join(dst, f), "wb") as o:
            o.write(i.read())
    with open(os.path.join(src, "model.safetensors"), "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    rng = random.Random(seed)
    out, meta, off = [], {}, 0
    for name, t in sorted((k, v) for k, v in head.items() if k != "__metadata__"):
        count = 1
        for d in t["shape"]:
            count *= d
        if len(t["shape"]) >= 2:
            vals = array.array("f", (rng.gauss(0.0, 0.02) for _ in range(count)))
        elif "A_log" in name or "dt_bias" in name:
            b, e = t["data_offsets"]
            vals = array.array("f", struct.unpack("<%de" % count, data[b:e]))
        else:
            vals = array.array("f", bytes(4 * count))
        raw = vals.tobytes()
        meta[name] = {"dtype": "F32", "shape": t["shape"], "data_offsets": [off, off + len(raw)]}
        out.append(raw)
        off += len(raw)
    hj = json.dumps(meta).encode()
    hj += b" " * ((8 - len(hj) % 8) % 8)
    with open(os.path.join(dst, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj + b"".join(out))


with open(os.path.join(GOLD, "golden.json"), encoding="utf-8") as f:
    g = json.load(f)
excerpt = os.path.join(DATA, "heldout_excerpt.txt")
with open(os.path.join(MODEL, "config.json"), encoding="utf-8") as f:
    V = json.load(f)["vocab_size"]

# tokenizer
with open(excerpt, "rb") as f:
    rc, out, err = run("tokenize", "-m", MODEL, stdin=f.read())
check(rc == 0 and [int(x) for x in out.split()] == g["heldout_ids"],
      "tokenize: the held-out excerpt's %d ids equal the tokenizers library's" % len(g["heldout_ids"]))

# perplexity
ctx = str(g["perplexity"]["ctx"])
want = g["perplexity"]["ppl"]
rc, out, err = run("perplexity", "-m", MODEL, "-f", excerpt, "--ctx", ctx, "--kv", "f32")
got = final_ppl(out)
check(rc == 0 and got and abs(got[0] / want - 1) <= 1e-4 and got[2] == g["perplexity"]["tokens_scored"],
      "perplexity: %s vs transformers %.6f (relative 1e-4, %d tokens)" % (got and "%.6f" % got[0], want,
                                                                          g["perplexity"]["tokens_scored"]))
rc, out2, _ = run("perplexity", "-m", MODEL, "-f", excerpt, "--ctx", ctx, "--kv", "f32", "--batch", "48")
got2 = final_ppl(out2)
check(rc == 0 and got2 and abs(got2[0] / want - 1) <= 1e-4, "perplexity --batch 48: %s" % (got2 and got2[0]))
n_ids, sctx, sstride = len(g["heldout_ids"]), 256, 64
rc, out3, _ = run("perplexity", "-m", MODEL, "-f", excerpt, "--ctx", str(sctx), "--stride", str(sstride), "--kv", "f32")
got3 = final_ppl(out3)
want3 = (n_ids - sctx + sstride - 1) // sstride * sstride  # llama-perplexity --ppl-stride's windows
check(rc == 0 and got3 and got3[2] == want3 and abs(got3[0] / want - 1) < 0.1,
      "perplexity --stride %d: %s over %s tokens (%d expected), near the plain figure" %
      (sstride, got3 and got3[0], got3 and got3[2], want3))
trained = got[0] if got else float("inf")
check(trained < V / 20, "the trained model's perplexity %.2f is far below the vocabulary size %d" % (trained, V))

rnd = os.path.join(TMP, "random-model")
random_model(MODEL, rnd)
rc, out, err = run("perplexity", "-m", rnd, "-f", excerpt, "--ctx", ctx, "--kv", "f32")
rp = final_ppl(out)
check(rc == 0 and rp and V / 2 < rp[0] < 2 * V,
      "a random-weight model of the same shapes scores %s, near the vocabulary size %d" % (rp and "%.1f" % rp[0], V))

# KL against a saved base
base = os.path.join(TMP, "base.kl")
rc, out, err = run("perplexity", "-m", MODEL, "-f", excerpt, "--ctx", ctx, "--kv", "f32", "--kl-base", base)
check(rc == 0 and os.path.isfile(base), "--kl-base writes the base file")
rc, out, err = run("perplexity", "-m", MODEL, "-f", excerpt, "--ctx", ctx, "--kv", "f32", "--kl-base", base,
                   "--kl-divergence")
m = re.search(r"Mean    KLD\s*:\s*([0-9.eE+-]+)", out)
t = re.search(r"Same top p\s*:\s*([0-9.]+)", out)
check(rc == 0 and m and float(m.group(1)) < 1e-6 and t and float(t.group(1)) == 100.0,
      "KL of the model against its own base: %s, same top %s %%" % (m and m.group(1), t and t.group(1)))
rc, out, err = run("perplexity", "-m", rnd, "-f", excerpt, "--ctx", ctx, "--kv", "f32", "--kl-base", base,
                   "--kl-divergence")
m = re.search(r"Mean    KLD\s*:\s*([0-9.eE+-]+)", out)
check(rc == 0 and m and float(m.group(1)) > 1.0, "KL of the random model against the trained base: %s" % (m and m.group(1)))
with open(base, "rb") as f:
    head = f.read(4096)
trunc = os.path.join(TMP, "trunc.kl")
with open(trunc, "wb") as f:
    f.write(head)
rc, out, err = run("perplexity", "-m", MODEL, "-f", excerpt, "--ctx", ctx, "--kl-base", trunc, "--kl-divergence")
check(rc == 1 and len(err.strip().splitlines()) == 1, "a truncated base file: exit %d, %r" % (rc, err.strip()[:120]))
rc, out, err = run("perplexity", "-m", MODEL, "-f", excerpt, "--ctx", "100000")
check(rc != 0 and len(err.strip().splitlines()) == 1, "--ctx longer than the text: exit %d" % rc)

# greedy continuations
for p in g["greedy"]:
    rc, out, err = run("generate", "-m", MODEL, "--ids", ",".join(map(str, p["ids"])), "-n", str(g["n_new"]),
                       "--greedy", "--print-ids", "--kv", "f32")
    got = [int(x) for x in out.split()] if rc == 0 else None
    check(got == p["continuation"], "greedy continuation of %r (%d tokens)" % (p["prompt"], len(p["continuation"])))

# the MTP block's draft logits
mt = g["mtp"]
mout = os.path.join(TMP, "mtp.f32")
rc, out, err = run("logits", "-m", MODEL, "--ids", ",".join(map(str, mt["ids"])), "--out", os.path.join(TMP, "l.f32"),
                   "--mtp-out", mout, "--kv", "f32")
ok = rc == 0
if ok:
    a, b = read_f32(mout), read_f32(os.path.join(GOLD, mt["file"]))
    ok = len(a) == len(b) == mt["rows"] * mt["vocab"]
if ok:
    Vm = mt["vocab"]
    dmax = max(abs(x - y) for x, y in zip(a, b))
    scale = max(abs(y) for y in b)
    same = all(max(range(Vm), key=lambda i: a[r * Vm + i]) == max(range(Vm), key=lambda i: b[r * Vm + i])
               for r in range(mt["rows"]))
    check(dmax <= 1e-4 * max(1.0, scale) and same,
          "MTP draft logits: max |diff| %.3g (largest logit %.3g), argmax equal on %d rows" % (dmax, scale, mt["rows"]))
else:
    check(False, "MTP draft logits: qhx logits --mtp-out failed: %s" % err.strip()[:200])

sys.exit(1 if fails else 0)
