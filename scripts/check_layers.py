#!/usr/bin/env python3
"""Check the #include graph of the tree against the layers declared in docs/architecture.md.

The declaration is a fenced block in that file:

    ```layers
    core:
    io: core
    tools/qhx: include
    ```

Each line names a layer, then the layers its files may include from (spaces or commas between
them; '#' starts a comment). A layer is a folder: a name such as `core` is the folder src/core; a
name outside src/ is a path from the top of the tree (`include`, `tools/qhx`). A file belongs to
the layer of the longest name that holds it, so `tools/qhx/dev` can be declared apart from
`tools/qhx`. Files of one layer may always include each other.

Every `#include "..."` in the scanned files (by default src/, tools/ and include/; or the files
and folders given as arguments) is resolved as the build resolves it: beside the including file,
then in the folders above it, then in src/ and include/. The check fails, with one line per
problem, for
  - an include the declaration does not allow (file:line: 'x.h' is not allowed from 'io' ...),
  - an include that resolves to no file, a file in no declared layer,
  - a cycle among the declared layers, an unknown or repeated layer name in the declaration,
  - a cycle of includes between files (a.h -> b.h -> a.h), whatever their layers,
  - a cycle of calls between the .c files of one folder (a.c calls a function b.c defines, and
    b.c one that a.c defines, directly or around a longer circle): within a layer, files too
    call only downwards. A function is matched to the file that defines it (a definition at the
    start of a line, not static) by its name; comments, strings and character literals are
    left out first, so only real calls count.
Exit status: 0 when the tree follows the declaration, 1 otherwise. Only the standard library.
"""
import argparse
import os
import re
import sys

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
SCANNED_SUFFIXES = (".c", ".h", ".def", ".cpp", ".cc", ".hpp")
DEFAULT_PATHS = ("src", "tools", "include")


def parse_layers(doc_path, doc_label, problems):
    """The declared layers: {name: set of names it may include}, in declaration order."""
    try:
        with open(doc_path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        problems.append(f"{doc_label}: cannot read: {e.strerror}")
        return None
    start = next((i for i, l in enumerate(lines) if l.strip() == "```layers"), None)
    if start is None:
        problems.append(f"{doc_label}: no ```layers block declares the layers")
        return None
    layers = {}
    where = {}
    end = None
    for i in range(start + 1, len(lines)):
        text = lines[i].split("#", 1)[0].strip()
        if lines[i].strip().startswith("```"):
            end = i
            break
        if not text:
            continue
        lineno = i + 1
        if ":" not in text:
            problems.append(f"{doc_label}:{lineno}: '{text}' is not 'layer: layers it may include'")
            continue
        name, deps = text.split(":", 1)
        name = name.strip().strip("/")
        if not name or " " in name:
            problems.append(f"{doc_label}:{lineno}: '{text}' names no layer")
            continue
        if name in layers:
            problems.append(f"{doc_label}:{lineno}: layer '{name}' is declared twice (first on line {where[name]})")
            continue
        layers[name] = [d.strip("/") for d in re.split(r"[\s,]+", deps.strip()) if d]
        where[name] = lineno
    if end is None:
        problems.append(f"{doc_label}:{start + 1}: the ```layers block is not closed")
    for name, deps in layers.items():
        for d in deps:
            if d not in layers:
                problems.append(f"{doc_label}:{where[name]}: layer '{name}' may include '{d}', which is not declared")
    return {name: set(d for d in deps if d in layers) for name, deps in layers.items()}


def find_cycle(graph):
    """One cycle of a directed graph {node: iterable of nodes} as a list of nodes, or None."""
    state = {}
    for root in sorted(graph):  # sorted: the same cycle is reported whatever the hash seed
        if state.get(root):
            continue
        stack = [(root, iter(sorted(graph.get(root, ()))))]
        path = [root]
        state[root] = 1  # on the current path
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                path.pop()
                state[node] = 2  # done
                continue
            if state.get(child) == 1:
                return path[path.index(child):] + [child]
            if not state.get(child):
                state[child] = 1
                path.append(child)
                stack.append((child, iter(sorted(graph.get(child, ())))))
    return None


def strongly_connected(graph):
    """The strongly connected components of graph (Tarjan, iterative), as lists of nodes."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                out.append(comp)
    return out


class Tree:
    def __init__(self, root, layers):
        self.root = os.path.abspath(root)
        self.layers = layers
        # longest names first, so tools/qhx/dev wins over tools/qhx
        self.by_length = sorted(layers, key=lambda n: -len(n))

    def rel(self, path):
        return os.path.relpath(os.path.abspath(path), self.root).replace(os.sep, "/")

    def layer_of(self, rel):
        """The layer holding rel (a path from the root), or None."""
        key = rel[len("src/"):] if rel.startswith("src/") else rel
        for name in self.by_length:
            if key == name or key.startswith(name + "/"):
                return name
        return None

    def resolve(self, including, target):
        """The file an #include "target" in including names, as the build finds it, or None."""
        here = os.path.dirname(os.path.abspath(including))
        folders = []
        d = here
        while True:
            folders.append(d)
            if os.path.normpath(d) == self.root or os.path.dirname(d) == d:
                break
            if not (d + os.sep).startswith(self.root + os.sep):
                break
            d = os.path.dirname(d)
        folders += [os.path.join(self.root, "src"), os.path.join(self.root, "include")]
        for folder in folders:
            candidate = os.path.normpath(os.path.join(folder, target))
            if os.path.isfile(candidate):
                return candidate
        return None


def scanned_files(tree, paths, problems):
    files = []
    for p in paths:
        full = p if os.path.isabs(p) else os.path.join(tree.root, p)
        if os.path.isfile(full):
            files.append(os.path.abspath(full))
        elif os.path.isdir(full):
            for base, dirs, names in os.walk(full):
                dirs.sort()
                files += [os.path.abspath(os.path.join(base, n)) for n in sorted(names) if n.endswith(SCANNED_SUFFIXES)]
        else:
            problems.append(f"{p}: no such file or folder to scan")
    return sorted(set(files))


def check(root, doc, paths):
    problems = []
    doc_label = os.path.relpath(doc, root).replace(os.sep, "/") if os.path.abspath(doc).startswith(os.path.abspath(root)) else doc
    layers = parse_layers(doc, doc_label, problems)
    if layers is None:
        return problems, 0, 0
    cycle = find_cycle(layers)
    if cycle:
        problems.append(f"{doc_label}: the declared layers form a cycle: {' -> '.join(cycle)}")
    tree = Tree(root, layers)
    files = scanned_files(tree, paths, problems)
    graph = {}
    n_includes = 0
    for path in files:
        rel = tree.rel(path)
        layer = tree.layer_of(rel)
        if layer is None:
            problems.append(f"{rel}: in no layer declared by {doc_label}")
        graph.setdefault(rel, set())
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError as e:
            problems.append(f"{rel}: cannot read: {e.strerror}")
            continue
        for lineno, line in enumerate(lines, 1):
            m = INCLUDE_RE.match(line)
            if not m:
                continue
            n_includes += 1
            target = m.group(1)
            found = tree.resolve(path, target)
            if found is None:
                problems.append(f"{rel}:{lineno}: '{target}' is no file beside it, above it, in src/ or in include/")
                continue
            found_rel = tree.rel(found)
            graph[rel].add(found_rel)
            to_layer = tree.layer_of(found_rel)
            if layer is None or to_layer == layer:
                continue
            if to_layer is None:
                problems.append(f"{rel}:{lineno}: '{target}' ({found_rel}) is in no layer declared by {doc_label}")
            elif to_layer not in layers[layer]:
                allowed = ", ".join(sorted(layers[layer])) or "nothing but itself"
                problems.append(f"{rel}:{lineno}: '{target}' is not allowed from '{layer}' by {doc_label} "
                                f"('{target}' is in '{to_layer}'; '{layer}' may include: {allowed})")
    for comp in strongly_connected(graph):
        members = set(comp)
        if len(comp) == 1 and comp[0] not in graph.get(comp[0], ()):
            continue
        sub = {n: graph.get(n, set()) & members for n in members}
        cycle = find_cycle(sub)
        problems.append(f"include cycle: {' -> '.join(cycle)}")
    for cycle in call_cycles(tree, files):
        problems.append(f"call cycle in {os.path.dirname(cycle[0])}: {' -> '.join(cycle)}")
    return problems, n_includes, len(files)


C_NOISE_RE = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
DEFINITION_RE = re.compile(r'^(?!static\b|typedef\b|extern\b|#)[A-Za-z_][\w \t\*]*?\b([A-Za-z_]\w*)\s*\(([^;{}()]|\([^;{}()]*\))*\)\s*\{', re.M)
CALL_RE = re.compile(r'\b([A-Za-z_]\w*)\s*\(')
NOT_CALLS = {"if", "for", "while", "switch", "return", "sizeof", "defined", "_Alignof", "alignof", "_Static_assert"}


def code_of(path):
    """The text of a C file without comments, strings and character literals (lines kept)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return ""
    return C_NOISE_RE.sub(lambda m: "\n" * m.group(0).count("\n") + " ", text)


def call_cycles(tree, files):
    """Cycles of calls between the .c files of one folder, as lists of paths from the root."""
    defined, calls = {}, {}
    for path in files:
        if not path.endswith(".c"):
            continue
        rel = tree.rel(path)
        code = code_of(path)
        names = set(m.group(1) for m in DEFINITION_RE.finditer(code))
        for n in names:
            defined.setdefault(n, set()).add(rel)
        calls[rel] = set(m.group(1) for m in CALL_RE.finditer(code)) - NOT_CALLS
    graph = {}
    for rel, called in calls.items():
        folder = os.path.dirname(rel)
        graph[rel] = set()
        for n in called:
            owners = defined.get(n, ())
            if len(owners) != 1:  # unknown, or defined twice (test doubles): no edge
                continue
            (owner,) = owners
            if owner != rel and os.path.dirname(owner) == folder:
                graph[rel].add(owner)
    out = []
    for comp in strongly_connected(graph):
        if len(comp) > 1:
            members = set(comp)
            out.append(find_cycle({n: graph[n] & members for n in members}))
    return out


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=os.path.dirname(here), help="top of the tree (default: this script's parent folder)")
    ap.add_argument("--doc", default=None, help="the file with the ```layers block (default: ROOT/docs/architecture.md)")
    ap.add_argument("paths", nargs="*", help="files or folders to scan, from ROOT (default: src tools include)")
    a = ap.parse_args(argv)
    doc = a.doc or os.path.join(a.root, "docs", "architecture.md")
    paths = a.paths or [p for p in DEFAULT_PATHS if os.path.isdir(os.path.join(a.root, p))]
    result = check(a.root, doc, paths)
    problems = result[0]
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"check_layers: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print(f"check_layers: {result[2]} files, {result[1]} includes: every one allowed, no cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
