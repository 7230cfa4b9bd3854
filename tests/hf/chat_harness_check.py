#!/usr/bin/env python3
"""The Jinja2 set-up of tests/cli/lib/chat_templates.py (what `make test` renders the released
templates with, python3-jinja2 only) against transformers' own apply_chat_template, over the
same conversation matrix and every template in tests/data/chat_templates: the texts must be
equal (a conversation both refuse counts as equal).

    python tests/hf/chat_harness_check.py      # in the HF environment (scripts/hf_env.sh)
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "cli", "lib"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import chat_templates as harness  # noqa: E402


def render(fn):
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - a template may refuse a conversation
        return "refused: %s" % type(e).__name__


def main():
    from transformers import PreTrainedTokenizerFast
    tok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(ROOT, "tests", "data", "fixtures", "tokenizer", "qwen3",
                                                              "tokenizer.json"))
    tdir = os.path.join(ROOT, "tests", "data", "chat_templates")
    bad = 0
    for fn in sorted(f for f in os.listdir(tdir) if f.endswith(".jinja")):
        with open(os.path.join(tdir, fn), encoding="utf-8") as f:
            tpl = f.read()
        with open(os.path.join(tdir, fn[:-6] + ".json"), encoding="utf-8") as f:
            family = json.load(f)["family"]
        jt = harness.environment().from_string(tpl)
        same = 0
        convs = harness.conversations(family)
        for n, conv in enumerate(convs):
            kw = {k: v for k, v in conv.items() if k not in ("messages", "tools")}
            a = render(lambda: jt.render(messages=conv["messages"], tools=conv.get("tools"), **kw))
            b = render(lambda: tok.apply_chat_template(conv["messages"], chat_template=tpl, tools=conv.get("tools"),
                                                       tokenize=False, **kw))
            if a == b or (a.startswith("refused") and b.startswith("refused")):
                same += 1
            else:
                bad += 1
                print("DIFF %s conversation %d:\n  harness:      %r\n  transformers: %r" % (fn, n, a, b))
        print("%s: %d of %d conversations render the same in the harness and in transformers" % (fn, same, len(convs)))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
