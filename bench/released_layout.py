#!/usr/bin/python3
"""Give a random Qwen3.5-2B checkpoint (qhx forge --random qwen3_5 DIR --preset 2b) the file layout
of the released Qwen/Qwen3.5-2B: its tensors plus a 24-block vision tower under model.visual.*
(hidden 1024, intermediate 4096, patch 16, temporal patch 2, merge 2 to 2048, 2304 position
rows: about 662 MB in bf16), as a second shard with a model.safetensors.index.json over both.
The tower's values are zeros written as a hole: only the loading behaviour is measured with it
(BENCHMARKS.md, "Memory"), no graph reads it.

    python3 bench/released_layout.py SRC_DIR OUT_DIR   (OUT_DIR gets hard links to SRC_DIR's files)
"""
import json
import os
import struct
import sys


def vision_tensors():
    h, inter, out, blocks = 1024, 4096, 2048, 24
    t = {"model.visual.patch_embed.proj.weight": [h, 3, 2, 16, 16],
         "model.visual.patch_embed.proj.bias": [h],
         "model.visual.pos_embed.weight": [2304, h]}
    for b in range(blocks):
        p = "model.visual.blocks.%d." % b
        t[p + "norm1.weight"] = [h]
        t[p + "norm1.bias"] = [h]
        t[p + "norm2.weight"] = [h]
        t[p + "norm2.bias"] = [h]
        t[p + "attn.qkv.weight"] = [3 * h, h]
        t[p + "attn.qkv.bias"] = [3 * h]
        t[p + "attn.proj.weight"] = [h, h]
        t[p + "attn.proj.bias"] = [h]
        t[p + "mlp.linear_fc1.weight"] = [inter, h]
        t[p + "mlp.linear_fc1.bias"] = [inter]
        t[p + "mlp.linear_fc2.weight"] = [h, inter]
        t[p + "mlp.linear_fc2.bias"] = [h]
    t["model.visual.merger.norm.weight"] = [h]
    t["model.visual.merger.norm.bias"] = [h]
    t["model.visual.merger.linear_fc1.weight"] = [4 * h, 4 * h]
    t["model.visual.merger.linear_fc1.bias"] = [4 * h]
    t["model.visual.merger.linear_fc2.weight"] = [out, 4 * h]
    t["model.visual.merger.linear_fc2.bias"] = [out]
    return t


def write_hole_shard(path, shapes):
    header, off = {"__metadata__": {"format": "pt"}}, 0
    for name, shape in shapes.items():
        n = 2
        for d in shape:
            n *= d
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [off, off + n]}
        off += n
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        f.truncate(8 + len(blob) + off)
    return off


def read_names(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return [k for k in json.loads(f.read(n)) if k != "__metadata__"]


def main():
    src, out = sys.argv[1], sys.argv[2]
    os.makedirs(out)
    for name in os.listdir(src):  # hard links where possible: the folder stands alone
        a, b = os.path.abspath(os.path.join(src, name)), os.path.join(out, name)
        try:
            os.link(a, b)
        except OSError:
            os.symlink(a, b)
    shapes = vision_tensors()
    size = write_hole_shard(os.path.join(out, "model-vision.safetensors"), shapes)
    wm = {k: "model.safetensors" for k in read_names(os.path.join(src, "model.safetensors"))}
    wm.update({k: "model-vision.safetensors" for k in shapes})
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": wm}, f)
    print("%s: %d vision tensors, %.0f MB" % (out, len(shapes), size / 1e6))


if __name__ == "__main__":
    main()
