"""qhx serve's HTTP/1.1 framing under hostile clients, over raw loopback sockets (the Python
standard library only). Usage: test_framing.py QHX DATA_DIR
Each case writes bytes a polite client would never send and checks the one answer RFC 9112 asks
for: the status, the OpenAI error shape, exactly one response, and the connection closed where
the framing cannot be trusted. Every socket has a timeout: the script cannot hang."""
import json
import socket
import sys
import time

from common import Checks, Server

QHX, DATA = sys.argv[1], sys.argv[2]
Q35 = DATA + "/fixtures/parity/qwen35-tiny-f32"
c = Checks()
TIMEOUT = 3  # --timeout: idle, header-section and body deadlines
srv = Server(QHX, Q35, "--parallel", "1", "--timeout", str(TIMEOUT), "--max-body", "65536")
PORT = int(srv.url.rsplit(":", 1)[1])


def connect():
    return socket.create_connection(("127.0.0.1", PORT), timeout=10)


def read_all(s, limit=15):
    """Everything until the server closes (or limit seconds): (bytes, closed)."""
    data, t0 = b"", time.time()
    s.settimeout(1)
    while time.time() - t0 < limit:
        try:
            b = s.recv(65536)
        except socket.timeout:
            continue
        except OSError:
            return data, True
        if not b:
            return data, True
        data += b
    return data, False


def exchange(raw, limit=15):
    s = connect()
    s.sendall(raw)
    data, closed = read_all(s, limit)
    s.close()
    return data, closed


def responses(data):
    """[(status, headers, body)] of the responses in data, in order."""
    out = []
    while data:
        head, sep, rest = data.partition(b"\r\n\r\n")
        if not sep:
            out.append((-1, {}, data))
            break
        lines = head.decode("latin-1").split("\r\n")
        try:
            status = int(lines[0].split(" ")[1])
        except (IndexError, ValueError):
            out.append((-1, {}, data))
            break
        hdr = {}
        for l in lines[1:]:
            k, _, v = l.partition(":")
            hdr[k.strip().lower()] = v.strip()
        if status == 100:
            out.append((100, hdr, b""))
            data = rest
            continue
        if hdr.get("transfer-encoding") == "chunked":
            body = b""
            while True:
                size_line, _, rest = rest.partition(b"\r\n")
                n = int(size_line, 16)
                body, rest = body + rest[:n], rest[n + 2:]
                if n == 0:
                    break
        else:
            n = int(hdr.get("content-length", "0"))
            body, rest = rest[:n], rest[n:]
        out.append((status, hdr, body))
        data = rest
    return out


def is_error_shape(body, status):
    try:
        e = json.loads(body)["error"]
    except (ValueError, KeyError, TypeError):
        return False
    return isinstance(e.get("message"), str) and e["message"] and e.get("code") == status


def refused(raw, status, what, closed_too=True, limit=15):
    """One response with status in the error shape, and (closed_too) the connection closed."""
    t0 = time.time()
    data, closed = exchange(raw, limit)
    rs = responses(data)
    ok = len(rs) == 1 and rs[0][0] == status and is_error_shape(rs[0][2], status) and \
        rs[0][1].get("content-type") == "application/json"
    if closed_too:
        ok = ok and closed and rs and rs[0][1].get("connection") == "close"
    c.check(ok, "%s: want one %d%s, got %s closed=%s in %.1f s: %r" % (
        what, status, " and close" if closed_too else "", [r[0] for r in rs], closed, time.time() - t0, data[:400]))
    return rs


def get(path, extra=b"", method=b"GET", version=b"HTTP/1.1", host=True):
    return method + b" " + path + b" " + version + b"\r\n" + (b"Host: x\r\n" if host else b"") + extra + \
        b"Connection: close\r\n\r\n"


def post(path, body, extra=b""):
    return b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + extra + \
        b"Content-Length: %d\r\n\r\n" % len(body) + body


def served(raw, status, what):
    data, _ = exchange(raw)
    rs = responses(data)
    c.check(len(rs) >= 1 and rs[-1][0] == status, "%s: want %d, got %s %r" % (what, status, [r[0] for r in rs], data[:300]))
    return rs


# ---- smuggling: conflicting or invalid lengths, CL with TE, unknown codings
smuggle = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n" \
          b"Content-Length: 57\r\n\r\n{}GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
refused(smuggle, 400, "two conflicting Content-Length headers (no second request from inside the body)")
refused(b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 2, 3\r\n\r\n{}", 400, "a Content-Length list that disagrees")
rs = served(b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 16\r\nContent-Length: 16\r\nConnection: close\r\n\r\n"
            b'{"content": "a"}', 200, "the same Content-Length twice is one length")
for bad in [b"-1", b"abc", b"1e3", b"12 34", b"+5", b"0x10", b""]:
    refused(b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: " + bad + b"\r\n\r\n{}", 400,
            "Content-Length %r (one status line, not two)" % bad)
refused(b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n{}", 413,
        "a Content-Length past any cap")
refused(b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"2\r\n{}\r\n0\r\n\r\n", 400, "Content-Length with Transfer-Encoding")
t0 = time.time()
refused(b"POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n{}", 400, "Transfer-Encoding: gzip")
c.check(time.time() - t0 < TIMEOUT - 0.5, "Transfer-Encoding: gzip answered at once, not at the timeout")
refused(b"POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501,
        "a coding before chunked")
refused(b"POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n", 400,
        "chunked twice")
refused(b"POST /tokenize HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400,
        "Transfer-Encoding on HTTP/1.0")
for bad in [b"zz", b"-5", b"0x10", b"", b"1 2", b"f" * 17]:
    refused(b"POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + bad + b"\r\n{}\r\n0\r\n\r\n",
            400, "chunk size %r" % bad)
refused(b"POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + b"f" * 15 + b"\r\n{}", 413,
        "a chunk size past --max-body")
refused(b"POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}XX0\r\n\r\n", 400,
        "chunk data not followed by CRLF")
rs = served(b"POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            b'5;name=v\r\n{"con\r\nB\r\ntent": "a"}\r\n0\r\nX-Trailer: 1\r\n\r\n', 200,
            "a chunked body with an extension and a trailer")
c.check(rs and b'"tokens"' in rs[-1][2], "the chunked body is read whole: %r" % (rs and rs[-1][2]))
refused(b"POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
        b"".join(b"8000\r\n" + b"a" * 0x8000 + b"\r\n" for _ in range(3)) + b"0\r\n\r\n", 413,
        "a chunked body past --max-body")

# ---- the target: NUL and control bytes, absolute form
for path in [b"/v1/models%00", b"/v1/models%00/../../secret", b"/health%00.json", b"/v1/models%0a", b"/health%7F",
             b"/v1/models%2", b"/v1/models%zz"]:
    refused(get(path), 400, "path %r" % path)
refused(post(b"/v1/chat/completions%00.txt", b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": 1}'), 400,
        "POST to a path with %00")
served(get(b"/v1/mod%65ls"), 200, "a percent-escaped letter decodes")
served(get(b"/health?x=%00"), 200, "the query is not part of the path")
served(get(b"http://127.0.0.1:%d/health" % PORT), 200, "an absolute-form target")
served(get(b"HTTP://example.com/v1/models?a=b"), 200, "an absolute-form target, upper-case scheme, with a query")
refused(get(b"*"), 400, "an asterisk-form target on GET")
refused(get(b"/health#frag"), 400, "a fragment in the target")

# ---- sizes: 414 for the request line, 431 for the header section
refused(get(b"/" + b"a" * 100000), 414, "a 100 KB URL")
refused(get(b"/" + b"a" * 9000), 414, "a 9 KB URL")
served(get(b"/" + b"a" * 7000), 404, "a 7 KB URL fits (404: no such endpoint)")
refused(b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: %s\r\n" % (i, b"v" * 1000) for i in range(70)) +
        b"\r\n", 431, "a 70 KB header section")
refused(b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(200)) + b"\r\n", 431,
        "200 header fields")

# ---- versions and malformed lines
refused(get(b"/health", version=b"HTTP/2.0"), 505, "HTTP/2.0")
refused(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505, "the HTTP/2 connection preface")
refused(b"GET /health\r\nHost: x\r\n\r\n", 400, "a request line without a version")
refused(b"GET /health HTTP/1.1 extra\r\nHost: x\r\n\r\n", 400, "a request line with four parts")
refused(b"GET  /health HTTP/1.1\r\nHost: x\r\n\r\n", 400, "two spaces in the request line")
refused(b"GET /health HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n folded\r\n\r\n", 400, "obsolete line folding")
refused(b"GET /health HTTP/1.1\r\nHost: x\r\nX-A : 1\r\n\r\n", 400, "whitespace before the colon")
refused(b"GET /health HTTP/1.1\r\nHost: x\r\nX-A: a\x01b\r\n\r\n", 400, "a control byte in a header value")
refused(b"GET /health HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n", 400, "a bare CR in a header line")
refused(b"GET /health HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n", 400, "a NUL in a header value")
refused(b"GET /health HTTP/1.1\r\nHost: x\r\nExpect: magic\r\n\r\n", 417, "an unknown expectation")
served(b"\r\nGET /health HTTP/1.1\nHost: x\nConnection: close\n\n", 200, "LF line ends and a leading empty line")

# ---- Host
refused(get(b"/health", host=False), 400, "HTTP/1.1 without Host")
refused(b"GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "two Host headers")
served(get(b"/health", version=b"HTTP/1.0", host=False), 200, "HTTP/1.0 without Host")

# ---- methods: 405 with Allow on a known path, 404 on an unknown one
for m in [b"POST", b"DELETE", b"PUT"]:
    rs = refused(get(b"/health", method=m), 405, "%s /health" % m, closed_too=False)
    c.check(rs and rs[0][1].get("allow") == "GET, HEAD", "%s /health: Allow: GET, HEAD (%s)" % (m, rs and rs[0][1]))
rs = refused(get(b"/v1/chat/completions"), 405, "GET /v1/chat/completions", closed_too=False)
c.check(rs and rs[0][1].get("allow") == "POST", "GET on a POST endpoint: Allow: POST (%s)" % (rs and rs[0][1]))
rs = refused(post(b"/v1/models", b"{}"), 405, "POST /v1/models", closed_too=False)
c.check(rs and rs[0][1].get("allow") == "GET, HEAD", "POST on a GET endpoint: Allow (%s)" % (rs and rs[0][1]))
rs = served(get(b"/health", method=b"HEAD"), 200, "HEAD /health")
c.check(rs and rs[0][2] == b"" and rs[0][1].get("content-length") == "15", "HEAD: the headers of GET, no body: %s" % rs)
refused(get(b"/nowhere", method=b"DELETE"), 404, "an unknown path with any method", closed_too=False)
refused(get(b"/health", method=b"G@T"), 400, "a method that is not a token")

# ---- keep-alive: pipelined requests are answered in order; 100-continue
data, _ = exchange(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n" + post(b"/tokenize", b'{"content": "ab"}') +
                   b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
rs = responses(data)
c.check([r[0] for r in rs] == [200, 200, 200] and b"tokens" in rs[1][2] and b"list" in rs[2][2],
        "three pipelined requests: %s" % [r[0] for r in rs])
s = connect()
s.sendall(b"POST /tokenize HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 16\r\nConnection: close\r\n\r\n")
first = s.recv(100)
s.sendall(b'{"content": "a"}')
data, _ = read_all(s)
s.close()
c.check(first.startswith(b"HTTP/1.1 100 Continue\r\n\r\n") and responses(data) and responses(data)[0][0] == 200,
        "Expect: 100-continue: %r then %r" % (first, data[:80]))

# a stream to an HTTP/1.0 client: no chunks (1.0 has none), the close ends the body
body = b'{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3, "stream": true}'
data, closed = exchange(b"POST /v1/chat/completions HTTP/1.0\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
head, _, rest = data.partition(b"\r\n\r\n")
c.check(head.startswith(b"HTTP/1.1 200 ") and b"transfer-encoding" not in head.lower() and closed and
        rest.startswith(b"data: {") and rest.endswith(b"data: [DONE]\n\n"), "an HTTP/1.0 stream: %r" % data[:300])

# ---- deadlines: the whole header section, the whole body, an idle connection
def dribble(prefix, pieces, every):
    """Send prefix, then one piece every `every` s while the server keeps the connection; return
    (what came back, seconds until it closed)."""
    s = connect()
    s.sendall(prefix)
    t0, data = time.time(), b""
    s.settimeout(every)
    for p in pieces:
        try:
            b = s.recv(4096)
            data += b
            if not b:
                break
        except socket.timeout:
            pass
        except OSError:
            break
        try:
            s.sendall(p)
        except OSError:
            break
    rest, _ = read_all(s, 5)
    s.close()
    return data + rest, time.time() - t0


data, took = dribble(b"GET /health HTTP/1.1\r\n", [b"X-%d: v\r\n" % i for i in range(40)], 0.5)
rs = responses(data)
c.check(rs and rs[0][0] == 408 and is_error_shape(rs[0][2], 408) and took < TIMEOUT + 2,
        "one header line every 0.5 s: 408 at the header deadline (%.1f s, --timeout %d): %r" % (took, TIMEOUT, data[:200]))
data, took = dribble(b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{", [b" "] * 40, 0.5)
rs = responses(data)
c.check(rs and rs[0][0] == 408 and is_error_shape(rs[0][2], 408) and took < TIMEOUT + 2,
        "one body byte every 0.5 s: 408 at the body deadline (%.1f s): %r" % (took, data[:200]))
data, took = dribble(b"POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
                     [b"1\r\n \r\n"] * 40, 0.5)
rs = responses(data)
c.check(rs and rs[0][0] == 408 and took < TIMEOUT + 2, "a chunk every 0.5 s: 408 at the body deadline (%.1f s)" % took)
s = connect()
t0 = time.time()
data, closed = read_all(s, TIMEOUT + 4)
c.check(closed and data == b"" and TIMEOUT - 0.5 < time.time() - t0 < TIMEOUT + 3,
        "an idle connection is closed quietly after --timeout (%.1f s, %r)" % (time.time() - t0, data))
s.close()
s = connect()
s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
t0 = time.time()
data, closed = read_all(s, TIMEOUT + 4)
rs = responses(data)
c.check(closed and [r[0] for r in rs] == [200] and TIMEOUT - 0.5 < time.time() - t0 < TIMEOUT + 3,
        "a kept-alive connection idles out after its answer (%.1f s)" % (time.time() - t0))
s.close()

# ---- connections: 128 per client address; the next one is closed at once, and served again after
idle = [connect() for _ in range(128)]
time.sleep(0.3)
t0 = time.time()
extra = connect()
extra.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
data, closed = read_all(extra, 2)
extra.close()
c.check(closed and data == b"" and time.time() - t0 < 1.5, "the 129th connection of one address is refused: %r" % data[:100])
for s in idle:
    s.close()
time.sleep(0.3)
served(get(b"/health"), 200, "served again once the 128 connections closed")

# ---- still serving
st = served(post(b"/v1/chat/completions", b'{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}'),
            200, "a chat request after all of the above")
srv.stop()
c.done()
