"""qhx serve against what a hostile (or careless) client can send, checked for one rule: every
failure a client can cause is a 4xx in the OpenAI error shape, a stream that fails after it
began ends with an error event, a last chunk with a finish_reason and [DONE], and a request
that can be refused before its stream starts is refused with its status (docs/server.md,
"Errors"). Kinds: a grammar too ambiguous for the matcher (streamed and not, both endpoints),
tool names each chat format cannot write, images in system or assistant messages, requests past the
context, structural bombs under the body cap (answered within a generous time), and wrong JSON
types for every field. With the openai package importable, the streamed failures are read
through it too. Usage: test_hostile.py QHX DATA_DIR"""
import base64
import json
import sys
import time
import urllib.request

from common import Checks, Server, post

QHX, DATA = sys.argv[1], sys.argv[2]
Q35 = DATA + "/fixtures/parity/qwen35-tiny-f32"
VL = DATA + "/fixtures/parity/qwen3vl-tiny-f32"
BOUND_S = 10.0  # a structural bomb must be answered within this (loose: the refusal is what counts)
c = Checks()

# Too ambiguous for the matcher: once the answer has begun ("Hello world", the only way it can
# start), the byte "x" is the start of 9,000 parses at once, past the matcher's cap on live parse
# stacks (QHX_E_LIMIT; docs/grammar.md), found while the answer is generated, in a fraction of a
# second. (An exponentially ambiguous one, a ::= "x" a "y" | "x" a "z" | ..., reaches the cap on
# stack nodes instead, after seconds of work per token.)
AMBIGUOUS = 'root ::= "Hello" " world" s\ns ::= ' + " | ".join('"x" "%d"' % i for i in range(9000))
# the same shape with the choices merged: one parse, followed to the end
PLAIN = 'root ::= "x"{3} "."'


def is_error(status, body, lo=400, hi=499):
    return lo <= status <= hi and isinstance(body, dict) and isinstance(body.get("error"), dict) and \
        isinstance(body["error"].get("message"), str) and body["error"].get("code") == status and \
        "type" in body["error"] and "param" in body["error"]


def raw(url, body):
    """POST body; (status, content type, raw text)."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read().decode()


def sse_events(text):
    """The data: payloads of an SSE body, in order."""
    return [block[6:] for block in text.split("\n\n") if block.startswith("data: ")]


def check_stream_end(what, status, ctype, text):
    """A streamed answer: a 4xx refused before it began, or a stream that ends right: its last
    event [DONE], a chunk with a finish_reason before it, an error event (4xx, the error shape)
    only just before that chunk, with finish_reason "error". Returns whether it had the error."""
    if status != 200:
        body = json.loads(text) if ctype.startswith("application/json") else text
        c.check(is_error(status, body), "%s: refused before the stream with a 4xx: %d %s" % (what, status, text[:300]))
        return True
    ev = sse_events(text)
    c.check(ctype.startswith("text/event-stream"), "%s: a stream: %s" % (what, ctype))
    c.check(ev and ev[-1] == "[DONE]", "%s: the stream ends with [DONE]: %r" % (what, text[-300:]))
    chunks = [json.loads(e) for e in ev[:-1]] if ev and ev[-1] == "[DONE]" else []
    errors = [i for i, ch in enumerate(chunks) if "error" in ch]
    finals = [i for i, ch in enumerate(chunks) if ch.get("choices") and ch["choices"][0].get("finish_reason")]
    c.check(len(finals) == 1, "%s: one chunk carries a finish_reason: %r" % (what, text[-400:]))
    if errors:
        e = chunks[errors[0]]
        c.check(len(errors) == 1 and finals and errors[0] == finals[0] - 1, "%s: the error event comes just before the last chunk" % what)
        c.check(is_error(e["error"]["code"], e), "%s: the error event is a 4xx in the OpenAI shape: %s" % (what, e))
        c.check(finals and chunks[finals[0]]["choices"][0]["finish_reason"] == "error",
                "%s: the last chunk's finish_reason is error" % what)
    return bool(errors)


srv = Server(QHX, Q35, "--parallel", "2", "--ctx", "1024")
U = srv.url
CHAT, COMP = U + "/v1/chat/completions", U + "/v1/completions"
user = [{"role": "user", "content": "x"}]

# ---- 1. a grammar the matcher gives up on: a 4xx, streamed or not, never a 500 or a cut stream
for url, base in [(COMP, {"prompt": "x"}), (CHAT, {"messages": user})]:
    name = url.rsplit("/", 1)[1]
    for field, value in [("grammar", AMBIGUOUS)]:
        body = dict(base, max_tokens=100, temperature=0, **{field: value})
        st, js = post(url, body, timeout=120)
        c.check(st == 200 or is_error(st, js), "%s, ambiguous grammar: 200 or a 4xx, never a 5xx: %d %s" % (name, st, js))
        st, ctype, text = raw(url, dict(body, stream=True, stream_options={"include_usage": True}))
        check_stream_end("%s, ambiguous grammar streamed" % name, st, ctype, text)
    # a grammar that is followed to its end still streams its normal end
    st, ctype, text = raw(url, dict(base, max_tokens=20, grammar=PLAIN, stream=True))
    had_error = check_stream_end("%s, a plain grammar streamed" % name, st, ctype, text)
    c.check(st == 200 and not had_error, "%s, a plain grammar: no error: %s" % (name, text[-300:]))

# ---- 2. a streamed request that fails before its first token: its status, not a stream
for url, base in [(COMP, {"prompt": "x " * 100}), (CHAT, {"messages": [{"role": "user", "content": "x " * 100}]})]:
    for extra, why in [({"max_tokens": 1000}, "prompt + max_tokens past the context"),
                       ({"max_tokens": 4}, None)]:
        st, ctype, text = raw(url, dict(base, stream=True, **extra))
        if why:
            c.check(st == 400 and ctype.startswith("application/json") and is_error(st, json.loads(text)) and
                    "context" in json.loads(text)["error"]["message"],
                    "%s streamed, %s: a 400 with its JSON body, no stream: %d %s %s" % (url, why, st, ctype, text[:200]))
        else:
            c.check(st == 200 and ctype.startswith("text/event-stream"), "%s streamed within the context: %d" % (url, st))
# a prompt alone past the context, streamed
st, ctype, text = raw(COMP, {"prompt": "x " * 3000, "stream": True, "max_tokens": 1})
c.check(st == 400 and ctype.startswith("application/json"), "a prompt past the context, streamed: %d %s %s" % (st, ctype, text[:200]))
# a grammar that does not compile, streamed: its 400 before the stream
st, ctype, text = raw(COMP, {"prompt": "x", "stream": True, "grammar": "root ::= root \"a\""})
c.check(st == 400 and ctype.startswith("application/json"), "a bad grammar, streamed: %d %s" % (st, text[:200]))


# a stop id past the vocabulary and a wrongly typed field, streamed: their 400s before the stream
for extra in [{"stop_token_ids": [99999999]}, {"temperature": "hot"}, {"tool_choice": {"type": "function", "function": {"name": "g"}},
                                                                      "tools": [{"type": "function", "function": {"name": "f"}}]}]:
    st, ctype, text = raw(CHAT, dict({"messages": user, "stream": True, "max_tokens": 2}, **extra))
    c.check(st == 400 and ctype.startswith("application/json"), "%s, streamed: a 400 before the stream: %d %s" % (extra, st, text[:200]))


# ---- 3. tool names the chat format cannot write: 400 naming the tool and the character
def tool(name, props=None):
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": props or {}}}}


def forced(name):
    return {"type": "function", "function": {"name": name}}


def tool_name_cases(url, refused, taken, fmt):
    for name, shown in refused:
        for what, body in [
            ("offered", {"messages": user, "tools": [tool(name)], "max_tokens": 2}),
            ("forced", {"messages": user, "tools": [tool(name)], "tool_choice": forced(name), "max_tokens": 2}),
            ("required", {"messages": user, "tools": [tool("ok"), tool(name)], "tool_choice": "required", "max_tokens": 2}),
            ("an earlier call", {"messages": user + [{"role": "assistant", "content": None, "tool_calls": [
                {"type": "function", "function": {"name": name, "arguments": "{}"}}]}], "max_tokens": 2}),
        ]:
            st, js = post(url, body)
            msg = js["error"]["message"] if is_error(st, js) else ""
            c.check(st == 400 and shown in msg and (name[:10] in msg or "control" in msg or not name),
                    "%s, %s tool name %r: a 400 naming it and %s: %d %s" % (fmt, what, name, shown, st, js))
    for name in taken:  # written as they are, and the forced call comes back with that very name
        body = {"messages": user, "tools": [tool("other"), tool(name)], "tool_choice": forced(name), "max_tokens": 60,
                "temperature": 0}
        st, js = post(url, body)
        calls = js["choices"][0]["message"].get("tool_calls") if st == 200 else None
        c.check(st == 200 and calls and calls[0]["function"]["name"] == name,
                "%s, the forced call to %r names it: %d %s" % (fmt, name, st, str(js)[:300]))
    # a choice naming a tool that is not offered, two tools of one name, a forced call without tools
    for body, needle in [
        ({"messages": user, "tools": [tool("f")], "tool_choice": forced("g")}, "not one of 'tools'"),
        ({"messages": user, "tools": [tool("f"), tool("f")]}, "offered twice"),
        ({"messages": user, "tool_choice": forced("f")}, "'tools' is empty"),
        ({"messages": user, "tools": [tool("f")], "tool_choice": forced("")}, "is empty"),
        ({"messages": user, "tools": [tool("")]}, "is empty"),
        ({"messages": user, "tools": [tool("a<b")], "tool_choice": "none"}, "'<'"),
        ({"messages": user, "tools": [5], "tool_choice": "none"}, "tools[0] must be"),
        ({"messages": user, "tools": [{"type": "function", "function": {"name": "f", "parameters": [1]}}]}, "parameters"),
    ]:
        st, js = post(url, dict(body, max_tokens=2))
        c.check(is_error(st, js) and st == 400 and needle in js["error"]["message"],
                "%s: 400 for %s: %d %s" % (fmt, needle, st, js))


tool_name_cases(CHAT, [("a>b", "'>'"), ("a<b", "'<'"), ("a</tool_call>", "'<'"), ("", "empty"), ("a\nb", "\\x0a"),
                       ("tab\there", "\\x09"), ("x" * 129, "at most 128")],
                ["get weather", "a\"b", "a\\b", "\u00fcn\u00efc\u00f6de", "x" * 128], "Qwen3.5")
# a parameter name is written as the function's on Qwen3.5 (<parameter=P>)
st, js = post(CHAT, {"messages": user, "tools": [tool("f", {"a>b": {"type": "string"}})], "max_tokens": 2})
c.check(st == 400 and "'>'" in js["error"]["message"] and "properties" in js["error"]["message"],
        "Qwen3.5: a parameter name with '>': %d %s" % (st, js))
st, js = post(CHAT, {"messages": user + [{"role": "assistant", "content": None, "tool_calls": [
    {"type": "function", "function": {"name": "f", "arguments": {"a>b": 1}}}]}], "max_tokens": 2})
c.check(st == 400 and "'>'" in js["error"]["message"], "Qwen3.5: an earlier call's argument name with '>': %d %s" % (st, js))

# ---- 6. wrong JSON types for every field: a 4xx in the error shape (or a 200), never a 5xx
VALUES = ["x", "", -1, 2 ** 31, 2 ** 63 - 1, -2 ** 63, 10 ** 30, 1e308, 0.5, True, None, [], {}, [1], ["a"], {"a": 1},
          [[]], [{}], "\u0000"]
FIELDS = ["temperature", "top_p", "min_p", "repeat_penalty", "presence_penalty", "frequency_penalty", "top_k",
          "repeat_last_n", "seed", "n", "max_tokens", "max_completion_tokens", "stream", "stream_options", "ignore_eos",
          "spec_draft", "response_format", "grammar", "json_schema", "stop", "stop_token_ids", "logprobs",
          "top_logprobs", "chat_template_kwargs", "tools", "tool_choice", "messages", "prompt", "echo", "logit_bias"]
n_bad = n_sent = 0
for url, base in [(CHAT, {"messages": user, "max_tokens": 1}), (COMP, {"prompt": "x", "max_tokens": 1})]:
    for f in FIELDS:
        for v in VALUES:
            st, js = post(url, dict(base, **{f: v}), timeout=60)
            n_sent += 1
            if not (st == 200 or is_error(st, js)):
                n_bad += 1
                print("  %s %s=%r: %d %s" % (url.rsplit("/", 1)[1], f, v, st, str(js)[:200]))
for key in ["role", "content", "tool_calls", "reasoning_content"]:
    for v in VALUES:
        for role in ["user", "assistant", "tool", "system"]:
            st, js = post(CHAT, {"messages": user + [dict({"role": role, "content": "x"}, **{key: v})], "max_tokens": 1})
            n_sent += 1
            if not (st == 200 or is_error(st, js)):
                n_bad += 1
                print("  messages[1].%s=%r (%s): %d %s" % (key, v, role, st, str(js)[:200]))
c.check(n_bad == 0, "wrong types: %d of %d requests not a 200 or a 4xx in the error shape" % (n_bad, n_sent))


# ---- 5. structural bombs under the body cap: refused before the work, within BOUND_S each
def timed(what, body, want, needle):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    t0 = time.monotonic()
    st, js = post(CHAT, data, timeout=120)
    dt = time.monotonic() - t0
    c.check(is_error(st, js) and st == want and needle in js["error"]["message"],
            "%s: %d with %r: %d %s" % (what, want, needle, st, str(js)[:300]))
    c.check(dt < BOUND_S, "%s: answered in %.1f s (bound %.0f s)" % (what, dt, BOUND_S))
    print("  %s: %d in %.2f s (%d bytes)" % (what, st, dt, len(data)))


part = {"type": "text", "text": ""}
call = {"type": "function", "function": {"name": "f", "arguments": "{}"}}
many = "more than 100000 JSON objects, lists and keys"
timed("100,000 content parts", {"messages": [{"role": "user", "content": [part] * 100000}], "max_tokens": 1}, 413, many)
timed("50,000 tool calls", {"messages": user + [{"role": "assistant", "content": "", "tool_calls": [call] * 50000}],
                            "max_tokens": 1}, 413, many)
timed("1,024 messages x 1,000 parts", {"messages": [{"role": "user", "content": [part] * 1000}] * 1024, "max_tokens": 1},
      413, many)
keys = {"k%d" % i: 1 for i in range(200000)}
timed("200,000 argument keys", {"messages": user + [{"role": "assistant", "content": "", "tool_calls": [
    {"type": "function", "function": {"name": "f", "arguments": keys}}]}], "max_tokens": 1}, 413, many)
timed("200,000 argument keys in an arguments text", {"messages": user + [{"role": "assistant", "content": "", "tool_calls": [
    {"type": "function", "function": {"name": "f", "arguments": json.dumps(keys)}}]}], "max_tokens": 1}, 413,
    "function.arguments holds " + many)
# the counts' own caps, in bodies small enough to pass the one above
timed("5,000 content parts", {"messages": [{"role": "user", "content": [part] * 5000}], "max_tokens": 1}, 413,
      "5000 content parts in all, at most 4096")
timed("2,000 tool calls", {"messages": user + [{"role": "assistant", "content": "", "tool_calls": [call] * 2000}],
                           "max_tokens": 1}, 413, "2000 tool calls in all, at most 1024")
timed("9,000 argument keys", {"messages": user + [{"role": "assistant", "content": "", "tool_calls": [
    {"type": "function", "function": {"name": "f", "arguments": {"k%d" % i: 1 for i in range(9000)}}}]}],
    "max_tokens": 1}, 413, "more than 8192 tool-call arguments")
deep = "nests more than 128 levels deep"
timed("100,000 nested lists", b'{"messages": [{"role": "user", "content": "x"}], "x": ' + b"[" * 100000 + b"]" * 100000 + b"}",
      400, deep)
timed("arguments nested 1,000 deep", b'{"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": '
      b'[{"function": {"name": "f", "arguments": {"a": ' + b"[" * 1000 + b"]" * 1000 + b"}}}]}]}", 400, deep)
timed("an arguments text nested 1,000 deep", {"messages": user + [{"role": "assistant", "content": "", "tool_calls": [
    {"type": "function", "function": {"name": "f", "arguments": '{"a": ' + "[" * 1000 + "]" * 1000 + "}"}}]}],
    "max_tokens": 1}, 400, "function.arguments " + deep)
timed("a tool's parameters nested 1,000 deep", b'{"messages": [{"role": "user", "content": "x"}], "tools": [{"type": '
      b'"function", "function": {"name": "f", "parameters": ' + b'{"a": ' * 1000 + b"1" + b"}" * 1000 + b"}}]}", 400, deep)
timed("a schema nested 1,000 deep", b'{"messages": [{"role": "user", "content": "x"}], "json_schema": ' +
      b'{"type": "array", "items": ' * 1000 + b"{}" + b"}" * 1000 + b"}", 400, deep)
# braces inside strings are text, not nesting
st, js = post(CHAT, {"messages": [{"role": "user", "content": "[{" * 3000 + "\\\"" + "}]" * 3000}], "max_tokens": 1})
c.check(st == 400 and "context" in js["error"]["message"], "brackets inside a string are not nesting: %d %s" % (st, str(js)[:200]))
# under the caps the same shapes are served
st, js = post(CHAT, {"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}] * 4096}], "max_tokens": 1})
c.check(st == 400 and "context" in js["error"]["message"], "4096 parts pass the cap (then the context): %d %s" % (st, str(js)[:200]))
st, js = post(CHAT, {"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}] * 8}], "max_tokens": 1})
c.check(st == 200, "8 parts: %d %s" % (st, str(js)[:200]))

# the server is up, counted the errors, and answers as before
st, js = post(CHAT, {"messages": user, "max_tokens": 2})
c.check(st == 200, "served after all of the above: %d" % st)
srv.stop()

# ---- 3 (Qwen3-VL) and 4. tool names in the JSON call format; images outside user messages
vsrv = Server(QHX, VL, "--parallel", "1", "--ctx", "1024")
VCHAT = vsrv.url + "/v1/chat/completions"
tool_name_cases(VCHAT, [("a\"b", "'\"'"), ("a\\b", "'\\'"), ("a<b", "'<'"), ("", "empty"), ("a\x01b", "\\x01")],
                ["a>b", "get weather", "\u00fcn\u00efc\u00f6de"], "Qwen3-VL")
PNG = base64.b64encode(open(VL + "/image-64x64.png", "rb").read()).decode()
img = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + PNG}}
for msgs, role in [([{"role": "system", "content": [img, {"type": "text", "text": "x"}]}, {"role": "user", "content": "x"}], "system"),
                   (user + [{"role": "assistant", "content": [img]}, {"role": "user", "content": "and?"}], "assistant")]:
    st, js = post(VCHAT, {"messages": msgs, "max_tokens": 1})
    c.check(st == 400 and "'%s' message" % role in js["error"]["message"] and "content[0]" in js["error"]["message"],
            "an image in a %s message: a 400 naming it: %d %s" % (role, st, js))
# an image that does not decode, streamed: its 400 before the stream
st, ctype, text = raw(VCHAT, {"messages": [{"role": "user", "content": [
    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgoAAAAN"}}]}], "stream": True, "max_tokens": 2})
c.check(st == 400 and ctype.startswith("application/json"), "a broken image, streamed: %d %s" % (st, text[:200]))
# a user message takes images; a tool's result is text in the API (its parts are text parts): a 400
st, js = post(VCHAT, {"messages": [{"role": "user", "content": [img, {"type": "text", "text": "what?"}]}], "max_tokens": 1})
c.check(st == 200, "an image in a user message is taken: %d %s" % (st, str(js)[:200]))
st, js = post(VCHAT, {"messages": user + [{"role": "assistant", "content": None, "tool_calls": [call]},
                                          {"role": "tool", "content": [img, {"type": "text", "text": "r"}]}], "max_tokens": 1})
c.check(st == 400 and "an image in a 'tool' message is not taken" in js["error"]["message"],
        "an image in a tool's result is refused: %d %s" % (st, str(js)[:200]))
vsrv.stop()

# ---- the streamed failures through the openai client, when it is installed
try:
    import openai
except ImportError:
    openai = None
    print("openai package not importable: its part is left out")
if openai:
    srv = Server(QHX, Q35, "--ctx", "1024")
    cl = openai.OpenAI(base_url=srv.url + "/v1", api_key="none", max_retries=0)
    try:
        cl.completions.create(model="m", prompt="x " * 100, max_tokens=1000, stream=True)
        c.check(False, "openai: a stream past the context must raise")
    except openai.BadRequestError as e:
        c.check(e.status_code == 400, "openai: a stream past the context is a 400: %s" % e)
    got = None
    try:
        for _ in cl.completions.create(model="m", prompt="x", max_tokens=100, stream=True, extra_body={"grammar": AMBIGUOUS}):
            pass
        got = "completed"
    except openai.APIStatusError as e:
        got = e.status_code
    except openai.APIError as e:  # the error event inside a stream
        got = "event: %s" % e.message
    c.check(got == "completed" or (isinstance(got, int) and 400 <= got < 500) or
            (isinstance(got, str) and got.startswith("event:")), "openai: the ambiguous grammar streamed: %r" % got)
    srv.stop()

c.done()
