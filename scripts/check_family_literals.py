#!/usr/bin/env python3
"""Check that the markers of the model families' formats are written only in the family folders.

A family's chat format and tokenizer (its turn, thinking, image and tool-call markers, its added
tokens) are data of that family: src/families/<name>/. Everything else (the other layers, the
tools, the public header) reads them from the family's descriptor, so a new family is one folder.

The markers are found, not listed: every string literal in the .c and .h files of the family
folders (src/families/*/) is scanned for marker-shaped pieces: <|name|>, <name>, </name>,
<name= and </name= (name: letters, digits, '_' and '-'). Then every file under src/, tools/ and
include/ outside src/families/ (C sources and headers, scripts) is read whole, comments and
help texts too, and each line holding one of those markers is a problem:
    src/io/x.c:12: '<|im_end|>' is a marker of the family formats (src/families/qwen35/chat.c)
Exit status: 0 when no marker is written outside the family folders, 1 otherwise (also when no
marker was found at all: the check then checks nothing). Only the standard library.
"""
import argparse
import os
import re
import sys

MARKER_RE = re.compile(r"<\|[A-Za-z0-9_-]+\|>|</?[A-Za-z][A-Za-z0-9_-]*[>=]")
STRING_RE = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
SOURCE_SUFFIXES = (".c", ".h", ".def", ".cl", ".py", ".sh", ".cmake", ".txt")
SCANNED = ("src", "tools", "include")
FAMILIES = os.path.join("src", "families")


def strip_comments(text):
    """C text without /* */ and // comments (string literals kept), for finding the literals."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def family_markers(root):
    """{marker: the family file that first defines it}."""
    found = {}
    base = os.path.join(root, FAMILIES)
    for fam in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        folder = os.path.join(base, fam)
        if not os.path.isdir(folder):
            continue
        for dirpath, dirs, files in os.walk(folder):
            dirs.sort()
            for name in sorted(files):
                if not name.endswith((".c", ".h")):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    code = strip_comments(f.read())
                for lit in STRING_RE.findall(code):
                    for m in MARKER_RE.findall(lit):
                        found.setdefault(m, os.path.relpath(path, root))
    return found


def scanned_files(root):
    for top in SCANNED:
        for dirpath, dirs, files in os.walk(os.path.join(root, top)):
            rel = os.path.relpath(dirpath, root)
            dirs[:] = sorted(d for d in dirs
                             if os.path.join(rel, d) != FAMILIES and not d.startswith(".") and d != "__pycache__")
            for name in sorted(files):
                if name.endswith(SOURCE_SUFFIXES):
                    yield os.path.join(dirpath, name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    markers = family_markers(root)
    if not markers:
        print(f"{FAMILIES}: no family markers found (the check would check nothing)")
        return 1
    pattern = re.compile("|".join(re.escape(m) for m in sorted(markers, key=len, reverse=True)))
    problems = 0
    for path in scanned_files(root):
        with open(path, encoding="utf-8", errors="replace") as f:
            for no, line in enumerate(f, 1):
                for m in sorted(set(pattern.findall(line))):
                    print(f"{os.path.relpath(path, root)}:{no}: '{m}' is a marker of the family formats ({markers[m]})")
                    problems += 1
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
