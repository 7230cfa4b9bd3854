#!/usr/bin/env python3
"""Write MANIFEST.tsv for the GGUF files of this folder: size, sha256, tensor count and the
tensor types each file really holds (llama-quantize falls back from a requested type for
tensors whose rows it cannot block, so the name of a file is not its content).

    manifest.py DIR > DIR/MANIFEST.tsv        # needs the `gguf` Python package (gguf-py)
"""
import hashlib
import os
import sys
from collections import Counter

from gguf import GGUFReader


def main():
    d = sys.argv[1]
    print("file\tbytes\tsha256\ttensors\ttypes (count per type)\tgeneral.file_type")
    for fn in sorted(f for f in os.listdir(d) if f.endswith(".gguf")):
        path = os.path.join(d, fn)
        with open(path, "rb") as f:
            sha = hashlib.sha256(f.read()).hexdigest()
        r = GGUFReader(path)
        types = Counter(t.tensor_type.name for t in r.tensors)
        ft = r.fields.get("general.file_type")
        ftv = int(ft.parts[ft.data[0]][0]) if ft is not None else -1
        print("%s\t%d\t%s\t%d\t%s\t%d" % (fn, os.path.getsize(path), sha, len(r.tensors),
                                         " ".join("%s:%d" % kv for kv in sorted(types.items())), ftv))


if __name__ == "__main__":
    main()
