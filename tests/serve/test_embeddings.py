"""The embeddings endpoints through the openai and ollama clients, checked against the model's
own logits: an embedding without normalisation is the final norm's row the lm-head reads, so
(tied head) embed_tokens @ embedding must give `qhx logits`' row for the same ids; the mean
pooling's must give the mean of the rows (the head is linear).
Usage: test_embeddings.py QHX DATA_DIR"""
import array
import json
import math
import struct
import subprocess
import sys
import tempfile

import ollama
import openai

from common import Checks, Server, post

QHX, DATA = sys.argv[1], sys.argv[2]
c = Checks()
TEXTS = ["The quick brown fox jumps over the lazy dog.", "hello", "Embeddings of a second, longer text: 1 2 3."]


def embed_matrix(model):
    """embed_tokens (V, H) of a tied checkpoint as a list of rows, read from its safetensors."""
    with open(model + "/model.safetensors", "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        t = head["model.language_model.embed_tokens.weight"]
        assert t["dtype"] == "F32", t["dtype"]
        a, b = t["data_offsets"]
        f.seek(8 + n + a)
        flat = array.array("f")
        flat.frombytes(f.read(b - a))
    V, H = t["shape"]
    return [flat[i * H:(i + 1) * H] for i in range(V)]


def logits_rows(model, ids):
    """qhx logits for ids (all prefilled at once): one row per position."""
    with tempfile.NamedTemporaryFile(suffix=".f32") as out:
        r = subprocess.run([QHX, "logits", "-m", model, "--ids", ",".join(map(str, ids)), "--out", out.name],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        flat = array.array("f")
        flat.frombytes(open(out.name, "rb").read())
    V = len(flat) // len(ids)
    return [flat[i * V:(i + 1) * V] for i in range(len(ids))]


def head_of(W, e):
    return [sum(w * x for w, x in zip(row, e)) for row in W]


def close(a, b, tol):
    scale = max(1.0, max(abs(x) for x in b))
    return max(abs(x - y) for x, y in zip(a, b)) <= tol * scale


def unit(v):
    n = math.sqrt(sum(x * x for x in v))
    return [x / n for x in v]


def tokenize(url, text):
    status, body = post(url + "/tokenize", {"content": text})
    assert status == 200, body
    return body["tokens"]


def check_model(model):
    name = model.rsplit("/", 1)[1]
    W = embed_matrix(model)
    H = len(W[0])
    srv = Server(QHX, model, "--parallel", "2")
    try:
        cl = openai.OpenAI(base_url=srv.url + "/v1", api_key="none")
        before = cl.completions.create(model="m", prompt="Once upon", max_tokens=8, temperature=0).choices[0].text
        ids = tokenize(srv.url, TEXTS[0])
        raw = cl.embeddings.create(model="m", input=TEXTS[0], encoding_format="float",
                                   extra_body={"embd_normalize": -1})
        e = raw.data[0].embedding
        c.check(len(e) == H, "%s: %d values, the hidden size is %d" % (name, len(e), H))
        c.check(raw.usage.prompt_tokens == len(ids), "%s: usage %d, %d ids" % (name, raw.usage.prompt_tokens, len(ids)))
        rows = logits_rows(model, ids)
        c.check(close(head_of(W, e), rows[-1], 1e-4), "%s: head(last-token embedding) != the last logits row" % name)
        # the openai client's default: base64 float32, Euclidean-normalised
        d = cl.embeddings.create(model="m", input=TEXTS[0]).data[0].embedding
        c.check(abs(math.sqrt(sum(x * x for x in d)) - 1) < 1e-5, "%s: the default embedding is not unit length" % name)
        c.check(close(d, unit(e), 1e-6), "%s: the default embedding is not the raw one normalised" % name)
        # several inputs: each the same as alone (a fresh state per input), in order
        many = cl.embeddings.create(model="m", input=TEXTS, encoding_format="float").data
        c.check([x.index for x in many] == [0, 1, 2], "%s: indices %s" % (name, [x.index for x in many]))
        for i, t in enumerate(TEXTS):
            alone = cl.embeddings.create(model="m", input=t, encoding_format="float").data[0].embedding
            c.check(close(many[i].embedding, alone, 1e-6), "%s: input %d differs in a batch" % (name, i))
        by_ids = cl.embeddings.create(model="m", input=ids, encoding_format="float").data[0].embedding
        c.check(close(by_ids, d, 1e-6), "%s: token ids and their text embed differently" % name)
        # ollama's clients on the same server
        ol = ollama.Client(host=srv.url)
        oe = ol.embed(model="m", input=[TEXTS[0], TEXTS[1]])
        c.check(len(oe.embeddings) == 2 and close(oe.embeddings[0], d, 1e-6), "%s: ollama embed differs" % name)
        old = ol.embeddings(model="m", prompt=TEXTS[0])
        c.check(close(old.embedding, e, 1e-6), "%s: ollama's /api/embeddings is not the raw embedding" % name)
        # llama-server's /embedding
        status, body = post(srv.url + "/embedding", {"content": TEXTS[0], "embd_normalize": -1})
        c.check(status == 200 and close(body[0]["embedding"][0], e, 1e-6), "%s: /embedding %s" % (name, status))
        # bad requests: one 400 each, the server goes on
        for bad, why in [({"input": ""}, "empty"), ({"input": [[]]}, "empty"), ({"input": [0, 1, 10 ** 9]}, "token id"),
                         ({"input": "a", "dimensions": H + 1}, "dimensions"), ({"input": {"a": 1}}, "must be"),
                         ({"input": "a", "encoding_format": "int8"}, "encoding_format"), ({}, "required"),
                         ({"input": "a", "embd_normalize": 1.5}, "embd_normalize"), ({"input": [None]}, "not a string")]:
            status, body = post(srv.url + "/v1/embeddings", bad)
            msg = body["error"]["message"] if isinstance(body, dict) else str(body)
            c.check(status == 400 and why in msg, "%s: %s gave %s %s" % (name, bad, status, msg))
        after = cl.completions.create(model="m", prompt="Once upon", max_tokens=8, temperature=0).choices[0].text
        c.check(after == before, "%s: a completion after the embeddings differs: %r %r" % (name, before, after))
    finally:
        srv.stop()
    # mean and first-token pooling
    for pooling, want in [("mean", [sum(col) / len(rows) for col in zip(*rows)]), ("cls", rows[0])]:
        srv = Server(QHX, model, "--pooling", pooling)
        try:
            status, body = post(srv.url + "/v1/embeddings", {"input": TEXTS[0], "embd_normalize": -1})
            c.check(status == 200 and close(head_of(W, body["data"][0]["embedding"]), want, 1e-4),
                    "%s: --pooling %s does not give the %s of the logits rows" % (name, pooling, pooling))
        finally:
            srv.stop()
    # inputs past the context: OpenAI's refused, ollama's cut (its "truncate" default) unless told not to
    srv = Server(QHX, model, "--ctx", "16", "--parallel", "1")
    try:
        # the one slot holds a completion's tokens: an embedding still gets it (and gives it up)
        cl = openai.OpenAI(base_url=srv.url + "/v1", api_key="none", timeout=30, max_retries=0)
        cl.completions.create(model="m", prompt="Once upon", max_tokens=6, temperature=0)
        status, body = post(srv.url + "/v1/embeddings", {"input": "hello"}, timeout=30)
        c.check(status == 200, "%s: an embedding on a slot that holds a completion: %s %s" % (name, status, body))
        long_text = " ".join(["word"] * 40)
        status, body = post(srv.url + "/v1/embeddings", {"input": long_text})
        c.check(status == 400 and "context" in body["error"]["message"], "%s: a long input gave %s" % (name, status))
        status, body = post(srv.url + "/api/embed", {"input": long_text, "truncate": False})
        c.check(status == 400 and "context" in body["error"], "%s: truncate false gave %s" % (name, status))
        status, body = post(srv.url + "/api/embed", {"input": long_text})
        first16 = tokenize(srv.url, long_text)[:16]
        status2, body2 = post(srv.url + "/v1/embeddings", {"input": first16})
        c.check(status == 200 and status2 == 200 and body["prompt_eval_count"] == 16 and
                close(body["embeddings"][0], body2["data"][0]["embedding"], 1e-6),
                "%s: ollama's truncated input is not its first 16 tokens' embedding" % name)
    finally:
        srv.stop()


for fixture in ["qwen35-tiny-f32", "qwen3vl-tiny-f32"]:
    check_model(DATA + "/fixtures/parity/" + fixture)
c.done()
