"""Helpers for the qhx serve tests: start a server on a free loopback port, run qhx commands."""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request


class Server:
    """qhx serve -m MODEL --port 0 ARGS...; .url is http://127.0.0.1:PORT once it listens."""

    def __init__(self, qhx, model, *args):
        # stderr (the access log: a line per request) goes to a file, never a pipe that nobody
        # reads and whose filling would block the server
        self.err = tempfile.TemporaryFile(mode="w+")
        self.p = subprocess.Popen([qhx, "serve", "-m", model, "--port", "0", *args],
                                  stdout=subprocess.PIPE, stderr=self.err, text=True)
        line = self.p.stdout.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        if not m:
            self.p.kill()
            self.p.wait()
            raise RuntimeError("server did not start: %r %s" % (line, self.log()))
        self.url = "http://127.0.0.1:%s" % m.group(1)

    def log(self):
        """What the server wrote on stderr so far."""
        self.err.seek(0)
        return self.err.read()

    def pid(self):
        return self.p.pid

    def rss_kb(self):
        with open("/proc/%d/status" % self.p.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def stop(self):
        """SIGTERM: the server drains and exits 0."""
        self.p.send_signal(signal.SIGTERM)
        try:
            rc = self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            raise AssertionError("server did not exit within 30 s of SIGTERM")
        assert rc == 0, "server exited %d: %s" % (rc, self.log())


def post(url, body, headers=None, timeout=60):
    """POST JSON (a dict, or bytes as they are); returns (status, parsed JSON or text)."""
    data = body if isinstance(body, (bytes, bytearray)) else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, raw = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode("utf-8", "replace")


def qhx_generate(qhx, model, *args):
    """qhx generate's stdout (the text) for args."""
    r = subprocess.run([qhx, "generate", "-m", model, *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


def chat_format(qhx, model, conv):
    """The prompt text qhx chat-format renders for a conversation dict."""
    r = subprocess.run([qhx, "chat-format", "-m", model], input=json.dumps(conv), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


class Checks:
    def __init__(self):
        self.failed = 0

    def check(self, ok, what):
        if not ok:
            print("FAIL:", what)
            self.failed += 1

    def done(self):
        if self.failed:
            print("%d check(s) failed" % self.failed)
            sys.exit(1)
        print("ok")
        sys.exit(0)
