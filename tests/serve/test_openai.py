"""qhx serve driven by the official openai client (installed by tests/cli/serve_openai.sh).
Usage: test_openai.py QHX DATA_DIR
Greedy answers are compared with qhx generate on the same prompt; prompts are the built-in
chat format's (qhx chat-format), which tests/cli/chat_templates.sh checks against the released
templates."""
import base64
import json
import sys
import threading
import urllib.request

import openai

from common import Checks, Server, chat_format, qhx_generate

QHX, DATA = sys.argv[1], sys.argv[2]
Q35 = DATA + "/fixtures/parity/qwen35-tiny-f32"
VL = DATA + "/fixtures/parity/qwen3vl-tiny-f32"
c = Checks()


def gen_json(model, *args):
    return json.loads(qhx_generate(QHX, model, "--json", *args))


def greedy_alone(model, prompt, n, *extra):
    """What qhx generate answers to one user message, greedy, n tokens, not stopping early."""
    return gen_json(model, "--chat", "-p", prompt, "-n", str(n), "--greedy", "--ignore-eos", *extra)["text"]


srv = Server(QHX, Q35, "--parallel", "4", "--ctx", "2048")


def tokenize(text):
    return json.loads(urllib.request.urlopen(urllib.request.Request(
        srv.url + "/tokenize", data=json.dumps({"content": text}).encode())).read())["tokens"]


cl = openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0, timeout=60)
GREEDY = dict(temperature=0, max_tokens=24, extra_body={"ignore_eos": True})

# ---- /v1/models
ids = [m.id for m in cl.models.list().data]
c.check(ids == ["qwen35-tiny-f32"], "models.list: %s" % ids)

# ---- chat, non-streaming, against qhx generate
prompts = ["Hello", "What is the capital of France?", "Tell me a story about a dragon", "1 2 3 4 5 6"]
want = {p: greedy_alone(Q35, p, 24, "--no-think") for p in prompts}
for p in prompts:
    r = cl.chat.completions.create(model="x", messages=[{"role": "user", "content": p}], **GREEDY)
    c.check(r.choices[0].message.content == want[p], "chat %r: %r != generate's %r" % (p, r.choices[0].message.content, want[p]))
    c.check(r.choices[0].finish_reason == "length", "finish_reason length: %s" % r.choices[0].finish_reason)
    c.check(r.usage.completion_tokens == 24 and r.usage.total_tokens == r.usage.prompt_tokens + 24, "usage %s" % r.usage)

# ---- streaming: the deltas join to the same text; include_usage gives a last usage chunk
s = cl.chat.completions.create(model="x", messages=[{"role": "user", "content": prompts[1]}], stream=True,
                               stream_options={"include_usage": True}, **GREEDY)
parts, finish, usage, roles = [], None, None, []
for ch in s:
    if ch.usage:
        usage = ch.usage
    for choice in ch.choices:
        if choice.delta.role:
            roles.append(choice.delta.role)
        if choice.delta.content:
            parts.append(choice.delta.content)
        if choice.finish_reason:
            finish = choice.finish_reason
c.check("".join(parts) == want[prompts[1]], "stream text %r != %r" % ("".join(parts), want[prompts[1]]))
c.check(roles == ["assistant"], "one role delta: %s" % roles)
c.check(finish == "length", "stream finish_reason %s" % finish)
c.check(usage is not None and usage.completion_tokens == 24, "stream usage %s" % usage)

# ---- streams greedy-identical with 4 parallel clients
got = {}


def one(p):
    st = cl.chat.completions.create(model="x", messages=[{"role": "user", "content": p}], stream=True, **GREEDY)
    got[p] = "".join(ch.choices[0].delta.content or "" for ch in st if ch.choices)


ts = [threading.Thread(target=one, args=(p,)) for p in prompts]
for t in ts:
    t.start()
for t in ts:
    t.join()
for p in prompts:
    c.check(got.get(p) == want[p], "parallel stream %r: %r != %r" % (p, got.get(p), want[p]))

# ---- stop strings: cut at the first match, never emitted, finish_reason stop
text = want[prompts[2]]
stop = text[8:12]
r = cl.chat.completions.create(model="x", messages=[{"role": "user", "content": prompts[2]}], stop=[stop, "zzzz"], **GREEDY)
c.check(r.choices[0].message.content == text[:text.index(stop)], "stop %r: %r" % (stop, r.choices[0].message.content))
c.check(r.choices[0].finish_reason == "stop", "stop finish_reason %s" % r.choices[0].finish_reason)
s = cl.chat.completions.create(model="x", messages=[{"role": "user", "content": prompts[2]}], stop=stop, stream=True, **GREEDY)
streamed = "".join(ch.choices[0].delta.content or "" for ch in s if ch.choices)
c.check(streamed == text[:text.index(stop)], "streamed stop %r: %r" % (stop, streamed))

# ---- stop_token_ids (vLLM's extension): the answer ends before that token, as qhx generate --stop-id
alone = ["--chat", "-p", prompts[2], "-n", "24", "--greedy", "--ignore-eos", "--no-think"]
full = gen_json(Q35, *alone)
sid = full["ids"][5]
cut = gen_json(Q35, *alone, "--stop-id", str(sid))
r = cl.chat.completions.create(model="x", messages=[{"role": "user", "content": prompts[2]}], temperature=0, max_tokens=24,
                               extra_body={"ignore_eos": True, "stop_token_ids": [sid]})
c.check(r.choices[0].message.content == cut["text"] and cut["stop"] == "eos", "stop_token_ids %d: %r vs %r" % (sid, r.choices[0].message.content, cut["text"]))
c.check(r.choices[0].finish_reason == "stop" and r.usage.completion_tokens == full["ids"].index(sid),
        "stop_token_ids: finish %s, %d tokens" % (r.choices[0].finish_reason, r.usage.completion_tokens))

# ---- seed reproducibility
def sampled(seed):
    return cl.chat.completions.create(model="x", messages=[{"role": "user", "content": "Hello"}], temperature=1.0,
                                      top_p=0.95, seed=seed, max_tokens=32,
                                      extra_body={"ignore_eos": True}).choices[0].message.content


a, b, d = sampled(42), sampled(42), sampled(43)
c.check(a == b, "same seed, same text: %r / %r" % (a, b))
c.check(a != d, "another seed, another text: %r" % a)
ref = gen_json(Q35, "--chat", "-p", "Hello", "-n", "32", "--temp", "1.0", "--top-p", "0.95", "--seed", "42",
               "--ignore-eos", "--no-think", "--top-k", "0", "--min-p", "0", "--repeat-penalty", "1")["text"]
c.check(a == ref, "seeded text equals qhx generate --seed 42: %r / %r" % (a, ref))

# ---- logprobs
r = cl.chat.completions.create(model="x", messages=[{"role": "user", "content": "Hello"}], logprobs=True, top_logprobs=3,
                               **GREEDY)
lp = r.choices[0].logprobs.content
c.check(len(lp) == 24, "a logprob entry per token: %d" % len(lp))
c.check("".join(e.token for e in lp) == r.choices[0].message.content, "the tokens spell the content")
for e in lp:
    tops = [t.logprob for t in e.top_logprobs]
    c.check(len(tops) == 3 and tops == sorted(tops, reverse=True), "3 sorted top logprobs: %s" % tops)
    c.check(abs(e.logprob - tops[0]) < 1e-9 and e.logprob <= 0, "greedy picks the top token: %s vs %s" % (e.logprob, tops))

# ---- tools: rendered as the built-in chat format does (the token count of its rendering) and
# an answer to a tool result; tool_calls come back in the OpenAI shape on the next turn
tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}}]
msgs = [{"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
                                                            "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris", "days": 3})}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C"}]
r = cl.chat.completions.create(model="x", messages=msgs, tools=tools, tool_choice="auto", **GREEDY)
conv = {"messages": [msgs[0], {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}}]},
                     msgs[2]], "tools": tools, "add_generation_prompt": True, "enable_thinking": False}
rendered = chat_format(QHX, Q35, conv)
n_ref = len(tokenize(rendered))
c.check(r.usage.prompt_tokens == n_ref, "tools prompt: %d tokens, the chat format's rendering %d" % (r.usage.prompt_tokens, n_ref))
c.check(r.choices[0].message.content is not None, "an answer after the tool result")

# ---- tool_choice. "none": the tools are not in the prompt (its token count and its answer are
# those of no tools) and nothing is parsed; "required" and a named function: the prompt ends with
# the forced start of a call (prompt tokens), the answer is its rest. Random weights: only the
# forced part is known, so the answer is checked against a greedy completion of that prompt.
one = [{"role": "user", "content": "Weather in Paris?"}]
base = cl.chat.completions.create(model="x", messages=one, **GREEDY)
auto = cl.chat.completions.create(model="x", messages=one, tools=tools, tool_choice="auto", **GREEDY)
none = cl.chat.completions.create(model="x", messages=one, tools=tools, tool_choice="none", **GREEDY)
c.check(none.usage.prompt_tokens == base.usage.prompt_tokens < auto.usage.prompt_tokens,
        "tool_choice none: %d prompt tokens, no tools %d, auto %d" % (none.usage.prompt_tokens, base.usage.prompt_tokens,
                                                                       auto.usage.prompt_tokens))
c.check(none.choices[0].message.content == base.choices[0].message.content and not none.choices[0].message.tool_calls
        and none.choices[0].finish_reason == "length", "tool_choice none answers as without tools: %r" % none.choices[0])
with_tools = chat_format(QHX, Q35, {"messages": one, "tools": tools, "add_generation_prompt": True, "enable_thinking": False})


REQ = "<tool_call>\n<function="
req = cl.chat.completions.create(model="x", messages=one, tools=tools, tool_choice="required", **GREEDY)
c.check(req.usage.prompt_tokens == len(tokenize(with_tools + REQ)) > auto.usage.prompt_tokens,
        "required: %d prompt tokens, want the tools prompt + the forced start (%d)" % (
            req.usage.prompt_tokens, len(tokenize(with_tools + REQ))))
m = req.choices[0].message
# the call is held to the tools (a grammar, docs/grammar.md): its name can only be get_weather
c.check(m.tool_calls and m.tool_calls[0].function.name == "get_weather" and not m.content,
        "required: the call %r" % (m.tool_calls,))
c.check(req.choices[0].finish_reason in ("length", "tool_calls"), "required: %s" % req.choices[0].finish_reason)

named = {"type": "function", "function": {"name": "get_weather"}}
NAMED = "<tool_call>\n<function=get_weather>\n"
kw = dict(model="x", messages=one, tools=tools, tool_choice=named, temperature=0, max_tokens=24,
          extra_body={"ignore_eos": True})
r = cl.chat.completions.create(**kw)
m = r.choices[0].message
c.check(r.usage.prompt_tokens == len(tokenize(with_tools + NAMED)), "named: %d prompt tokens, want %d" % (
    r.usage.prompt_tokens, len(tokenize(with_tools + NAMED))))
c.check(r.choices[0].finish_reason in ("length", "tool_calls") and m.content is None and len(m.tool_calls or []) == 1
        and m.tool_calls[0].function.name == "get_weather", "named call: %s %r" % (r.choices[0].finish_reason, m))
if r.choices[0].finish_reason == "tool_calls":  # a finished call: its arguments follow the schema
    args = json.loads(m.tool_calls[0].function.arguments)
    c.check(isinstance(args.get("city"), str), "named call's arguments: %r" % args)
s = cl.chat.completions.create(stream=True, **kw)
content, calls, finish = [], [], None
for ch in s:
    if ch.choices:
        d = ch.choices[0].delta
        content.append(d.content or "")
        calls += d.tool_calls or []
        finish = ch.choices[0].finish_reason or finish
c.check("".join(content) == "" and [t.function.name for t in calls] == ["get_weather"]
        and finish == r.choices[0].finish_reason and calls[0].function.arguments == m.tool_calls[0].function.arguments,
        "named call streamed: %r %r %s" % (content, calls, finish))
# thinking asked for: a forced call has no think block (the prompt is the one without thinking)
r = cl.chat.completions.create(model="x", messages=one, tools=tools, tool_choice=named, max_tokens=2,
                               extra_body={"chat_template_kwargs": {"enable_thinking": True}})
c.check(r.usage.prompt_tokens == len(tokenize(with_tools + NAMED)) and r.choices[0].message.tool_calls[0].function.name == "get_weather",
        "named call with thinking asked for: %d prompt tokens" % r.usage.prompt_tokens)
# the forced start belongs to those prompts only: a plain request answers as it did before them
again = cl.chat.completions.create(model="x", messages=one, tools=tools, tool_choice="auto", **GREEDY)
c.check(again.choices[0].message.content == auto.choices[0].message.content, "auto after forced calls: %r, before %r" % (
    again.choices[0].message.content, auto.choices[0].message.content))
for bad, what in [({"type": "function", "function": {"name": "get_time"}}, "not one of 'tools'"),
                  ({"type": "function"}, "'tool_choice' must be"), ({"function": {"name": "get_weather"}}, "'tool_choice' must be")]:
    try:
        cl.chat.completions.create(model="x", messages=one, tools=tools, tool_choice=bad, max_tokens=2)
        c.check(False, "tool_choice %s refused" % bad)
    except openai.BadRequestError as e:
        c.check(e.status_code == 400 and what in str(e), "tool_choice %s: %s" % (bad, e))
try:
    cl.chat.completions.create(model="x", messages=one, tool_choice="required", max_tokens=2)
    c.check(False, "required without tools refused")
except openai.BadRequestError as e:
    c.check("'tools' is empty" in str(e), "required without tools: %s" % e)

# ---- errors come back as the client's exceptions with their status
r = cl.chat.completions.create(model="x", messages=[{"role": "user", "content": "Hi"}], n=2, max_tokens=2)
c.check([ch.index for ch in r.choices] == [0, 1] and r.usage.completion_tokens == 4, "n=2: two choices: %s" % r)
try:
    cl.chat.completions.create(model="x", messages=[{"role": "user", "content": "Hi"}], n=17, max_tokens=2)
    c.check(False, "n=17 refused")
except openai.BadRequestError as e:
    c.check(e.status_code == 400 and "at most 16" in str(e), "n=17: %s" % e)
texts, usage = {}, None
for ch in cl.chat.completions.create(model="x", messages=[{"role": "user", "content": "Hi"}], n=2, max_tokens=2,
                                     stream=True, stream_options={"include_usage": True}):
    usage = ch.usage or usage
    for choice in ch.choices:
        texts[choice.index] = texts.get(choice.index, "") + (choice.delta.content or "")
c.check(texts == {k: r.choices[k].message.content for k in (0, 1)} and usage and usage.completion_tokens == 4,
        "n=2 streamed: both choices, as unstreamed: %s %s" % (texts, usage))
try:
    cl.chat.completions.create(model="x", messages=[{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}]}], max_tokens=2)
    c.check(False, "remote image refused")
except openai.BadRequestError as e:
    c.check("remote image URLs are not fetched" in str(e), "remote URL: %s" % e)

# ---- prompt reuse: the second turn prefills only what is new, and answers as a fresh run does
first = cl.chat.completions.create(model="x", messages=[{"role": "user", "content": "Hi there friend"}], **GREEDY)
turn2 = [{"role": "user", "content": "Hi there friend"}, {"role": "assistant", "content": first.choices[0].message.content},
         {"role": "user", "content": "And then?"}]
second = cl.chat.completions.create(model="x", messages=turn2, **GREEDY)
cached = second.usage.prompt_tokens_details.cached_tokens
# Qwen3.5's template renders an earlier answer without the empty think block its generation
# prompt opened, so the state is reused up to the first turn's assistant header (a checkpoint
# there), and the answer is fed again
n_user = len(tokenize(chat_format(QHX, Q35, {"messages": turn2[:1], "add_generation_prompt": False})))
c.check(cached == n_user and second.usage.prompt_tokens > n_user,
        "second turn reuses the first up to its assistant header: %d cached, want %d" % (cached, n_user))
third = cl.chat.completions.create(model="x", messages=turn2 + [{"role": "assistant", "content": second.choices[0].message.content},
                                                                {"role": "user", "content": "Why?"}], **GREEDY)
n_two = len(tokenize(chat_format(QHX, Q35, {"messages": turn2, "add_generation_prompt": False})))
c.check(third.usage.prompt_tokens_details.cached_tokens == n_two, "third turn: %d cached, want %d" % (
    third.usage.prompt_tokens_details.cached_tokens, n_two))
fresh = gen_json(Q35, "-p", chat_format(QHX, Q35, {"messages": turn2, "add_generation_prompt": True, "enable_thinking": False}),
                 "-n", "24", "--greedy", "--ignore-eos")["text"]
c.check(second.choices[0].message.content == fresh, "reused turn %r equals a fresh run %r" % (second.choices[0].message.content, fresh))

# ---- thinking: what comes before </think> is reasoning_content
r = cl.chat.completions.create(model="x", messages=[{"role": "user", "content": "Hello"}],
                               extra_body={"chat_template_kwargs": {"enable_thinking": True}, "ignore_eos": True},
                               temperature=0, max_tokens=24)
think = greedy_alone(Q35, "Hello", 24, "--think")
rc_text = getattr(r.choices[0].message, "reasoning_content", None) or (r.choices[0].message.model_extra or {}).get("reasoning_content")
if "</think>" in think:
    c.check(rc_text == think.split("</think>")[0], "reasoning %r" % rc_text)
else:
    c.check(rc_text == think and not r.choices[0].message.content, "all reasoning: %r / %r" % (rc_text, r.choices[0].message.content))

# ---- completions: prompt text and token ids
r = cl.completions.create(model="x", prompt="The capital of France is", max_tokens=12, temperature=0,
                          extra_body={"ignore_eos": True})
ref = gen_json(Q35, "-p", "The capital of France is", "-n", "12", "--greedy", "--ignore-eos")
c.check(r.choices[0].text == ref["text"], "completion %r != %r" % (r.choices[0].text, ref["text"]))
r2 = cl.completions.create(model="x", prompt=tokenize("The capital of France is"), max_tokens=12, temperature=0, extra_body={"ignore_eos": True})
c.check(r2.choices[0].text == ref["text"], "completion from ids %r" % r2.choices[0].text)
srv.stop()

# ---- an image message on the Qwen3-VL fixture, against qhx generate --image
vsrv = Server(QHX, VL, "--parallel", "2")
vcl = openai.OpenAI(base_url=vsrv.url + "/v1", api_key="unused", max_retries=0, timeout=60)
png = open(VL + "/image-64x96.png", "rb").read()
url = "data:image/png;base64," + base64.b64encode(png).decode()
r = vcl.chat.completions.create(model="x", messages=[{"role": "user", "content": [
    {"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": "What is in the picture?"}]}], **GREEDY)
ref = greedy_alone(VL, "What is in the picture?", 24, "--image", VL + "/image-64x96.png")
c.check(r.choices[0].message.content == ref, "image answer %r != generate --image %r" % (r.choices[0].message.content, ref))
# another image with the same text: a fresh answer, not one reused from the first image's state
png2 = VL + "/image-64x64.png"
r2 = vcl.chat.completions.create(model="x", messages=[{"role": "user", "content": [
    {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(open(png2, "rb").read()).decode()}},
    {"type": "text", "text": "What is in the picture?"}]}], **GREEDY)
ref2 = greedy_alone(VL, "What is in the picture?", 24, "--image", png2)
c.check(r2.choices[0].message.content == ref2, "second image answer %r != generate --image %r" % (r2.choices[0].message.content, ref2))
c.check(r2.usage.prompt_tokens_details.cached_tokens < 8, "nothing past the image reused: %d cached" % r2.usage.prompt_tokens_details.cached_tokens)
# image requests from 4 clients at once (the images are encoded on the connection threads while
# the engine decodes): each answer as alone
res = {}


def image_req(k):
    u = url if k % 2 == 0 else "data:image/png;base64," + base64.b64encode(open(png2, "rb").read()).decode()
    res[k] = vcl.chat.completions.create(model="x", messages=[{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": u}}, {"type": "text", "text": "What is in the picture?"}]}],
        **GREEDY).choices[0].message.content


ts = [threading.Thread(target=image_req, args=(k,)) for k in range(4)]
for t in ts:
    t.start()
for t in ts:
    t.join()
for k in range(4):
    c.check(res.get(k) == (ref if k % 2 == 0 else ref2), "parallel image request %d: %r" % (k, res.get(k)))
# two images in one message: each gets its own pads (64x64: 4 tokens, 64x96: 6) and markers
url2 = "data:image/png;base64," + base64.b64encode(open(VL + "/image-64x64.png", "rb").read()).decode()
two = vcl.chat.completions.create(model="x", messages=[{"role": "user", "content": [
    {"type": "image_url", "image_url": {"url": url2}}, {"type": "image_url", "image_url": {"url": url}},
    {"type": "text", "text": "What is in the picture?"}]}], **GREEDY)
c.check(two.usage.prompt_tokens == r.usage.prompt_tokens + 4 + 2, "two images: %d prompt tokens, one: %d" % (
    two.usage.prompt_tokens, r.usage.prompt_tokens))
try:
    vcl.chat.completions.create(model="x", messages=[{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": url}}] * 5}], max_tokens=2)
    c.check(False, "5 images refused")
except openai.APIStatusError as e:
    c.check(e.status_code == 413, "5 images: %s" % e)
try:
    vcl.chat.completions.create(model="x", messages=[{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\nnot really").decode()}}]}],
        max_tokens=2)
    c.check(False, "a broken PNG refused")
except openai.BadRequestError as e:
    c.check(e.status_code == 400, "broken PNG: %s" % e)

# ---- tools on Qwen3-VL: the prompt is the built-in format's rendering of its template (tools as
# tojson lines, a call as a JSON object, tool responses in a user turn); tool_choice none, required
# and named as for Qwen3.5, with the JSON-object starts; add_vision_id numbers the pictures.


def vtokenize(text):
    return json.loads(urllib.request.urlopen(urllib.request.Request(
        vsrv.url + "/tokenize", data=json.dumps({"content": text}).encode())).read())["tokens"]


r = vcl.chat.completions.create(model="x", messages=msgs, tools=tools, tool_choice="auto", **GREEDY)
vconv = dict(conv)
del vconv["enable_thinking"]
vrendered = chat_format(QHX, VL, vconv)
c.check('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n</tool_call>' in vrendered
        and "<|im_start|>user\n<tool_response>\nsunny, 21 C\n</tool_response><|im_end|>" in vrendered,
        "Qwen3-VL tool history rendered: %r" % vrendered)
c.check(r.usage.prompt_tokens == len(vtokenize(vrendered)), "Qwen3-VL tools prompt: %d tokens, the chat format's %d" % (
    r.usage.prompt_tokens, len(vtokenize(vrendered))))
c.check(r.choices[0].finish_reason == "length" and r.choices[0].message.content is not None,
        "Qwen3-VL: an answer after the tool result: %r" % r.choices[0])
vbase = vcl.chat.completions.create(model="x", messages=one, **GREEDY)
vnone = vcl.chat.completions.create(model="x", messages=one, tools=tools, tool_choice="none", **GREEDY)
vwith = chat_format(QHX, VL, {"messages": one, "tools": tools, "add_generation_prompt": True})
vauto = vcl.chat.completions.create(model="x", messages=one, tools=tools, **GREEDY)
c.check(vnone.usage.prompt_tokens == vbase.usage.prompt_tokens < vauto.usage.prompt_tokens == len(vtokenize(vwith)),
        "Qwen3-VL tool_choice none %d, no tools %d, auto %d (rendered %d)" % (
            vnone.usage.prompt_tokens, vbase.usage.prompt_tokens, vauto.usage.prompt_tokens, len(vtokenize(vwith))))
c.check(vnone.choices[0].message.content == vbase.choices[0].message.content, "Qwen3-VL none answers as without tools")


VREQ = '<tool_call>\n{"name": "'
req = vcl.chat.completions.create(model="x", messages=one, tools=tools, tool_choice="required", **GREEDY)
c.check(req.usage.prompt_tokens == len(vtokenize(vwith + VREQ)), "Qwen3-VL required: %d prompt tokens, want %d" % (
    req.usage.prompt_tokens, len(vtokenize(vwith + VREQ))))
m = req.choices[0].message
# held to the tools: a JSON-object call named get_weather; cut by max_tokens before the object
# closes, the text is content (never a 500), and it begins with the forced start
if req.choices[0].finish_reason == "tool_calls":
    c.check(m.tool_calls and m.tool_calls[0].function.name == "get_weather"
            and isinstance(json.loads(m.tool_calls[0].function.arguments).get("city"), str), "Qwen3-VL required: %r" % m)
else:
    c.check(req.choices[0].finish_reason == "length" and (m.tool_calls or (m.content or "").startswith(VREQ + "get_weather")),
            "Qwen3-VL required, cut: %r" % m)
VNAMED = '<tool_call>\n{"name": "get_weather", "arguments": '
r = vcl.chat.completions.create(model="x", messages=one, tools=tools, tool_choice=named, temperature=0, max_tokens=300,
                                extra_body={"ignore_eos": True})
m = r.choices[0].message
c.check(r.usage.prompt_tokens == len(vtokenize(vwith + VNAMED)), "Qwen3-VL named: %d prompt tokens" % r.usage.prompt_tokens)
if r.choices[0].finish_reason == "tool_calls":
    c.check(len(m.tool_calls or []) == 1 and m.tool_calls[0].function.name == "get_weather" and not m.content
            and isinstance(json.loads(m.tool_calls[0].function.arguments).get("city"), str), "Qwen3-VL named: %r" % m)
else:
    c.check((m.content or "").startswith(VNAMED + "{"), "Qwen3-VL named, cut: %s %r" % (r.choices[0].finish_reason, m))
# an image in a tool response: the API's tool results are text, so the request is a 400
tmsgs = [dict(m) for m in msgs]
tmsgs[2] = {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "image_url", "image_url": {"url": url2}},
                                                                  {"type": "text", "text": "sunny, 21 C"}]}
try:
    vcl.chat.completions.create(model="x", messages=tmsgs, tools=tools, max_tokens=1)
    c.check(False, "an image in a tool response was taken")
except openai.BadRequestError as e:
    c.check("not taken" in str(e), "an image in a tool response: %s" % e)
# add_vision_id: "Picture 1: " before the image, as the template writes it
img_msg = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": "Hi"}]}]
plain = vcl.chat.completions.create(model="x", messages=img_msg, max_tokens=1)
vid = vcl.chat.completions.create(model="x", messages=img_msg, max_tokens=1,
                                  extra_body={"chat_template_kwargs": {"add_vision_id": True}})
c.check(vid.usage.prompt_tokens == plain.usage.prompt_tokens + len(vtokenize("Picture 1: ")),
        "add_vision_id: %d prompt tokens, without %d" % (vid.usage.prompt_tokens, plain.usage.prompt_tokens))
try:
    vcl.chat.completions.create(model="x", messages=img_msg, max_tokens=1, extra_body={"chat_template_kwargs": {"add_vision_id": 1}})
    c.check(False, "add_vision_id must be a boolean")
except openai.BadRequestError as e:
    c.check("add_vision_id" in str(e), "add_vision_id 1: %s" % e)
vsrv.stop()

# ---- Qwen3.5 with its vision tower (a checkpoint folder opened with --images)
Q35VL = DATA + "/fixtures/parity/qwen35vl-tiny-f32"
qsrv = Server(QHX, Q35VL, "--images", "--parallel", "2")
qcl = openai.OpenAI(base_url=qsrv.url + "/v1", api_key="unused", max_retries=0, timeout=60)
r = qcl.chat.completions.create(model="x", messages=[{"role": "user", "content": [
    {"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": "What is in the picture?"}]}], **GREEDY)
ref = greedy_alone(Q35VL, "What is in the picture?", 24, "--image", VL + "/image-64x96.png", "--no-think")
c.check(r.choices[0].message.content == ref, "Qwen3.5 image answer %r != generate --image %r" % (r.choices[0].message.content, ref))
qsrv.stop()
c.done()
