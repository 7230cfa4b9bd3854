#!/usr/bin/env python3
"""Tensor payload bytes of weight files (safetensors or GGUF), headers and metadata left out.

    python3 bench/data_bytes.py FILE...      -> one number: the sum over the files

safetensors: the file size less the 8-byte length and the JSON header. GGUF (version 2 or 3):
the file size less everything before the aligned start of the tensor data (header, key-value
metadata, tensor infos, padding). Reads only the headers."""
import json
import os
import struct
import sys

GGUF_SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # type -> bytes
GGUF_STRING, GGUF_ARRAY = 8, 9


def _gguf_skip_value(f, t):
    if t in GGUF_SCALAR:
        f.seek(GGUF_SCALAR[t], 1)
    elif t == GGUF_STRING:
        (n,) = struct.unpack("<Q", f.read(8))
        f.seek(n, 1)
    elif t == GGUF_ARRAY:
        et, n = struct.unpack("<IQ", f.read(12))
        for _ in range(n):
            _gguf_skip_value(f, et)
    else:
        raise ValueError("GGUF: unknown value type %d" % t)


def _gguf_read_str(f):
    (n,) = struct.unpack("<Q", f.read(8))
    return f.read(n).decode("utf-8", "replace")


def gguf_data_bytes(path):
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise ValueError("%s: not a GGUF file" % path)
        version, n_tensors, n_kv = struct.unpack("<IQQ", f.read(20))
        if version not in (2, 3):
            raise ValueError("%s: GGUF version %d" % (path, version))
        align = 32
        for _ in range(n_kv):
            key = _gguf_read_str(f)
            (t,) = struct.unpack("<I", f.read(4))
            if key == "general.alignment" and t == 4:
                (align,) = struct.unpack("<I", f.read(4))
            else:
                _gguf_skip_value(f, t)
        for _ in range(n_tensors):
            _gguf_read_str(f)
            (nd,) = struct.unpack("<I", f.read(4))
            f.seek(8 * nd + 4 + 8, 1)
        start = (f.tell() + align - 1) // align * align
    return os.path.getsize(path) - start


def safetensors_data_bytes(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        json.loads(f.read(n))  # a header that does not parse is an error, not a size
    return os.path.getsize(path) - 8 - n


def main():
    total = 0
    for p in sys.argv[1:]:
        total += gguf_data_bytes(p) if p.endswith(".gguf") else safetensors_data_bytes(p)
    print(total)


if __name__ == "__main__":
    main()
