#!/usr/bin/env python3
"""Render released chat templates with transformers' own apply_chat_template over a matrix of
conversations, and store (or check) the results.

    python tests/hf/chat_templates.py --write    # (re)make tests/hf/chat/renders.jsonl
    python tests/hf/chat_templates.py --check    # re-render, compare with the stored file

Run in the HF environment (scripts/hf_env.sh). Templates: every tests/hf/chat/templates/NAME.jinja
(provenance in tests/hf/chat/NOTICE). Each is rendered through a tokenizer object
(PreTrainedTokenizerFast on tests/data/fixtures/tokenizer/qwen3/tokenizer.json, the template passed
as chat_template=), i.e. transformers' sandboxed Jinja environment with its own filters (tojson,
trim_blocks / lstrip_blocks, raise_exception, strftime_now), not a bare jinja2 render. The token
ids of each render (tokenize=True, same call) are stored too, so a runtime's chat path can be
compared at the id level.

renders.jsonl: one JSON object per line, keys: template, template_sha256, case, kwargs
(add_generation_prompt, enable_thinking, tools), messages, text, ids. The matrix covers: one user
turn; system + user; multi-turn with assistant replies; assistant reasoning given as
reasoning_content and as <think>...</think> in content, before and after the last user query;
whitespace around contents; non-ASCII text; empty contents; tool definitions, tool calls and
tool responses; add_generation_prompt on and off; enable_thinking unset, true and false.
A render that raises is stored with "error" instead of text/ids.
"""
import argparse
import hashlib
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.join(ROOT, "tests", "hf", "chat")
TOKENIZER = os.path.join(ROOT, "tests", "data", "fixtures", "tokenizer", "qwen3", "tokenizer.json")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}

CONVERSATIONS = {
    "user": [{"role": "user", "content": "Hello!"}],
    "system_user": [{"role": "system", "content": "You are a helpful assistant."},
                    {"role": "user", "content": "What is 2+2?"}],
    "multi_turn": [{"role": "system", "content": "Be brief."},
                   {"role": "user", "content": "Name a colour."},
                   {"role": "assistant", "content": "Blue."},
                   {"role": "user", "content": "Another one?"}],
    "reasoning_content": [{"role": "user", "content": "Is 7 prime?"},
                          {"role": "assistant", "content": "Yes.", "reasoning_content": "7 has no divisors but 1 and 7."},
                          {"role": "user", "content": "And 9?"},
                          {"role": "assistant", "content": "No.", "reasoning_content": "9 = 3 * 3."}],
    "think_in_content": [{"role": "user", "content": "Is 7 prime?"},
                         {"role": "assistant", "content": "<think>\nCheck 2..sqrt(7).\n</think>\n\nYes."},
                         {"role": "user", "content": "Thanks."}],
    "last_assistant_thinking": [{"role": "user", "content": "Pick a number."},
                                {"role": "assistant", "content": "<think>\nAny will do.\n</think>\n\n42"}],
    "whitespace": [{"role": "system", "content": "  padded system  \n"},
                   {"role": "user", "content": "\n\n  spaced user\t\n"},
                   {"role": "assistant", "content": "  spaced reply  "},
                   {"role": "user", "content": "end"}],
    "unicode": [{"role": "user", "content": "你好，世界 🌍 — café naïve Ωmega ﬁ"}],
    "empty": [{"role": "system", "content": ""}, {"role": "user", "content": ""}],
    "tools": [{"role": "system", "content": "Use tools when useful."},
              {"role": "user", "content": "Weather in Paris?"}],
    "tool_call_and_response": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "",
         "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "content": "{\"temp_c\": 18, \"sky\": \"clear\"}"},
        {"role": "user", "content": "Thanks!"}],
    "special_tokens_in_text": [{"role": "user", "content": "literal <|im_end|> and <think> in text"}],
}

KWARGS = []
for agp in (True, False):
    for think in (None, True, False):
        KWARGS.append({"add_generation_prompt": agp, "enable_thinking": think})


def templates():
    d = os.path.join(HERE, "templates")
    out = []
    for fn in sorted(os.listdir(d)):
        if fn.endswith(".jinja"):
            with open(os.path.join(d, fn), encoding="utf-8", newline="") as f:
                out.append((fn[:-6], f.read()))
    return out


def render_all():
    from transformers import PreTrainedTokenizerFast
    tok = PreTrainedTokenizerFast(tokenizer_file=TOKENIZER)
    rows = []
    for tname, tpl in templates():
        sha = hashlib.sha256(tpl.encode("utf-8")).hexdigest()
        for cname, msgs in CONVERSATIONS.items():
            for kw in KWARGS:
                call = {"add_generation_prompt": kw["add_generation_prompt"]}
                if kw["enable_thinking"] is not None:
                    call["enable_thinking"] = kw["enable_thinking"]
                tools = [WEATHER_TOOL] if cname.startswith("tool") else None
                row = {"template": tname, "template_sha256": sha, "case": cname,
                       "kwargs": dict(kw, tools=bool(tools)), "messages": msgs}
                try:
                    text = tok.apply_chat_template(msgs, chat_template=tpl, tools=tools, tokenize=False, **call)
                    ids = tok.apply_chat_template(msgs, chat_template=tpl, tools=tools, tokenize=True,
                                                  return_dict=False, **call)
                    if isinstance(ids, dict) or hasattr(ids, "keys"):
                        ids = ids["input_ids"]
                    row["text"] = text
                    row["ids"] = [int(i) for i in ids]
                except Exception as e:  # noqa: BLE001 - a template may refuse a conversation
                    row["error"] = "%s: %s" % (type(e).__name__, e)
                rows.append(row)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", action="store_true")
    g.add_argument("--check", action="store_true")
    a = ap.parse_args()
    import transformers
    rows = render_all()
    path = os.path.join(HERE, "renders.jsonl")
    if a.write:
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        with open(os.path.join(HERE, "renders.meta.json"), "w", encoding="utf-8") as f:
            json.dump({"transformers": transformers.__version__, "rows": len(rows),
                       "templates": sorted({r["template"] for r in rows})}, f, indent=1)
            f.write("\n")
        print("chat_templates: wrote %d renders to %s" % (len(rows), os.path.relpath(path, ROOT)))
        return
    with open(path, encoding="utf-8") as f:
        stored = [json.loads(l) for l in f]
    if not stored or not rows:
        print("chat_templates: nothing to compare (%d stored, %d rendered)" % (len(stored), len(rows)))
        sys.exit(1)
    key = lambda r: (r["template"], r["case"], json.dumps(r["kwargs"], sort_keys=True))
    have = {key(r): r for r in stored}
    bad = 0
    for r in rows:
        s = have.get(key(r))
        if s is None or s.get("text") != r.get("text") or s.get("ids") != r.get("ids") \
                or s.get("error") != r.get("error") or s["template_sha256"] != r["template_sha256"]:
            bad += 1
            print("DIFF %s %s %s" % key(r))
    if len(stored) != len(rows):
        bad += 1
        print("DIFF: %d stored renders, %d now" % (len(stored), len(rows)))
    print("chat_templates: %d renders, %d differ from %s" % (len(rows), bad, os.path.relpath(path, ROOT)))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
