#!/usr/bin/env python3
"""qhexrt's image preprocessing against Hugging Face's Qwen2-VL image processors.

    python tests/hf/image_compare.py --pixels build/tools/qhx_pixels [--json OUT.json] [--strict]

Run in the HF environment (scripts/hf_env.sh). For every image (the parity fixtures' PNGs, the
photographs in tests/data/image/photos/, and tests/data/image/resize_src.png) and every
preprocessor setting below, it compares pixel_values and image_grid_thw of
  * qhexrt, torch resampling (the default), with transformers' torchvision processor
    (Qwen2VLImageProcessor, called Qwen2VLImageProcessorFast before transformers 5.x);
  * qhexrt, Pillow resampling (qhx_pixels --resize pillow), with the PIL processor
    (Qwen2VLImageProcessorPil, the former slow processor).
Both HF processors get the image from transformers.image_utils.load_image (PIL open,
exif_transpose, RGB), as a pipeline would. Differences are reported in pixel_values units and
in uint8 steps (mean = std = 0.5: one step is 2/255).

Settings: "fixture" (the fixtures' preprocessor_config.json: min_pixels 32^2, no resize for
multiples of 32), "released" (the released Qwen3-VL / Qwen3.5 values: min 64K, max 16M pixels;
sizes not multiple of 32 are resampled slightly), "down" (max 160K pixels: strong downscale),
"up" (min 1.5M pixels: upscale).

Exit status: 0 when every grid matches and both pairs agree to float32 rounding (max |diff|
<= 1e-6, i.e. no uint8 step anywhere), 1 otherwise. (Measured with transformers 5.24.0,
torchvision 0.29.2, Pillow 12.3.0: torch path bit-exact, Pillow path within 5.9e-8.)
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

BASE = {
    "do_convert_rgb": True, "do_resize": True, "do_rescale": True, "do_normalize": True,
    "resample": 3, "rescale_factor": 1 / 255, "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5], "patch_size": 16, "temporal_patch_size": 2, "merge_size": 2,
}
SETTINGS = {
    "fixture": {"shortest_edge": 1024, "longest_edge": 1048576},
    "released": {"shortest_edge": 65536, "longest_edge": 16777216},
    "down": {"shortest_edge": 1024, "longest_edge": 160000},
    "up": {"shortest_edge": 1500000, "longest_edge": 16777216},
}
STEP = 2.0 / 255.0


def images():
    out = []
    for case in ("qwen3vl-tiny-f32", "qwen35vl-tiny-f32"):
        d = os.path.join(DATA, "fixtures", "parity", case)
        out += [os.path.join(d, f) for f in sorted(os.listdir(d)) if f.endswith(".png")]
    ph = os.path.join(DATA, "image", "photos")
    out += [os.path.join(ph, f) for f in sorted(os.listdir(ph)) if f.endswith((".png", ".jpg"))]
    out.append(os.path.join(DATA, "image", "resize_src.png"))
    return out


def run_qhx(tool, image, cfg_path, mode, tmp):
    out = os.path.join(tmp, "px.f32")
    r = subprocess.run([tool, "--image", image, "--config", cfg_path, "--resize", mode, "--out", out],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("qhx_pixels failed on %s: %s" % (image, r.stderr.strip()))
    gt, gh, gw, n, dim, _w, _h = (int(x) for x in r.stdout.split())
    return np.fromfile(out, dtype="<f4").reshape(n, dim), [gt, gh, gw]


def compare(a, b):
    d = np.abs(a.astype(np.float64) - b.astype(np.float64))
    steps = np.rint(d / STEP)
    return {"max_abs": float(d.max()), "max_steps": int(steps.max()),
            "frac_differ": float((d > 1e-6).mean()), "frac_over_1_step": float((steps > 1).mean()),
            "n_values": int(d.size)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pixels", default=os.path.join(ROOT, "build", "tools", "qhx_pixels"))
    ap.add_argument("--json", default=None)
    a = ap.parse_args()

    import PIL
    import torch
    import torchvision
    import transformers
    from transformers.image_utils import load_image
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    torch.set_num_threads(1)
    rows, ok = [], True
    with tempfile.TemporaryDirectory() as tmp:
        for sname, size in SETTINGS.items():
            cfg = dict(BASE, size=size)
            cfg_path = os.path.join(tmp, "preprocessor_config.json")
            with open(cfg_path, "w") as f:
                json.dump(dict(cfg, image_processor_type="Qwen2VLImageProcessor"), f)
            fast = Qwen2VLImageProcessor(**cfg)
            slow = Qwen2VLImageProcessorPil(**cfg)
            for img in images():
                pil = load_image(img)
                rel = os.path.relpath(img, ROOT)
                hf_f = fast(images=[pil], return_tensors="np")
                hf_s = slow(images=[pil], return_tensors="np")
                q_t, g_t = run_qhx(a.pixels, img, cfg_path, "torch", tmp)
                q_p, g_p = run_qhx(a.pixels, img, cfg_path, "pillow", tmp)
                gf = [int(x) for x in np.asarray(hf_f["image_grid_thw"])[0]]
                gs = [int(x) for x in np.asarray(hf_s["image_grid_thw"])[0]]
                pf, ps = np.asarray(hf_f["pixel_values"]), np.asarray(hf_s["pixel_values"])
                row = {"setting": sname, "image": rel, "size_wh": list(pil.size),
                       "grid_thw": gf, "resized": gf[1] * 16 != pil.size[1] or gf[2] * 16 != pil.size[0]}
                good = True
                if g_t != gf or q_t.shape != pf.shape:
                    row["torch_vs_fast"] = "grid %s vs %s" % (g_t, gf)
                    good = False
                else:
                    c = compare(q_t, pf)
                    row["torch_vs_fast"] = c
                    good &= c["max_steps"] == 0 and c["max_abs"] <= 1e-6
                if g_p != gs or q_p.shape != ps.shape:
                    row["pillow_vs_pil"] = "grid %s vs %s" % (g_p, gs)
                    good = False
                else:
                    c = compare(q_p, ps)
                    row["pillow_vs_pil"] = c
                    good &= c["max_steps"] == 0 and c["max_abs"] <= 1e-6
                if gf == gs and pf.shape == ps.shape:
                    row["fast_vs_pil"] = compare(pf, ps)
                row["ok"] = bool(good)
                ok &= good
                rows.append(row)

                def fmt(c):
                    if isinstance(c, str):
                        return c
                    return "max %.2e (%d steps), %.3f%% differ" % (c["max_abs"], c["max_steps"], 100 * c["frac_differ"])
                print("%-8s %-52s %4dx%-4d grid %-12s torch/fast: %-36s pillow/PIL: %-36s fast/PIL: %s %s" % (
                    sname, rel, pil.size[0], pil.size[1], gf, fmt(row["torch_vs_fast"]), fmt(row["pillow_vs_pil"]),
                    fmt(row.get("fast_vs_pil", "-")), "ok" if good else "FAIL"), flush=True)
    meta = {"torch": torch.__version__, "torchvision": torchvision.__version__,
            "transformers": transformers.__version__, "Pillow": PIL.__version__, "rows": rows}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(meta, f, indent=1)
    n_bad = sum(not r["ok"] for r in rows)
    print("image_compare: %d comparisons, %d outside the bounds" % (len(rows), n_bad))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
