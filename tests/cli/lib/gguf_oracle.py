"""The GGUF reader and the reference dequantization against the `gguf` Python package.

Writes a GGUF file with gguf's own GGUFWriter: metadata of every value type (strings that are not
ASCII, arrays of numbers and of strings, a long string array), and one tensor per weight type
qhexrt reads (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL,
IQ4_XS) filled with random block bytes and with edge-case blocks (zero, negative-zero, subnormal,
largest and non-finite f16 scales; the largest minima). Then:
  - `qhx inspect FILE --json` must list the metadata and the tensors as gguf.GGUFReader reads them;
  - gguf_dump (the reader + kernels/gguf_quant.h) must give, for every tensor, values bit-identical
    to gguf.quants.dequantize (a NaN matches a NaN: its payload is the platform's).
Usage: gguf_oracle.py QHX GGUF_DUMP WORK_DIR [--seed N]
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

TYPES = ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K",
         "IQ4_NL", "IQ4_XS"]

# Byte offsets of each type's f16 scale fields inside a block (docs/formats.md, "GGUF").
SCALE_FIELDS = {
    "Q8_0": [0], "Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q2_K": [80, 82], "Q3_K": [108],
    "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208], "IQ4_NL": [0], "IQ4_XS": [0],
}
# f16 bit patterns: zero, negative zero, smallest and largest subnormal, smallest normal, one,
# the largest finite (positive and negative), infinity, NaN.
SPECIAL_F16 = [0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x3C00, 0x7BFF, 0xFBFF, 0x7C00, 0x7E00]


def blocks_for(name, rng):
    """(rows, row_bytes) uint8 of random blocks plus edge cases, and the raw dtype."""
    qt = T[name]
    block, size = gguf.GGML_QUANT_SIZES[qt]
    per_row = 2 if block > 1 else 64                     # blocks per row
    rows = 48
    data = rng.integers(0, 256, size=(rows, per_row * size), dtype=np.uint8)
    fields = SCALE_FIELDS.get(name, [])
    r = 0
    for f in fields:                                     # one row of blocks per special scale value
        for special in SPECIAL_F16:
            if r >= rows:
                break
            for b in range(per_row):
                data[r, b * size + f:b * size + f + 2] = np.frombuffer(np.uint16(special).tobytes(), np.uint8)
            r += 1
    if name in ("Q2_K", "Q4_K", "Q5_K") and r < rows:    # the largest minima: dmin max, mins 15 / 63
        for b in range(per_row):
            base = b * size
            dmin = 82 if name == "Q2_K" else 2
            data[r, base + dmin:base + dmin + 2] = np.frombuffer(np.uint16(0x7BFF).tobytes(), np.uint8)
            if name == "Q2_K":
                data[r, base:base + 16] = 0xF0               # scale 0, min 15
            else:
                data[r, base + 4:base + 16] = 0xFF           # every 6-bit scale and min 63
        r += 1
    if name in ("F32",):
        data = data.view(np.float32).copy()
        data[0, :4] = [0.0, -0.0, np.inf, np.nan]
        return data, None
    if name == "F16":
        return data.view(np.float16).copy(), None
    return data, qt


def write_file(path, rng):
    w = gguf.GGUFWriter(path, arch="qwen35")
    w.add_uint8("test.u8", 200)
    w.add_int8("test.i8", -100)
    w.add_uint16("test.u16", 65000)
    w.add_int16("test.i16", -32000)
    w.add_uint32("test.u32", 4000000000)
    w.add_int32("test.i32", -2000000000)
    w.add_float32("test.f32", 0.1)
    w.add_uint64("test.u64", 2 ** 63 + 5)
    w.add_int64("test.i64", -(2 ** 62))
    w.add_float64("test.f64", 1e-300)
    w.add_bool("test.bool", True)
    w.add_string("test.string", "h\u00e9llo \u4e16\u754c\n\"quoted\" \\ tab\t")
    w.add_string("test.empty", "")
    w.add_array("test.ints", [1, -2, 3])
    w.add_array("test.floats", [0.5, -1.25])
    w.add_array("test.strings", ["a", "", "\u00fc", "<|im_start|>"])
    w.add_array("test.long", ["tok%d" % i for i in range(1000)])
    w.add_array("test.empty_array", [])
    expected = {}
    for name in TYPES:
        data, raw = blocks_for(name, rng)
        tname = "blk.0.%s.weight" % name.lower()
        if raw is None:
            w.add_tensor(tname, data)
        else:
            w.add_tensor(tname, data, raw_dtype=raw)
        expected[tname] = name
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return expected


def same_bits(a, b):
    """Equal bit for bit, a NaN matching any NaN."""
    a = np.ascontiguousarray(a, dtype=np.float32).ravel()
    b = np.ascontiguousarray(b, dtype=np.float32).ravel()
    if a.shape != b.shape:
        return False, "shapes %s and %s" % (a.shape, b.shape)
    nan = np.isnan(a) & np.isnan(b)
    diff = (a.view(np.uint32) != b.view(np.uint32)) & ~nan
    if diff.any():
        i = int(np.argmax(diff))
        return False, "%d values differ, first at %d: %r (0x%08x) vs %r (0x%08x)" % (
            int(diff.sum()), i, float(a[i]), int(a.view(np.uint32)[i]), float(b[i]), int(b.view(np.uint32)[i]))
    return True, "%d values" % a.size


def reader_value(field):
    """A field's value as qhx inspect --json prints it (long arrays: their head)."""
    vtype = field.types[0]
    if vtype == gguf.GGUFValueType.ARRAY:
        n = len(field.data)
        vals = [field.contents(i) for i in range(min(n, 8 if n > 64 else n))]
        if n > 64:
            return {"array_of": field.types[1].name.lower(), "length": n, "head": vals}
        return vals
    return field.contents()


def values_match(ours, theirs):
    if isinstance(theirs, int) and theirs >= 2 ** 63:
        return ours == str(theirs)                       # JSON's integers stop at int64 here
    if isinstance(theirs, float) and not isinstance(theirs, bool):
        return isinstance(ours, (int, float)) and np.float64(ours) == np.float64(theirs)
    if isinstance(theirs, dict):
        return isinstance(ours, dict) and ours.keys() == theirs.keys() and all(
            values_match(ours[k], theirs[k]) for k in theirs)
    if isinstance(theirs, list):
        return isinstance(ours, list) and len(ours) == len(theirs) and all(
            values_match(a, b) for a, b in zip(ours, theirs))
    return ours == theirs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("qhx")
    ap.add_argument("dump")
    ap.add_argument("work")
    ap.add_argument("--seed", type=int, default=2026)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    path = os.path.join(a.work, "types.gguf")
    expected = write_file(path, rng)
    failed = 0

    def check(ok, what):
        nonlocal failed
        print(("ok: " if ok else "FAIL: ") + what)
        failed += not ok

    reader = gguf.GGUFReader(path)
    r = subprocess.run([a.qhx, "inspect", path, "--json"], capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, "qhx inspect --json exit %d %s" % (r.returncode, r.stderr.strip()))
    doc = json.loads(r.stdout) if r.returncode == 0 else {"metadata": {}, "tensors": []}
    meta = doc["metadata"]
    for key, field in reader.fields.items():
        if key.startswith("GGUF."):
            continue
        want = reader_value(field)
        check(key in meta and values_match(meta[key], want),
              "metadata %s: %s" % (key, json.dumps(meta.get(key))[:80]))
    check(len(meta) == len([k for k in reader.fields if not k.startswith("GGUF.")]), "metadata key count")
    rows = {t["name"]: t for t in doc["tensors"]}
    for t in reader.tensors:
        ours = rows.get(t.name)
        ok = ours is not None and ours["type"] == t.tensor_type.name and ours["ne"] == [int(x) for x in t.shape] \
            and ours["bytes"] == int(t.n_bytes) and ours["offset"] == int(t.data_offset) \
            and ours["elements"] == int(t.n_elements)
        check(ok, "tensor %s: %s" % (t.name, json.dumps(ours)))

    out = os.path.join(a.work, "dump")
    os.makedirs(out, exist_ok=True)
    r = subprocess.run([a.dump, path, out], capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, "gguf_dump exit %d %s" % (r.returncode, r.stderr.strip()))
    listed = {}
    for line in r.stdout.splitlines():
        idx, name, tname = line.split()[:3]
        listed[name] = (int(idx), tname, line.endswith("skipped"))
    for t in reader.tensors:
        idx, tname, skipped = listed.get(t.name, (None, None, True))
        check(not skipped and tname == expected[t.name], "%s dequantized as %s" % (t.name, tname))
        if skipped:
            continue
        ours = np.fromfile(os.path.join(out, "%d.f32" % idx), dtype="<f4")
        theirs = gguf.quants.dequantize(t.data, t.tensor_type)
        ok, why = same_bits(ours, theirs)
        check(ok, "%s bit-identical to gguf.quants.dequantize: %s" % (expected[t.name], why))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
