#!/usr/bin/env python3
"""scripts/check_layers.py on small trees made here: it passes a tree that follows its block and
fails, naming file and line, on each kind of problem it exists for (a forbidden include, a
cycle between declared layers, a cycle of includes between files, a cycle of calls between the
files of one folder, an include that resolves to nothing, a file in no layer, a malformed
block), so the check of the real tree cannot pass by checking nothing. Run as: test_check_layers.py SOURCE_DIR"""
import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(sys.argv[1] if len(sys.argv) > 1 else ".", "scripts", "check_layers.py")
failures = 0
checks = 0

GOOD_BLOCK = """# a comment line
core:
io: core
text: core, io
tools/app: core
tools/app/dev: tools/app io
"""


def make_tree(root, block, files):
    os.makedirs(os.path.join(root, "docs"), exist_ok=True)
    with open(os.path.join(root, "docs", "architecture.md"), "w") as f:
        f.write("# layers\n\ntext before\n\n```layers\n" + block + "```\n\ntext after\n")
    for rel, text in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)


def good_files():
    return {
        "src/core/a.h": "#pragma once\n#include <stdio.h>\n",
        "src/core/a.c": '#include "core/a.h"\n#include "a.h"\n',
        "src/io/b.h": '#include "core/a.h"\n',
        "src/io/b.c": '#include "io/b.h"\n',
        "src/text/t.c": '#include "io/b.h"\n#include "core/a.h"\n',
        "tools/app/cli.h": '#include "core/a.h"\n',
        "tools/app/main.c": '#include "cli.h"\n',
        "tools/app/dev/d.c": '#include "cli.h"\n#include "io/b.h"\n',
    }


def run(root, *paths):
    p = subprocess.run([sys.executable, SCRIPT, "--root", root, *paths], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def expect(name, block, files, rc_want, lines_want=(), paths=()):
    global failures, checks
    with tempfile.TemporaryDirectory(prefix="qhx_layers.") as root:
        make_tree(root, block, files)
        rc, out = run(root, *paths)
    checks += 1
    missing = [l for l in lines_want if l not in out]
    if rc != rc_want or missing:
        failures += 1
        print(f"FAIL: {name}: rc {rc} (want {rc_want}); missing {missing}\n{out}", file=sys.stderr)


# a tree that follows its block passes
expect("a good tree", GOOD_BLOCK, good_files(), 0, ["every one allowed, no cycle"])

# an include the block does not allow: one line, file and line named
bad = good_files()
bad["src/io/b.c"] = '#include "io/b.h"\n\n#include "text/x.h"\n'
bad["src/text/x.h"] = "\n"
expect("a forbidden include", GOOD_BLOCK, bad, 1,
       ["src/io/b.c:3: 'text/x.h' is not allowed from 'io' by docs/architecture.md ('text/x.h' is in 'text'; 'io' may include: core)"])

# the product part of a tool may not reach into the library; its dev part may
bad = good_files()
bad["tools/app/main.c"] = '#include "cli.h"\n#include "io/b.h"\n'
expect("a product file including an internal header", GOOD_BLOCK, bad, 1,
       ["tools/app/main.c:2: 'io/b.h' is not allowed from 'tools/app' by docs/architecture.md"])

# a cycle between declared layers, however the files include each other
expect("a cycle of layers", GOOD_BLOCK.replace("core:\n", "core: text\n"), good_files(), 1,
       ["docs/architecture.md: the declared layers form a cycle: core -> text -> core"])

# a cycle of includes between files of one layer
bad = good_files()
bad["src/io/c.h"] = '#include "io/d.h"\n'
bad["src/io/d.h"] = '#include "core/a.h"\n#include "c.h"\n'
expect("a file-level include cycle", GOOD_BLOCK, bad, 1, ["include cycle: src/io/c.h -> src/io/d.h -> src/io/c.h"])

# a file that includes itself
bad = good_files()
bad["src/core/self.h"] = '#include "self.h"\n'
expect("a file including itself", GOOD_BLOCK, bad, 1, ["include cycle: src/core/self.h -> src/core/self.h"])

# an include that resolves to no file
bad = good_files()
bad["src/core/a.c"] = '#include "core/missing.h"\n'
expect("an unresolved include", GOOD_BLOCK, bad, 1,
       ["src/core/a.c:1: 'core/missing.h' is no file beside it, above it, in src/ or in include/"])

# a file outside every declared layer
bad = good_files()
bad["src/extra/e.c"] = '#include "core/a.h"\n'
expect("an undeclared folder", GOOD_BLOCK, bad, 1, ["src/extra/e.c: in no layer declared by docs/architecture.md"])

# the block itself: an unknown layer, a repeated one, no block at all
expect("an unknown layer in the block", GOOD_BLOCK + "extra: nowhere\n", good_files(), 1,
       ["layer 'extra' may include 'nowhere', which is not declared"])
expect("a repeated layer", GOOD_BLOCK + "io:\n", good_files(), 1, ["layer 'io' is declared twice"])
with tempfile.TemporaryDirectory(prefix="qhx_layers.") as root:
    make_tree(root, "", good_files())
    with open(os.path.join(root, "docs", "architecture.md"), "w") as f:
        f.write("no block here\n")
    rc, out = run(root)
    checks += 1
    if rc != 1 or "no ```layers block" not in out:
        failures += 1
        print(f"FAIL: no block: rc {rc}\n{out}", file=sys.stderr)

# paths as arguments: only those are scanned (the bad file elsewhere is not read)
bad = good_files()
bad["src/io/b.c"] = '#include "text/x.h"\n'
bad["src/text/x.h"] = "\n"
expect("scanning given paths only", GOOD_BLOCK, bad, 0, ["every one allowed"], paths=("src/core", "tools"))
expect("scanning a given file", GOOD_BLOCK, bad, 1, ["src/io/b.c:1: 'text/x.h' is not allowed from 'io'"],
       paths=("src/io/b.c",))

# a call cycle between two .c files of one folder: a.c calls what b.c defines and back
bad = good_files()
bad["src/io/b.c"] = '#include "io/b.h"\nint io_b(int x) {\n    return x ? io_c(x - 1) : 0;\n}\n'
bad["src/io/c.c"] = '#include "io/b.h"\nint io_c(int x)\n{\n    return io_b(x);\n}\n'
expect("a call cycle inside a folder", GOOD_BLOCK, bad, 1,
       ["call cycle in src/io: src/io/b.c -> src/io/c.c -> src/io/b.c"])
# calls one way only, names in comments and strings, a static function of the same name, and
# the same call across folders: no cycle
ok = good_files()
ok["src/io/b.c"] = '#include "io/b.h"\nint io_b(int x) {\n    return io_c(x); /* io_d() */\n}\n'
ok["src/io/c.c"] = ('#include "io/b.h"\nint io_c(int x) {\n    const char *s = "io_b(1)";\n    return x + (s[0] == \'(\');\n}\n'
                    'static int io_b2(void) { return 0; }\n')
ok["src/io/d.c"] = '#include "io/b.h"\nstatic int io_b(int x) { return x; }\nint io_d(void) { return io_b(1); }\n'
ok["src/text/t.c"] = '#include "io/b.h"\nint t_x(void) { return io_b(0); }\n'
ok["src/core/a.c"] = '#include "core/a.h"\nint core_a(void) { return t_x(); }\n'
expect("calls that make no cycle", GOOD_BLOCK, ok, 0, ["every one allowed, no cycle"])

print(f"test_check_layers: {checks} checks, {failures} failed", file=sys.stderr)
sys.exit(1 if failures else 0)
