#!/usr/bin/env python3
"""Turn hf_goldens.py output into the Hugging Face golden set of a parity fixture (numpy only).

    hf_golden_set.py --fixture tests/data/fixtures/parity/CASE --hf-out build/hf-out/CASE \\
        [--write FIXTURE/hf] [--compare FIXTURE/hf]

The fixture's own goldens come from llama.cpp. This writes a second set, made by transformers,
in the layout parity_gate.py reads with --golden DIR:
  golden.json          per prompt: greedy, greedy_margins, row_top1, row_margins, n_prompt, n_rows
                       (and image_embd_file for image prompts), plus the producer and versions
  NAME.logits.f32      HF's teacher-forced logits, prompt prefilled in one pass then the golden
                       greedy tokens one at a time through the cache (hf_goldens' logits_decode:
                       the way the llama.cpp goldens and `qhx logits --prefill` are made)
  NAME.image_embd.f32  image prompts: HF's merger outputs (then deepstack mergers)
  meta.json            torch / transformers versions and the checks hf_goldens.py ran, and per
                       prompt the differences from the llama.cpp goldens
Margins are computed from those logits; HF's free-running greedy must equal the tokens the rows
were teacher-forced on (else this refuses, because the set would not be self-consistent).

--compare DIR instead checks that a fresh hf_goldens.py run reproduces the committed set: same
greedy tokens, and logits / embeddings within --tol (default 1e-5; a rerun on one CPU thread is
normally bit-identical). Exit status 0 when it does.
"""
import argparse
import json
import os
import shutil
import sys

import numpy as np


def load(p):
    with open(p, encoding="utf-8") as f:
        return json.load(f)


def margins(rows):
    """top1 - top2 of each row (float64)."""
    r = np.sort(rows.astype(np.float64), axis=1)
    return r[:, -1] - r[:, -2]


def build(fixture, hf_out):
    cfg = load(os.path.join(fixture, "config.json"))
    V = cfg.get("text_config", cfg)["vocab_size"]
    prompts = load(os.path.join(fixture, "prompts.json"))
    llama = load(os.path.join(fixture, "golden.json"))
    meta = load(os.path.join(hf_out, "meta.json"))
    out_prompts, files, vs = {}, {}, {}
    for p in prompts:
        name = p["name"]
        lg = llama["prompts"][name]
        n_prompt = len(p["ids"])
        greedy = load(os.path.join(hf_out, name + ".greedy.json"))["greedy"]
        if greedy != lg["greedy"]:
            k = next(i for i in range(len(lg["greedy"])) if i >= len(greedy) or greedy[i] != lg["greedy"][i])
            raise SystemExit("%s: HF greedy differs from the llama.cpp greedy at step %d; the teacher-forced "
                             "rows would not follow HF's own tokens" % (name, k))
        logits = np.fromfile(os.path.join(hf_out, name + ".logits_decode.f32"), dtype="<f4").reshape(-1, V)
        onepass = np.fromfile(os.path.join(hf_out, name + ".logits.f32"), dtype="<f4").reshape(-1, V)
        gold = np.fromfile(os.path.join(fixture, name + ".logits.f32"), dtype="<f4").reshape(-1, V)
        if logits.shape != gold.shape:
            raise SystemExit("%s: HF logits %s, golden %s" % (name, logits.shape, gold.shape))
        m = margins(logits)
        top1 = logits.argmax(axis=1)
        ent = {"n_prompt": n_prompt, "n_rows": int(logits.shape[0]), "greedy": greedy,
               "greedy_margins": [float(x) for x in m[n_prompt - 1:n_prompt - 1 + len(greedy)]],
               "row_top1": [int(x) for x in top1], "row_margins": [float(x) for x in m]}
        files[name + ".logits.f32"] = logits
        d = np.abs(logits.astype(np.float64) - gold)
        v = {"max_abs_logits_vs_llama": float(d.max()),
             "max_abs_logits_vs_llama_prompt_rows": float(d[:n_prompt].max()),
             "max_abs_logits_vs_llama_decode_rows": float(d[n_prompt:].max()) if d.shape[0] > n_prompt else 0.0,
             "argmax_agree_vs_llama": "%d/%d" % (int((top1 == np.array(lg["row_top1"])).sum()), len(top1)),
             "greedy_equal_llama": True,
             "max_abs_onepass_vs_decode": float(np.abs(onepass.astype(np.float64) - logits).max())}
        if "image" in p:
            emb = np.fromfile(os.path.join(hf_out, name + ".image_embd.f32"), dtype="<f4")
            gemb = np.fromfile(os.path.join(fixture, lg["image_embd_file"]), dtype="<f4")
            if emb.shape != gemb.shape:
                raise SystemExit("%s: HF image_embd %s, golden %s" % (name, emb.shape, gemb.shape))
            ent["image_embd_file"] = lg["image_embd_file"]
            ent["image_embd_shape"] = lg.get("image_embd_shape")
            files[lg["image_embd_file"]] = emb
            v["max_abs_image_embd_vs_llama"] = float(np.abs(emb.astype(np.float64) - gemb).max())
            a, b = emb.astype(np.float64), gemb.astype(np.float64)
            v["cosine_image_embd_vs_llama"] = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
        out_prompts[name] = ent
        vs[name] = v
    producer = {"tool": "tests/data/oracle/hf_goldens.py (Hugging Face transformers), then tests/hf/hf_golden_set.py",
                "torch": meta.get("torch"), "transformers": meta.get("transformers"), "numpy": meta.get("numpy"),
                "python": meta.get("python"), "dtype": meta.get("dtype"), "device": meta.get("device"),
                "model_class": meta.get("model_class"), "attn_implementation": meta.get("attn_implementation"),
                "logits": "prompt prefilled in one forward, then the golden greedy tokens one at a time through the cache",
                "greedy": "free-running, argmax over all logits (lowest index on ties), no EOS stop; equal to the llama.cpp greedy"}
    golden = {"case": os.path.basename(os.path.normpath(fixture)), "producer": producer, "prompts": out_prompts}
    hf_meta = {"producer": producer,
               "checks": {k: meta.get(k) for k in ("weight_check", "rope_check", "norm_eps_check", "linear_attention",
                                                 "determinism", "kernel_modules_loaded_at_end", "gate")},
               "vs_llama_cpp_goldens": vs,
               "images": {n: meta["prompts"][n]["image"] for n in meta.get("prompts", {})
                          if isinstance(meta["prompts"][n], dict) and "image" in meta["prompts"][n]}}
    return golden, files, hf_meta


def write(dest, golden, files, hf_meta):
    if os.path.isdir(dest):
        shutil.rmtree(dest)
    os.makedirs(dest)
    with open(os.path.join(dest, "golden.json"), "w", encoding="utf-8") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    with open(os.path.join(dest, "meta.json"), "w", encoding="utf-8") as f:
        json.dump(hf_meta, f, indent=1, default=str)
        f.write("\n")
    for fn, arr in files.items():
        np.ascontiguousarray(arr, dtype="<f4").tofile(os.path.join(dest, fn))


def compare(dest, golden, files, tol):
    ok = True
    have = load(os.path.join(dest, "golden.json"))
    for name, ent in golden["prompts"].items():
        h = have["prompts"].get(name)
        if h is None:
            print("%-10s FAIL not in the committed set" % name)
            ok = False
            continue
        msg, good = [], h["greedy"] == ent["greedy"]
        msg.append("greedy %s" % ("equal" if good else "DIFFERS"))
        for fn in [name + ".logits.f32"] + ([ent["image_embd_file"]] if "image_embd_file" in ent else []):
            old = np.fromfile(os.path.join(dest, fn), dtype="<f4")
            new = files[fn].reshape(-1)
            if old.shape != new.shape:
                msg.append("%s size %d != %d" % (fn, new.size, old.size))
                good = False
                continue
            d = float(np.abs(old.astype(np.float64) - new).max())
            msg.append("%s max|diff| %.2e" % (fn.split(".", 1)[1], d))
            good = good and d <= tol
        ok = ok and good
        print("%-10s %s %s" % (name, "PASS" if good else "FAIL", "; ".join(msg)))
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fixture", required=True)
    ap.add_argument("--hf-out", required=True)
    ap.add_argument("--write", default=None)
    ap.add_argument("--compare", default=None)
    ap.add_argument("--tol", type=float, default=1e-5)
    a = ap.parse_args()
    golden, files, hf_meta = build(a.fixture, a.hf_out)
    if a.write:
        write(a.write, golden, files, hf_meta)
        print("wrote %s (%d prompts)" % (a.write, len(golden["prompts"])))
    if a.compare:
        sys.exit(0 if compare(a.compare, golden, files, a.tol) else 1)


if __name__ == "__main__":
    main()
