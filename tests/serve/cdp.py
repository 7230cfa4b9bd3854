"""A headless Chromium driven over the Chrome DevTools protocol, with the Python standard library
only: a minimal WebSocket client (RFC 6455: the handshake, masked client frames, fragmented
and 64-bit-length server frames) and the few protocol calls the web page's test needs.

The browser is kept to the loopback: every host name resolves to nothing but 127.0.0.1, and the
background services that would phone home (updates, sync, metrics, safe browsing) are off."""
import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


class WebSocket:
    def __init__(self, url, timeout=60):
        assert url.startswith("ws://"), url
        hostport, _, path = url[5:].partition("/")
        host, _, port = hostport.partition(":")
        self.sock = socket.create_connection((host, int(port or 80)), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(("GET /%s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                           "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % (path, hostport, key)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("the DevTools endpoint closed during the handshake")
            head += chunk
        head, self.buf = head.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise ConnectionError("WebSocket handshake refused: %r" % head[:200])

    def send(self, text):
        data = text.encode()
        n = len(data)
        header = bytes([0x81])  # FIN, text
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 65536:
            header += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("the DevTools connection closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv(self):
        """The next text message (fragments joined); control frames answered or skipped."""
        parts = []
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            mask = self._read(4) if b1 & 0x80 else None
            payload = self._read(n)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            op = b0 & 0x0F
            if op == 0x8:
                raise ConnectionError("the DevTools connection closed")
            if op in (0x9, 0xA):  # ping (pong not needed by DevTools), pong
                continue
            parts.append(payload)
            if b0 & 0x80:
                return b"".join(parts).decode()

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class Browser:
    """chromium --headless=new on a temporary profile; .page is the DevTools session of its tab.
    Events are kept in .events (console errors, exceptions, log entries, requests)."""

    def __init__(self, exe):
        self.profile = tempfile.mkdtemp(prefix="qhx-chromium-")
        args = [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
                "--user-data-dir=" + self.profile, "--no-first-run", "--no-default-browser-check",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-default-apps", "--disable-extensions", "--disable-domain-reliability",
                "--disable-client-side-phishing-detection", "--metrics-recording-only", "--no-pings",
                "--disable-features=Translate,OptimizationHints,MediaRouter,AutofillServerCommunication",
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
                "--window-size=1280,800", "about:blank"]
        self.log = open(os.path.join(self.profile, "chromium.log"), "w")
        self.p = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        port_file = os.path.join(self.profile, "DevToolsActivePort")
        deadline = time.time() + 30
        while not (os.path.exists(port_file) and open(port_file).read().count("\n") >= 1):
            if self.p.poll() is not None or time.time() > deadline:
                raise RuntimeError("chromium did not start: " + open(os.path.join(self.profile, "chromium.log")).read()[-2000:])
            time.sleep(0.05)
        port = int(open(port_file).read().split("\n")[0])
        self.ws = WebSocket(self._page_ws(port))
        self.next_id = 0
        self.events = []
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(domain + ".enable")

    def _page_ws(self, port):
        import urllib.request
        deadline = time.time() + 30
        while time.time() < deadline:
            targets = json.loads(urllib.request.urlopen("http://127.0.0.1:%d/json/list" % port, timeout=10).read())
            pages = [t for t in targets if t.get("type") == "page"]
            if pages:
                return pages[0]["webSocketDebuggerUrl"]
            time.sleep(0.1)
        raise RuntimeError("chromium has no page target")

    def call(self, method, **params):
        self.next_id += 1
        my = self.next_id
        self.ws.send(json.dumps({"id": my, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my:
                if "error" in msg:
                    raise RuntimeError("%s: %s" % (method, msg["error"]))
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def eval(self, expr):
        """The value of a JavaScript expression (awaited when it is a promise)."""
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError("JavaScript failed: %s: %s" % (expr[:120], r["exceptionDetails"]))
        return r["result"].get("value")

    def wait(self, expr, timeout=30, what=None):
        """Poll expr until it is truthy; its value, or an AssertionError after timeout seconds."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            v = self.eval(expr)
            if v:
                return v
            time.sleep(0.02)
        page = self.eval("document.getElementById('messages').innerText.slice(-600) + ' | status: ' + "
                         "document.getElementById('status').textContent")
        raise AssertionError("timed out waiting for %s; the page shows: %s" % (what or expr, page))

    def navigate(self, url):
        self.call("Page.navigate", url=url)
        self.wait("document.readyState === 'complete'", what="the page to load")

    def errors(self):
        """Console errors, uncaught exceptions and error log entries (CSP violations, failed loads)."""
        out = []
        for e in self.events:
            m, p = e["method"], e.get("params", {})
            if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console.%s: %s" % (p["type"], [a.get("value", a.get("description")) for a in p.get("args", [])]))
            elif m == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                out.append("exception: %s" % (d.get("exception", {}).get("description") or d.get("text")))
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append("log: %s %s" % (p["entry"].get("text"), p["entry"].get("url", "")))
        return out

    def requested_urls(self):
        return [e["params"]["request"]["url"] for e in self.events if e["method"] == "Network.requestWillBeSent"]

    def viewport(self, width, height, mobile=False):
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=mobile)

    def screenshot(self, path):
        data = self.call("Page.captureScreenshot", format="png")["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def close(self):
        self.ws.close()
        self.p.terminate()
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)
