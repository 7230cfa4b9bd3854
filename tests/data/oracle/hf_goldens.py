#!/usr/bin/env python3
"""Hugging Face reference outputs for a tiny parity fixture (torch + transformers).

    python3 oracle/hf_goldens.py --fixture fixtures/parity/qwen35-tiny-f32 --out OUTDIR \\
        [--dtype float32|bfloat16] [--device cpu|cuda] [--check]

(paths relative to the shared folder).  Runs the fixture's checkpoint through transformers
(the class named by config.json "architectures": Qwen3_5ForConditionalGeneration,
Qwen3_5ForCausalLM, Qwen3VLForConditionalGeneration, ...), attn_implementation="eager",
model.eval(), torch.no_grad(), float32 by default, and writes what oracle/parity_gate.py reads.
The fixture goldens come from llama.cpp; this gives the same files from Hugging Face itself.

Per prompt NAME of the fixture's prompts.json, in OUTDIR:
  NAME.greedy.json        {"greedy": [...]}: free-running greedy, n_decode tokens (default: as many
                          as the golden), argmax over ALL vocab logits (lowest index on ties), no EOS
                          stop; model.forward() with the cache, not generate()
  NAME.logits.f32         little-endian float32 [n_prompt + n_decode - 1, vocab]: prompt followed by
                          the golden greedy[:-1], teacher-forced in ONE forward pass (all positions)
  NAME.logits_decode.f32  same rows, but the prompt is one forward pass and the golden greedy tokens
                          are then fed one at a time through the cache (how the goldens were made)
  NAME.image_embd.f32     image prompts: float32 [n_image_tokens, hidden * (1 + n_deepstack)],
                          row = [final merger | deepstack merger 0 | ...], HF token order
                          (captured with forward hooks on the vision tower's mergers)
  NAME.layers.f32         only for the prompt named by golden.json "layers_file": float32
                          [n_layers, n_prompt, hidden], residual stream after each decoder layer
                          (prefill, forward hooks on the decoder layers)
  meta.json               torch / transformers versions, device, dtype, what was checked, and per
                          prompt max|logits (one pass) - logits (decode)| plus diffs to the goldens
With --check, parity_gate.py (next to this script) is run on OUTDIR (one-pass logits) and on
OUTDIR/gate_decode_variant (links to the decode-variant logits); its reports are printed and the
exit status is non-zero when either gate fails.

Positions.  Image prompts are already HF-expanded (the image pad id repeated n_image_tokens times).
By default (--positions hf) the M-RoPE positions of the prompt come from the model's own
get_rope_index() (with mm_token_type_ids where that version wants them) and are passed to every
forward() explicitly as [4, 1, L] = [text row; t; h; w] (the layout generate() uses); decode steps
continue at position + rope_delta.  --positions own uses this script's copy of that rule,
--positions model passes no position_ids and lets forward() derive them.  The three are compared
with each other and with golden.json "mrope_positions_thw" and the result goes into meta.json.

Linear attention (Qwen3.5 Gated DeltaNet) always runs the pure-torch fallback: the kernel probes
(flash-linear-attention, causal-conv1d) are patched to "unavailable" before the modeling module is
imported, hub kernels are disabled (USE_HUB_KERNELS=NO), module-level kernel globals are cleared,
and after loading every *GatedDeltaNet instance is checked (and re-bound if needed) to
torch_chunk_gated_delta_rule / torch_recurrent_gated_delta_rule / torch_causal_conv1d_update.

Images: pixel_values / image_grid_thw come from the checkpoint's own image processor
(AutoImageProcessor on the fixture folder, then the Qwen2VL image processor classes); a numpy
patchifier that follows the same layout is always computed as a cross-check, and is used only if
no HF image processor can be built (--image-processor numpy forces it).

Needs: python3, numpy, torch, transformers; Pillow for PNGs is optional (a small PNG decoder is
built in).  Nothing is downloaded (HF_HUB_OFFLINE=1, local_files_only=True).
"""

import argparse
import importlib
import inspect
import json
import math
import os
import platform
import shutil
import struct
import subprocess
import sys
import time
import traceback
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TAG = "[hf_goldens]"


def log(msg):
    print("%s %s" % (TAG, msg), flush=True)


def warn(msg):
    print("%s WARNING: %s" % (TAG, msg), flush=True)


class Fatal(Exception):
    """An error whose message is meant for the person running the script."""


def load_json(path):
    with open(path, "r", encoding="utf-8") as f:
        return json.load(f)


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1, sort_keys=False, default=_json_default)
        f.write("\n")


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, (set, frozenset, tuple)):
        return sorted(o) if isinstance(o, (set, frozenset)) else list(o)
    return str(o)


def write_f32(path, arr):
    np.ascontiguousarray(arr, dtype="<f4").tofile(path)


def fmax(x):
    """max of an array as a plain float (nan-safe for empty arrays)."""
    x = np.asarray(x)
    return float(np.max(x)) if x.size else 0.0


# ---------------------------------------------------------------------------
# checkpoint reader (numpy only): used to check what transformers actually loaded

_ST_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4",
              "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "?"}


def read_safetensors_file(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n).decode("utf-8"))
    base = 8 + n
    mm = np.memmap(path, dtype=np.uint8, mode="r")
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dt, shape = info["dtype"], tuple(info["shape"])
        a, b = info["data_offsets"]
        raw = np.array(mm[base + a:base + b])  # copy: small fixtures, and no alignment surprises
        if dt == "BF16":
            arr = (raw.view("<u2").astype(np.uint32) << 16).view("<f4")
        elif dt in _ST_DTYPES:
            arr = raw.view(_ST_DTYPES[dt])
        else:
            out[name] = (None, dt, shape)
            continue
        out[name] = (arr.reshape(shape), dt, shape)
    del mm
    return out


def read_checkpoint(folder):
    idx = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(idx):
        files = sorted(set(load_json(idx)["weight_map"].values()))
    elif os.path.exists(os.path.join(folder, "model.safetensors")):
        files = ["model.safetensors"]
    else:
        files = []
    tensors = {}
    for fn in files:
        tensors.update(read_safetensors_file(os.path.join(folder, fn)))
    return tensors


# ---------------------------------------------------------------------------
# images (numpy only)

def png_decode_rgb(path):
    """Minimal PNG decoder: 8-bit grey / grey+alpha / RGB / RGBA, not interlaced, all 5 filters.
    Returns uint8 [H, W, 3] (alpha dropped, as PIL's convert("RGB") does)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise Fatal("%s is not a PNG file" % path)
    pos, idat, ihdr = 8, [], None
    while pos + 8 <= len(data):
        ln = struct.unpack(">I", data[pos:pos + 4])[0]
        typ = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + ln]
        pos += 12 + ln
        if typ == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif typ == b"IDAT":
            idat.append(body)
        elif typ == b"IEND":
            break
    if ihdr is None:
        raise Fatal("%s: PNG without IHDR" % path)
    w, h, depth, ctype, _comp, _filt, interlace = ihdr
    chans = {0: 1, 2: 3, 4: 2, 6: 4}.get(ctype)
    if depth != 8 or chans is None or interlace != 0:
        raise Fatal("%s: built-in PNG decoder handles 8-bit non-interlaced grey/RGB(A) only "
                    "(depth %d, colour type %d, interlace %d); install Pillow" % (path, depth, ctype, interlace))
    raw = zlib.decompress(b"".join(idat))
    stride, bpp = w * chans, chans
    img = np.zeros((h, stride), dtype=np.uint8)
    prev = np.zeros(stride, dtype=np.int64)
    i = 0
    for y in range(h):
        ftype = raw[i]
        i += 1
        line = np.frombuffer(raw, dtype=np.uint8, count=stride, offset=i).astype(np.int64)
        i += stride
        if ftype == 0:
            cur = line
        elif ftype == 2:
            cur = (line + prev) & 255
        elif ftype in (1, 3, 4):
            cur = np.zeros(stride, dtype=np.int64)
            for x in range(stride):
                left = cur[x - bpp] if x >= bpp else 0
                up = prev[x]
                if ftype == 1:
                    pred = left
                elif ftype == 3:
                    pred = (left + up) >> 1
                else:
                    ul = prev[x - bpp] if x >= bpp else 0
                    p = left + up - ul
                    pa, pb, pc = abs(p - left), abs(p - up), abs(p - ul)
                    pred = left if (pa <= pb and pa <= pc) else (up if pb <= pc else ul)
                cur[x] = (line[x] + pred) & 255
        else:
            raise Fatal("%s: bad PNG filter type %d in row %d" % (path, ftype, y))
        img[y] = cur.astype(np.uint8)
        prev = cur
    img = img.reshape(h, w, chans)
    if chans == 1:
        img = np.repeat(img, 3, axis=2)
    elif chans == 2:
        img = np.repeat(img[:, :, :1], 3, axis=2)
    elif chans == 4:
        img = img[:, :, :3]
    return np.ascontiguousarray(img)


def load_rgb(path):
    """Returns (uint8 [H, W, 3], PIL image or None, decoder name, cross-check note)."""
    builtin = None
    try:
        builtin = png_decode_rgb(path)
    except Exception as e:  # noqa: BLE001 - only a cross-check
        builtin_err = "%s: %s" % (type(e).__name__, e)
    else:
        builtin_err = None
    try:
        from PIL import Image
    except ImportError:
        if builtin is None:
            raise Fatal("cannot decode %s: Pillow is not installed and the built-in decoder failed (%s)"
                        % (path, builtin_err))
        return builtin, None, "builtin-png", "Pillow not installed"
    im = Image.open(path)
    im.load()
    im = im.convert("RGB")
    arr = np.asarray(im, dtype=np.uint8).copy()
    if builtin is None:
        note = "built-in decoder failed: %s" % builtin_err
    elif builtin.shape != arr.shape or not np.array_equal(builtin, arr):
        note = "built-in decoder DIFFERS from Pillow"
    else:
        note = "built-in decoder == Pillow"
    return arr, im, "Pillow", note


def smart_resize(height, width, factor, min_pixels, max_pixels):
    """Qwen2-VL smart_resize (image_processing_qwen2_vl.py), used to know whether HF resizes."""
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return int(h_bar), int(w_bar)


def image_geometry(pcfg, vcfg):
    ps = int(pcfg.get("patch_size") or vcfg.get("patch_size") or 16)
    tps = int(pcfg.get("temporal_patch_size") or vcfg.get("temporal_patch_size") or 2)
    ms = int(pcfg.get("merge_size") or vcfg.get("spatial_merge_size") or 2)
    return ps, tps, ms


def numpy_patchify(rgb, pcfg, vcfg):
    """Qwen2-VL image processor layout in numpy (no resize).  Returns (pixel_values float32
    [grid_h*grid_w, C*tps*ps*ps], (1, grid_h, grid_w), note) or (None, None, why)."""
    ps, tps, ms = image_geometry(pcfg, vcfg)
    h, w, c = rgb.shape
    size = pcfg.get("size") or {}
    min_px = pcfg.get("min_pixels") or size.get("shortest_edge") or 56 * 56
    max_px = pcfg.get("max_pixels") or size.get("longest_edge") or 28 * 28 * 1280
    if pcfg.get("do_resize", True):
        rh, rw = smart_resize(h, w, ps * ms, min_px, max_px)
        if (rh, rw) != (h, w):
            return None, None, ("image %dx%d would be resized to %dx%d by the HF processor; the numpy "
                                "patchifier does not resize" % (h, w, rh, rw))
    elif h % (ps * ms) or w % (ps * ms):
        return None, None, "image %dx%d is not a multiple of %d" % (h, w, ps * ms)
    x = rgb.astype(np.float64)
    if pcfg.get("do_rescale", True):
        x = x * float(pcfg.get("rescale_factor", 1.0 / 255.0))
    if pcfg.get("do_normalize", True):
        mean = np.asarray(pcfg.get("image_mean", [0.48145466, 0.4578275, 0.40821073]), dtype=np.float64)
        std = np.asarray(pcfg.get("image_std", [0.26862954, 0.26130258, 0.27577711]), dtype=np.float64)
        x = (x - mean) / std
    x = x.transpose(2, 0, 1)                      # C, H, W
    frames = np.stack([x] * tps, axis=0)          # one image = tps copies of the frame
    gh, gw = h // ps, w // ps
    p = frames.reshape(1, tps, c, gh // ms, ms, ps, gw // ms, ms, ps)
    p = p.transpose(0, 3, 6, 4, 7, 2, 1, 5, 8).reshape(gh * gw, c * tps * ps * ps)
    return p.astype(np.float32), (1, gh, gw), "ok"


# ---------------------------------------------------------------------------
# M-RoPE positions: this script's copy of HF get_rope_index (used as a cross-check / fallback)

def mrope_reference(ids, image_token_id, video_token_id, grids, merge):
    """ids: prompt ids (HF-expanded).  grids: list of (t, h, w) patch grids, in order of the image
    runs.  Text token -> (s, s, s), s += 1.  Image run -> token (ti, r, c) gets
    (s + ti, s + r, s + c); afterwards s += max(h, w) // merge.  Returns (int64 [3, n], delta) with
    delta = next position - len(ids)."""
    pos, s, i, gi, n = [], 0, 0, 0, len(ids)
    while i < n:
        tok = ids[i]
        if tok == image_token_id or (video_token_id is not None and tok == video_token_id):
            j = i
            while j < n and ids[j] == tok:
                j += 1
            if gi >= len(grids):
                raise Fatal("more image-token runs in the prompt than image grids (%d)" % len(grids))
            t, h, w = (int(v) for v in grids[gi])
            gi += 1
            gh, gw = h // merge, w // merge
            if j - i != t * gh * gw:
                raise Fatal("image-token run of %d tokens at %d, but grid %s gives %d merged tokens"
                            % (j - i, i, (t, h, w), t * gh * gw))
            for ti in range(t):
                for r in range(gh):
                    for c in range(gw):
                        pos.append((s + ti, s + r, s + c))
            s += max(h, w) // merge if t == 1 else max(t, gh, gw)
            i = j
        else:
            pos.append((s, s, s))
            s += 1
            i += 1
    arr = np.asarray(pos, dtype=np.int64).reshape(-1, 3).T.copy()
    return arr, s - n


def positions_table(pos3_prompt, delta, total):
    """[4, total] int64 = [text row (0..total-1); t; h; w]; rows past the prompt continue as
    index + delta on all three M-RoPE axes (text tokens)."""
    n = pos3_prompt.shape[1]
    tab = np.zeros((4, total), dtype=np.int64)
    tab[0] = np.arange(total)
    tab[1:, :n] = pos3_prompt[:, :min(n, total)]
    if total > n:
        tab[1:, n:] = np.arange(n, total)[None, :] + int(delta)
    return tab


# ---------------------------------------------------------------------------
# torch / transformers setup

def setup_environment():
    # must run before torch / transformers are imported
    os.environ["USE_HUB_KERNELS"] = "NO"          # no kernels from the Hub (also: no network there)
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")   # deterministic cuBLAS
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def import_stack():
    try:
        import torch
    except ImportError as e:
        raise Fatal("cannot import torch (%s); run this on a machine with PyTorch and transformers" % e)
    try:
        import transformers
    except ImportError as e:
        raise Fatal("cannot import transformers (%s); run this on a machine with transformers 5.x" % e)
    return torch, transformers


def setup_determinism(torch, device, threads):
    rep = {}
    torch.manual_seed(0)
    if threads and threads > 0:
        torch.set_num_threads(threads)
    rep["torch_num_threads"] = torch.get_num_threads()
    try:
        torch.use_deterministic_algorithms(True, warn_only=True)
        rep["use_deterministic_algorithms"] = True
    except Exception as e:  # noqa: BLE001
        rep["use_deterministic_algorithms"] = "failed: %s" % e
    if hasattr(torch.backends, "cudnn"):
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True
    # full fp32 on the GPU: no TF32 in matmuls or convolutions (patch embed, depthwise conv1d).
    # Use torch's new fp32_precision API where it exists and the legacy allow_tf32 flag only where
    # it does not (torch refuses a mix of the two).
    prec = {}
    for label, path, legacy_obj, legacy_attr in (("cuda.matmul", ("cuda", "matmul"), ("cuda", "matmul"), "allow_tf32"),
                                                 ("cudnn.conv", ("cudnn", "conv"), ("cudnn",), "allow_tf32")):
        try:
            obj = torch.backends
            for part in path:
                obj = getattr(obj, part)
            if not hasattr(obj, "fp32_precision"):
                raise AttributeError("fp32_precision")
            obj.fp32_precision = "ieee"
            prec[label] = "fp32_precision=ieee"
        except Exception:  # noqa: BLE001
            try:
                obj = torch.backends
                for part in legacy_obj:
                    obj = getattr(obj, part)
                setattr(obj, legacy_attr, False)
                prec[label] = "%s=False" % legacy_attr
            except Exception as e:  # noqa: BLE001
                prec[label] = "could not set: %s" % e
    rep["fp32_precision"] = prec
    if device.type == "cuda":
        rep["cuda_device"] = torch.cuda.get_device_name(device)
    return rep


def _always_false(*args, **kwargs):
    return False


def _always_none(*args, **kwargs):
    return None


_KERNEL_PROBES = ("is_flash_linear_attention_available", "is_causal_conv1d_available",
                  "is_mamba_ssm_available", "is_mamba_2_ssm_available")
_KERNEL_GLOBALS = ("causal_conv1d_fn", "causal_conv1d_update", "chunk_gated_delta_rule",
                   "fused_recurrent_gated_delta_rule", "fused_chunk_gated_delta_rule",
                   "FusedRMSNormGated")


def disable_kernel_probes():
    """Before any modeling module is imported: make the fla / causal-conv1d probes say 'absent'
    (modeling_qwen3_5.py imports the kernels at module import time only if these return True)."""
    patched = []
    for mname in ("transformers.utils.import_utils", "transformers.utils"):
        try:
            m = importlib.import_module(mname)
        except Exception:  # noqa: BLE001
            continue
        for name in _KERNEL_PROBES:
            if hasattr(m, name):
                try:
                    setattr(m, name, _always_false)
                    patched.append("%s.%s" % (mname, name))
                except Exception:  # noqa: BLE001
                    pass
    return patched


def disable_kernel_globals():
    """After the modeling module is imported, before the model is built: clear module-level
    kernel handles so that __init__ binds the torch fallbacks."""
    changed = []
    for mname, m in list(sys.modules.items()):
        if m is None or not mname.startswith("transformers.models."):
            continue
        has_gdn = any(k.endswith("GatedDeltaNet") for k in getattr(m, "__dict__", {}))
        if not has_gdn and not any(hasattr(m, g) for g in _KERNEL_GLOBALS):
            continue
        for g in _KERNEL_GLOBALS:
            v = getattr(m, g, None)
            if v is None:
                continue
            # transformers >= 5.2x defines causal_conv1d_fn / causal_conv1d_update itself: pure torch
            # functions wrapped by use_kernel_func_from_hub_with_fallback, which binds a kernel only
            # when its package imports (kernel_modules_loaded() proves none did). Keep those.
            if callable(v) and (getattr(v, "__module__", "") or "").startswith("transformers.models."):
                changed.append("%s.%s kept (transformers' own torch function)" % (mname, g))
                continue
            setattr(m, g, None)
            changed.append("%s.%s=None" % (mname, g))
        if getattr(m, "is_fast_path_available", False):
            m.is_fast_path_available = False
            changed.append("%s.is_fast_path_available=False" % mname)
        if hasattr(m, "lazy_load_kernel"):
            m.lazy_load_kernel = _always_none
            changed.append("%s.lazy_load_kernel->None" % mname)
    return changed


def _fn_name(fn):
    if fn is None:
        return None
    return "%s.%s" % (getattr(fn, "__module__", "?"), getattr(fn, "__qualname__", getattr(fn, "__name__", repr(fn))))


def _is_torch_impl(fn):
    if fn is None:
        return True
    mod = getattr(fn, "__module__", "") or ""
    name = getattr(fn, "__name__", "") or ""
    return mod.startswith("transformers.models.") and name.startswith("torch_")


def kernel_modules_loaded():
    """Linear-attention kernel packages present in this process (should be none)."""
    return sorted(m for m in list(sys.modules) if m.split(".")[0] in ("fla", "causal_conv1d", "mamba_ssm"))


def force_torch_linear_attention(torch, model):
    """Make every *GatedDeltaNet use the pure-torch functions of its modeling module."""
    rep = {"n_modules": 0, "rebound": [], "bound": {}, "norm": {}}
    attrs = (("chunk_gated_delta_rule", "torch_chunk_gated_delta_rule"),
             ("recurrent_gated_delta_rule", "torch_recurrent_gated_delta_rule"),
             ("causal_conv1d_update", "torch_causal_conv1d_update"),
             ("causal_conv1d_fn", "torch_causal_conv1d_fn"))
    for qual, mod in model.named_modules():
        cls = type(mod)
        if not cls.__name__.endswith("GatedDeltaNet"):
            continue
        rep["n_modules"] += 1
        impls, norm_classes = {}, []
        for base in cls.__mro__:
            bm = inspect.getmodule(base)
            if bm is None or not bm.__name__.startswith("transformers.models."):
                continue
            for k, v in vars(bm).items():
                if k.startswith("torch_") and callable(v):
                    impls.setdefault(k, v)
                if (isinstance(v, type) and k.endswith("RMSNormGated") and not k.startswith("Fused")
                        and (v.__module__ or "").startswith("transformers.")):
                    norm_classes.append(v)
        for attr, want in attrs:
            if not hasattr(mod, attr):
                continue
            cur = getattr(mod, attr)
            if _is_torch_impl(cur):
                continue
            repl = impls.get(want)
            if repl is None and attr != "causal_conv1d_fn":
                where = [inspect.getmodule(b).__name__ for b in cls.__mro__ if inspect.getmodule(b) is not None]
                if (getattr(cur, "__module__", "") or "").startswith("transformers."):
                    # a transformers-owned dispatcher: keep it, the kernel-module check below still applies
                    warn("%s.%s is %s (not a torch_* fallback) and %s has no %s; keeping it"
                         % (qual, attr, _fn_name(cur), where, want))
                    rep.setdefault("kept", []).append("%s.%s=%s" % (qual, attr, _fn_name(cur)))
                    continue
                raise Fatal("%s (%s).%s is bound to %s, and no %s was found in %s.\n  torch_* functions "
                            "found: %s" % (qual, cls.__name__, attr, _fn_name(cur), want, where, sorted(impls)))
            setattr(mod, attr, repl)
            rep["rebound"].append("%s.%s: %s -> %s" % (qual, attr, _fn_name(cur), _fn_name(repl)))
        norm = getattr(mod, "norm", None)
        if norm is not None and not (type(norm).__module__ or "").startswith("transformers."):
            if not norm_classes:
                raise Fatal("%s.norm is %s.%s (a kernel) and no torch *RMSNormGated class was found"
                            % (qual, type(norm).__module__, type(norm).__name__))
            eps = getattr(norm, "eps", None) or getattr(norm, "variance_epsilon", None)
            if eps is None:
                eps = getattr(getattr(mod, "config", None), "rms_norm_eps", 1e-6)
            new = norm_classes[0](norm.weight.shape[0], eps=eps)
            with torch.no_grad():
                new.weight.copy_(norm.weight.detach().to(new.weight.dtype))
            new.to(device=norm.weight.device, dtype=norm.weight.dtype)
            setattr(mod, "norm", new)
            rep["rebound"].append("%s.norm: %s -> %s" % (qual, type(norm).__name__, type(new).__name__))
        # what is bound now (kernel slots stored on the instance)
        for k, v in vars(mod).items():
            if k.startswith("_") or isinstance(v, torch.nn.Module):
                continue
            if ("conv1d" in k or "delta_rule" in k) and (v is None or callable(v)):
                rep["bound"].setdefault(k, set()).add(str(_fn_name(v)))
        nm = getattr(mod, "norm", None)
        if nm is not None:
            rep["norm"].setdefault("%s.%s" % (type(nm).__module__, type(nm).__name__), 0)
            rep["norm"]["%s.%s" % (type(nm).__module__, type(nm).__name__)] += 1
    rep["bound"] = {k: sorted(v) for k, v in rep["bound"].items()}
    rep["kernel_modules_loaded"] = kernel_modules_loaded()
    bad = [k for k, v in rep["bound"].items() if any(x != "None" and not x.startswith("transformers.") for x in v)]
    if bad:
        raise Fatal("linear attention still bound to non-transformers callables: %s\n  %s"
                    % (bad, json.dumps(rep["bound"], indent=1)))
    return rep


# ---------------------------------------------------------------------------
# model structure helpers

def _get_path(root, path):
    obj = root
    if not path:
        return obj
    for part in path.split("."):
        try:
            obj = getattr(obj, part)
        except Exception:  # noqa: BLE001
            return None
        if obj is None:
            return None
    return obj


def describe(obj, depth=1):
    try:
        kids = [n for n, _ in obj.named_children()]
    except Exception:  # noqa: BLE001
        kids = []
    out = "%s children=%s" % (type(obj).__name__, kids)
    if depth > 0:
        for n in kids[:4]:
            out += "\n    %s: %s" % (n, describe(getattr(obj, n), depth - 1))
    return out


def find_module(model, candidates, what, must_have=()):
    for c in candidates:
        obj = _get_path(model, c)
        if obj is not None and all(hasattr(obj, a) for a in must_have):
            return obj, c or "<model>"
    raise Fatal("cannot find the %s: tried %s (each needing attributes %s).\n  Model structure: %s"
                % (what, ["model." + c if c else "model" for c in candidates], list(must_have), describe(model)))


def sub_config(cfg, key):
    sub = cfg.get(key)
    return sub if isinstance(sub, dict) else {}


def text_cfg_json(cfg):
    t = cfg.get("text_config")
    return t if isinstance(t, dict) else cfg


def rope_check(torch, lm, tcfg):
    rep = {}
    rot = getattr(lm, "rotary_emb", None)
    if rot is None or not hasattr(rot, "inv_freq"):
        return {"skipped": "no rotary_emb.inv_freq on %s" % type(lm).__name__}
    rp = tcfg.get("rope_parameters") or {}
    rs = tcfg.get("rope_scaling") or {}
    theta = rp.get("rope_theta", tcfg.get("rope_theta"))
    # Qwen3_5TextConfig defaults partial_rotary_factor to 0.25; everything else here rotates all dims
    default_partial = 0.25 if str(tcfg.get("model_type", "")).startswith("qwen3_5") else 1.0
    partial = rp.get("partial_rotary_factor", tcfg.get("partial_rotary_factor", default_partial))
    head_dim = tcfg.get("head_dim") or tcfg["hidden_size"] // tcfg["num_attention_heads"]
    inv = rot.inv_freq.detach().float().cpu().numpy().astype(np.float64)
    rep["inv_freq_len"] = int(inv.size)
    if theta is not None:
        dim = int(head_dim * float(partial))
        exp = 1.0 / (float(theta) ** (np.arange(0, dim, 2, dtype=np.float64) / dim))
        rep["expected_theta"] = float(theta)
        rep["expected_rotary_dim"] = dim
        if exp.shape != inv.shape:
            rep["ok"] = False
            rep["problem"] = "inv_freq has %d entries, expected %d" % (inv.size, exp.size)
        else:
            rel = fmax(np.abs(inv - exp) / exp)
            rep["inv_freq_max_rel_err"] = rel
            rep["ok"] = rel < 1e-5
    want_sec = rp.get("mrope_section", rs.get("mrope_section"))
    have_sec = getattr(rot, "mrope_section", None)
    if want_sec is not None:
        rep["mrope_section_config"] = list(want_sec)
        rep["mrope_section_module"] = list(have_sec) if have_sec is not None else None
        if have_sec is not None and list(have_sec) != list(want_sec):
            rep["ok"] = False
            rep["problem"] = "mrope_section %s != config %s" % (have_sec, want_sec)
    sc = getattr(rot, "attention_scaling", None)
    if sc is not None:
        rep["attention_scaling"] = float(sc)
        if abs(float(sc) - 1.0) > 1e-12:
            rep["ok"] = False
            rep["problem"] = "attention_scaling %s != 1" % sc
    return rep


def norm_eps_check(lm, tcfg):
    seen = {}
    for qual, m in lm.named_modules():
        if "Norm" not in type(m).__name__:
            continue
        eps = getattr(m, "variance_epsilon", None)
        if eps is None:
            eps = getattr(m, "eps", None)
        if eps is None:
            continue
        key = "%s eps=%g" % (type(m).__name__, float(eps))
        seen[key] = seen.get(key, 0) + 1
    want = tcfg.get("rms_norm_eps")
    ok = all(abs(float(k.split("eps=")[1]) - float(want)) <= 1e-12 * max(1.0, float(want))
             for k in seen) if want is not None else None
    return {"config_rms_norm_eps": want, "modules": seen, "ok": ok}


def attn_impl_report(model):
    out = {}
    for label, c in (("config", getattr(model, "config", None)),
                     ("text_config", getattr(getattr(model, "config", None), "text_config", None)),
                     ("vision_config", getattr(getattr(model, "config", None), "vision_config", None))):
        if c is None:
            continue
        v = getattr(c, "_attn_implementation", None)
        if v is None:
            v = getattr(c, "_attn_implementation_internal", None)
        out[label] = v
    return out


def force_eager(model):
    rep = attn_impl_report(model)
    if all(v in (None, "eager") for v in rep.values()):
        return rep, None
    note = None
    try:
        if hasattr(model, "set_attn_implementation"):
            model.set_attn_implementation("eager")
            note = "set_attn_implementation('eager')"
    except Exception as e:  # noqa: BLE001
        note = "set_attn_implementation failed: %s" % e
    rep2 = attn_impl_report(model)
    if not all(v in (None, "eager") for v in rep2.values()):
        for m in model.modules():
            c = getattr(m, "config", None)
            if c is not None and hasattr(c, "_attn_implementation"):
                try:
                    c._attn_implementation = "eager"
                except Exception:  # noqa: BLE001
                    try:
                        c._attn_implementation_internal = "eager"
                    except Exception:  # noqa: BLE001
                        pass
        note = (note or "") + "; set config._attn_implementation='eager' on every module config"
        rep2 = attn_impl_report(model)
    if not all(v in (None, "eager") for v in rep2.values()):
        warn("attention implementation is not eager everywhere: %s" % rep2)
    return rep2, note


class Capture:
    """Forward hooks that store module outputs (as float32 numpy) while enabled."""

    def __init__(self):
        self.enabled = False
        self.data = {}
        self.handles = []

    def add(self, module, key):
        def hook(_mod, _args, output):
            if not self.enabled:
                return
            t = output
            if isinstance(t, (tuple, list)):
                t = t[0]
            if hasattr(t, "last_hidden_state") and not hasattr(t, "detach"):
                t = t.last_hidden_state
            self.data.setdefault(key, []).append(t.detach().float().cpu().numpy())
        self.handles.append(module.register_forward_hook(hook))

    def start(self):
        self.data = {}
        self.enabled = True

    def stop(self):
        self.enabled = False
        d, self.data = self.data, {}
        return d


# ---------------------------------------------------------------------------

class Runner:
    def __init__(self, args, torch, transformers, fixture, cfg):
        self.args, self.torch, self.transformers = args, torch, transformers
        self.fixture, self.cfg = fixture, cfg
        self.tcfg = text_cfg_json(cfg)
        self.vcfg = sub_config(cfg, "vision_config")
        self.meta = {}
        self.image_processor = None
        self.image_processor_name = None
        self.image_processor_errors = []

    # -- loading --------------------------------------------------------------
    def load(self):
        torch, transformers, args = self.torch, self.transformers, self.args
        self.meta["kernel_probes_patched"] = disable_kernel_probes()
        archs = self.cfg.get("architectures") or []
        if not archs:
            raise Fatal("config.json has no 'architectures' list; cannot tell which class to load")
        arch = archs[0]
        try:
            cls = getattr(transformers, arch)
        except Exception as e:  # noqa: BLE001
            cands = sorted(n for n in dir(transformers)
                           if n.startswith("Qwen3") and ("For" in n or n.endswith("Model")))
            raise Fatal("transformers %s has no usable class %r (%s: %s).\n  Qwen3* model classes in this "
                        "transformers: %s" % (transformers.__version__, arch, type(e).__name__, e, cands))
        self.meta["model_class"] = "%s.%s" % (cls.__module__, cls.__name__)
        try:
            importlib.import_module(cls.__module__)
        except Exception:  # noqa: BLE001
            pass
        self.meta["kernel_globals_cleared"] = disable_kernel_globals()

        dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[args.dtype]
        common = dict(attn_implementation="eager", local_files_only=True, output_loading_info=True)
        t0 = time.time()
        try:
            try:
                res = cls.from_pretrained(self.fixture, dtype=dtype, **common)
                how = "dtype"
            except TypeError as e:
                if "dtype" not in str(e):
                    raise
                res = cls.from_pretrained(self.fixture, torch_dtype=dtype, **common)
                how = "torch_dtype"
        except Fatal:
            raise
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            raise Fatal("%s.from_pretrained(%r) failed: %s: %s" % (cls.__name__, self.fixture, type(e).__name__, e))
        if isinstance(res, tuple):
            model, info = res[0], (res[1] if len(res) > 1 and isinstance(res[1], dict) else {})
        else:
            model, info = res, {}
        self.meta["load_seconds"] = round(time.time() - t0, 3)
        self.meta["from_pretrained_dtype_kwarg"] = how
        li = {}
        for k in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
            v = info.get(k)
            if v is None:
                continue
            v = sorted(str(x) for x in v)
            li[k] = {"count": len(v), "first": v[:40]}
        self.meta["loading_info"] = li
        missing = [str(x) for x in (info.get("missing_keys") or [])]
        critical = [k for k in missing if not any(s in k for s in ("visual", "vision", "lm_head", "mtp."))]
        if critical:
            raise Fatal("transformers reports %d missing text-model weights (they would be random), e.g. %s.\n"
                        "  The checkpoint layout does not match %s in this transformers version."
                        % (len(critical), critical[:10], cls.__name__))
        if info.get("mismatched_keys"):
            raise Fatal("transformers reports shape-mismatched weights: %s" % list(info["mismatched_keys"])[:10])

        # dtype: the concrete class honours dtype=, but make sure (composite configs had bugs)
        dts = {}
        for p in model.parameters():
            dts[str(p.dtype)] = dts.get(str(p.dtype), 0) + p.numel()
        if args.dtype == "float32" and set(dts) != {"torch.float32"}:
            warn("parameters loaded as %s; casting the model to float32" % dts)
            model = model.to(torch.float32)
            dts = {"torch.float32": sum(p.numel() for p in model.parameters())}
        self.meta["param_dtypes"] = dts

        model.eval()
        self.model = model
        self.meta["attn_implementation"], note = force_eager(model)
        if note:
            self.meta["attn_implementation_note"] = note
        self.meta["linear_attention"] = force_torch_linear_attention(torch, model)
        if self.meta["linear_attention"]["n_modules"]:
            log("linear attention: %d GatedDeltaNet modules, bound to %s"
                % (self.meta["linear_attention"]["n_modules"], self.meta["linear_attention"]["bound"]))
            if self.meta["linear_attention"]["kernel_modules_loaded"]:
                warn("kernel packages are imported in this process: %s (the GatedDeltaNet slots above are the "
                     "torch fallbacks, but check nothing else uses them)"
                     % self.meta["linear_attention"]["kernel_modules_loaded"])

        self.lm, self.lm_path = find_module(model, ["model.language_model", "language_model", "model"],
                                            "text decoder (module with .layers)", must_have=("layers",))
        self.layers = list(self.lm.layers)
        self.visual, self.visual_path = None, None
        for c in ("model.visual", "visual", "model.vision_tower", "vision_tower"):
            v = _get_path(model, c)
            if v is not None:
                self.visual, self.visual_path = v, c
                break
        self.meta["modules"] = {"text_decoder": self.lm_path, "n_layers": len(self.layers),
                                "visual": self.visual_path}
        try:
            self.fwd_params = set(inspect.signature(model.forward).parameters)
        except (TypeError, ValueError):
            self.fwd_params = set()
        self.meta["forward_accepts"] = sorted(k for k in ("mm_token_type_ids", "cache_position", "position_ids",
                                                          "pixel_values", "image_grid_thw") if k in self.fwd_params)

        # tied lm_head, weights == checkpoint, rope, norm eps
        self.check_weights_and_tie()
        self.meta["rope_check"] = rope_check(torch, self.lm, self.tcfg)
        if self.meta["rope_check"].get("ok") is False:
            warn("RoPE check: %s" % self.meta["rope_check"])
        self.meta["norm_eps_check"] = norm_eps_check(self.lm, self.tcfg)
        if self.meta["norm_eps_check"].get("ok") is False:
            warn("norm eps check: %s" % self.meta["norm_eps_check"])

        self.device = torch.device(args.device)
        self.model = self.model.to(self.device)

        # hooks
        self.layer_cap = Capture()
        for i, layer in enumerate(self.layers):
            self.layer_cap.add(layer, i)
        self.img_cap = Capture()
        self.n_deepstack = 0
        self.visual_layout_problem = None
        if self.visual is not None:
            merger = getattr(self.visual, "merger", None)
            if merger is not None:
                self.img_cap.add(merger, "merger")
            ds = getattr(self.visual, "deepstack_merger_list", None)
            if ds is not None:
                for i, m in enumerate(ds):
                    self.img_cap.add(m, "deepstack%d" % i)
                self.n_deepstack = len(ds)
            self.meta["modules"]["visual_merger"] = merger is not None
            self.meta["modules"]["n_deepstack_mergers"] = self.n_deepstack
            want_ds = len(self.vcfg.get("deepstack_visual_indexes") or [])
            if merger is None or self.n_deepstack != want_ds:
                self.visual_layout_problem = (
                    "vision tower: merger %s, %d deepstack mergers found, config deepstack_visual_indexes has %d; "
                    "image_embd rows will not have the golden layout.\n  visual: %s"
                    % ("found" if merger is not None else "NOT found", self.n_deepstack, want_ds,
                       describe(self.visual)))

        # where get_rope_index lives
        self.rope_owner = None
        for c in ("model", ""):
            o = _get_path(model, c)
            if o is not None and hasattr(o, "get_rope_index"):
                self.rope_owner = o
                break

    def check_weights_and_tie(self):
        torch, model, args = self.torch, self.model, self.args
        ck = {} if args.skip_weight_check else read_checkpoint(self.fixture)
        rep = {}
        if ck:
            sd = model.state_dict()
            n_ok, worst, unmatched, shape_bad = 0, 0.0, [], []
            for name, (arr, dt, shape) in ck.items():
                if name.startswith("mtp.") or arr is None:
                    continue
                t = sd.get(name)
                if t is None:
                    unmatched.append(name)
                    continue
                if tuple(t.shape) != tuple(shape):
                    shape_bad.append("%s %s vs %s" % (name, tuple(t.shape), shape))
                    continue
                d = float(np.max(np.abs(t.detach().float().cpu().numpy().astype(np.float64)
                                        - arr.astype(np.float64)))) if arr.size else 0.0
                worst = max(worst, d)
                n_ok += 1
            rep = {"checkpoint_tensors": len(ck), "compared": n_ok, "max_abs_diff": worst,
                   "unmatched": unmatched[:40], "n_unmatched": len(unmatched), "shape_mismatch": shape_bad[:20]}
            if shape_bad:
                raise Fatal("loaded weights differ in shape from the checkpoint: %s" % shape_bad[:10])
            if args.dtype == "float32" and worst != 0.0:
                warn("loaded float32 weights differ from the checkpoint by up to %g" % worst)
            if unmatched:
                warn("%d checkpoint tensors have no same-named model parameter (renamed by transformers?), "
                     "e.g. %s" % (len(unmatched), unmatched[:5]))
        # tied output embedding
        emb = model.get_input_embeddings()
        head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
        tie = {}
        if emb is not None and head is not None and getattr(head, "weight", None) is not None:
            same = head.weight.data_ptr() == emb.weight.data_ptr()
            equal = bool(same or (head.weight.shape == emb.weight.shape and torch.equal(head.weight, emb.weight)))
            tie = {"same_storage": bool(same), "equal": equal, "checkpoint_has_lm_head": "lm_head.weight" in ck}
            want_tie = bool(self.cfg.get("tie_word_embeddings", self.tcfg.get("tie_word_embeddings", False)))
            if want_tie and not equal and "lm_head.weight" not in ck:
                warn("config says tie_word_embeddings but lm_head != embed_tokens after loading; tying by hand")
                head.weight = emb.weight
                tie["tied_by_this_script"] = True
        rep["lm_head_tie"] = tie
        self.meta["weight_check"] = rep

    # -- images --------------------------------------------------------------
    def get_image_processor(self):
        if self.image_processor is not None or self.image_processor_errors:
            return self.image_processor
        transformers = self.transformers
        try:
            from transformers import AutoImageProcessor
            self.image_processor = AutoImageProcessor.from_pretrained(self.fixture, local_files_only=True)
        except Exception as e:  # noqa: BLE001
            self.image_processor_errors.append("AutoImageProcessor: %s: %s" % (type(e).__name__, e))
        if self.image_processor is None:
            pc = self.pcfg
            for nm in [pc.get("image_processor_type"), "Qwen2VLImageProcessor", "Qwen2VLImageProcessorPil",
                       "Qwen2VLImageProcessorFast"]:
                if not nm:
                    continue
                try:
                    self.image_processor = getattr(transformers, nm).from_pretrained(self.fixture,
                                                                                      local_files_only=True)
                    break
                except Exception as e:  # noqa: BLE001
                    self.image_processor_errors.append("%s: %s: %s" % (nm, type(e).__name__, e))
        if self.image_processor is not None:
            self.image_processor_name = "%s.%s" % (type(self.image_processor).__module__,
                                                   type(self.image_processor).__name__)
        else:
            self.image_processor_errors.append("(no HF image processor could be built)")
            warn("no HF image processor: %s" % self.image_processor_errors)
        return self.image_processor

    def prepare_image(self, p):
        torch = self.torch
        path = os.path.join(self.fixture, p["image"])
        rgb, pil, decoder, dec_note = load_rgb(path)
        info = {"file": p["image"], "hw": [int(rgb.shape[0]), int(rgb.shape[1])], "decoder": decoder,
                "decoder_check": dec_note}
        if p.get("image_hw") and list(p["image_hw"]) != info["hw"]:
            raise Fatal("%s is %s but prompts.json says image_hw %s" % (p["image"], info["hw"], p["image_hw"]))
        ref_pv, ref_grid, ref_note = numpy_patchify(rgb, self.pcfg, self.vcfg)
        info["numpy_patchify"] = ref_note
        hf_pv = hf_grid = None
        if self.args.image_processor in ("auto", "hf"):
            ip = self.get_image_processor()
            if ip is not None:
                try:
                    out = ip(images=[pil if pil is not None else rgb], return_tensors="pt")
                    hf_pv = out["pixel_values"]
                    hf_grid = out["image_grid_thw"]
                    info["processor"] = self.image_processor_name
                    info["processor_extra_outputs"] = sorted(k for k in out.keys()
                                                             if k not in ("pixel_values", "image_grid_thw"))
                except Exception as e:  # noqa: BLE001
                    traceback.print_exc()
                    self.image_processor_errors.append("calling %s: %s: %s" % (self.image_processor_name,
                                                                               type(e).__name__, e))
            if hf_pv is None and self.args.image_processor == "hf":
                raise Fatal("HF image processor unavailable: %s" % self.image_processor_errors)
        if hf_pv is not None:
            pv = hf_pv.to(torch.float32)
            grid = hf_grid.to(torch.long)
            if ref_pv is not None:
                if tuple(pv.shape) == ref_pv.shape:
                    info["hf_vs_numpy_pixel_max_abs"] = fmax(np.abs(pv.cpu().numpy().astype(np.float64) - ref_pv))
                    if info["hf_vs_numpy_pixel_max_abs"] > 1e-3:
                        warn("%s: HF pixel_values differ from the plain patchify by %.3g (resize/normalize?)"
                             % (p["name"], info["hf_vs_numpy_pixel_max_abs"]))
                else:
                    info["hf_vs_numpy_pixel_max_abs"] = "shape %s vs %s" % (tuple(pv.shape), ref_pv.shape)
        else:
            if ref_pv is None:
                raise Fatal("no HF image processor (%s) and the numpy fallback cannot do this image: %s"
                            % (self.image_processor_errors, ref_note))
            pv = torch.from_numpy(ref_pv)
            grid = torch.tensor([list(ref_grid)], dtype=torch.long)
            info["processor"] = "numpy fallback (this script)"
            info["processor_errors"] = self.image_processor_errors
        info["pixel_values_shape"] = list(pv.shape)
        info["image_grid_thw"] = grid.tolist()
        return pv.to(self.device), grid.to(self.device), info

    # -- forward helpers -------------------------------------------------------
    def mm_types(self, ids):
        t = self.torch.zeros((1, len(ids)), dtype=self.torch.long)
        a = np.asarray(ids)
        if self.image_token_id is not None:
            t[0, self.torch.from_numpy(np.nonzero(a == self.image_token_id)[0])] = 1
        if self.video_token_id is not None:
            t[0, self.torch.from_numpy(np.nonzero(a == self.video_token_id)[0])] = 2
        return t.to(self.device)

    def reset_rope_state(self):
        for o in (self.model, _get_path(self.model, "model")):
            if o is not None and hasattr(o, "rope_deltas"):
                try:
                    o.rope_deltas = None
                except Exception:  # noqa: BLE001
                    pass

    def forward(self, ids, pos_tab, start, attn_len, past, use_cache, image=None):
        """One model.forward() on `ids` (token ids at sequence indices start..start+len-1)."""
        torch = self.torch
        n = len(ids)
        kw = {"input_ids": torch.tensor([ids], dtype=torch.long, device=self.device),
              "attention_mask": torch.ones((1, attn_len), dtype=torch.long, device=self.device),
              "use_cache": use_cache}
        if past is not None:
            kw["past_key_values"] = past
        if pos_tab is not None:
            kw["position_ids"] = torch.from_numpy(
                np.ascontiguousarray(pos_tab[:, start:start + n])).view(4, 1, n).to(self.device)
        elif "cache_position" in self.fwd_params:
            # --positions model: let forward() derive positions the way generate() drives it
            kw["cache_position"] = torch.arange(start, start + n, dtype=torch.long, device=self.device)
        if image is not None:
            kw["pixel_values"], kw["image_grid_thw"] = image
            if "mm_token_type_ids" in self.fwd_params:
                kw["mm_token_type_ids"] = self.mm_types(ids)
        out = self.model(**kw)
        logits = out.logits if hasattr(out, "logits") else out[0]
        new_past = getattr(out, "past_key_values", None)
        if use_cache and new_past is None:
            raise Fatal("forward(use_cache=True) returned no past_key_values (output type %s)" % type(out).__name__)
        lg = logits[0].detach().float().cpu().numpy()
        if lg.shape != (n, self.vocab):
            raise Fatal("logits shape %s, expected (%d, %d)" % (lg.shape, n, self.vocab))
        return lg, new_past

    def run_cached(self, ids, pos_tab, image, feed=None, n_steps=0, capture_layers=False):
        """Prompt in one forward, then one token per forward through the cache.
        feed=None: free-running greedy (n_steps decode calls after the prefill)."""
        self.reset_rope_state()
        if capture_layers:
            self.layer_cap.start()
        lg, past = self.forward(ids, pos_tab, 0, len(ids), None, True, image)
        layers = self.layer_cap.stop() if capture_layers else None
        rows, toks, n = [lg], [], len(ids)
        if feed is None:
            tok = int(np.argmax(lg[-1]))
            toks.append(tok)
            for k in range(n_steps):
                lg, past = self.forward([tok], pos_tab, n + k, n + k + 1, past, True)
                rows.append(lg)
                tok = int(np.argmax(lg[-1]))
                toks.append(tok)
        else:
            for k, tok in enumerate(feed):
                lg, past = self.forward([int(tok)], pos_tab, n + k, n + k + 1, past, True)
                rows.append(lg)
        return toks, np.concatenate(rows, axis=0), layers

    def run_onepass(self, ids, pos_tab, image):
        self.reset_rope_state()
        lg, _ = self.forward(ids, pos_tab, 0, len(ids), None, False, image)
        return lg

    def hf_rope_index(self, ids, grid):
        torch = self.torch
        if self.rope_owner is None:
            raise Fatal("no get_rope_index on model or model.model")
        fn = self.rope_owner.get_rope_index
        params = inspect.signature(fn).parameters
        input_ids = torch.tensor([ids], dtype=torch.long, device=self.device)
        kw = {}
        if "mm_token_type_ids" in params:
            kw["mm_token_type_ids"] = self.mm_types(ids)
        if "image_grid_thw" in params:
            kw["image_grid_thw"] = grid
        else:
            raise Fatal("get_rope_index%s has no image_grid_thw parameter" % inspect.signature(fn))
        if "attention_mask" in params:
            kw["attention_mask"] = torch.ones_like(input_ids)
        res = fn(input_ids, **kw)
        pos, delta = res[0], res[1]
        pos = pos.detach().cpu().numpy().astype(np.int64)
        if pos.ndim != 3 or pos.shape[0] != 3 or pos.shape[2] != len(ids):
            raise Fatal("get_rope_index returned positions of shape %s, expected (3, 1, %d)" % (pos.shape, len(ids)))
        return pos[:, 0, :], int(np.asarray(delta.detach().cpu()).reshape(-1)[0])

    def standalone_image_features(self, image):
        for c in ("model", ""):
            o = _get_path(self.model, c)
            if o is not None and hasattr(o, "get_image_features"):
                return o.get_image_features(image[0], image[1])
        raise Fatal("no get_image_features on model or model.model: %s" % describe(self.model))

    def image_embd_from(self, cap, ret=None):
        """[n_tok, hidden*(1+n_ds)] from hook captures (or, failing that, get_image_features' result)."""
        if cap.get("merger"):
            parts = [np.concatenate(cap["merger"], axis=0)]
            for i in range(self.n_deepstack):
                if not cap.get("deepstack%d" % i):
                    raise Fatal("visual.merger ran but deepstack_merger_list[%d] did not (deepstack_visual_indexes "
                                "%s).\n  visual: %s" % (i, getattr(self.visual, "deepstack_visual_indexes", "?"),
                                                         describe(self.visual)))
                parts.append(np.concatenate(cap["deepstack%d" % i], axis=0))
            return np.concatenate(parts, axis=1), "forward hooks on visual.merger / visual.deepstack_merger_list"
        if ret is None:
            raise Fatal("the vision mergers' forward hooks captured nothing.\n  visual: %s" % describe(self.visual))
        main, ds = None, None
        if hasattr(ret, "pooler_output"):
            main, ds = ret.pooler_output, getattr(ret, "deepstack_features", None)
        elif isinstance(ret, (tuple, list)) and len(ret) == 2:
            main, ds = ret
        if main is None:
            raise Fatal("cannot read image features from get_image_features() result %s" % type(ret).__name__)
        if isinstance(main, (tuple, list)):
            main = self.torch.cat(list(main), dim=0)
        parts = [main.detach().float().cpu().numpy()]
        for d in (ds or []):
            parts.append(d.detach().float().cpu().numpy())
        return np.concatenate(parts, axis=1), "get_image_features() return value"

    # -- one prompt ------------------------------------------------------------
    def run_prompt(self, p, g, out):
        args = self.args
        name, ids = p["name"], [int(x) for x in p["ids"]]
        n = len(ids)
        n_decode = args.n_decode or (len(g["greedy"]) if g else 32)
        if n_decode < 1 or n < 1:
            raise Fatal("%s: need at least one prompt token and n_decode >= 1 (got %d, %d)" % (name, n, n_decode))
        rep = {"n_prompt": n, "n_decode": n_decode}
        t0 = time.time()

        image = None
        if "image" in p:
            if self.visual is None:
                raise Fatal("prompt %s has an image but the model has no vision tower" % name)
            pv, grid, iinfo = self.prepare_image(p)
            image = (pv, grid)
            rep["image"] = iinfo
            merge = int(self.vcfg.get("spatial_merge_size") or image_geometry(self.pcfg, self.vcfg)[2])
            n_tok_grid = int(np.prod(grid.cpu().numpy(), axis=1).sum()) // (merge * merge)
            n_tok_ids = ids.count(self.image_token_id)
            if not (n_tok_grid == n_tok_ids == int(p.get("n_image_tokens", n_tok_ids))):
                raise Fatal("%s: image tokens disagree: grid %s gives %d, prompt has %d image-pad ids, "
                            "prompts.json n_image_tokens=%s" % (name, grid.tolist(), n_tok_grid, n_tok_ids,
                                                                p.get("n_image_tokens")))
            grids = [tuple(int(v) for v in row) for row in grid.cpu().numpy().tolist()]
        else:
            merge, grids = 1, []

        # positions of the prompt: own rule, HF get_rope_index, golden
        own3, own_delta = mrope_reference(ids, self.image_token_id, self.video_token_id, grids, merge)
        prep = {"mode": args.positions, "own_delta": own_delta}
        pos3, delta = own3, own_delta
        if image is not None:
            try:
                hf3, hf_delta = self.hf_rope_index(ids, image[1])
                prep["hf_delta"] = hf_delta
                prep["hf_equals_own"] = bool(np.array_equal(hf3, own3) and hf_delta == own_delta)
                if not prep["hf_equals_own"]:
                    warn("%s: get_rope_index differs from this script's rule (delta %d vs %d)"
                         % (name, hf_delta, own_delta))
                if args.positions == "hf":
                    pos3, delta = hf3, hf_delta
            except Fatal:
                raise
            except Exception as e:  # noqa: BLE001
                prep["hf_error"] = "%s: %s" % (type(e).__name__, e)
                if args.positions == "hf":
                    warn("%s: get_rope_index failed (%s); using this script's positions" % (name, prep["hf_error"]))
                    prep["mode"] = "own (get_rope_index failed)"
        n_rows = n + n_decode - 1
        pos_tab = positions_table(pos3, delta, n_rows)
        if g is not None and g.get("mrope_positions_thw"):
            gold = np.asarray(g["mrope_positions_thw"], dtype=np.int64).T
            m = min(gold.shape[1], n_rows)
            prep["equals_golden"] = bool(np.array_equal(gold[:, :m], pos_tab[1:, :m]))
        elif g is not None and g.get("positions"):
            gold = np.asarray(g["positions"], dtype=np.int64)
            m = min(gold.size, n_rows)
            prep["equals_golden"] = bool(np.array_equal(gold[:m], pos_tab[1, :m]))
        if prep.get("equals_golden") is False:
            warn("%s: positions used here differ from golden.json positions" % name)
        rep["positions"] = prep
        feed_tab = None if args.positions == "model" else pos_tab

        # 1. free-running greedy
        greedy, _, _ = self.run_cached(ids, feed_tab, image, feed=None, n_steps=n_decode - 1)
        with open(os.path.join(out, name + ".greedy.json"), "w") as f:
            json.dump({"greedy": greedy}, f)
            f.write("\n")
        rep["greedy"] = greedy

        # 2. teacher tokens: golden greedy[:-1] (own greedy if there is no golden)
        if g is not None and len(g.get("greedy", [])) >= n_decode - 1:
            teacher, rep["teacher_tokens"] = [int(t) for t in g["greedy"][:n_decode - 1]], "golden greedy"
        else:
            teacher, rep["teacher_tokens"] = greedy[:n_decode - 1], "own greedy (no golden)"
        if image is not None and any(t in (self.image_token_id, self.video_token_id) for t in teacher):
            warn("%s: teacher tokens contain an image/video pad id; the one-pass forward will count them "
                 "as image tokens" % name)

        # 3. decode variant (prefill + one token at a time), optionally capturing the layers
        layers_for = self.layers_prompt == name
        self.img_cap.start()
        _, dec, layers = self.run_cached(ids, feed_tab, image, feed=teacher, capture_layers=layers_for)
        cap_prefill = self.img_cap.stop()
        write_f32(os.path.join(out, name + ".logits_decode.f32"), dec)

        # 4. one forward pass over prompt + teacher tokens
        self.img_cap.start()
        one = self.run_onepass(ids + teacher, feed_tab, image)
        cap_onepass = self.img_cap.stop()
        write_f32(os.path.join(out, name + ".logits.f32"), one)

        d = np.abs(one.astype(np.float64) - dec.astype(np.float64)).max(axis=1)
        rep["n_rows"] = int(one.shape[0])
        rep["max_abs_prefill_vs_decode"] = fmax(d)
        rep["max_abs_prefill_vs_decode_prompt_rows"] = fmax(d[:n])
        rep["max_abs_prefill_vs_decode_decode_rows"] = fmax(d[n:])
        rep["argmax_rows_differ_prefill_vs_decode"] = int(np.sum(one.argmax(1) != dec.argmax(1)))

        # 5. image embeddings
        if image is not None:
            self.img_cap.start()
            try:
                ret = self.standalone_image_features(image)
            except Exception as e:  # noqa: BLE001 - only a cross-check; the forward's hooks are the source
                ret = None
                rep["image"]["standalone_get_image_features_error"] = "%s: %s" % (type(e).__name__, e)
                warn("%s: get_image_features() cross-check failed: %s" % (name, e))
            cap_alone = self.img_cap.stop()
            emb, src = self.image_embd_from(cap_onepass, ret)
            rep["image"]["embd_source"] = src
            rep["image"]["embd_shape"] = list(emb.shape)
            rep["image"]["n_deepstack"] = self.n_deepstack
            for label, cap in (("standalone_get_image_features", cap_alone), ("decode_prefill", cap_prefill)):
                if cap.get("merger"):
                    other, _ = self.image_embd_from(cap)
                    rep["image"]["embd_max_abs_vs_" + label] = (fmax(np.abs(other - emb))
                                                                if other.shape == emb.shape else "shape %s" % (other.shape,))
            write_f32(os.path.join(out, name + ".image_embd.f32"), emb)
            gf = g.get("image_embd_file") if g else None
            if gf and os.path.exists(os.path.join(self.fixture, gf)):
                gold = np.fromfile(os.path.join(self.fixture, gf), dtype="<f4")
                if gold.size == emb.size:
                    rep["image"]["embd_max_abs_vs_golden"] = fmax(np.abs(gold.reshape(emb.shape) - emb))
                else:
                    rep["image"]["embd_vs_golden"] = "size %d vs golden %d" % (emb.size, gold.size)

        # 6. layers (residual stream after each decoder layer, prefill of the prompt)
        if layers_for:
            missing = [i for i in range(len(self.layers)) if not (layers or {}).get(i)]
            if missing:
                warn("%s: forward hooks on decoder layers %s captured nothing; no layers file" % (name, missing))
                rep["layers"] = {"error": "no capture for layers %s" % missing}
        if layers_for and not rep.get("layers"):
            arr = np.stack([layers[i][0].reshape(-1, layers[i][0].shape[-1])[-n:] for i in range(len(self.layers))])
            write_f32(os.path.join(out, name + ".layers.f32"), arr)
            lrep = {"shape": list(arr.shape)}
            lf = os.path.join(self.fixture, self.golden["layers_file"]["file"])
            if os.path.exists(lf):
                gold = np.fromfile(lf, dtype="<f4")
                if gold.size == arr.size:
                    gold = gold.reshape(arr.shape)
                    lrep["max_abs_vs_golden_per_layer"] = [fmax(np.abs(gold[i] - arr[i])) for i in range(arr.shape[0])]
                else:
                    lrep["vs_golden"] = "size %d vs golden %d" % (arr.size, gold.size)
            rep["layers"] = lrep

        # 7. against the golden
        if g is not None:
            gg = [int(t) for t in g["greedy"]]
            k = next((i for i in range(min(len(gg), len(greedy))) if gg[i] != greedy[i]), None)
            gv = {"exact": k is None and len(greedy) >= len(gg), "first_divergence": k}
            if k is not None and g.get("greedy_margins"):
                gv["golden_margin_at_divergence"] = g["greedy_margins"][k]
            rep["greedy_vs_golden"] = gv
            gl = os.path.join(self.fixture, name + ".logits.f32")
            if os.path.exists(gl):
                gold = np.fromfile(gl, dtype="<f4").reshape(-1, self.vocab)
                vs = {}
                for label, mine in (("onepass", one), ("decode", dec)):
                    if mine.shape != gold.shape:
                        vs[label] = "shape %s vs golden %s" % (mine.shape, gold.shape)
                        continue
                    dd = np.abs(mine.astype(np.float64) - gold.astype(np.float64)).max(axis=1)
                    am = mine.argmax(1)
                    top1 = np.asarray(g.get("row_top1", gold.argmax(1)))
                    vs[label] = {"max_abs": fmax(dd), "max_abs_prompt_rows": fmax(dd[:n]),
                                 "max_abs_decode_rows": fmax(dd[n:]),
                                 "argmax_agree": "%d/%d" % (int(np.sum(am == top1)), am.size)}
                rep["vs_golden"] = vs
        rep["seconds"] = round(time.time() - t0, 3)
        return rep

    # -- all prompts -------------------------------------------------------------
    def run(self, prompts, golden, out):
        self.golden = golden
        self.layers_prompt = None
        if golden and isinstance(golden.get("layers_file"), dict):
            self.layers_prompt = os.path.basename(golden["layers_file"]["file"]).split(".")[0]
        self.vocab = int(self.tcfg["vocab_size"])
        self.image_token_id = self.cfg.get("image_token_id", getattr(self.model.config, "image_token_id", None))
        self.video_token_id = self.cfg.get("video_token_id", getattr(self.model.config, "video_token_id", None))
        pp = os.path.join(self.fixture, "preprocessor_config.json")
        self.pcfg = load_json(pp) if os.path.exists(pp) else {}
        results, errors = {}, {}
        torch = self.torch
        if self.visual_layout_problem and any("image" in p for p in prompts):
            warn(self.visual_layout_problem)
            self.meta["visual_layout_problem"] = self.visual_layout_problem
        for p in prompts:
            name = p["name"]
            g = golden["prompts"].get(name) if golden else None
            log("%s: %d prompt tokens%s ..." % (name, len(p["ids"]), " + image " + p["image"] if "image" in p else ""))
            try:
                with torch.no_grad():
                    r = self.run_prompt(p, g, out)
            except Exception as e:  # noqa: BLE001
                traceback.print_exc()
                errors[name] = "%s: %s" % (type(e).__name__, e)
                log("%s: FAILED: %s" % (name, errors[name]))
                continue
            results[name] = r
            msg = "%s: max|onepass-decode| %.2e" % (name, r["max_abs_prefill_vs_decode"])
            if "greedy_vs_golden" in r:
                gv = r["greedy_vs_golden"]
                msg += ", greedy %s" % ("== golden" if gv["exact"] else "diverges at %s" % gv["first_divergence"])
            vs = r.get("vs_golden", {})
            if isinstance(vs.get("onepass"), dict):
                msg += ", max|onepass-golden| %.2e, max|decode-golden| %.2e" % (
                    vs["onepass"]["max_abs"], vs["decode"]["max_abs"] if isinstance(vs.get("decode"), dict) else float("nan"))
            if "image" in r and "embd_max_abs_vs_golden" in r["image"]:
                msg += ", max|image_embd-golden| %.2e" % r["image"]["embd_max_abs_vs_golden"]
            log(msg + " (%.1fs)" % r["seconds"])
        return results, errors


# ---------------------------------------------------------------------------

def link_or_copy(src, dst):
    if os.path.lexists(dst):
        os.remove(dst)
    try:
        os.symlink(os.path.relpath(src, os.path.dirname(dst)), dst)
    except OSError:
        shutil.copyfile(src, dst)


def run_gate(fixture, run_dir, label):
    gate = os.path.join(HERE, "parity_gate.py")
    if not os.path.exists(gate):
        log("--check: %s not found" % gate)
        return 2
    print("\n===== parity_gate.py: %s =====" % label, flush=True)
    r = subprocess.run([sys.executable, gate, "--fixture", fixture, "--run", run_dir],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    print(r.stdout, end="" if r.stdout.endswith("\n") else "\n", flush=True)
    return r.returncode


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fixture", required=True, help="fixture folder (config.json, model.safetensors, prompts.json, ...)")
    ap.add_argument("--out", required=True, help="output folder (created)")
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                    help="model dtype (default float32; the goldens are fp32 math, bf16 is informational)")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--check", action="store_true", help="run parity_gate.py on the outputs afterwards")
    ap.add_argument("--prompts", default="", help="comma-separated prompt names (default: all; with --check the "
                                                   "gate then reports the other prompts as missing)")
    ap.add_argument("--n-decode", type=int, default=0, help="greedy tokens per prompt (default: golden's count)")
    ap.add_argument("--positions", choices=("hf", "own", "model"), default="hf",
                    help="M-RoPE positions: hf = explicit, from get_rope_index (default); own = explicit, "
                         "from this script's copy of the rule; model = none passed, forward() derives them")
    ap.add_argument("--image-processor", choices=("auto", "hf", "numpy"), default="auto",
                    help="auto = HF image processor, numpy fallback if it cannot be built")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (default: torch's choice)")
    ap.add_argument("--skip-weight-check", action="store_true",
                    help="do not compare the loaded weights with model.safetensors")
    args = ap.parse_args()

    t_start = time.time()
    fixture = os.path.abspath(args.fixture)
    out = os.path.abspath(args.out)
    for f in ("config.json", "prompts.json"):
        if not os.path.exists(os.path.join(fixture, f)):
            print("%s %s has no %s" % (TAG, args.fixture, f), file=sys.stderr)
            return 2
    cfg = load_json(os.path.join(fixture, "config.json"))
    prompts = load_json(os.path.join(fixture, "prompts.json"))
    gpath = os.path.join(fixture, "golden.json")
    golden = load_json(gpath) if os.path.exists(gpath) else None
    if args.prompts:
        want = [s.strip() for s in args.prompts.split(",") if s.strip()]
        unknown = [w for w in want if w not in [p["name"] for p in prompts]]
        if unknown:
            print("%s unknown prompt names %s; the fixture has %s" % (TAG, unknown, [p["name"] for p in prompts]),
                  file=sys.stderr)
            return 2
        prompts = [p for p in prompts if p["name"] in want]
    os.makedirs(out, exist_ok=True)

    setup_environment()
    meta = {"tool": "oracle/hf_goldens.py", "fixture": os.path.basename(fixture.rstrip(os.sep)),
            "fixture_arg": args.fixture, "argv": sys.argv[1:], "python": platform.python_version(),
            "platform": platform.platform(), "numpy": np.__version__,
            "golden_producer": (golden or {}).get("producer")}
    rc = 0
    try:
        torch, transformers = import_stack()
        meta.update({"torch": torch.__version__, "transformers": transformers.__version__,
                     "dtype": args.dtype, "device": args.device})
        log("torch %s, transformers %s, device %s, dtype %s" % (torch.__version__, transformers.__version__,
                                                                args.device, args.dtype))
        if not transformers.__version__.split(".")[0].isdigit() or int(transformers.__version__.split(".")[0]) < 5:
            warn("written against transformers 5.x; this is %s" % transformers.__version__)
        if args.device == "cuda" and not torch.cuda.is_available():
            raise Fatal("--device cuda but torch.cuda.is_available() is False")
        meta["determinism"] = setup_determinism(torch, torch.device(args.device), args.threads)
        runner = Runner(args, torch, transformers, fixture, cfg)
        runner.meta = meta
        runner.load()
        results, errors = runner.run(prompts, golden, out)
        meta["prompts"] = results
        meta["kernel_modules_loaded_at_end"] = kernel_modules_loaded()
        if meta["kernel_modules_loaded_at_end"]:
            warn("linear-attention kernel packages were imported during the run: %s"
                 % meta["kernel_modules_loaded_at_end"])
        if runner.image_processor_name or runner.image_processor_errors:
            meta["image_processor"] = {"class": runner.image_processor_name, "errors": runner.image_processor_errors}
        if errors:
            meta["errors"] = errors
            rc = 3
    except Fatal as e:
        meta["fatal"] = str(e)
        write_json(os.path.join(out, "meta.json"), meta)
        print("%s FATAL: %s" % (TAG, e), file=sys.stderr, flush=True)
        return 2
    meta["elapsed_seconds"] = round(time.time() - t_start, 3)
    write_json(os.path.join(out, "meta.json"), meta)
    log("wrote %s (%d prompts, %d errors)" % (out, len(meta.get("prompts", {})), len(meta.get("errors", {}))))

    if args.check:
        dv = os.path.join(out, "gate_decode_variant")
        os.makedirs(dv, exist_ok=True)
        for p in prompts:
            nm = p["name"]
            for src, dst in ((nm + ".logits_decode.f32", nm + ".logits.f32"), (nm + ".greedy.json",) * 2,
                             (nm + ".image_embd.f32",) * 2):
                if os.path.exists(os.path.join(out, src)):
                    link_or_copy(os.path.join(out, src), os.path.join(dv, dst))
        g1 = run_gate(fixture, out, "one-pass teacher-forced logits (NAME.logits.f32)")
        g2 = run_gate(fixture, dv, "prefill + cached decode logits (NAME.logits_decode.f32)")
        meta["gate"] = {"onepass_exit": g1, "decode_variant_exit": g2}
        write_json(os.path.join(out, "meta.json"), meta)
        if (g1 or g2) and rc == 0:
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
