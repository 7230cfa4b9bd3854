#!/usr/bin/env python3
"""Aggregate decode speed and second-turn time to first token of an OpenAI-compatible server
(qhx serve, llama-server, ...), with the Python standard library only.

  serve_bench.py URL decode --streams 1,2,4,8 --tokens 32
      S streamed completion requests (chat-formatted prompts) at once, different prompts, greedy, ignore_eos; the aggregate
      decode rate is the tokens all streams received while every one of them was decoding
      (between the last stream's first token and the first stream's end) over that time.
  serve_bench.py URL ttft --history 1000
      turn 1: a user message of HISTORY tokens; turn 2: the same conversation + a short answer +
      a new question (chat-formatted completions of one token: the time to the answer is the
      prefill + one step). Times to first token of both turns
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


def chat_stream(url, prompt, max_tokens):
    """One streamed /v1/completions request of a prompt already in the chat format (a random-
    weight model's output is no valid reasoning or tool-call text, which llama-server's chat
    endpoint refuses); returns (arrival time of each text chunk, usage or None, the text)."""
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=3600)
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "ignore_eos": True, "stream_options": {"include_usage": True}}
    conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError("HTTP %d: %s" % (resp.status, resp.read()[:300]))
    times, usage, buf, text = [], None, b"", []
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
                return times, usage, "".join(text)
            js = json.loads(data)
            if js.get("usage"):
                usage = js["usage"]
            for ch in js.get("choices", []):
                if ch.get("text"):
                    times.append(time.time())
                    text.append(ch["text"])
    conn.close()
    return times, usage, "".join(text)


def user_turn(text):
    return "<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n" % text


def n_tokens(url, text):
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    conn.request("POST", "/tokenize", json.dumps({"content": text}), {"Content-Type": "application/json"})
    n = len(json.loads(conn.getresponse().read())["tokens"])
    conn.close()
    return n


def decode(url, streams, tokens):
    results = [None] * streams

    def one(i):
        p = user_turn("Story %d: %s" % (i, " ".join(WORDS[(i + k) % len(WORDS)] for k in range(12))))
        results[i] = chat_stream(url, p, tokens)[0]

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


def first_token_time(url, prompt):
    """Seconds to the answer of a one-token completion (prefill + one decode step), and its
    usage. The status is not looked at: llama-server answers 500 when a random-weight model's one
    token is not valid UTF-8 on its own, after doing the same work."""
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=3600)
    body = {"prompt": prompt, "max_tokens": 1, "temperature": 0, "ignore_eos": True, "cache_prompt": True}
    t0 = time.time()
    conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    raw = resp.read()
    dt = time.time() - t0
    conn.close()
    try:
        usage = json.loads(raw).get("usage")
    except ValueError:
        usage = None
    return dt, usage, resp.status


def ttft(url, history):
    """history: tokens of the first user message (sized with the server's /tokenize). Turn 2 is
    turn 1, a short answer and a new question, as a chat client sends the next turn."""
    words = []
    while n_tokens(url, " ".join(words)) < history:
        words += [WORDS[(len(words) * 7) % len(WORDS)] for _ in range(50)]
    while len(words) > 1 and n_tokens(url, " ".join(words)) > history:
        words.pop()
    turn1 = user_turn(" ".join(words))
    turn2 = turn1 + "Noted.<|im_end|>\n" + user_turn("What was the third word?")
    ttft1, usage1, st1 = first_token_time(url, turn1)
    ttft2, usage2, st2 = first_token_time(url, turn2)
    cached = lambda u: ((u or {}).get("prompt_tokens_details") or {}).get("cached_tokens")
    return {"history_tokens": history, "prompt1_tokens": n_tokens(url, turn1), "ttft1_s": ttft1,
            "prompt2_tokens": n_tokens(url, turn2), "ttft2_s": ttft2, "ratio": ttft2 / ttft1,
            "cached2": cached(usage2), "status": [st1, st2]}


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
