#!/usr/bin/env python3
"""A video through the real openai client against qhx serve: time to the first token.

Starts `qhx serve -m MODEL --port 0 [SERVE_ARGS...]` on 127.0.0.1, sends one chat request whose
user message holds the video as a base64 `video_url` data URL and a question, streamed, through
the official `openai` Python client (the test venv's: build/serve-venv, made by
tests/cli/serve_openai.sh), and prints the answer, the time to the first streamed token (from
sending the request: the upload, the video's decoding and preprocessing, the vision tower, the
prefill and the first token), the total time, the usage (with "video_fitted" when the server
sampled fewer frames to fit its context) and the server's peak RSS.

Usage: video_openai.py QHX MODEL VIDEO [--prompt TEXT] [--max-tokens N] [-- SERVE_ARGS...]
  e.g. build/serve-venv/bin/python bench/video_openai.py build/bin/qhx BUNDLE clip.mp4 -- --ctx 2048
"""
import argparse
import base64
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

import openai


def start_server(qhx, model, extra):
    err = tempfile.TemporaryFile(mode="w+")
    p = subprocess.Popen([qhx, "serve", "-m", model, "--host", "127.0.0.1", "--port", "0", *extra],
                         stdout=subprocess.PIPE, stderr=err, text=True)
    line = p.stdout.readline()
    m = re.search(r"http://127\.0\.0\.1:(\d+)", line)
    if not m:
        p.kill()
        p.wait()
        err.seek(0)
        sys.exit("the server did not start: %r %s" % (line, err.read()))
    return p, err, "http://127.0.0.1:%s" % m.group(1)


def peak_rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def main():
    argv = sys.argv[1:]
    serve_args = []
    if "--" in argv:
        k = argv.index("--")
        argv, serve_args = argv[:k], argv[k + 1:]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("qhx")
    ap.add_argument("model")
    ap.add_argument("video")
    ap.add_argument("--prompt", default="What happens in this video?")
    ap.add_argument("--max-tokens", type=int, default=8)
    a = ap.parse_args(argv)
    with open(a.video, "rb") as f:
        url = "data:video/mp4;base64," + base64.b64encode(f.read()).decode()
    p, err, base = start_server(a.qhx, a.model, serve_args)
    try:
        client = openai.OpenAI(base_url=base + "/v1", api_key="none", timeout=3600, max_retries=0)
        messages = [{"role": "user", "content": [{"type": "video_url", "video_url": {"url": url}},
                                                 {"type": "text", "text": a.prompt}]}]
        t0 = time.monotonic()
        first = None
        text = []
        usage = None
        stream = client.chat.completions.create(model="qhx", messages=messages, max_tokens=a.max_tokens,
                                                temperature=0, stream=True,
                                                stream_options={"include_usage": True})
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                if first is None:
                    first = time.monotonic() - t0
                text.append(chunk.choices[0].delta.content)
            if chunk.usage is not None:
                usage = chunk.usage.model_dump()
        total = time.monotonic() - t0
        rss = peak_rss_kb(p.pid)
        print("answer: %r" % "".join(text))
        print("time to first token: %.1f s" % first if first is not None else "time to first token: (no token)")
        print("total: %.1f s" % total)
        print("usage: %s" % json.dumps(usage))
        print("server peak RSS: %d MB" % (rss // 1024))
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
        err.seek(0)
        log = err.read().strip()
        if log:
            print("server log:\n" + log)


if __name__ == "__main__":
    main()
