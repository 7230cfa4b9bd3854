"""qhx serve's structured output: response_format json_object / json_schema (strict or not) in
chat, llama-server's json_schema and grammar fields in chat and completions, streamed and not;
every answer parses and validates (python3-jsonschema); schemas outside the subset and
conflicting fields are 400 naming the cause. Standard library + jsonschema only.
  test_structured.py QHX DATA_DIR"""
import json
import sys

from common import Checks, Server, post

try:
    import jsonschema
except ImportError:
    print("SKIP: python3-jsonschema is not installed")
    sys.exit(77)

SCHEMAS = [
    {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                      "temp": {"type": "number", "minimum": -50, "maximum": 60},
                                      "sky": {"enum": ["clear", "rain", "snow"]}},
     "required": ["city", "temp", "sky"], "additionalProperties": False},
    {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "minItems": 1, "maxItems": 4},
    {"anyOf": [{"type": "string", "format": "date"}, {"type": "null"}]},
]


TOOL_PARAMS = {"type": "object", "properties": {"days": {"type": "integer", "minimum": 1, "maximum": 7},
                                                "unit": {"enum": ["celsius", "fahrenheit"]},
                                                "note": {"const": "ok"}, "ids": {"type": "array", "items": {"type": "boolean"},
                                                                                 "maxItems": 2}},
               "required": ["days", "unit"]}
TOOLS = [{"type": "function", "function": {"name": "weather", "parameters": TOOL_PARAMS}},
         {"type": "function", "function": {"name": "clock", "parameters": {"type": "object", "properties":
                                           {"h": {"type": "integer", "minimum": 0, "maximum": 23}}, "required": ["h"]}}}]


def forced_calls(c, chat, msgs, label):
    """A call forced by tool_choice (required, named): one call, its arguments valid under the
    function's parameters schema, greedy and sampled."""
    by_name = {t["function"]["name"]: jsonschema.Draft202012Validator(t["function"]["parameters"]) for t in TOOLS}
    for choice in ("required", {"type": "function", "function": {"name": "weather"}}):
        for temp, seed in ((0, 0), (1.3, 1), (1.3, 2)):
            st, r = post(chat, {"messages": msgs, "max_tokens": 300, "temperature": temp, "seed": seed, "tools": TOOLS,
                                "tool_choice": choice})
            ch = r["choices"][0] if st == 200 else {}
            calls = (ch.get("message") or {}).get("tool_calls") or []
            ok = st == 200 and ch.get("finish_reason") == "tool_calls" and len(calls) == 1
            if ok:
                fn = calls[0]["function"]
                ok = fn["name"] in by_name and (choice == "required" or fn["name"] == "weather") and \
                    by_name[fn["name"]].is_valid(json.loads(fn["arguments"]))
            c.check(ok, "%s forced tool call %s temp %g: %d %s" % (label, choice, temp, st, json.dumps(r)[:300]))


def sse_text(url, body):
    import urllib.request
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    text, finish = "", None
    with urllib.request.urlopen(req, timeout=120) as r:
        for line in r.read().decode().splitlines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            ch = json.loads(line[6:])["choices"][0]
            text += (ch.get("delta") or {}).get("content") or ch.get("text") or ""
            finish = ch.get("finish_reason") or finish
    return text, finish


def main():
    qhx, data = sys.argv[1], sys.argv[2]
    c = Checks()
    s = Server(qhx, data + "/fixtures/parity/qwen35-tiny-f32")
    chat, comp = s.url + "/v1/chat/completions", s.url + "/v1/completions"
    msgs = [{"role": "user", "content": "Weather as JSON"}]
    try:
        for i, schema in enumerate(SCHEMAS):
            val = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
            for strict in (True, False):
                for temp in (0, 1.3):
                    rf = {"type": "json_schema", "json_schema": {"name": "s%d" % i, "strict": strict, "schema": schema}}
                    st, r = post(chat, {"messages": msgs, "max_tokens": 400, "temperature": temp, "seed": i,
                                        "response_format": rf})
                    ok = st == 200 and r["choices"][0]["finish_reason"] == "stop"
                    text = r["choices"][0]["message"]["content"] if st == 200 else str(r)
                    try:
                        ok = ok and val.is_valid(json.loads(text))
                    except ValueError:
                        ok = False
                    c.check(ok, "chat json_schema %d strict=%s temp %g: %r" % (i, strict, temp, text[:200]))
            body = {"messages": msgs, "max_tokens": 400, "temperature": 1.0, "seed": 7, "stream": True, "json_schema": schema}
            text, fin = sse_text(chat, body)
            c.check(fin == "stop" and val.is_valid(json.loads(text)), "streamed chat json_schema %d: %r" % (i, text[:200]))
            text, fin = sse_text(comp, {"prompt": "JSON:", "max_tokens": 400, "temperature": 1.0, "seed": 3, "stream": True,
                                        "json_schema": schema})
            c.check(fin == "stop" and val.is_valid(json.loads(text)), "streamed completion json_schema %d: %r" % (i, text[:200]))
        st, r = post(chat, {"messages": msgs, "max_tokens": 300, "response_format": {"type": "json_object"}})
        text = r["choices"][0]["message"]["content"] if st == 200 else ""
        try:
            obj = json.loads(text) if r["choices"][0]["finish_reason"] == "stop" else {}
        except ValueError:
            obj = None
        c.check(st == 200 and isinstance(obj, dict), "json_object: %r" % text[:200])
        st, r = post(comp, {"prompt": "Digits:", "max_tokens": 20, "temperature": 1.5, "seed": 1,
                            "grammar": "root ::= [0-9]{2} (\"-\" [a-c])?"})
        text = r["choices"][0]["text"] if st == 200 else ""
        c.check(st == 200 and len(text) in (2, 4) and text[:2].isdigit() and r["choices"][0]["finish_reason"] == "stop",
                "completion grammar: %r" % text)
        st, r = post(comp, {"prompt": "x", "max_tokens": 20, "grammar": ""})
        c.check(st == 200, "an empty grammar is none (llama-server's default)")
        forced_calls(c, chat, msgs, "Qwen3.5")
        for body, needle in [
            ({"messages": msgs, "response_format": {"type": "json_schema", "json_schema": {"schema": {"not": {}}}}}, "'not'"),
            ({"messages": msgs, "response_format": {"type": "yaml"}}, "'yaml'"),
            ({"messages": msgs, "response_format": {"type": "json_schema", "json_schema": {"name": "x"}}}, "no 'schema'"),
            ({"messages": msgs, "grammar": "root ::= root \"a\""}, "left-recursive"),
            ({"messages": msgs, "grammar": "root ::= x", "json_schema": {}}, "give one of"),
            ({"prompt": "x", "json_schema": {"$ref": "#/nowhere"}}, "names nothing"),
            ({"messages": msgs, "response_format": {"type": "json_object"}, "tool_choice": "required",
              "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]}, "forces a tool call"),
            ({"messages": msgs, "tool_choice": "required",
              "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties":
                                                          {"a": {"type": "string", "maxLength": 3}}}}}]}, "'maxLength'"),
        ]:
            st, r = post(comp if "prompt" in body else chat, body)
            msg = r.get("error", {}).get("message", "") if isinstance(r, dict) else str(r)
            c.check(st == 400 and needle in msg, "400 for %s: %d %s" % (needle, st, msg))
    finally:
        s.stop()
    v = Server(qhx, data + "/fixtures/parity/qwen3vl-tiny-f32")
    try:
        forced_calls(c, v.url + "/v1/chat/completions", [{"role": "user", "content": "Weather in Paris?"}], "Qwen3-VL")
    finally:
        v.stop()
    c.done()


if __name__ == "__main__":
    main()
