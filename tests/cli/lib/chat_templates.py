#!/usr/bin/env python3
"""The built-in chat formats against released chat templates, token for token.

For every template TEMPLATES_DIR/NAME.jinja (with NAME.json: {"family": "qwen3_5" | "qwen3_vl",
"source": ..., "sha256": ..., optional "thinking_default": true | false}) this renders a matrix of conversations with Jinja2 the way
Hugging Face transformers' apply_chat_template does (a sandboxed environment with trim_blocks
and lstrip_blocks, raise_exception, tojson without ASCII escaping), renders the same
conversations with `qhx chat-format`, tokenizes both with `qhx tokenize` and compares the ids.
A conversation the built-in format refuses (tools) is listed, not failed: a refusal is an
error the user sees, not a wrong prompt.

Usage: chat_templates.py QHX TEMPLATES_DIR QWEN35_MODEL QWEN3VL_MODEL
Exit: 0 all rendered conversations equal, 1 a difference (the first diverging token is shown),
77 no template to check.
"""
import hashlib
import itertools
import json
import os
import subprocess
import sys
import tempfile

import jinja2
import jinja2.sandbox


def environment():
    """Jinja as transformers configures it for chat templates."""
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                       extensions=["jinja2.ext.loopcontrols"])

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


def user(text, image=False):
    if not image:
        return {"role": "user", "content": text}
    return {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}


def conversations(family):
    """The matrix: system or not, 1 to 3 turns, reasoning in the history, thinking on/off/default,
    images, tools and tool responses."""
    out = []
    for system, turns, reasoning, image in itertools.product([None, "You are concise. "], [1, 2, 3],
                                                             [False, True], [False, True]):
        msgs = []
        if system:
            msgs.append({"role": "system", "content": system})
        for t in range(turns):
            msgs.append(user(" Question %d:\nwhat is %d + %d? " % (t, t, t + 1), image and t == turns - 1))
            if t < turns - 1:
                answer = {"role": "assistant", "content": "It is %d.\n" % (2 * t + 1)}
                if reasoning:
                    answer["content"] = "<think>\nadd them\n</think>\n\n" + answer["content"]
                msgs.append(answer)
        for thinking in ([None, True, False] if family == "qwen3_5" else [None]):
            conv = {"messages": msgs, "add_generation_prompt": True}
            if thinking is not None:
                conv["enable_thinking"] = thinking
            out.append(conv)
    # an answer to finish (no generation prompt), and reasoning_content as a field
    out.append({"messages": [user("Hi"), {"role": "assistant", "content": "Hello!", "reasoning_content": "greet"}],
                "add_generation_prompt": False})
    # tools: definitions, a call and its response
    out.append({"messages": [user("Weather in Paris?")], "tools": [TOOL], "add_generation_prompt": True})
    out.append({"messages": [user("Weather in Paris?"),
                             {"role": "assistant", "content": "", "tool_calls": [
                                 {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
                             {"role": "tool", "content": "sunny"}],
                "tools": [TOOL], "add_generation_prompt": True})
    # two calls with non-string arguments, two responses in a row, an answer after them, a system
    # message beside the tools, and reasoning before the calls
    two = [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}},
           {"type": "function", "function": {"name": "convert", "arguments": {
               "values": [1, 2.5], "opts": {"round": True, "unit": "°C"}, "note": None, "exact": False}}}]
    out.append({"messages": [{"role": "system", "content": "Be brief."}, user("Weather in Paris, in C?"),
                             {"role": "assistant", "content": "<think>\nneed tools\n</think>\n\nChecking.",
                              "tool_calls": two},
                             {"role": "tool", "content": "sunny, 21"}, {"role": "tool", "content": " 21 C "},
                             {"role": "assistant", "content": "Sunny, 21 C."}, user("Thanks")],
                "tools": [TOOL, {"type": "function", "function": {"name": "convert", "description": "Units é",
                                                                   "parameters": {"type": "object"}}}],
                "add_generation_prompt": True})
    # arguments given as a JSON text (Qwen3-VL prints it as it is), a call after content given
    # as a list, and a system message given as parts beside the tools
    out.append({"messages": [{"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
                             user("Weather?"),
                             {"role": "assistant", "content": [{"type": "text", "text": "One moment."}],
                              "tool_calls": [{"type": "function", "function": {
                                  "name": "get_weather", "arguments": "{\"city\":  \"Oslo\"}"}}]},
                             {"role": "tool", "content": [{"type": "text", "text": "snow"}]}],
                "tools": [TOOL], "add_generation_prompt": True})
    # floats and escapes as tojson writes them (Python's repr), in a definition and in arguments
    fl = {"type": "function", "function": {"name": "locate", "description": "Point \u001b\"q\"",
                                           "parameters": {"type": "object", "properties": {
                                               "lat": {"type": "number", "minimum": -90.0, "maximum": 90.5},
                                               "eps": {"type": "number", "default": 1e-05}}}}}
    out.append({"messages": [user("Where?"), {"role": "assistant", "content": "", "tool_calls": [
                    {"type": "function", "function": {"name": "locate", "arguments": {
                        "lat": 48.85, "lon": 2.35, "big": 1e16, "tiny": 0.0001, "third": 1 / 3, "neg": -0.0,
                        "n": [0.1, 100.0, 1e22], "s": "tab\there \u00e9"}}}]},
                             {"role": "tool", "content": "ok"}],
                "tools": [fl], "add_generation_prompt": True})
    # add_vision_id: pictures numbered across the user turns and a tool response
    pics = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "and"}, {"type": "image"}]},
            {"role": "assistant", "content": "", "tool_calls": [
                {"type": "function", "function": {"name": "get_weather", "arguments": {}}}]},
            {"role": "tool", "content": [{"type": "image"}, {"type": "text", "text": "a map"}]},
            {"role": "assistant", "content": "Done."},
            user("Compare", image=True)]
    for vid in (True, False):
        out.append({"messages": pics, "tools": [TOOL], "add_vision_id": vid, "add_generation_prompt": True})
        out.append({"messages": pics[:1], "add_vision_id": vid, "add_generation_prompt": False})
    return out


def tokenize(qhx, model, text):
    r = subprocess.run([qhx, "tokenize", "-m", model], input=text.encode(), capture_output=True)
    if r.returncode:
        raise SystemExit("FAIL: qhx tokenize: " + r.stderr.decode(errors="replace"))
    return [int(t) for t in r.stdout.split()]


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def check_template(qhx, path, meta, models, tmp):
    env = environment()
    template = env.from_string(open(path, encoding="utf-8").read())
    model = models[meta["family"]]
    failed = refused = checked = 0
    for n, conv in enumerate(conversations(meta["family"])):
        kwargs = {k: v for k, v in conv.items() if k != "messages"}
        try:
            want = template.render(messages=conv["messages"], **kwargs)
        except (jinja2.exceptions.TemplateError, TypeError) as e:  # a string of arguments: TypeError
            want = None
            why = str(e)
        conv_path = os.path.join(tmp, "conv%d.json" % n)
        ours = dict(conv)
        # The template's own default when enable_thinking is unset (meta "thinking_default": the
        # small Qwen3.5 variants think only when asked, the larger ones unless told not to); the
        # run plan carries that default for qhx (generation.thinking), so it is passed explicitly.
        if "enable_thinking" not in ours and "thinking_default" in meta:
            ours["enable_thinking"] = meta["thinking_default"]
        with open(conv_path, "w") as f:
            json.dump(ours, f)
        r = subprocess.run([qhx, "chat-format", "-m", model, conv_path], capture_output=True)
        if want is None:  # the template refuses: so must we
            if r.returncode == 0:
                print("FAIL: %s, conversation %d: the template refuses it (%s), qhx rendered it" % (path, n, why))
                failed += 1
            continue
        if r.returncode:
            refused += 1
            print("  not rendered by the built-in format: conversation %d (%s)" % (n, r.stderr.decode().strip()))
            continue
        got = r.stdout.decode()
        checked += 1
        a, b = tokenize(qhx, model, want), tokenize(qhx, model, got)
        if a != b:
            i = first_difference(a, b)
            print("FAIL: %s, conversation %d (%s): token %d differs: template %s, qhx %s\n  template: %r\n  qhx:      %r"
                  % (path, n, json.dumps(kwargs), i, a[max(0, i - 3):i + 4], b[max(0, i - 3):i + 4], want, got))
            failed += 1
    print("%s: %d conversations equal token for token, %d refused by the built-in format, %d failed"
          % (os.path.basename(path), checked - failed if failed <= checked else 0, refused, failed))
    return failed == 0


def main():
    qhx, tdir, q35, qvl = sys.argv[1:5]
    models = {"qwen3_5": q35, "qwen3_vl": qvl}
    names = sorted(f for f in os.listdir(tdir) if f.endswith(".jinja")) if os.path.isdir(tdir) else []
    if not names:
        print("chat_templates: no released template under %s (see its README.md): nothing checked" % tdir)
        return 77
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            path = os.path.join(tdir, name)
            meta = json.load(open(path[:-len(".jinja")] + ".json"))
            digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
            if meta.get("sha256") and meta["sha256"] != digest:
                print("FAIL: %s: sha256 %s, its .json says %s" % (path, digest, meta["sha256"]))
                ok = False
                continue
            ok &= check_template(qhx, path, meta, models, tmp)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
