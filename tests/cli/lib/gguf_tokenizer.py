"""Write a GGUF file holding the tokenizer of a tokenizer.json as llama.cpp's converter writes it
(tokenizer.ggml.model "gpt2", the pre-tokenizer's name, every id's string with its type: normal,
control for special added tokens, user-defined for the others, unused for padding ids past the
tokenizer as a config's vocab_size leaves them; the merges as "left right"), then check that
`qhx tokenize --tokenizer FILE.gguf --jsonl` gives the golden ids of every text in golden.jsonl.
Usage: gguf_tokenizer.py QHX TOKENIZER_DIR PRE WORK_DIR [--model NAME] [--write-only]
(--write-only: write the file and print its path, for the tests of refused tokenizers)
"""
import argparse
import json
import os
import subprocess
import sys

import gguf


def write(src, pre, out, model="gpt2"):
    j = json.load(open(src, encoding="utf-8"))
    vocab = dict(j["model"]["vocab"])
    added = {t["id"]: t for t in j["added_tokens"]}
    n = max(max(vocab.values()), max(added)) + 1 + 7
    rev = {i: t for t, i in vocab.items()}
    tokens, types = [], []
    for i in range(n):
        if i in added:
            tokens.append(added[i]["content"])
            types.append(gguf.TokenType.CONTROL if added[i]["special"] else gguf.TokenType.USER_DEFINED)
        elif i in rev:
            tokens.append(rev[i])
            types.append(gguf.TokenType.NORMAL)
        else:
            tokens.append("[PAD%d]" % i)
            types.append(gguf.TokenType.UNUSED)
    merges = [m if isinstance(m, str) else " ".join(m) for m in j["model"]["merges"]]
    w = gguf.GGUFWriter(out, arch="qwen35")
    w.add_tokenizer_model(model)
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser()
    for a in ("qhx", "tokdir", "pre", "work"):
        ap.add_argument(a)
    ap.add_argument("--model", default="gpt2")
    ap.add_argument("--write-only", action="store_true")
    a = ap.parse_args()
    qhx, tokdir, pre = a.qhx, a.tokdir, a.pre
    out = os.path.join(a.work, "tok-%s-%s-%s.gguf" % (os.path.basename(tokdir), a.model, pre))
    write(os.path.join(tokdir, "tokenizer.json"), pre, out, a.model)
    if a.write_only:
        print(out)
        return 0
    golden = [json.loads(l) for l in open(os.path.join(tokdir, "golden.jsonl"), encoding="utf-8")]
    feed = "".join(json.dumps({"text": g["text"]}) + "\n" for g in golden)
    r = subprocess.run([qhx, "tokenize", "--tokenizer", out, "--jsonl"], input=feed.encode(), capture_output=True,
                       timeout=300)
    if r.returncode:
        print("FAIL: %s: qhx tokenize exit %d: %s" % (out, r.returncode, r.stderr.decode(errors="replace")))
        return 1
    got = [json.loads(l)["ids"] for l in r.stdout.decode().splitlines()]
    bad = [g["name"] for g, ids in zip(golden, got) if ids != g["ids"]]
    if len(got) != len(golden) or bad:
        print("FAIL: %s: %d of %d texts differ from the golden ids: %s" % (tokdir, len(bad) + abs(len(got) - len(golden)),
                                                                       len(golden), bad[:5]))
        return 1
    print("ok: %s from GGUF (pre %s): the golden ids of all %d texts" % (os.path.basename(tokdir), pre, len(golden)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
