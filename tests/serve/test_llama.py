"""qhx serve as llama-server's users drive it, with the Python standard library only.
Usage: test_llama.py QHX DATA_DIR
Flags: llama-server's spellings give the same server as qhx's own; --host takes names and
IPv6; a busy port and an unknown host are one clear line and exit 1. The access log: one line
per request (method, path, status, prompt and generated tokens, ms), as text or JSON, one line
even for a hostile path."""
import json
import re
import socket
import subprocess
import sys
import tempfile
import urllib.request

from common import Checks, Server, post

QHX, DATA = sys.argv[1], sys.argv[2]
Q35 = DATA + "/fixtures/parity/qwen35-tiny-f32"
c = Checks()


def get(url, timeout=30):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")


def run(*args, timeout=60):
    return subprocess.run([QHX, "serve", "-m", Q35, *args], capture_output=True, text=True, timeout=timeout)


def start_at(host, *args):
    """A server on host (--port 0); (process, port) once it listens, or (process, None)."""
    err = tempfile.TemporaryFile(mode="w+")
    p = subprocess.Popen([QHX, "serve", "-m", Q35, "--host", host, "--port", "0", *args],
                         stdout=subprocess.PIPE, stderr=err, text=True)
    m = re.search(r"listening on http://(\S+):(\d+)", p.stdout.readline())
    return p, (int(m.group(2)) if m else None)


def stop(p):
    p.terminate()
    return p.wait(timeout=30)


# ---- llama-server's spellings ----------------------------------------------------------------
short = Server(QHX, Q35, "-c", "512", "-t", "1", "-np", "2", "-a", "tiny-alias")
st, models = get(short.url + "/v1/models")
c.check(st == 200 and models["data"][0]["id"] == "tiny-alias", "-a names the model: %s" % models)
c.check(st == 200 and models["data"][0]["meta"]["n_ctx"] == 512, "-c sets the context per slot: %s" % models)
short.stop()
long_ = Server(QHX, Q35, "--ctx-size", "384", "--threads", "1", "--parallel", "1", "--alias", "long-alias")
st, models = get(long_.url + "/v1/models")
c.check(models["data"][0]["meta"]["n_ctx"] == 384 and models["data"][0]["id"] == "long-alias",
        "--ctx-size and --alias: %s" % models)
long_.stop()
for args, name in ((["-c", "abc"], "-c"), (["--ctx-size", "8"], "--ctx-size"), (["-np", "0"], "-np"),
                   (["-t", "x"], "-t"), (["--log-format", "xml"], "--log-format")):
    r = run(*args)
    c.check(r.returncode == 2 and name in r.stderr and len(r.stderr.strip().splitlines()) == 1,
            "%s: a usage error naming the spelling given: %d %r" % (args, r.returncode, r.stderr))

# ---- --host: names and IPv6 ------------------------------------------------------------------
p, port = start_at("localhost")
c.check(port is not None, "--host localhost listens")
if port:
    st, _ = get("http://localhost:%d/health" % port)
    c.check(st == 200, "a client of localhost reaches it: %s" % st)
c.check(stop(p) == 0, "--host localhost: SIGTERM exit 0")
try:
    socket.socket(socket.AF_INET6).bind(("::1", 0))
    has_v6 = True
except OSError:
    has_v6 = False
if has_v6:
    p, port = start_at("::1")
    c.check(port is not None, "--host ::1 listens")
    if port:
        st, _ = get("http://[::1]:%d/health" % port)
        c.check(st == 200, "a client of [::1] reaches it: %s" % st)
    c.check(stop(p) == 0, "--host ::1: SIGTERM exit 0")
else:
    print("note: no IPv6 loopback here; --host ::1 not tried")
r = run("--host", "no-such-host.invalid", "--port", "0")
c.check(r.returncode == 1 and "no-such-host.invalid" in r.stderr and len(r.stderr.strip().splitlines()) == 1,
        "an unknown host: exit 1, one line naming it: %d %r" % (r.returncode, r.stderr))

# ---- a busy port -----------------------------------------------------------------------------
busy = socket.socket()
busy.bind(("127.0.0.1", 0))
busy.listen(1)
bport = busy.getsockname()[1]
r = run("--port", str(bport))
c.check(r.returncode == 1 and ("127.0.0.1:%d" % bport) in r.stderr and "in use" in r.stderr
        and "cannot listen on" in r.stderr and "serve: serve" not in r.stderr
        and len(r.stderr.strip().splitlines()) == 1,
        "a busy port: exit 1, one line naming the address, the port, and that it is in use: %d %r"
        % (r.returncode, r.stderr))
busy.close()

# ---- the access log --------------------------------------------------------------------------
body = {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 5, "temperature": 0}
for fmt in ("text", "json"):
    srv = Server(QHX, Q35, "--parallel", "1", "--log-format", fmt)
    st, out = post(srv.url + "/v1/chat/completions", body)
    c.check(st == 200, "chat: %s %s" % (st, out))
    n_prompt, n_gen = out["usage"]["prompt_tokens"], out["usage"]["completion_tokens"]
    get(srv.url + "/no/such")
    # a path with a quote, a backslash and a character beyond ASCII (sent percent-encoded);
    # one with a newline (refused by the framing: 400, logged without its path)
    get(srv.url + "/evil%22%5c%c3%a9")
    get(srv.url + "/nl%0aGET%20/forged")
    st2, out2 = post(srv.url + "/v1/completions", {"prompt": "Hi", "max_tokens": 3, "temperature": 0,
                                                   "stream": True})
    srv.stop()
    lines = [ln for ln in srv.log().splitlines() if ln.strip()]
    if fmt == "json":
        recs = []
        for ln in [ln for ln in lines if not ln.startswith("qhx serve: ")]:
            try:
                recs.append(json.loads(ln))
            except ValueError:
                c.check(False, "json log: a line that is not JSON: %r" % ln)
        recs = [r for r in recs if isinstance(r, dict) and "path" in r]
        c.check(len(recs) == 5, "json log: one line per request: %r" % lines)
        chat = [r for r in recs if r["path"] == "/v1/chat/completions"]
        c.check(len(chat) == 1 and chat[0]["method"] == "POST" and chat[0]["status"] == 200
                and chat[0]["prompt_tokens"] == n_prompt and chat[0]["generated_tokens"] == n_gen
                and isinstance(chat[0]["ms"], (int, float)) and chat[0]["ms"] >= 0
                and chat[0]["client"] == "127.0.0.1" and re.match(r"\d{4}-\d\d-\d\dT", chat[0]["time"]),
                "json log: the chat request's line: %r (usage %d/%d)" % (chat, n_prompt, n_gen))
        nf = [r for r in recs if r["path"] == "/no/such"]
        c.check(len(nf) == 1 and nf[0]["status"] == 404 and nf[0]["method"] == "GET", "json log: a 404: %r" % nf)
        cm = [r for r in recs if r["path"] == "/v1/completions"]
        c.check(len(cm) == 1 and cm[0]["status"] == 200 and cm[0]["generated_tokens"] == 3,
                "json log: a streamed completion's line: %r" % cm)
        ev = [r for r in recs if r["path"].startswith("/evil")]
        c.check(len(ev) == 1 and ev[0]["status"] == 404 and ev[0]["path"] == "/evil\\x22\\x5c\\xc3\\xa9",
                "json log: a hostile path, escaped: %r" % ev)
        c.check(sum(1 for r in recs if r["status"] == 400 and r["path"] == "-") == 1,
                "json log: the refused path: 400, no path: %r" % recs)
    else:
        req = [ln for ln in lines if re.search(r'"[A-Z-]+ [/-]', ln)]
        c.check(len(req) == 5, "text log: one line per request: %r" % lines)
        want = r'^\d{4}-\d\d-\d\dT\S+Z 127\.0\.0\.1 "POST /v1/chat/completions" 200 prompt=%d generated=%d [0-9.]+ ms$' \
            % (n_prompt, n_gen)
        c.check(any(re.match(want, ln) for ln in req), "text log: the chat request's line %r in %r" % (want, req))
        c.check(any('"GET /no/such" 404 prompt=0 generated=0' in ln for ln in req), "text log: a 404: %r" % req)
        c.check(any('"POST /v1/completions" 200' in ln and "generated=3 " in ln for ln in req),
                "text log: the streamed completion: %r" % req)
        ev = [ln for ln in lines if "evil" in ln]
        c.check(len(ev) == 1 and '"GET /evil\\x22\\x5c\\xc3\\xa9" 404 ' in ev[0], "text log: a hostile path escaped: %r" % ev)
        c.check(sum(1 for ln in req if '"GET -" 400 ' in ln) == 1 and not any("forged" in ln for ln in lines),
                "text log: the refused path: 400, no path, no forged line: %r" % lines)


# ---- llama-server's endpoints in its shapes ---------------------------------------------------
def sse(url, body):
    """The data: events of a streamed POST, parsed (a [DONE] kept as the string)."""
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        raw = r.read().decode()
    out = []
    for ev in raw.split("\n\n"):
        if ev.startswith("data: "):
            out.append("[DONE]" if ev[6:] == "[DONE]" else json.loads(ev[6:]))
    return out


srv = Server(QHX, Q35, "-np", "2", "-c", "256")
U = srv.url
st, props = get(U + "/props")
c.check(st == 200 and props["total_slots"] == 2 and props["default_generation_settings"]["n_ctx"] == 256
        and props["modalities"]["vision"] is False and "temperature" in props["default_generation_settings"]["params"]
        and props["model_alias"] and isinstance(props["build_info"], str), "/props: %s" % props)
st, slots = get(U + "/slots")
c.check(st == 200 and [s_["id"] for s_ in slots] == [0, 1] and all(s_["n_ctx"] == 256 and s_["is_processing"] is False
                                                                  for s_ in slots), "/slots: %s" % slots)
st, health = get(U + "/health")
c.check(st == 200 and health == {"status": "ok"}, "/health as llama-server answers: %s" % health)

st, tok = post(U + "/tokenize", {"content": "Hello world, héllo"})
st2, pieces = post(U + "/tokenize", {"content": "Hello world, héllo", "with_pieces": True})
c.check(st == 200 and st2 == 200 and [p_["id"] for p_ in pieces["tokens"]] == tok["tokens"],
        "/tokenize with_pieces: the same ids: %s %s" % (tok, pieces))
joined = "".join(p_["piece"] for p_ in pieces["tokens"])
c.check(joined == "Hello world, héllo", "/tokenize with_pieces: the pieces make the text: %r" % pieces)
st, bad = post(U + "/tokenize", {"content": "x", "with_pieces": "yes"})
c.check(st == 400, "/tokenize: with_pieces not a bool: %s" % st)

prompt = "Once upon a time"
st, ref = post(U + "/v1/completions", {"prompt": prompt, "max_tokens": 12, "temperature": 0})
st, comp = post(U + "/completion", {"prompt": prompt, "n_predict": 12, "temperature": 0})
ntok = len(post(U + "/tokenize", {"content": prompt})[1]["tokens"])
c.check(st == 200 and comp["content"] == ref["choices"][0]["text"] and comp["stop"] is True
        and comp["tokens_predicted"] == 12 and comp["tokens_evaluated"] == ntok and comp["stop_type"] == "limit"
        and comp["model"] == ref["model"] and comp["truncated"] is False,
        "/completion: llama-server's shape, the answer of /v1/completions: %s vs %s" % (comp, ref))
t = comp.get("timings", {})
c.check(all(k in t for k in ("prompt_n", "prompt_ms", "prompt_per_second", "predicted_n", "predicted_ms",
                             "predicted_per_token_ms", "predicted_per_second")) and t["predicted_n"] == 12,
        "/completion: timings: %s" % t)
events = sse(U + "/completion", {"prompt": prompt, "n_predict": 12, "temperature": 0, "stream": True})
c.check(events and "[DONE]" not in events and events[-1]["stop"] is True and all(e["stop"] is False for e in events[:-1])
        and "".join(e["content"] for e in events) == comp["content"] and events[-1]["tokens_predicted"] == 12,
        "/completion stream: data: {content, stop} events, the last one stop true, no [DONE]: %s" % events)
text = comp["content"]
word = text[len(text) // 2:len(text) // 2 + 3]
if word.strip():
    st, cut = post(U + "/completion", {"prompt": prompt, "n_predict": 12, "temperature": 0, "stop": [word]})
    c.check(st == 200 and cut["stop_type"] == "word" and text.startswith(cut["content"])
            and word not in cut["content"], "/completion: a stop word: %r in %r -> %s" % (word, text, cut))
st, ids = post(U + "/completion", {"prompt": tok["tokens"], "n_predict": 3, "temperature": 0})
c.check(st == 200 and ids["tokens_evaluated"] == len(tok["tokens"]) and ids["tokens_predicted"] == 3,
        "/completion: a prompt of token ids: %s" % ids)
# no n_predict (and -1): until the end of the text or the context (256 here), never a refusal
for extra in ({}, {"n_predict": -1}):
    st, inf = post(U + "/completion", {"prompt": prompt, "temperature": 0, "ignore_eos": True, **extra})
    c.check(st == 200 and inf["tokens_predicted"] + inf["tokens_evaluated"] == 256 and inf["stop_type"] == "limit",
            "/completion %s: generates until the context: %s" % (extra, {k: inf.get(k) for k in ("tokens_predicted", "tokens_evaluated", "stop_type")} if isinstance(inf, dict) else inf))
st, e = post(U + "/completion", {"n_predict": 3})
c.check(st == 400 and "prompt" in e["error"]["message"], "/completion without a prompt: 400: %s" % e)
st, e = post(U + "/completion", b"[1, 2]")
c.check(st == 400, "/completion: a body that is not an object: %s" % st)
st, slots = get(U + "/slots")
c.check(any(s_["n_past"] >= ntok for s_ in slots), "/slots: a served slot holds its tokens: %s" % slots)

# echo on /v1/completions: the prompt's text, then the same answer
st, ech = post(U + "/v1/completions", {"prompt": prompt, "max_tokens": 12, "temperature": 0, "echo": True})
c.check(st == 200 and ech["choices"][0]["text"] == prompt + ref["choices"][0]["text"]
        and ech["usage"]["completion_tokens"] == 12, "echo: the prompt, then the answer: %s" % ech)
events = sse(U + "/v1/completions", {"prompt": prompt, "max_tokens": 12, "temperature": 0, "echo": True, "stream": True})
c.check(events[-1] == "[DONE]" and "".join(e["choices"][0]["text"] for e in events[:-1]) == ech["choices"][0]["text"],
        "echo streamed: the same text: %s" % events)
st, ech = post(U + "/v1/completions", {"prompt": tok["tokens"], "max_tokens": 2, "temperature": 0, "echo": True})
c.check(st == 200 and ech["choices"][0]["text"].startswith("Hello world, héllo"), "echo of token ids: %s" % ech)
st, e = post(U + "/v1/completions", {"prompt": prompt, "max_tokens": 2, "echo": True, "logprobs": 1})
c.check(st == 400 and "echo" in e["error"]["message"], "echo with logprobs: 400 saying why: %s" % e)

# n > 1: several choices, each its own job (seed + i), decoded together by the engine
st, one = post(U + "/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 6,
                                            "temperature": 0})
st, three = post(U + "/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 6,
                                              "temperature": 0, "n": 3})
c.check(st == 200 and [ch["index"] for ch in three["choices"]] == [0, 1, 2]
        and all(ch["message"]["content"] == one["choices"][0]["message"]["content"] for ch in three["choices"])
        and three["usage"]["prompt_tokens"] == one["usage"]["prompt_tokens"]
        and three["usage"]["completion_tokens"] == 3 * one["usage"]["completion_tokens"],
        "n = 3 greedy: three equal choices, the prompt counted once: %s vs %s" % (three, one))
body = {"prompt": prompt, "max_tokens": 8, "temperature": 1.5, "seed": 40, "n": 4}
st, four = post(U + "/v1/completions", body)
seeded = [post(U + "/v1/completions", {**body, "n": 1, "seed": 40 + i})[1]["choices"][0]["text"] for i in range(4)]
c.check(st == 200 and [ch["text"] for ch in four["choices"]] == seeded and len(set(seeded)) > 1,
        "n = 4 sampled: choice i is the answer of seed + i: %s vs %s" % ([ch["text"] for ch in four["choices"]], seeded))
events = sse(U + "/v1/completions", {**body, "stream": True, "stream_options": {"include_usage": True}})
texts, fins = {}, {}
for e in events[:-2]:
    for ch in e["choices"]:
        texts[ch["index"]] = texts.get(ch["index"], "") + ch["text"]
        if ch["finish_reason"]:
            fins[ch["index"]] = fins.get(ch["index"], 0) + 1
c.check(events[-1] == "[DONE]" and sum(1 for e in events if e == "[DONE]") == 1
        and texts == {i: seeded[i] for i in range(4)} and fins == {i: 1 for i in range(4)}
        and events[-2]["choices"] == [] and events[-2]["usage"]["completion_tokens"] == 32,
        "n = 4 streamed: each choice's text as unstreamed, one finish each, one usage, one [DONE]: %s" % events[-3:])
srv.stop()

c.done()
