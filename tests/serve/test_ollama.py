"""qhx serve driven by ollama's official Python client (installed by tests/cli/serve_ollama.sh).
Usage: test_ollama.py QHX DATA_DIR
Greedy answers are compared with qhx generate on the same prompt (the built-in chat format);
the stream's pieces join to the unstreamed answer; format answers parse (and follow the schema);
the model-information endpoints answer in the client's types."""
import base64
import json
import sys
import urllib.request

import ollama

from common import Checks, Server, qhx_generate

QHX, DATA = sys.argv[1], sys.argv[2]
Q35 = DATA + "/fixtures/parity/qwen35-tiny-f32"
VL = DATA + "/fixtures/parity/qwen3vl-tiny-f32"
c = Checks()


def gen(model, prompt, n, *extra):
    """qhx generate's greedy answer to one user message (n tokens at most; it may stop sooner)."""
    return json.loads(qhx_generate(QHX, model, "--json", "--chat", "-p", prompt, "-n", str(n), "--greedy", *extra))["text"]


srv = Server(QHX, Q35, "-np", "2", "-c", "1024")
cl = ollama.Client(host=srv.url, timeout=60)
GREEDY = {"temperature": 0, "num_predict": 16}

# ---- model information
tags = cl.list()
names = [m.model for m in tags.models]
c.check(names == ["qwen35-tiny-f32"], "list: %s" % tags)
c.check(tags.models[0].details.family == "qwen3_5", "list: details: %s" % tags.models[0].details)
show = cl.show("qwen35-tiny-f32")
c.check("completion" in (show.capabilities or []) and "thinking" in (show.capabilities or []), "show: %s" % show)
ps = cl.ps()
c.check([m.model for m in ps.models] == ["qwen35-tiny-f32"], "ps: %s" % ps)
ver = json.loads(urllib.request.urlopen(srv.url + "/api/version", timeout=10).read())
c.check(isinstance(ver.get("version"), str) and ver["version"].count(".") == 2, "version: %s" % ver)

# ---- chat against qhx generate, unstreamed and streamed
prompts = ["Hello", "What is the capital of France?", "Tell me a story about a dragon"]
for p in prompts:
    want = gen(Q35, p, 16, "--no-think")
    r = cl.chat(model="qwen35-tiny-f32", messages=[{"role": "user", "content": p}], options=GREEDY, stream=False,
                keep_alive="5m")
    c.check(r.message.content == want and r.message.role == "assistant" and r.done,
            "chat %r: %r != generate's %r" % (p, r.message.content, want))
    c.check((r.done_reason == "length" and r.eval_count == 16) or (r.done_reason == "stop" and r.eval_count <= 16),
            "chat %r: the reason and the count: %s" % (p, r))
    c.check(r.prompt_eval_count > 0 and r.total_duration >= r.eval_duration > 0, "chat %r: durations %s" % (p, r))
    parts, last = [], None
    for ch in cl.chat(model="qwen35-tiny-f32", messages=[{"role": "user", "content": p}], options=GREEDY, stream=True):
        parts.append(ch.message.content)
        last = ch
    c.check("".join(parts) == want, "chat streamed %r: %r != %r" % (p, "".join(parts), want))
    c.check(last is not None and last.done and last.eval_count == r.eval_count
            and last.prompt_eval_count == r.prompt_eval_count and last.total_duration > 0,
            "the stream's last object has the counts: %s vs %s" % (last, r))

# ---- generate: the prompt in the chat format (as ollama), and raw
want = gen(Q35, "Hello", 16, "--no-think")
g = cl.generate(model="x", prompt="Hello", options=GREEDY)
c.check(g.response == want and g.done, "generate %r != %r" % (g.response, want))
gs = "".join(ch.response for ch in cl.generate(model="x", prompt="Hello", options=GREEDY, stream=True))
c.check(gs == want, "generate streamed %r != %r" % (gs, want))
raw_want = json.loads(qhx_generate(QHX, Q35, "--json", "-p", "The capital of France is", "-n", "10", "--greedy"))["text"]
g = cl.generate(model="x", prompt="The capital of France is", raw=True, options={"temperature": 0, "num_predict": 10})
c.check(g.response == raw_want, "generate raw %r != %r" % (g.response, raw_want))
sysw = json.loads(qhx_generate(QHX, Q35, "--json", "--chat", "--system", "Be brief.", "-p", "Hello", "-n", "16",
                               "--greedy", "--no-think"))["text"]
g = cl.generate(model="x", prompt="Hello", system="Be brief.", options=GREEDY)
c.check(g.response == sysw, "generate with a system prompt %r != %r" % (g.response, sysw))
g = cl.generate(model="x", prompt="")
c.check(g.done and g.done_reason == "load" and g.response == "", "generate without a prompt: loaded: %s" % g)

# ---- options: seed, stop, num_predict; sampled answers reproducible per seed
samp = {"temperature": 1.2, "top_k": 50, "top_p": 0.9, "min_p": 0.0, "seed": 7, "num_predict": 12}
a = cl.chat(model="x", messages=[{"role": "user", "content": "Hi"}], options=samp).message.content
b = cl.chat(model="x", messages=[{"role": "user", "content": "Hi"}], options=samp).message.content
d = cl.chat(model="x", messages=[{"role": "user", "content": "Hi"}], options={**samp, "seed": 8}).message.content
c.check(a == b and a != d, "seed: equal for one seed, another for another: %r %r %r" % (a, b, d))
full = cl.chat(model="x", messages=[{"role": "user", "content": "Hello"}], options=GREEDY).message.content
word = full[len(full) // 2:len(full) // 2 + 2]
if word.strip():
    cut = cl.chat(model="x", messages=[{"role": "user", "content": "Hello"}], options={**GREEDY, "stop": [word]})
    c.check(full.startswith(cut.message.content) and word not in cut.message.content and cut.done_reason == "stop",
            "stop %r: %r of %r" % (word, cut.message.content, full))
r = cl.chat(model="x", messages=[{"role": "user", "content": "Hello"}], options={"temperature": 0, "num_predict": 3,
                                                                                    "num_ctx": 1024, "num_gpu": 99})
c.check(r.eval_count == 3 and r.done_reason == "length", "num_predict 3 (num_ctx, num_gpu taken): %s" % r)
try:
    cl.chat(model="x", messages=[{"role": "user", "content": "Hello"}], options={"num_ctx": 99999})
    c.check(False, "num_ctx beyond the slot refused")
except ollama.ResponseError as e:
    c.check(e.status_code == 400 and "num_ctx" in str(e), "num_ctx beyond the slot: %s" % e)

# ---- format: "json" and a schema (the answer parses; cut by num_predict: done_reason length)
# (a random-weight model may ramble in a string until num_predict: an answer that stops is
# whole JSON, one cut is said to be cut)
for seed in range(3):
    r = cl.chat(model="x", messages=[{"role": "user", "content": "Give me JSON"}], format="json",
                options={"temperature": 1, "seed": seed, "num_predict": 60})
    try:
        ok = isinstance(json.loads(r.message.content), dict)
    except ValueError:
        ok = False
    c.check(r.message.content.startswith("{") and (ok if r.done_reason == "stop" else r.eval_count == 60 and
                                                      r.done_reason == "length"),
            "format json: %r (%s)" % (r.message.content, r.done_reason))
schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8}, "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}
r = cl.chat(model="x", messages=[{"role": "user", "content": "A person"}], format=schema,
            options={"temperature": 0.8, "seed": 3, "num_predict": 200})
try:
    v = json.loads(r.message.content)
    ok = set(v) == {"name", "age"} and isinstance(v["name"], str) and isinstance(v["age"], int)
except ValueError:
    ok = False
c.check(ok, "format schema: %r" % r.message.content)
r = cl.chat(model="x", messages=[{"role": "user", "content": "A person"}], format=schema,
            options={"temperature": 0, "num_predict": 3})
c.check(r.done_reason == "length", "format cut by num_predict: done_reason length: %s" % r)

# ---- think: the reasoning apart from the content
r = cl.chat(model="x", messages=[{"role": "user", "content": "Hi"}], think=True, options={"temperature": 0, "num_predict": 12})
want = json.loads(qhx_generate(QHX, Q35, "--json", "--chat", "-p", "Hi", "-n", "12", "--greedy", "--think"))["text"]
c.check((r.message.thinking or "") + (r.message.content or "") != "" and
        want.startswith((r.message.thinking or "")[:8]), "think: %r / %r vs %r" % (r.message.thinking, r.message.content, want))

# ---- tools: offered (the prompt grows by the tool's text), a call round trip in the history
tools = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}}]
plain = cl.chat(model="x", messages=[{"role": "user", "content": "Weather in Paris?"}], options={"temperature": 0, "num_predict": 4})
withtools = cl.chat(model="x", messages=[{"role": "user", "content": "Weather in Paris?"}], tools=tools,
                    options={"temperature": 0, "num_predict": 4})
c.check(withtools.prompt_eval_count > plain.prompt_eval_count + 20, "tools in the prompt: %d vs %d" % (
    withtools.prompt_eval_count, plain.prompt_eval_count))
hist = [{"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "content": "sunny, 21 C", "tool_name": "get_weather"}]
r = cl.chat(model="x", messages=hist, tools=tools, options={"temperature": 0, "num_predict": 6})
c.check(r.done and r.prompt_eval_count > withtools.prompt_eval_count, "a tool round trip: %s" % r)

# ---- errors in ollama's shape
try:
    cl.chat(model="x", messages=[{"role": "wizard", "content": "x"}])
    c.check(False, "an unknown role refused")
except ollama.ResponseError as e:
    c.check(e.status_code == 400 and "role" in e.error, "an unknown role: %s" % e)
req = urllib.request.Request(srv.url + "/api/chat", data=b'{"messages": 5}')
try:
    urllib.request.urlopen(req, timeout=10)
    c.check(False, "a bad body refused")
except urllib.error.HTTPError as e:
    body = json.loads(e.read())
    c.check(e.code == 400 and set(body) == {"error"} and isinstance(body["error"], str), "ollama's error shape: %s" % body)
st = urllib.request.urlopen(urllib.request.Request(srv.url + "/api/chat", data=json.dumps(
    {"messages": [{"role": "user", "content": "Hi"}], "options": {"num_predict": 2}}).encode()), timeout=30)
c.check(st.headers.get("Content-Type") == "application/x-ndjson", "streamed as NDJSON: %s" % st.headers.get("Content-Type"))
lines = st.read().decode().splitlines()
c.check(len(lines) >= 2 and all(json.loads(ln)["done"] is (i == len(lines) - 1) for i, ln in enumerate(lines)),
        "one JSON object per line, done only on the last: %r" % lines)
srv.stop()

# ---- an image (base64 list) on the Qwen3-VL fixture, against qhx generate --image
vsrv = Server(QHX, VL, "-np", "1")
vcl = ollama.Client(host=vsrv.url, timeout=60)
png = VL + "/image-64x96.png"
ref = gen(VL, "What is in the picture?", 16, "--image", png)
r = vcl.chat(model="x", messages=[{"role": "user", "content": "What is in the picture?",
                                   "images": [base64.b64encode(open(png, "rb").read()).decode()]}], options=GREEDY)
c.check(r.message.content == ref, "image answer %r != generate --image %r" % (r.message.content, ref))
r = vcl.chat(model="x", messages=[{"role": "user", "content": "What is in the picture?", "images": [png]}], options=GREEDY)
c.check(r.message.content == ref, "image by path (the client reads it) %r != %r" % (r.message.content, ref))
c.check("vision" in (vcl.show("x").capabilities or []), "show: vision")
vsrv.stop()
c.done()
