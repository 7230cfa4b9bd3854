#!/usr/bin/env python3
"""qhx bench tokenizer against the Hugging Face `tokenizers` library on the same inputs.

    python bench/tokenizer_vs_hf.py --qhx build/bin/qhx \\
        --tokenizer tests/data/fixtures/tokenizer/qwen3_5/tokenizer.json [--runs 5] [--work DIR]

Run with a Python that has `tokenizers` (scripts/hf_env.sh). The inputs are written to --work
(default: a temporary folder): "mixed" is the English licences of /usr/share/common-licenses
and the C headers the qhx bench reads, then the texts of the tokenizer's golden.jsonl beside it
(Qwen3.5's: Indic, Thai, Arabic, Cyrillic, CJK, marks, added tokens) repeated to a fifth of the
size, about 10 MB in all; "multilingual" is those golden texts alone, repeated to 2 MB. Both
tools encode 64 KiB chunks (cut at character boundaries) on one thread, twice (the second pass
with warm caches); the ids of both are compared chunk by chunk on the first pass. Load: the
tokenizer.json, min of --runs. Times are wall clock and process CPU time.
"""
import argparse
import json
import os
import subprocess
import tempfile
import time

ENGLISH = ["GPL-3", "Apache-2.0", "LGPL-2.1", "GPL-2", "MPL-2.0", "Artistic"]
HEADERS = ["stdio.h", "stdlib.h", "string.h", "unistd.h", "jansson.h", "pcre2.h", "utf8proc.h", "math.h",
           "pthread.h", "signal.h", "fcntl.h", "time.h"]


def read(paths):
    out = []
    for p in paths:
        try:
            with open(p, encoding="utf-8", errors="replace") as f:
                out.append(f.read())
        except OSError:
            pass
    return "".join(out)


def fill(text, size):
    b = []
    n = 0
    while n < size:
        b.append(text)
        n += len(text.encode())
    return "".join(b)


def inputs(golden, work):
    with open(golden, encoding="utf-8") as f:
        multi = "\n".join(json.loads(l)["text"] for l in f) + "\n"
    eng = read("/usr/share/common-licenses/" + n for n in ENGLISH)
    code = read("/usr/include/" + n for n in HEADERS)
    mixed = fill(eng, 4_500_000) + fill(code, 3_500_000) + fill(multi, 2_000_000)
    paths = {}
    for name, text in (("mixed", mixed), ("multilingual", fill(multi, 2_000_000))):
        p = os.path.join(work, name + ".txt")
        with open(p, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        paths[name] = p
    return paths


def chunks(text, size=65536):
    data = text.encode()
    i = 0
    while i < len(data):
        j = min(len(data), i + size)
        while j < len(data) and (data[j] & 0xC0) == 0x80:
            j -= 1
        yield data[i:j].decode()
        i = j


def hf_bench(tokenizer, path, runs):
    from tokenizers import Tokenizer
    loads = []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        tok = Tokenizer.from_file(tokenizer)
        loads.append((time.perf_counter() - t0, time.process_time() - c0))
    with open(path, encoding="utf-8", newline="") as f:
        text = f.read()
    parts = list(chunks(text))
    passes, ids = [], []
    for p in range(2):
        t0, c0 = time.perf_counter(), time.process_time()
        got = [tok.encode(c, add_special_tokens=False).ids for c in parts]
        passes.append((time.perf_counter() - t0, time.process_time() - c0, sum(len(g) for g in got)))
        if p == 0:
            ids = got
    return min(loads), passes, len(text.encode()), parts, ids


def qhx_ids(qhx, tokenizer, parts, work):
    """qhx's ids of each chunk (qhx tokenize --jsonl: one line of ids per input line would split
    chunks at newlines, so each chunk goes through on its own)."""
    out = []
    for c in parts:
        r = subprocess.run([qhx, "tokenize", "--tokenizer", tokenizer], input=c.encode(), capture_output=True, check=True)
        out.append([int(t) for t in r.stdout.split()])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--qhx", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--work")
    ap.add_argument("--compare-chunks", type=int, default=24, help="chunks whose ids are compared (0: none)")
    a = ap.parse_args()
    import tokenizers
    work = a.work or tempfile.mkdtemp(prefix="qhx_tokbench_")
    os.makedirs(work, exist_ok=True)
    golden = os.path.join(os.path.dirname(os.path.abspath(a.tokenizer)), "golden.jsonl")
    paths = inputs(golden, work)
    print("tokenizers %s; inputs in %s" % (tokenizers.__version__, work))
    for name, path in paths.items():
        r = subprocess.run([a.qhx, "bench", "tokenizer", "--tokenizer", a.tokenizer, "--input", path,
                            "--runs", str(a.runs)], capture_output=True, text=True, check=True)
        print("== %s: qhx bench tokenizer --input %s" % (name, os.path.basename(path)))
        print(r.stdout.strip())
        load, passes, nbytes, parts, ids = hf_bench(a.tokenizer, path, a.runs)
        print("tokenizers: load tokenizer.json min %.1f ms (CPU %.1f ms), %d runs" % (load[0] * 1e3, load[1] * 1e3, a.runs))
        for k, (w, c, n) in enumerate(passes):
            print("tokenizers: encode (%s pass): %.2f MB in %.3f s = %.2f MB/s (CPU %.3f s = %.2f MB/s), %d tokens"
                  % ("first" if k == 0 else "second", nbytes / 1e6, w, nbytes / 1e6 / w, c, nbytes / 1e6 / c, n))
        if a.compare_chunks:
            step = max(1, len(parts) // a.compare_chunks)
            pick = list(range(0, len(parts), step))[:a.compare_chunks]
            got = qhx_ids(a.qhx, a.tokenizer, [parts[i] for i in pick], work)
            same = sum(1 for g, i in zip(got, pick) if g == ids[i])
            print("ids: %d of %d sampled chunks identical" % (same, len(pick)))


if __name__ == "__main__":
    main()
