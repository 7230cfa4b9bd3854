#!/usr/bin/env python3
"""qhx chat on a pseudo-terminal (what a person at a terminal gets): the banner, a pasted block of
three lines read as one message, /set and /system and /stats, the line history kept across runs
in XDG_STATE_HOME (readable by its owner only) and recalled with the Up arrow. Standard library
only. Prints one FAIL line per problem; exit 1 on any.

    chat_tty.py QHX MODEL STATE_DIR
"""
import os
import pty
import select
import stat
import sys
import time


def run(qhx, model, state, keys):
    """Run qhx chat on a pty, typing each of keys (bytes) after the output settles; returns
    everything the terminal showed (stdout and stderr share the pty)."""
    pid, fd = pty.fork()
    if pid == 0:
        env = dict(os.environ, XDG_STATE_HOME=state, TERM="xterm")
        os.execve(qhx, [qhx, "chat", "-m", model, "-n", "4", "--greedy"], env)
    out = b""

    def drain(quiet_s):
        nonlocal out
        last = time.time()
        while time.time() - last < quiet_s:
            r, _, _ = select.select([fd], [], [], 0.05)
            if r:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    return False
                if not chunk:
                    return False
                out += chunk
                last = time.time()
        return True

    drain(1.5)
    for k in keys:
        os.write(fd, k)
        if not drain(1.0):
            break
    deadline = time.time() + 20
    while time.time() < deadline:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        drain(0.2)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    return out.decode("utf-8", "replace")


def main():
    qhx, model, state = sys.argv[1:4]
    fails = []
    paste = b"\x1b[200~first line\nsecond line\nthird line\x1b[201~\r"
    out = run(qhx, model, state, [paste, b"/stats\r", b"/set temperature 0.5\r", b"/set\r",
                                  b"/system Be brief.\r", b"/system\r", b"hello there\r", b"/bye\r"])
    if "qhx chat: " not in out or "/help for commands" not in out:
        fails.append("no banner: %r" % out[:300])
    # one paste, one answer: /stats right after it shows the one answer's prompt
    n_answers = out.count("last answer:")
    if n_answers != 1:
        fails.append("/stats after the paste: %d lines (%r)" % (n_answers, out[-600:]))
    if "second line" not in out:
        fails.append("the pasted text was not shown")
    if "temperature 0.5 from the next answer on" not in out or "temperature 0.5, top_k" not in out:
        fails.append("/set temperature: %r" % out[-800:])
    if "system message set; new conversation" not in out or "system: Be brief." not in out:
        fails.append("/system: %r" % out[-800:])
    speed = [ln for ln in out.splitlines() if "tok/s" in ln]
    if len(speed) != 1:  # the speed line only on /stats (or --verbose)
        fails.append("speed lines outside /stats: %d (%r)" % (len(speed), out[-600:]))
    hist = os.path.join(state, "qhx", "chat_history")
    if not os.path.exists(hist):
        fails.append("no history file at %s" % hist)
    else:
        mode = stat.S_IMODE(os.stat(hist).st_mode)
        if mode & 0o077:
            fails.append("the history file is readable by others: %o" % mode)
        text = open(hist, encoding="utf-8", errors="replace").read()
        if "hello" not in text:
            fails.append("the history lacks the last message: %r" % text[:300])
    # a second run: the Up arrow twice brings back the last message (before /bye), sent again
    out2 = run(qhx, model, state, [b"\x1b[A", b"\x1b[A", b"\r", b"/stats\r", b"/bye\r"])
    if "hello there" not in out2 or out2.count("last answer:") != 1:
        fails.append("the history of the last run was not recalled: %r" % out2[-600:])
    for f in fails:
        print("FAIL: " + f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
