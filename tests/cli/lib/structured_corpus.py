#!/usr/bin/env python3
"""Every output `qhx generate --json-schema` makes under a schema is JSON that a real JSON Schema
validator (python3-jsonschema, formats checked) accepts. The corpus: hand-written schemas and
random ones drawn with a fixed seed (bounded: strings, arrays and numbers have limits, so every
output must end by itself within the token budget). Each schema runs greedy on one model and
sampled (temperature 1.5) on another: with tiny or random weights almost any token is likely,
which is what stresses the masks.

  structured_corpus.py QHX MODEL_A MODEL_B [--random N] [--seed S] [--tokens N] [--report FILE]
Exit 0 when every finished output validates and every bounded schema finished; 1 otherwise."""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

try:
    import jsonschema
    from jsonschema import Draft202012Validator
except ImportError:
    print("SKIP: python3-jsonschema is not installed (scripts/deps.sh installs it)")
    sys.exit(77)

PATTERNS = ["^[a-z]{1,5}$", "^\\d{3}-\\d{2}$", "^(foo|bar)[0-9]?$", "^[A-Z][a-z]{0,4}$", "^x\\.y[\\w]{0,3}$",
            "^(\"|')q[^a-z\"]{0,2}$"]
FORMATS = ["date", "time", "date-time", "uuid", "email"]
WORDS = ["id", "name", "count", "ok", "tags", "a b", "é", "x\"y", "kind", "v"]


def scalar(rng):
    return rng.choice([rng.randint(-50, 50), round(rng.uniform(-5, 5), 2), rng.choice(WORDS), True, False, None])


def rand_schema(rng, depth=0, defs=None):
    kinds = ["string", "integer", "number", "boolean", "null", "enum", "const", "format", "pattern", "union"]
    if depth < 3:
        kinds += ["array", "object", "object", "anyOf", "oneOf", "allOf", "tuple"]
        if defs is not None:
            kinds += ["ref"]
    k = rng.choice(kinds)
    if k == "string":
        hi = rng.randint(0, 6)
        s = {"type": "string", "maxLength": hi}
        if rng.random() < 0.5:
            s["minLength"] = rng.randint(0, hi)
        return s
    if k in ("integer", "number"):
        s = {"type": k}
        lo = rng.randint(-1000, 1000)
        r = rng.random()
        if r < 0.3:
            s["minimum"] = lo
        elif r < 0.6:
            s["maximum"] = lo
        elif r < 0.9:
            s["minimum" if rng.random() < 0.5 else "exclusiveMinimum"] = lo + (0.5 if k == "number" and rng.random() < 0.5 else 0)
            s["maximum" if rng.random() < 0.5 else "exclusiveMaximum"] = lo + rng.randint(2, 3000)
        return s
    if k in ("boolean", "null"):
        return {"type": k}
    if k == "enum":
        vals = []
        for _ in range(rng.randint(1, 5)):
            v = scalar(rng) if rng.random() < 0.8 else {"k": scalar(rng)}
            if v not in vals:
                vals.append(v)
        return {"enum": vals}
    if k == "const":
        return {"const": scalar(rng) if rng.random() < 0.7 else [scalar(rng), {"z": scalar(rng)}]}
    if k == "format":
        return {"type": "string", "format": rng.choice(FORMATS)}
    if k == "pattern":
        return {"type": "string", "pattern": rng.choice(PATTERNS)}
    if k == "union":
        return {"type": rng.sample(["string", "integer", "boolean", "null"], 2), "maxLength": 3}
    if k == "array":
        s = {"type": "array", "items": rand_schema(rng, depth + 1, defs), "maxItems": rng.randint(0, 3)}
        s["minItems"] = rng.randint(0, s["maxItems"])
        return s
    if k == "tuple":
        s = {"type": "array", "prefixItems": [rand_schema(rng, depth + 1, defs) for _ in range(rng.randint(1, 3))]}
        if rng.random() < 0.5:
            s["items"] = False
        else:
            s["items"] = rand_schema(rng, depth + 1, defs)
            s["maxItems"] = len(s["prefixItems"]) + rng.randint(0, 2)
        s["minItems"] = rng.randint(0, len(s["prefixItems"]))
        return s
    if k == "object":
        names = rng.sample(WORDS, rng.randint(0, 4))
        s = {"type": "object", "properties": {n: rand_schema(rng, depth + 1, defs) for n in names},
             "additionalProperties": False}
        s["required"] = [n for n in names if rng.random() < 0.6]
        return s
    if k == "anyOf":
        return {"anyOf": [rand_schema(rng, depth + 1, defs) for _ in range(rng.randint(2, 3))]}
    if k == "oneOf":  # branches of distinct types: they cannot overlap
        types = rng.sample(["string", "integer", "boolean", "null"], rng.randint(2, 3))
        return {"oneOf": [{"type": t, "maxLength": 4} if t == "string" else {"type": t} for t in types]}
    if k == "allOf":
        a, b = rng.sample(WORDS, 2)
        return {"allOf": [{"type": "object", "properties": {a: rand_schema(rng, depth + 1, defs)}, "required": [a]},
                          {"properties": {b: {"type": "integer", "minimum": 0, "maximum": 9}}}]}
    # ref
    name = "d%d" % len(defs)
    defs[name] = rand_schema(rng, depth + 1, None)
    return {"$ref": "#/$defs/" + name}


def random_schema(rng):
    defs = {}
    s = rand_schema(rng, 0, defs)
    if defs:
        s = dict(s, **{"$defs": defs})
    return s


# (schema, bounded): unbounded ones may be cut by the token budget; those that end must validate
HANDWRITTEN = [
    ({"type": "object", "properties": {"name": {"type": "string", "maxLength": 10},
                                       "age": {"type": "integer", "minimum": 0, "maximum": 120}},
      "required": ["name", "age"], "additionalProperties": False}, True),
    ({"type": "array", "items": {"type": "integer", "minimum": -5, "maximum": 5}, "minItems": 2, "maxItems": 4}, True),
    ({"enum": ["red", "green", "blue", 7, None, {"x": [1, 2]}]}, True),
    ({"type": "string", "format": "date-time"}, True),
    ({"type": "string", "format": "uuid"}, True),
    ({"type": "string", "format": "email"}, True),
    ({"type": "string", "pattern": "^[A-Z]{2}-\\d{2,4}(x|y)?$"}, True),
    ({"type": ["number", "null"], "exclusiveMinimum": 0, "maximum": 1}, True),
    ({"$defs": {"pt": {"type": "object", "properties": {"x": {"type": "integer", "minimum": 0, "maximum": 9},
                                                        "y": {"type": "integer", "minimum": 0, "maximum": 9}},
                       "required": ["x", "y"], "additionalProperties": False}},
      "type": "array", "items": {"$ref": "#/$defs/pt"}, "maxItems": 3}, True),
    ({"oneOf": [{"type": "string", "maxLength": 3}, {"type": "integer", "minimum": 10, "maximum": 20}]}, True),
    ({"allOf": [{"properties": {"a": {"type": "boolean"}}, "required": ["a"]},
                {"properties": {"b": {"const": "fixed"}}, "required": ["b"]}]}, True),
    ({"type": "array", "prefixItems": [{"type": "string", "maxLength": 2}, {"type": "boolean"}], "items": False}, True),
    ({"type": "object", "properties": {"id": {"type": "integer", "minimum": 1, "maximum": 9}},
      "additionalProperties": {"type": "boolean"}, "required": ["id"]}, False),
    ({"type": "object"}, False),
    ({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}, False),
    ({"$defs": {"t": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/t"},
                                                                "maxItems": 2}},
                      "additionalProperties": False}}, "$ref": "#/$defs/t"}, False),
    ({"type": "number"}, True),
    ({"type": "integer", "minimum": -1000000, "maximum": -999}, True),
    ({"type": "string", "minLength": 2, "maxLength": 5}, True),
    ({"const": {"exact": [True, None, "s"]}}, True),
    ({"type": "object", "properties": {"when": {"type": "string", "format": "date"},
                                       "at": {"type": "string", "format": "time"}},
      "required": ["when"], "additionalProperties": False}, True),
]


def run(qhx, model, schema_path, temp, seed, tokens, ctx):
    cmd = [qhx, "generate", "-m", model, "-p", "Answer in JSON:", "-n", str(tokens), "--json", "--quiet",
           "--json-schema", schema_path, "--seed", str(seed)] + (["-c", str(ctx)] if ctx else [])
    cmd += ["--temp", str(temp)] if temp > 0 else ["--greedy"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    # exit 3: the output was cut by -n or the context before the schema's end (one stderr line
    # says so); a whole output exits 0
    if p.returncode not in (0, 3):
        return None, "exit %d: %s" % (p.returncode, p.stderr.strip()[:300])
    out = json.loads(p.stdout)
    cut = out["stop"] not in ("eos", "grammar complete")
    if cut != (p.returncode == 3):
        return None, "exit %d with stop %s (a cut output exits 3, a whole one 0)" % (p.returncode, out["stop"])
    if cut and p.stderr.count("the output is incomplete") != 1:
        return None, "cut (stop %s) without the one 'incomplete' line: %s" % (out["stop"], p.stderr.strip()[:300])
    return out, None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("qhx")
    ap.add_argument("models", nargs="+")
    ap.add_argument("--random", type=int, default=110)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--tokens", type=int, default=768)
    ap.add_argument("--handwritten", type=int, default=len(HANDWRITTEN), help="how many of the hand-written schemas")
    ap.add_argument("--ctx", type=int, default=0, help="-c for qhx generate (0: the model's)")
    ap.add_argument("--report")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    corpus = list(HANDWRITTEN[:a.handwritten]) + [(random_schema(rng), True) for _ in range(a.random)]
    fails, done, cut, runs = [], 0, 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        for i, (schema, bounded) in enumerate(corpus):
            Draft202012Validator.check_schema(schema)
            val = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
            path = os.path.join(tmp, "s%d.json" % i)
            with open(path, "w") as f:
                json.dump(schema, f)
            for j, model in enumerate(a.models):
                temp, seed = (0, 0) if j % 2 == 0 else (1.5, a.seed + i)
                runs += 1
                out, err = run(a.qhx, model, path, temp, seed, a.tokens, a.ctx)
                where = "schema %d %s on %s (temp %g)" % (i, json.dumps(schema)[:200], os.path.basename(model), temp)
                if err:
                    fails.append("%s: %s" % (where, err))
                    continue
                if out["stop"] not in ("eos", "grammar complete"):
                    cut += 1
                    if bounded:
                        fails.append("%s: a bounded schema's output did not end (%s): %r" % (where, out["stop"], out["text"][:200]))
                    continue
                try:
                    doc = json.loads(out["text"])
                    val.validate(doc)
                    done += 1
                except (ValueError, jsonschema.ValidationError) as e:
                    fails.append("%s: output %r does not validate: %s" % (where, out["text"][:300], str(e).splitlines()[0]))
    summary = "structured: %d schemas (%d random, seed %d), %d runs: %d outputs ended and validated, %d cut by the budget (unbounded schemas), %d failures" % (
        len(corpus), a.random, a.seed, runs, done, cut, len(fails))
    print(summary)
    for f in fails[:20]:
        print("FAIL:", f)
    if a.report:
        with open(a.report, "w") as f:
            f.write(summary + "\n")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
