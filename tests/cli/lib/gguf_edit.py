#!/usr/bin/env python3
"""Set a string key of a GGUF file (added at the end of the metadata, or replaced), keeping
every tensor's bytes: the tensor descriptions follow the metadata and the data section is padded
to the alignment again (tensor offsets are relative to it). Standard library only.

    gguf_edit.py IN OUT KEY VALUE_FILE     # VALUE_FILE's text (UTF-8) becomes the value
"""
import struct
import sys

SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def skip_value(b, at, t):
    if t in SIZES:
        return at + SIZES[t]
    if t == 8:
        (n,) = struct.unpack_from("<Q", b, at)
        return at + 8 + n
    if t == 9:
        et, n = struct.unpack_from("<IQ", b, at)
        at += 12
        for _ in range(n):
            at = skip_value(b, at, et)
        return at
    raise ValueError("value type %d" % t)


def main():
    src, out, key, vfile = sys.argv[1:5]
    b = open(src, "rb").read()
    value = open(vfile, "rb").read()
    magic, version, n_tensors, n_kv = struct.unpack_from("<4sIQQ", b, 0)
    assert magic == b"GGUF" and version in (2, 3)
    at, kvs, alignment = 24, [], 32
    for _ in range(n_kv):
        start = at
        (klen,) = struct.unpack_from("<Q", b, at)
        name = b[at + 8:at + 8 + klen].decode()
        (t,) = struct.unpack_from("<I", b, at + 8 + klen)
        at = skip_value(b, at + 12 + klen, t)
        if name == "general.alignment":
            (alignment,) = struct.unpack_from("<I", b, start + 12 + klen)
        if name != key:
            kvs.append(b[start:at])
    infos_start = at
    for _ in range(n_tensors):
        (nlen,) = struct.unpack_from("<Q", b, at)
        at += 8 + nlen
        (nd,) = struct.unpack_from("<I", b, at)
        at += 4 + 8 * nd + 4 + 8
    infos = b[infos_start:at]
    data_start = (at + alignment - 1) // alignment * alignment
    kb = key.encode()
    kvs.append(struct.pack("<Q", len(kb)) + kb + struct.pack("<IQ", 8, len(value)) + value)
    head = struct.pack("<4sIQQ", b"GGUF", version, n_tensors, len(kvs)) + b"".join(kvs) + infos
    head += b"\0" * ((-len(head)) % alignment)
    open(out, "wb").write(head + b[data_start:])


if __name__ == "__main__":
    main()
