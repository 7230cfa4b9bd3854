#!/usr/bin/env python3
"""Seeds of fuzz_gguf_model: a GGUF file's metadata (every key, the tokenizer's included) with
only its token_embd.weight tensor, so a seed is small and still makes a config and a tokenizer.
Standard library only.

    make_gguf_model_corpus.py IN.gguf OUT
"""
import struct
import sys

SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def skip_value(b, at, t):
    if t in SIZES:
        return at + SIZES[t]
    if t == 8:
        return at + 8 + struct.unpack_from("<Q", b, at)[0]
    et, n = struct.unpack_from("<IQ", b, at)
    at += 12
    for _ in range(n):
        at = skip_value(b, at, et)
    return at


def main():
    b = open(sys.argv[1], "rb").read()
    _, version, n_tensors, n_kv = struct.unpack_from("<4sIQQ", b, 0)
    at = 24
    for _ in range(n_kv):
        (klen,) = struct.unpack_from("<Q", b, at)
        (t,) = struct.unpack_from("<I", b, at + 8 + klen)
        at = skip_value(b, at + 12 + klen, t)
    kvs_end, keep, infos = at, None, []
    for _ in range(n_tensors):
        start = at
        (nlen,) = struct.unpack_from("<Q", b, at)
        name = b[at + 8:at + 8 + nlen]
        at += 8 + nlen
        (nd,) = struct.unpack_from("<I", b, at)
        dims = struct.unpack_from("<%dQ" % nd, b, at + 4)
        typ, off = struct.unpack_from("<IQ", b, at + 4 + 8 * nd)
        at += 4 + 8 * nd + 12
        if name == b"token_embd.weight":
            keep = (b[start:at - 8], dims, typ, off)
    data_start = (at + 31) // 32 * 32
    info, dims, typ, off = keep
    # the tensor's bytes: up to the next tensor's offset or the end (its row bytes by type)
    block = {0: (1, 4), 1: (1, 2), 8: (32, 34), 2: (32, 18), 14: (256, 210), 12: (256, 144)}[typ]
    n = 1
    for d in dims:
        n *= d
    nbytes = n // block[0] * block[1]
    head = struct.pack("<4sIQQ", b"GGUF", version, 1, n_kv) + b[24:kvs_end] + info + struct.pack("<Q", 0)
    head += b"\0" * ((-len(head)) % 32)
    open(sys.argv[2], "wb").write(head + b[data_start + off:data_start + off + nbytes])


if __name__ == "__main__":
    main()
