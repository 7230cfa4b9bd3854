"""qhx serve under hostile and odd input, with the Python standard library only (raw sockets
where the HTTP client would be too polite). Usage: test_http.py QHX DATA_DIR
Every bad request must get a 4xx in the OpenAI error shape, the server must stay up and keep
serving, a client that goes away must free its slot within a step, a slow client must not hold
a slot, and SIGTERM must drain and exit 0."""
import json
import socket
import struct
import sys
import threading
import time
import zlib

from common import Checks, Server, post

QHX, DATA = sys.argv[1], sys.argv[2]
Q35 = DATA + "/fixtures/parity/qwen35-tiny-f32"
VL = DATA + "/fixtures/parity/qwen3vl-tiny-f32"
c = Checks()


def metric(url, name):
    import urllib.request
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise KeyError(name)


def is_error(status, body, want):
    return status == want and isinstance(body, dict) and isinstance(body.get("error"), dict) and \
        isinstance(body["error"].get("message"), str) and body["error"].get("code") == want


srv = Server(QHX, Q35, "--parallel", "2", "--queue", "2", "--ctx", "8192", "--max-body", "65536", "--timeout", "2")
U = srv.url
CHAT = U + "/v1/chat/completions"
ok_body = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "temperature": 0}


def models_n_ctx(url):
    import urllib.request
    return json.loads(urllib.request.urlopen(url + "/v1/models", timeout=10).read())["data"][0]["meta"]["n_ctx"]


c.check(models_n_ctx(U) == 8192, "--ctx sets each slot's context over the default (/v1/models meta.n_ctx)")

# ---- bad input: one 4xx each, in the error shape
bad = [
    (b"{not json", 400, "malformed JSON"),
    (b"[1, 2]", 400, "not an object"),
    (b'{"messages": "hi"}', 400, "messages not a list"),
    (b'{"messages": []}', 400, "no messages"),
    (b'{"messages": [{"role": "user", "content": 5}]}', 400, "content a number"),
    (b'{"messages": [{"role": "wizard", "content": "x"}]}', 400, "unknown role"),
    (b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": -1}', 400, "negative max_tokens"),
    (b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": 99999999999999999999999}', 400, "huge max_tokens"),
    (b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": 1e400}', 400, "max_tokens overflowing double"),
    (b'{"messages": [{"role": "user", "content": "x"}], "temperature": "hot"}', 400, "temperature a string"),
    (b'{"messages": [{"role": "user", "content": "x"}], "temperature": -1}', 400, "negative temperature"),
    (b'{"messages": [{"role": "user", "content": "x"}], "top_p": 7}', 400, "top_p out of range"),
    (b'{"messages": [{"role": "user", "content": "x"}], "n": 17}', 400, "n = 17, past the cap"),
    (b'{"messages": [{"role": "user", "content": "x"}], "n": 0}', 400, "n = 0"),
    (b'{"messages": [{"role": "user", "content": "x"}], "n": 2.5}', 400, "n not an integer"),
    (b'{"messages": [{"role": "user", "content": "x"}], "stop": [1]}', 400, "stop not strings"),
    (b'{"messages": [{"role": "user", "content": "x"}], "stop_token_ids": 5}', 400, "stop_token_ids not a list"),
    (b'{"messages": [{"role": "user", "content": "x"}], "stop_token_ids": ["a"]}', 400, "stop_token_ids not ids"),
    (b'{"messages": [{"role": "user", "content": "x"}], "stop_token_ids": [-1]}', 400, "negative stop_token_ids"),
    (b'{"messages": [{"role": "user", "content": "x"}], "stop_token_ids": [99999999]}', 400, "stop_token_ids past the vocabulary"),
    (b'{"messages": [{"role": "user", "content": "x"}], "stream": "yes"}', 400, "stream a string"),
    (b'{"messages": [{"role": "user", "content": "\xff\xfe bad utf-8"}]}', 400, "invalid UTF-8"),
    (b'{"messages": [{"role": "user", "content": "x\\u0000y"}]}', 400, "NUL in content"),
    (b'{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}}]}]}', 400, "image on a text model"),
    (b'{"messages": [{"role": "user", "content": [{"type": "video"}]}]}', 400, "unknown part type"),
    (b'{"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]}', 400, "tool without function"),
    (b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": 9000}', 400, "max_tokens past the context"),
    (b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": 5000}', 400, "max_tokens past the server cap"),
    (b'{"messages": [{"role": "user", "content": "x"}], "top_logprobs": 500}', 400, "top_logprobs too many"),
    (b'{"messages": [{"role": "assistant", "content": "x", "tool_calls": [{"function": {"name": "f", "arguments": "[1]"}}]}, {"role": "user", "content": "y"}]}', 400, "arguments not an object"),
    (b'{"messages": [{"role": "assistant", "content": "x", "tool_calls": [{"function": {"name": "f", "arguments": "{not json"}}]}, {"role": "user", "content": "y"}]}', 400, "arguments not JSON"),
    (b'{"messages": [{"role": "assistant", "content": "x", "tool_calls": [{"function": {"name": "f", "arguments": "{\\"city\\": "}}]}, {"role": "user", "content": "y"}]}', 400, "arguments cut short"),
    (b'{"messages": [' + b",".join([b'{"role": "user", "content": "x"}'] * 1100) + b']}', 413, "too many messages"),
    (b'{"messages": [{"role": "user", "content": "' + b"a" * 70000 + b'"}]}', 413, "body over the cap"),
]
for body, want, what in bad:
    st, js = post(CHAT, body)
    c.check(is_error(st, js, want), "%s: want %d, got %d %s" % (what, want, st, str(js)[:200]))
st, js = post(U + "/v1/completions", b'{"prompt": [1, 2, 99999999]}')
c.check(is_error(st, js, 400), "completion id outside the vocabulary: %d %s" % (st, js))
for args in ['{not json', '{"city": ']:
    st, js = post(CHAT, {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "x", "tool_calls": [
        {"function": {"name": "f", "arguments": args}}]}, {"role": "user", "content": "y"}]})
    c.check(is_error(st, js, 400) and "messages[1].tool_calls[0].function.arguments" in js["error"]["message"],
            "invalid arguments %r: 400 naming the message and the field: %d %s" % (args, st, js))
st, js = post(CHAT, {"messages": [{"role": "assistant", "content": "x", "tool_calls": [
    {"function": {"name": "f", "arguments": '{"city": "Paris"}'}}]}, {"role": "user", "content": "y"}], "max_tokens": 1})
c.check(st == 200, "valid arguments as a JSON text: %d %s" % (st, js))
st, js = post(U + "/v1/completions", {"prompt": ["one", "two"]})
c.check(is_error(st, js, 400) and "2 prompts" in js["error"]["message"], "two prompts: %d %s" % (st, js))
st, js = post(U + "/tokenize", b'{"content": "a", "content": "b"}')
c.check(is_error(st, js, 400) and "duplicate" in js["error"]["message"], "tokenize a duplicate key: %d %s" % (st, js))
st, js = post(U + "/detokenize", b'{"tokens": [1], "tokens": [2]}')
c.check(is_error(st, js, 400), "detokenize a duplicate key: %d %s" % (st, js))
# the caps of docs/server.md's limits table that a small body can reach
x = {"messages": [{"role": "user", "content": "x"}]}
st, js = post(CHAT, dict(x, stop=["s%d" % i for i in range(17)]))
c.check(is_error(st, js, 400), "17 stop strings: %d %s" % (st, js))
st, js = post(CHAT, dict(x, stop=["s" * 257]))
c.check(is_error(st, js, 400), "a 257-byte stop string: %d %s" % (st, js))
st, js = post(CHAT, dict(x, max_tokens=1, stop=["s%d" % i for i in range(16)]))
c.check(st == 200, "16 stop strings are allowed: %d %s" % (st, js))
st, js = post(CHAT, dict(x, tools=[{"type": "function", "function": {"name": "f%d" % i}} for i in range(129)]))
c.check(is_error(st, js, 413), "129 tools: %d %s" % (st, js))
st, js = post(U + "/v1/completions", b'{"prompt": []}')
c.check(is_error(st, js, 400), "empty completion prompt: %d" % st)
st, js = post(U + "/detokenize", b'{"tokens": [-1]}')
c.check(is_error(st, js, 400), "detokenize a negative id: %d" % st)
st, js = post(U + "/tokenize", b'{"content": 3}')
c.check(is_error(st, js, 400), "tokenize a number: %d" % st)
st, js = post(U + "/nothing", b"{}")
c.check(is_error(st, js, 404), "unknown path: %d" % st)

# unknown fields are ignored; the server still answers after all of the above
body = dict(ok_body, frobnicate={"x": 1}, response_format={"type": "text"}, user="u")
st, js = post(CHAT, body)
c.check(st == 200 and js["choices"][0]["message"]["content"] is not None, "unknown fields ignored: %d %s" % (st, js))

# round trip through /tokenize and /detokenize
st, t = post(U + "/tokenize", {"content": "Hello wörld"})
st2, d = post(U + "/detokenize", {"tokens": t["tokens"]})
c.check(st == 200 and st2 == 200 and d["content"] == "Hello wörld", "tokenize/detokenize: %s %s" % (t, d))

# ---- an image bomb on the VL fixture: a PNG header claiming 40000 x 40000 pixels
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


bomb = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 40000, 40000, 8, 2, 0, 0, 0)) + \
    chunk(b"IDAT", zlib.compress(b"\0" * 100000)) + chunk(b"IEND", b"")
import base64
vsrv = Server(QHX, VL, "--parallel", "1")
st, js = post(vsrv.url + "/v1/chat/completions", {"messages": [{"role": "user", "content": [
    {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(bomb).decode()}},
    {"type": "text", "text": "x"}]}], "max_tokens": 2})
c.check(st in (400, 413) and "error" in js, "image bomb: %d %s" % (st, js))
st, js = post(vsrv.url + "/v1/chat/completions", {"messages": [{"role": "user", "content": [
    {"type": "image_url", "image_url": {"url": "data:image/png;base64,!!!"}}]}], "max_tokens": 2})
c.check(st == 400, "bad base64: %d %s" % (st, js))
st, js = post(vsrv.url + "/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "max_tokens": 2,
                                                  "tools": [{"type": "function", "function": {"name": "f"}}]})
c.check(st == 200 and js["usage"]["prompt_tokens"] > 20, "tools on Qwen3-VL are rendered: %d %s" % (st, js))
# a tool call the client gives with arguments that are not an object: a 400 naming the field
st, js = post(vsrv.url + "/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}, {
    "role": "assistant", "content": None, "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "[1]"}}]}],
    "max_tokens": 2})
c.check(st == 400 and "arguments" in js["error"]["message"], "Qwen3-VL call with list arguments: %d %s" % (st, js))
vsrv.stop()

# ---- a client that goes away mid-stream frees its slot within a step
def raw_request(body, path="/v1/chat/completions"):
    s = socket.create_connection(("127.0.0.1", int(U.rsplit(":", 1)[1])), timeout=10)
    data = json.dumps(body).encode()
    s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (
        path.encode(), len(data)) + data)
    return s


gen0, can0 = metric(U, "qhx_generated_tokens_total"), metric(U, "qhx_requests_cancelled_total")
long_stream = {"messages": [{"role": "user", "content": "go"}], "max_tokens": 4000, "temperature": 0,
               "ignore_eos": True, "stream": True}
s = raw_request(long_stream)
s.recv(4096)  # the headers and the first chunks
s.close()
t0 = time.time()
while metric(U, "qhx_slots_busy") and time.time() - t0 < 5:
    time.sleep(0.01)
freed = time.time() - t0
c.check(metric(U, "qhx_slots_busy") == 0, "the slot is free after the client left (%.2f s)" % freed)
c.check(metric(U, "qhx_requests_cancelled_total") == can0 + 1, "counted as cancelled")
made = metric(U, "qhx_generated_tokens_total") - gen0
c.check(made < 4000, "generation stopped early: %d of 4000 tokens" % made)
# the same for a non-streaming request
s = raw_request(dict(long_stream, stream=False))
time.sleep(0.05)
s.close()
t0 = time.time()
while metric(U, "qhx_slots_busy") and time.time() - t0 < 5:
    time.sleep(0.01)
c.check(metric(U, "qhx_slots_busy") == 0 and metric(U, "qhx_requests_cancelled_total") == can0 + 2,
        "a non-streaming request is cancelled too")

# ---- slow clients hold a connection, never a slot; the body deadline drops them
slow = []
for _ in range(4):
    s = socket.create_connection(("127.0.0.1", int(U.rsplit(":", 1)[1])), timeout=10)
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
    slow.append(s)


def dribble():
    for _ in range(10):
        for s in slow:
            try:
                s.send(b" ")
            except OSError:
                pass
        time.sleep(0.5)


th = threading.Thread(target=dribble)
th.start()
t0 = time.time()
st, js = post(CHAT, ok_body)
c.check(st == 200 and time.time() - t0 < 2, "served beside 4 slow clients: %d in %.2f s" % (st, time.time() - t0))
th.join()
closed = 0
for s in slow:  # each gets a 408 at the body deadline, then the connection closes
    s.settimeout(3)
    got = b""
    try:
        while True:
            b = s.recv(4096)
            if not b:
                break
            got += b
    except OSError:
        got = None
    closed += got is not None and got.startswith(b"HTTP/1.1 408 ") and b'"code":408' in got
    s.close()
c.check(closed == 4, "the slow bodies got 408 at the deadline and were closed: %d of 4" % closed)

# ---- queue full: 503 in the error shape (2 slots + 2 waiting)
def wait_for(name, value):
    t0 = time.time()
    while metric(U, name) < value and time.time() - t0 < 5:
        time.sleep(0.005)


socks = [raw_request(dict(long_stream, stream=False, max_tokens=4000)) for _ in range(2)]
wait_for("qhx_slots_busy", 2)
socks += [raw_request(dict(long_stream, stream=False, max_tokens=4000)) for _ in range(2)]
wait_for("qhx_queue_length", 2)
t0 = time.time()
qm = (metric(U, "qhx_queue_length"), metric(U, "qhx_slots_busy"), time.time() - t0)
st, js = post(CHAT, ok_body)
c.check(is_error(st, js, 503), "queue full: %d %s (queue, busy, wait: %s)" % (st, js, qm))
for s in socks:
    s.close()
t0 = time.time()
while (metric(U, "qhx_slots_busy") or metric(U, "qhx_queue_length")) and time.time() - t0 < 10:
    time.sleep(0.02)
st, js = post(CHAT, ok_body)
c.check(st == 200, "served again once the queue drained: %d" % st)

# ---- SIGTERM drains: a request in flight is answered, then the server exits 0
res = {}


def inflight():
    res["r"] = post(CHAT, dict(ok_body, max_tokens=1500, ignore_eos=True))


th = threading.Thread(target=inflight)
th.start()
time.sleep(0.05)
srv.stop()
th.join()
st, js = res["r"]
c.check(st == 200 and js["usage"]["completion_tokens"] == 1500, "the request in flight finished: %d" % st)

# ---- an API key: 401 without it, /health open
key = Server(QHX, Q35, "--api-key", "s3cret")
st, js = post(key.url + "/v1/chat/completions", ok_body)
c.check(is_error(st, js, 401), "no key: %d %s" % (st, js))
st, js = post(key.url + "/v1/chat/completions", ok_body, {"Authorization": "Bearer wrong"})
c.check(is_error(st, js, 401), "wrong key: %d" % st)
st, js = post(key.url + "/v1/chat/completions", ok_body, {"Authorization": "Bearer s3cret"})
c.check(st == 200, "right key: %d" % st)
import urllib.request
c.check(urllib.request.urlopen(key.url + "/health").status == 200, "/health needs no key")
# token ids past 1 Mi (this server has the default 32 MiB body cap)
big = b'{"tokens": [' + b",".join([b"1"] * ((1 << 20) + 1)) + b"]}"
st, js = post(key.url + "/detokenize", big, {"Authorization": "Bearer s3cret"})
c.check(is_error(st, js, 413) and "too many ids" in js["error"]["message"], "1 Mi + 1 ids: %d %s" % (st, str(js)[:200]))
key.stop()

# ---- the key from a file (first line, trimmed); SIGINT drains and exits 0 as SIGTERM does
import os
import signal
import tempfile
with tempfile.NamedTemporaryFile("w", suffix=".key", delete=False) as kf:
    kf.write("  from-a-file \nignored second line\n")
kfile = Server(QHX, Q35, "--api-key-file", kf.name)
st, js = post(kfile.url + "/v1/chat/completions", ok_body, {"Authorization": "Bearer from-a-file"})
c.check(st == 200, "key from a file: %d %s" % (st, js))
st, js = post(kfile.url + "/v1/chat/completions", ok_body, {"Authorization": "Bearer ignored second line"})
c.check(st == 401, "only the first line is the key: %d" % st)
kfile.p.send_signal(signal.SIGINT)
c.check(kfile.p.wait(timeout=30) == 0, "SIGINT: exit 0")
os.unlink(kf.name)
c.done()
