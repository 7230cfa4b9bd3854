#!/usr/bin/env python3
"""scripts/check_family_literals.py on small trees made here: it passes a tree whose markers stay
in the family folders, and fails, naming file, line and marker, when one is written elsewhere
(code, a comment, a help text, a tool) and when it finds no marker at all, so the check of the
real tree cannot pass by checking nothing. Run as: test_check_family_literals.py SOURCE_DIR"""
import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(sys.argv[1] if len(sys.argv) > 1 else ".", "scripts", "check_family_literals.py")
failures = 0
checks = 0

FAMILY = {
    "src/families/fam/chat.c": 'static const char *a = "<|turn|>", *b = "<tool>\\n<fn=";\n'
                               '/* "<|only_in_a_comment|>" is no marker */\n',
    "src/families/family.h": "/* the descriptor */\n",
    "src/io/plan.c": "/* a plan */\nint x;\n",
    "tools/app/main.c": 'const char *u = "usage: app [--chat]\\n";\n',
}


def expect(name, extra, rc_want, lines_want=(), lines_not=()):
    global failures, checks
    with tempfile.TemporaryDirectory(prefix="qhx_literals.") as root:
        files = dict(FAMILY)
        files.update(extra)
        for rel, text in files.items():
            if text is None:
                continue
            path = os.path.join(root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        p = subprocess.run([sys.executable, SCRIPT, "--root", root], capture_output=True, text=True)
        rc, out = p.returncode, p.stdout + p.stderr
    checks += 1
    bad = [l for l in lines_want if l not in out] + [l for l in lines_not if l in out]
    if rc != rc_want or bad:
        failures += 1
        print(f"FAIL {name}: rc {rc} (want {rc_want}); wanted / unwanted lines {bad}\n{out}")


expect("clean tree", {}, 0)
expect("a marker in code", {"src/io/plan.c": '/* a plan */\nconst char *t = "<|turn|>";\n'}, 1,
       ["src/io/plan.c:2: '<|turn|>' is a marker of the family formats (src/families/fam/chat.c)"])
expect("a marker in a comment", {"src/grammar/g.h": "/* after <fn= comes the name */\n"}, 1,
       ["src/grammar/g.h:1: '<fn='"])
expect("a marker in a help text", {"tools/app/main.c": 'const char *u = "ids hold <tool> runs\\n";\n'}, 1,
       ["tools/app/main.c:1: '<tool>'"])
expect("a marker in a script of the tools", {"tools/app/x.py": "END = '<|turn|>'\n"}, 1, ["tools/app/x.py:1:"])
expect("a comment in the family defines nothing", {"src/io/plan.c": "/* <|only_in_a_comment|> */\n"}, 0)
expect("a family folder writes its markers anywhere", {"src/families/fam/config.c": '/* <|turn|> */\n'}, 0)
expect("no marker at all", {"src/families/fam/chat.c": "int nothing;\n"}, 1, ["no family markers found"])

print(f"test_check_family_literals: {checks - failures}/{checks} passed")
sys.exit(1 if failures else 0)
