#!/usr/bin/env python3
"""Video preprocessing goldens from Hugging Face's Qwen3VLVideoProcessor, and the comparison with
qhexrt's (qhx_pixels --video).

    python tests/hf/video_golden.py --write tests/data/video/golden   # the committed goldens
    python tests/hf/video_golden.py --pixels build/tools/qhx_pixels   # compare, exit 1 on a diff

Run in the HF environment (scripts/hf_env.sh; torchcodec is the processor's default reader).
Every clip of tests/data/video is read by transformers' own path: the processor's fetch_videos
(torchcodec, exact seek mode) with its sample_frames, then Qwen3VLVideoProcessor with its
defaults (fps 2, min 4 / max 768 frames, 128·32² .. 768·32² pixels over all frames,
cap_pixels_per_frame False) and with overrides (fps, max_frames, the fixtures' sizes). The
processor's prompt expansion (Qwen3VLProcessor.replace_video_token with the timestamps) is
written as text.

Per case the golden JSON holds video_grid_thw, the sampled indices, the metadata fps, the
timestamps, the expanded placeholder text, the SHA-256 of pixel_values_videos (float32 little
endian) and of each sampled RGB frame as the reader returns it, and a few values of each for a
readable diff. The files are small; the C test (tests/test_video.c) recomputes everything.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VID = os.path.join(ROOT, "tests", "data", "video")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
warnings.filterwarnings("ignore")

CLIPS = ["h264.mp4", "vp9.webm", "mjpeg.avi", "odd.mkv", "rotate.mp4", "rotate180.mp4", "rotate270.mp4", "vfr.mkv",
         "long.mp4"]
# name: (processor kwargs, qhx_pixels options)
SETTINGS = {
    "default": ({}, []),
    "fps1": ({"fps": 1}, ["--fps", "1"]),
    "max4": ({"max_frames": 4}, ["--max-frames", "4"]),
    "max5": ({"max_frames": 5}, ["--max-frames", "5"]),  # an odd count: the last frame repeated
    "fps1.25": ({"fps": 1.25}, ["--fps", "1.25"]),
    "fixture": ({"size": {"shortest_edge": 1024, "longest_edge": 1048576}}, ["--config", "FIXTURE"]),
}
FIXTURE_CFG = os.path.join(ROOT, "tests", "data", "fixtures", "parity", "qwen3vl-tiny-f32", "preprocessor_config.json")


def hf_case(clip, kwargs):
    import torch
    from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor
    from transformers.models.qwen3_vl.processing_qwen3_vl import Qwen3VLProcessor

    vp = Qwen3VLVideoProcessor(cap_pixels_per_frame=False, **{k: v for k, v in kwargs.items() if k != "fps"})
    path = os.path.join(VID, clip)
    out = vp(videos=[path], return_metadata=True, return_tensors="pt", **({"fps": kwargs["fps"]} if "fps" in kwargs else {}))
    md = out["video_metadata"][0]
    pv = out["pixel_values_videos"].to(torch.float32).numpy()
    grid = [int(x) for x in out["video_grid_thw"][0]]
    # the frames exactly as the reader returns them (same call the processor made)
    frames, _ = vp.fetch_videos(path, sample_indices_fn=lambda metadata, **kw: vp.sample_frames(metadata, fps=kwargs.get("fps")))
    frames = np.asarray(frames)  # (k, C, H, W) uint8
    frames = np.ascontiguousarray(frames.transpose(0, 2, 3, 1))
    # the prompt expansion: replace_video_token as the processor calls it (no tokenizer needed)
    proc = Qwen3VLProcessor.__new__(Qwen3VLProcessor)
    proc.video_processor = vp
    proc.video_token, proc.vision_start_token, proc.vision_end_token = "<|video_pad|>", "<|vision_start|>", "<|vision_end|>"
    text = proc.replace_video_token({"video_grid_thw": out["video_grid_thw"], "video_metadata": [md]}, 0)
    ts = proc._calculate_timestamps(list(md.frames_indices), md.fps, vp.temporal_patch_size)
    return {
        "clip": clip,
        "grid_thw": grid,
        "n_frames": int(md.total_num_frames),
        "fps": float(md.fps),
        "indices": [int(i) for i in md.frames_indices],
        "timestamps": [float(t) for t in ts],
        "placeholder": text.replace("<|video_pad|>" * (grid[1] * grid[2] // 4), "<|video_pad|>*%d" % (grid[1] * grid[2] // 4)),
        "frame_size": [int(frames.shape[2]), int(frames.shape[1])],
        "frames_sha256": [hashlib.sha256(f.tobytes()).hexdigest() for f in frames],
        "pixel_values_shape": list(pv.shape),
        "pixel_values_sha256": hashlib.sha256(pv.astype("<f4").tobytes()).hexdigest(),
        "pixel_values_head": [float(x) for x in pv.reshape(-1)[:8]],
        "pixel_values_sum": float(pv.astype(np.float64).sum()),
    }, pv, frames


def qhx_case(pixels, clip, opts, tmp):
    opts = [FIXTURE_CFG if o == "FIXTURE" else o for o in opts]
    out, dec = os.path.join(tmp, "p.f32"), os.path.join(tmp, "f.u8")
    r = subprocess.run([pixels, "--video", os.path.join(VID, clip), *opts, "--out", out, "--decoded", dec],
                       capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(r.stderr.strip())
    lines = r.stdout.splitlines()
    g = [int(x) for x in lines[0].split()]
    idx = [int(x) for x in lines[2].split()[1:]]
    pv = np.fromfile(out, dtype="<f4").reshape(g[3], g[4])
    return g[:3], idx, pv, np.fromfile(dec, dtype=np.uint8)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", help="folder for the golden JSON files")
    ap.add_argument("--pixels", help="qhx_pixels to compare")
    a = ap.parse_args()
    bad = 0
    if a.write:
        os.makedirs(a.write, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for clip in CLIPS:
            for name, (kw, opts) in SETTINGS.items():
                g, pv, frames = hf_case(clip, kw)
                case = "%s.%s" % (clip.replace(".", "_"), name)
                g["setting"] = name
                g["qhx_pixels_options"] = opts
                if a.write:
                    with open(os.path.join(a.write, case + ".json"), "w") as f:
                        json.dump(g, f, indent=1)
                        f.write("\n")
                if a.pixels:
                    grid, idx, qpv, qframes = qhx_case(a.pixels, clip, opts, tmp)
                    msg = []
                    if grid != g["grid_thw"]:
                        msg.append("grid %s vs HF %s" % (grid, g["grid_thw"]))
                    if idx != g["indices"]:
                        msg.append("indices %s vs HF %s" % (idx, g["indices"]))
                    fr = frames.reshape(-1)
                    if qframes.shape != fr.shape:
                        msg.append("frames %s bytes vs HF %s" % (qframes.shape, fr.shape))
                    else:
                        d = np.abs(qframes.astype(int) - fr.astype(int))
                        if d.max():
                            msg.append("frames differ: max %d, %d of %d bytes" % (d.max(), (d > 0).sum(), d.size))
                    if qpv.shape != pv.shape:
                        msg.append("pixel_values %s vs HF %s" % (qpv.shape, pv.shape))
                    else:
                        d = np.abs(qpv - pv)
                        if d.max() > 0:
                            msg.append("pixel_values max |diff| %.3g on %d of %d values" % (d.max(), (d > 0).sum(), d.size))
                    print("%-28s %s" % (case, "; ".join(msg) if msg else "bit-identical (grid %s, %d frames)" % (grid, len(idx))))
                    bad += bool(msg)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
