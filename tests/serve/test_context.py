"""qhx serve's context shift, with the Python standard library only.
Usage: test_context.py QHX DATA_DIR
A chat of 50 turns in a 512-token context is never refused: once the conversation and the
answer's room exceed the context, the oldest turns after the system prompt are dropped, a round
at a time; usage says "truncated" and how many messages went, and the prompt's token count is the
chat format's rendering of the kept turns (no more dropped than needed). --no-context-shift
refuses instead; a single message too long is refused either way; structured output cut by
max_tokens has finish_reason "length"."""
import json
import sys

from common import Checks, Server, chat_format, post

QHX, DATA = sys.argv[1], sys.argv[2]
Q35 = DATA + "/fixtures/parity/qwen35-tiny-f32"
CTX, ANSWER = 512, 24
c = Checks()

srv = Server(QHX, Q35, "-np", "1", "-c", str(CTX))
U = srv.url


def n_tokens(messages):
    text = chat_format(QHX, Q35, {"messages": messages, "add_generation_prompt": True, "enable_thinking": False})
    return len(post(U + "/tokenize", {"content": text})[1]["tokens"])


system = {"role": "system", "content": "You are a helpful assistant who answers briefly."}
conv = [system]
truncated_seen, refused = 0, 0
for turn in range(50):
    conv.append({"role": "user", "content": "Turn %d: tell me something about the number %d, please." % (turn, turn * 7)})
    st, r = post(U + "/v1/chat/completions", {"messages": conv, "max_tokens": ANSWER, "temperature": 0,
                                              "ignore_eos": True})
    if st != 200:
        refused += 1
        c.check(False, "turn %d refused: %s %s" % (turn, st, r))
        conv.pop()
        continue
    u = r["usage"]
    c.check(u["prompt_tokens"] + ANSWER <= CTX and u["completion_tokens"] == ANSWER,
            "turn %d: the prompt and the answer fit: %s" % (turn, u))
    if u.get("truncated"):
        truncated_seen += 1
        d = u["dropped_messages"]
        kept = [system] + conv[1 + d:]
        c.check(kept[1]["role"] == "user", "turn %d: the kept turns start with a user turn: %d dropped" % (turn, d))
        if truncated_seen <= 3 or turn == 49:  # the counts, against the chat format's rendering
            c.check(n_tokens(kept) == u["prompt_tokens"], "turn %d: %d prompt tokens, the kept turns render to %d" % (
                turn, u["prompt_tokens"], n_tokens(kept)))
            one_less = [system] + conv[1 + d - 2:]  # one round (user + assistant) fewer dropped
            c.check(d < 2 or n_tokens(one_less) + ANSWER > CTX, "turn %d: no more dropped than needed (%d)" % (turn, d))
    else:
        c.check("truncated" not in u, "turn %d: no truncated key when nothing was dropped: %s" % (turn, u))
    content = r["choices"][0]["message"]["content"]
    c.check(isinstance(content, str) and content != "", "turn %d: a well-formed answer: %r" % (turn, content))
    conv.append({"role": "assistant", "content": content})
c.check(refused == 0 and truncated_seen > 10, "50 turns: %d refused, %d truncated" % (refused, truncated_seen))

# without max_tokens the answer keeps a room of min(256, ctx / 4) tokens
st, r = post(U + "/v1/chat/completions", {"messages": conv[:-1], "temperature": 0, "max_tokens": None})
c.check(st == 200 and r["usage"]["prompt_tokens"] + min(256, CTX // 4) <= CTX and r["usage"].get("truncated"),
        "no max_tokens: room for an answer kept: %s %s" % (st, r.get("usage") if isinstance(r, dict) else r))
# a single message past the context: refused even with the shift (nothing older to drop)
big = [system, {"role": "user", "content": "word " * 2000}]
st, r = post(U + "/v1/chat/completions", {"messages": big, "max_tokens": 4})
c.check(st == 400 and "context" in r["error"]["message"], "one message past the context: 400: %s %s" % (st, r))
# structured output cut by max_tokens: finish_reason length (and the JSON is incomplete)
st, r = post(U + "/v1/chat/completions", {"messages": [{"role": "user", "content": "JSON please"}], "max_tokens": 4,
                                          "response_format": {"type": "json_object"}, "temperature": 0})
c.check(st == 200 and r["choices"][0]["finish_reason"] == "length", "json_object cut by max_tokens: %s" % r)
srv.stop()

# --no-context-shift: the long conversation is refused as before
ns = Server(QHX, Q35, "-np", "1", "-c", str(CTX), "--no-context-shift")
st, r = post(ns.url + "/v1/chat/completions", {"messages": conv, "max_tokens": ANSWER})
c.check(st == 400 and "context" in r["error"]["message"], "--no-context-shift: 400: %s %s" % (st, r))
st, r = post(ns.url + "/v1/chat/completions", {"messages": conv[:1] + conv[-3:], "max_tokens": ANSWER, "temperature": 0})
c.check(st == 200 and "truncated" not in r["usage"], "--no-context-shift: a short one served: %s" % r)
ns.stop()
c.done()
