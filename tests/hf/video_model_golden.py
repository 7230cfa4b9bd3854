#!/usr/bin/env python3
"""A video prompt through transformers on the tiny vision checkpoints: the golden that
tests/test_video_model.c checks qhexrt against.

    python tests/hf/video_model_golden.py --write tests/data/video/model   # the committed set
    python tests/hf/video_model_golden.py --check tests/data/video/model   # a fresh run equals it

Run in the HF environment (scripts/hf_env.sh, torchcodec as the processor's reader). For each
fixture (qwen3vl-tiny-f32, qwen35vl-tiny-f32): the conversation [user: video, "Describe the
video."] rendered by the family's released chat template (tests/data/chat_templates), expanded
by Qwen3VLProcessor (the fixture's tokenizer and preprocessor_config.json, which transformers
also reads as the video processor's settings, with its default 2 fps sampling), run by the
fixture's *ForConditionalGeneration in float32 on the CPU (eager attention, one thread).
Written per case (NAME = fixture.clip):
  NAME.json         prompt ids, video_grid_thw, the expanded prompt text, the greedy ids (16
                    tokens, argmax, no EOS stop), the last prompt row's top-1 margin
  NAME.logits.f32   the logits of the last prompt row and of the greedy steps before the last
                    (16 rows: model.generate's output_logits)
  NAME.video_embd.f32  the vision tower's output for the video, [tokens, hidden (1 + deepstack)]
                    in token order (the merger, then each DeepStack merger), as embed-image writes
"""
import argparse
import json
import os
import sys
import warnings

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIX = os.path.join(ROOT, "tests", "data", "fixtures", "parity")
VID = os.path.join(ROOT, "tests", "data", "video")
TPL = os.path.join(ROOT, "tests", "data", "chat_templates")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
warnings.filterwarnings("ignore")

CASES = [("qwen3vl-tiny-f32", "qwen3_vl-8b-instruct.jinja", "h264.mp4"),
         ("qwen35vl-tiny-f32", "qwen3_5-4b.jinja", "vp9.webm")]
N_NEW = 16
TEXT = "Describe the video."


def run_case(fixture, template, clip):
    import torch
    from transformers import AutoTokenizer
    from transformers.models.qwen3_vl.processing_qwen3_vl import Qwen3VLProcessor
    from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor

    torch.set_num_threads(1)
    d = os.path.join(FIX, fixture)
    cfg = json.load(open(os.path.join(d, "config.json")))
    tok = AutoTokenizer.from_pretrained(d)
    pre = json.load(open(os.path.join(d, "preprocessor_config.json")))
    keys = ("do_resize", "do_rescale", "do_normalize", "rescale_factor", "image_mean", "image_std", "size",
            "patch_size", "temporal_patch_size", "merge_size")
    kw = {k: pre[k] for k in keys if k in pre}
    vp = Qwen3VLVideoProcessor(cap_pixels_per_frame=False, **kw)
    ip = Qwen2VLImageProcessor(**kw)
    chat_template = open(os.path.join(TPL, template)).read()
    proc = Qwen3VLProcessor(image_processor=ip, tokenizer=tok, video_processor=vp, chat_template=chat_template)
    path = os.path.join(VID, clip)
    msgs = [{"role": "user", "content": [{"type": "video", "video": path}, {"type": "text", "text": TEXT}]}]
    text = proc.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    inputs = proc(text=[text], videos=[path], return_tensors="pt")
    if cfg.get("model_type") == "qwen3_vl":
        from transformers import Qwen3VLForConditionalGeneration as M
    else:
        from transformers import Qwen3_5ForConditionalGeneration as M
    model = M.from_pretrained(d, torch_dtype=torch.float32, attn_implementation="eager").eval()
    ids = inputs["input_ids"]
    with torch.no_grad():
        vis = model.model.visual(inputs["pixel_values_videos"].type(model.model.visual.dtype),
                                 grid_thw=inputs["video_grid_thw"], return_dict=True)
        embd = [vis.pooler_output] + list(getattr(vis, "deepstack_features", None) or [])
        embd = torch.cat([e.float() for e in embd], dim=1).numpy().astype("<f4")
        out = model.generate(**inputs, max_new_tokens=N_NEW, do_sample=False, output_logits=True,
                             return_dict_in_generate=True, eos_token_id=None, pad_token_id=0)
    greedy = [int(x) for x in out.sequences[0, ids.shape[1]:]]
    rows = [r[0].float().numpy() for r in out.logits]
    rows = np.stack(rows).astype("<f4")
    top = np.sort(rows[0].astype(np.float64))
    expanded = tok.decode(ids[0], skip_special_tokens=False)
    return {
        "fixture": fixture, "clip": clip, "template": template, "text": TEXT,
        "prompt_ids": [int(x) for x in ids[0]],
        "video_grid_thw": [int(x) for x in inputs["video_grid_thw"][0]],
        "prompt_text": expanded,
        "greedy": greedy[:N_NEW],
        "margin_last_prompt_row": float(top[-1] - top[-2]),
        "n_rows": int(rows.shape[0]),
    }, rows, embd


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--write")
    ap.add_argument("--check")
    a = ap.parse_args()
    bad = 0
    for fixture, template, clip in CASES:
        g, rows, embd = run_case(fixture, template, clip)
        name = "%s.%s" % (fixture, clip.split(".")[0])
        if a.write:
            os.makedirs(a.write, exist_ok=True)
            with open(os.path.join(a.write, name + ".json"), "w") as f:
                json.dump(g, f, indent=1)
                f.write("\n")
            rows.tofile(os.path.join(a.write, name + ".logits.f32"))
            embd.tofile(os.path.join(a.write, name + ".video_embd.f32"))
            print("%s: %d prompt ids, grid %s, greedy %s" % (name, len(g["prompt_ids"]), g["video_grid_thw"], g["greedy"]))
        if a.check:
            want = json.load(open(os.path.join(a.check, name + ".json")))
            old = np.fromfile(os.path.join(a.check, name + ".logits.f32"), dtype="<f4").reshape(rows.shape)
            d = float(np.abs(old - rows).max())
            ok = want["prompt_ids"] == g["prompt_ids"] and want["greedy"] == g["greedy"] and d <= 1e-5
            print("%s: %s (max |d logit| %.3g)" % (name, "ok" if ok else "DIFFERS", d))
            bad += not ok
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
