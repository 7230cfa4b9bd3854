#!/usr/bin/env python3
"""The HF-vs-llama.cpp-vs-qhexrt figures of every parity fixture (numpy only, no torch).

    python3 tests/hf/figures.py [--bin build/bin] [--markdown]

Runs qhexrt (qhx embed-image / logits --prefill / generate --greedy --ignore-eos, as the parity
tests do) on every prompt qhexrt supports, then compares three sets per case: the llama.cpp
goldens (CASE/), the Hugging Face goldens (CASE/hf/) and qhexrt. Per case and prompt kind (text,
image) it reports max |delta logit| over all teacher-forced rows, greedy agreement (steps equal
to the other side's free-running greedy, all 32 per prompt) and max |delta image_embd|.
qwen35vl-tiny-f32 image prompts: qhexrt has no Qwen3.5 image path yet, so only HF vs llama.cpp.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PARITY = os.path.join(ROOT, "tests", "data", "fixtures", "parity")


def load(p):
    with open(p, encoding="utf-8") as f:
        return json.load(f)


def run_qhx(qhx, fx, p, golden, tmp):
    ids = p["ids"]
    g = golden["prompts"][p["name"]]["greedy"]
    img = ["--image", os.path.join(fx, p["image"])] if "image" in p else []
    out = {}
    if img:
        e = os.path.join(tmp, p["name"] + ".embd")
        subprocess.run([qhx, "embed-image", "-m", fx] + img + ["--out", e], check=True, capture_output=True)
        out["embd"] = np.fromfile(e, dtype="<f4")
    lg = os.path.join(tmp, p["name"] + ".logits")
    forced = ids + g[:-1]
    subprocess.run([qhx, "logits", "-m", fx, "--ids", ",".join(map(str, forced)), "--prefill", str(len(ids)),
                    "--kv", "f32"] + img + ["--out", lg], check=True, capture_output=True)  # f32 KV: the gates' setting
    out["logits"] = np.fromfile(lg, dtype="<f4")
    r = subprocess.run([qhx, "generate", "-m", fx, "--ids", ",".join(map(str, ids))] + img
                       + ["-n", str(len(g)), "--greedy", "--ignore-eos", "--print-ids", "--kv", "f32"],
                       check=True, capture_output=True, text=True)
    out["greedy"] = [int(x) for x in r.stdout.split()]
    return out


def agree(a, b):
    """Greedy steps that agree before the first divergence (all of them when equal)."""
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    qhx = os.path.join(a.bin, "qhx")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in sorted(os.listdir(PARITY)):
            fx = os.path.join(PARITY, case)
            if not os.path.isfile(os.path.join(fx, "prompts.json")) or not os.path.isdir(os.path.join(fx, "hf")):
                continue
            prompts = load(os.path.join(fx, "prompts.json"))
            ll = load(os.path.join(fx, "golden.json"))
            hf = load(os.path.join(fx, "hf", "golden.json"))
            qhx_images = not case.startswith("qwen35vl")
            for kind in ("text", "image"):
                ps = [p for p in prompts if ("image" in p) == (kind == "image")]
                if not ps:
                    continue
                acc = {"hf_ll": [0.0, 0, 0, 0.0], "q_ll": [0.0, 0, 0, 0.0], "q_hf": [0.0, 0, 0, 0.0]}
                ran_q = kind == "text" or qhx_images
                for p in ps:
                    n = p["name"]
                    L = np.fromfile(os.path.join(fx, n + ".logits.f32"), dtype="<f4").astype(np.float64)
                    H = np.fromfile(os.path.join(fx, "hf", n + ".logits.f32"), dtype="<f4").astype(np.float64)
                    gl, gh = ll["prompts"][n]["greedy"], hf["prompts"][n]["greedy"]
                    pairs = [("hf_ll", H, L, gh, gl)]
                    emb = {}
                    if kind == "image":
                        ef = ll["prompts"][n]["image_embd_file"]
                        emb["L"] = np.fromfile(os.path.join(fx, ef), dtype="<f4").astype(np.float64)
                        emb["H"] = np.fromfile(os.path.join(fx, "hf", ef), dtype="<f4").astype(np.float64)
                        acc["hf_ll"][3] = max(acc["hf_ll"][3], float(np.abs(emb["H"] - emb["L"]).max()))
                    if ran_q:
                        q = run_qhx(qhx, fx, p, ll, tmp)
                        Q = q["logits"].astype(np.float64)
                        pairs += [("q_ll", Q, L, q["greedy"], gl), ("q_hf", Q, H, q["greedy"], gh)]
                        if kind == "image":
                            E = q["embd"].astype(np.float64)
                            acc["q_ll"][3] = max(acc["q_ll"][3], float(np.abs(E - emb["L"]).max()))
                            acc["q_hf"][3] = max(acc["q_hf"][3], float(np.abs(E - emb["H"]).max()))
                    for key, X, Y, gx, gy in pairs:
                        acc[key][0] = max(acc[key][0], float(np.abs(X - Y).max()))
                        acc[key][1] += agree(gx, gy)
                        acc[key][2] += len(gy)
                rows.append({"case": case, "kind": kind, "n_prompts": len(ps), "qhexrt_ran": ran_q, **acc})
    if a.markdown:
        print("| case | prompts | HF vs llama.cpp: max \\|Δlogit\\| / greedy / max \\|Δembd\\| "
              "| qhexrt vs HF | qhexrt vs llama.cpp |")
        print("|---|---|---|---|---|")
        for r in rows:
            def cell(v, ran=True):
                if not ran:
                    return "not run (no Qwen3.5 image path in qhexrt yet)"
                s = "%.1e / %d/%d" % (v[0], v[1], v[2])
                return s + (" / %.1e" % v[3] if r["kind"] == "image" else "")
            print("| %s | %d %s | %s | %s | %s |" % (r["case"], r["n_prompts"], r["kind"], cell(r["hf_ll"]),
                                                  cell(r["q_hf"], r["qhexrt_ran"]), cell(r["q_ll"], r["qhexrt_ran"])))
    else:
        print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
