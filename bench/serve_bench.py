#!/usr/bin/env python3
"""Aggregate decode speed and second-turn time to first token of an OpenAI-compatible server
(qhx serve, llama-server, ...), with the Python standard library only.

  serve_bench.py URL decode --streams 1,2,4,8 --tokens 32
      S streamed chat requests at once, different prompts, greedy, ignore_eos; the aggregate
      decode rate is the tokens all streams received while every one of them was decoding
      (between the last stream's first token and the first stream's end) over that time.
  serve_bench.py URL ttft --history 1000
      turn 1: a user message of about HISTORY tokens, answered with 16 tokens; turn 2: the
      same conversation + the answer + a short question. Times to first token of both turns
      (each turn streamed, one client), and the server's cached-token count when it says.
Prints one JSON line per measurement."""
import argparse
import http.client
import json
import threading
import time
import urllib.parse

WORDS = ("river stone light window garden music paper north summer quiet market letter "
         "engine forest silver harbour thunder candle meadow bridge").split()


def chat_stream(url, messages, max_tokens, extra=None):
    """One streamed chat request; returns (arrival time of each content chunk, usage or None)."""
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=3600)
    body = {"messages": messages, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "ignore_eos": True, "stream_options": {"include_usage": True},
            "chat_template_kwargs": {"enable_thinking": False}, **(extra or {})}
    conn.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError("HTTP %d: %s" % (resp.status, resp.read()[:300]))
    times, usage, buf = [], None, b""
    while True:
        chunk = resp.read1(65536)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            line = ev.decode().strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                conn.close()
                return times, usage
            js = json.loads(data)
            if js.get("usage"):
                usage = js["usage"]
            for ch in js.get("choices", []):
                d = ch.get("delta", {})
                if d.get("content") or d.get("reasoning_content"):
                    times.append(time.time())
    conn.close()
    return times, usage


def decode(url, streams, tokens):
    results = [None] * streams

    def one(i):
        msgs = [{"role": "user", "content": "Story %d: %s" % (i, " ".join(WORDS[(i + k) % len(WORDS)] for k in range(12)))}]
        results[i] = chat_stream(url, msgs, tokens)[0]

    ts = [threading.Thread(target=one, args=(i,)) for i in range(streams)]
    t0 = time.time()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    start = max(r[0] for r in results)  # every stream has its first token
    end = min(r[-1] for r in results)   # no stream has finished
    n = sum(sum(1 for x in r if start < x <= end) for r in results)
    wall = time.time() - t0
    total = sum(len(r) for r in results)
    return {"streams": streams, "tokens_per_stream": tokens, "aggregate_tok_s": n / (end - start) if end > start else None,
            "window_s": end - start, "chunks": total, "wall_s": wall}


def ttft(url, history):
    text = " ".join(WORDS[(k * 7) % len(WORDS)] for k in range(history))
    turn1 = [{"role": "user", "content": "Read this and remember it: " + text}]
    t0 = time.time()
    times, usage1 = chat_stream(url, turn1, 16)
    ttft1 = times[0] - t0
    # the answer as the client would send it back (its text is not needed for the timing; the
    # server gets the conversation it would get from a real client)
    answer = "Noted."
    turn2 = turn1 + [{"role": "assistant", "content": answer}, {"role": "user", "content": "What was the third word?"}]
    t0 = time.time()
    times, usage2 = chat_stream(url, turn2, 16)
    ttft2 = times[0] - t0
    cached = lambda u: ((u or {}).get("prompt_tokens_details") or {}).get("cached_tokens")
    return {"history_words": history, "prompt1": (usage1 or {}).get("prompt_tokens"), "ttft1_s": ttft1,
            "prompt2": (usage2 or {}).get("prompt_tokens"), "ttft2_s": ttft2, "ratio": ttft2 / ttft1,
            "cached2": cached(usage2)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("what", choices=["decode", "ttft"])
    ap.add_argument("--streams", default="1,2,4,8")
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--history", type=int, default=1000)
    a = ap.parse_args()
    if a.what == "decode":
        for s in [int(x) for x in a.streams.split(",")]:
            print(json.dumps(decode(a.url, s, a.tokens)), flush=True)
    else:
        print(json.dumps(ttft(a.url, a.history)), flush=True)


if __name__ == "__main__":
    main()
