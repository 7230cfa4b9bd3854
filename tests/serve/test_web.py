"""qhx serve's web chat page (GET /) in a real browser: headless Chromium driven over the
DevTools protocol (cdp.py). Usage: test_web.py QHX DATA_DIR MODEL SHOT_DIR
What it checks: the page's HTTP answer (type, cache, a Content-Security-Policy that allows no
other origin and whose hashes are those of the page's own script and style); in the browser, no
console error, no request to any other address, an answer that streams in (and equals the
server's own answer to the same request), stop mid-answer (the server sees the client go), a
regenerated answer, an edited message, the conversation surviving a reload, hostile Markdown
rendered inert, thinking folded, an API key asked for and sent, an image sent to a model with a
vision tower; screenshots at desktop (1280x800) and phone (390x844) widths into SHOT_DIR."""
import base64
import hashlib
import json
import os
import re
import sys
import time
import urllib.request

from cdp import Browser, find_chromium
from common import Checks, Server, post

QHX, DATA, MODEL, SHOTS = sys.argv[1:5]
VL = DATA + "/fixtures/parity/qwen3vl-tiny-f32"
c = Checks()

exe = find_chromium()
if not exe:
    print("SKIP: no chromium (scripts/deps.sh installs it)")
    sys.exit(77)


def get(url, method="GET"):
    req = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers.items()), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers.items()), e.read()


def csp_hash(text):
    return "'sha256-%s'" % base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


def js(s):
    return json.dumps(s)


def metric(url, name):
    for line in urllib.request.urlopen(url + "/metrics", timeout=10).read().decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise KeyError(name)


srv = Server(QHX, MODEL, "--parallel", "2", "--alias", "demo")
U = srv.url

# ---- the page over plain HTTP ----------------------------------------------------------------
st, hdr, page = get(U + "/")
h = {k.lower(): v for k, v in hdr.items()}
c.check(st == 200 and h.get("content-type") == "text/html; charset=utf-8", "GET / is the page: %s %s" % (st, hdr))
c.check(page.startswith(b"<!doctype html>") and int(h.get("content-length", -1)) == len(page), "the page's bytes")
c.check(h.get("cache-control") == "no-cache" and h.get("x-content-type-options") == "nosniff",
        "cache and sniffing headers: %s" % hdr)
csp = h.get("content-security-policy", "")
text = page.decode()
script = text[text.index("<script>") + 8:text.index("</script>")]
style = text[text.index("<style>") + 7:text.index("</style>")]
c.check("default-src 'none'" in csp and "connect-src 'self'" in csp and "frame-ancestors 'none'" in csp,
        "the policy allows nothing by default: %s" % csp)
c.check(not re.search(r"https?:|\*|unsafe", csp), "the policy names no origin, no wildcard, nothing unsafe: %s" % csp)
c.check("script-src %s;" % csp_hash(script) in csp and "style-src %s;" % csp_hash(style) in csp,
        "the policy's hashes are those of the page's own script and style: %s" % csp)
c.check(text.count("<script") == 1 and text.count("<style") == 1, "one script, one style")
c.check(not re.search(r"(src|href|action)\s*=\s*[\"']?\s*(https?:)?//", text, re.I), "the page loads nothing from elsewhere")
c.check(not re.search(r"\son[a-z]+\s*=|\sstyle\s*=", re.sub(r"<script>.*</script>|<!--.*?-->", "", text, flags=re.S), re.I),
        "no inline handlers or style attributes (the policy would block them)")
st2, _, page2 = get(U + "/index.html")
c.check(st2 == 200 and page2 == page, "GET /index.html is the same page")
st3, hdr3, body3 = get(U + "/", "HEAD")
c.check(st3 == 200 and body3 == b"" and int({k.lower(): v for k, v in hdr3.items()}["content-length"]) == len(page),
        "HEAD / has the headers and no body")
st4, hdr4, _ = get(U + "/", "POST")
c.check(st4 == 405 and {k.lower(): v for k, v in hdr4.items()}.get("allow") == "GET, HEAD", "POST / is 405: %s" % st4)
c.check(get(U + "/index.htm")[0] == 404, "only / and /index.html are the page")
meta = json.loads(get(U + "/v1/models")[2])["data"][0]["meta"]
c.check(meta.get("vision") is False and isinstance(meta.get("thinking"), bool),
        "/v1/models says whether the model takes images and thinks: %s" % meta)

# ---- in the browser --------------------------------------------------------------------------
b = Browser(exe)
ANSWER = "document.querySelector('#messages .msg.assistant:last-child .answer')"


def stored():
    """The conversations as the page keeps them in localStorage."""
    return b.eval("JSON.parse(localStorage.getItem('qhx.conversations') || '[]')")


def settings(**kw):
    """Fill the settings dialog as a user would, then close it."""
    b.eval("document.getElementById('settings-btn').click(), true")
    for key, value in kw.items():
        el = "document.getElementById(%s)" % js("s-" + key.replace("_", "-"))
        if isinstance(value, bool):
            b.eval("%s.checked = %s, true" % (el, "true" if value else "false"))
        else:
            b.eval("%s.value = %s, true" % (el, js(str(value))))
    b.eval("document.querySelector('#settings button[value=ok]').click(), true")
    b.wait("!document.getElementById('settings').open", what="the settings to close")


def send(message):
    b.eval("document.getElementById('input').value = %s, document.getElementById('send').click(), true" % js(message))


STORED_MSGS = "JSON.parse(localStorage.getItem('qhx.conversations'))[0].messages"


def last_answer_done():
    """The page idle, its last stored answer complete (not stopped)."""
    return idle() + " && ((m) => m.role === 'assistant' && m.done && !m.stopped && !!m.content)(%s.slice(-1)[0])" % STORED_MSGS


def idle():
    return "!document.getElementById('send').hidden && !document.querySelector('#messages .cursor')"


try:
    b.navigate(U + "/")
    b.wait("document.getElementById('model').textContent.indexOf('demo') === 0", what="the model's name from /v1/models")
    c.check(b.eval("document.getElementById('attach').hidden") is True, "no image button for a text-only model")
    c.check(b.eval("getComputedStyle(document.body).display") == "flex", "the page's style applies (CSP hash)")

    # an answer streams in: several partial texts seen before the end; it is the server's answer
    settings(temperature=0, max_tokens=48, seed=7, ignore_eos=True)
    # the partial texts are recorded in the page by a MutationObserver (every change of the
    # answer while the cursor shows), not by polling from here: a fast model can stream its
    # whole answer between two polls
    b.eval("window.qhxSeen = new Set(); new MutationObserver(() => { const a = %s;"
           " if (a && a.textContent && document.querySelector('#messages .cursor')) window.qhxSeen.add(a.textContent); })"
           ".observe(document.getElementById('messages'), {subtree: true, childList: true, characterData: true}); 0"
           % ANSWER)
    send("Speak of the king.")
    b.wait(last_answer_done(), what="the streamed answer's end", timeout=60)
    n_seen = b.eval("window.qhxSeen.size")
    c.check(n_seen >= 2, "the answer appears piece by piece while it streams (%d partial texts seen)" % n_seen)
    conv = stored()[0]
    answer = conv["messages"][1]["content"]
    st, ref = post(U + "/v1/chat/completions", {"messages": [{"role": "user", "content": "Speak of the king."}],
                                                "temperature": 0, "max_tokens": 48, "seed": 7, "ignore_eos": True})
    c.check(st == 200 and answer and answer == ref["choices"][0]["message"]["content"],
            "the streamed answer is the server's answer to the same request: %r vs %r" % (answer, ref))
    c.check(b.eval("document.querySelector('#messages .msg.assistant .note').textContent").startswith("48 tokens"),
            "the usage is shown under the answer")
    c.check(conv["title"] == "Speak of the king.", "the conversation is named after its first message")

    # stop mid-answer: the text stops growing, the answer is marked stopped, the server sees it go
    cancelled0 = metric(U, "qhx_requests_cancelled_total")
    settings(max_tokens=3000, ignore_eos=True, temperature=0.8, seed="")
    send("Tell a long tale.")
    b.wait("%s && %s.textContent.length > 20" % (ANSWER, ANSWER), what="the long answer to start")
    b.eval("document.getElementById('stop').click(), true")
    b.wait(idle(), what="the page to leave the streaming state after stop")
    n1 = b.eval("%s.textContent.length" % ANSWER)
    time.sleep(0.5)
    c.check(b.eval("%s.textContent.length" % ANSWER) == n1, "nothing arrives after stop")
    c.check(b.eval("!!document.querySelector('#messages .msg.assistant:last-child .stopped')"), "the answer says it was stopped")
    msgs = stored()[0]["messages"]
    c.check(msgs[-1].get("stopped") is True and msgs[-1]["content"], "the stopped answer is kept, marked as such")
    deadline = time.time() + 10
    while metric(U, "qhx_requests_cancelled_total") <= cancelled0 and time.time() < deadline:
        time.sleep(0.05)
    c.check(metric(U, "qhx_requests_cancelled_total") == cancelled0 + 1, "the server cancelled the stopped request")

    # regenerate the last answer, then edit the first message: what followed it is replaced
    settings(max_tokens=24, temperature=0, seed=3)
    b.eval("document.querySelector('#messages .msg.assistant:last-child .regenerate').click(), true")
    b.wait(last_answer_done(), what="the regenerated answer")
    msgs = stored()[0]["messages"]
    c.check(len(msgs) == 4 and not msgs[-1].get("stopped") and msgs[-1]["content"], "regenerate replaces the last answer")
    b.eval("document.querySelector('#messages .msg.user .edit').click(), true")
    b.eval("document.querySelector('#messages textarea.edit').value = 'Speak of the queen.', "
           "document.querySelector('#messages .save').click(), true")
    b.wait(last_answer_done() + " && %s.length === 2" % STORED_MSGS, what="the answer to the edited message")
    msgs = stored()[0]["messages"]
    c.check(len(msgs) == 2 and msgs[0]["content"] == "Speak of the queen." and msgs[1]["content"],
            "an edited message drops what followed and gets a new answer: %s" % [m["content"][:20] for m in msgs])

    # a second conversation with a system prompt, then a reload: both come back as they were
    b.eval("document.getElementById('new-chat').click(), true")
    settings(system="You are a player in a Shakespeare play.")
    send("Who goes there?")
    b.wait(idle(), what="the second conversation's answer")
    before = b.eval("document.getElementById('messages').innerText")
    b.call("Page.reload")
    b.wait("document.readyState === 'complete' && document.querySelectorAll('#conv-list li').length === 2",
           what="the conversations after a reload")
    b.wait("document.getElementById('model').textContent.indexOf('demo') === 0", what="the model name after a reload")
    c.check(b.eval("document.getElementById('messages').innerText") == before, "the conversation survives a reload")
    convs = stored()
    c.check(len(convs) == 2 and convs[0]["system"] == "You are a player in a Shakespeare play.",
            "the system prompt is kept with its conversation")

    # screenshots of that conversation: desktop and phone widths
    os.makedirs(SHOTS, exist_ok=True)
    b.viewport(1280, 800)
    time.sleep(0.3)
    b.screenshot(os.path.join(SHOTS, "web-chat-desktop.png"))
    b.viewport(390, 844, mobile=True)
    time.sleep(0.3)
    c.check(b.eval("document.documentElement.scrollWidth <= 390"), "nothing overflows a phone's width")
    c.check(b.eval("getComputedStyle(document.getElementById('side')).position") == "fixed", "the list is a drawer on a phone")
    b.screenshot(os.path.join(SHOTS, "web-chat-phone.png"))
    b.viewport(1280, 800)

    errors = b.errors()
    c.check(not errors, "no console errors: %s" % errors)
    foreign = [u for u in b.requested_urls() if not (u.startswith(U + "/") or u.startswith("data:"))]
    c.check(not foreign, "the page asked for nothing but its own server: %s" % foreign)

    # hostile Markdown in a stored answer renders inert; thinking is folded
    hostile = {"id": "h", "title": "hostile", "system": "", "messages": [
        {"role": "user", "content": "<b>not bold</b><img src=x onerror=\"window.pwned=1\">"},
        {"role": "assistant", "done": True, "reasoning": "", "content":
         "<think>secret **plan**</think>\n# Title <script>window.pwned=2</script>\n\n"
         "**bold** and *it* and `<i>code</i>` [ok](https://example.invalid/a?b=1&c=2) [bad](javascript:window.pwned=3)\n"
         "<img src=x onerror=\"window.pwned=4\"> \"quoted\" 'single' &lt;b&gt;entity&lt;/b&gt;\n"
         "[q](https://x.invalid/\"onmouseover=\"window.pwned=7) ![i](https://x.invalid/i.png)\n\n"
         "```html\n<b onclick=\"window.pwned=5\">x</b>\n```\n\n- one\n- two <svg onload=window.pwned=6>\n\n"
         "| a | b |\n|---|---|\n| <u>1</u> | 2 |\n\n> quote\n\n1. first\n2. second"},
        {"role": "assistant", "done": True, "content": "answer", "reasoning": "the server's reasoning_content"}]}
    b.eval("localStorage.setItem('qhx.conversations', JSON.stringify([%s])), localStorage.setItem('qhx.current', '\"h\"'), true"
           % json.dumps(hostile))
    b.call("Page.reload")
    b.wait("document.readyState === 'complete' && document.querySelectorAll('#messages .msg').length === 3",
           what="the stored hostile conversation")
    msgs_el = "document.getElementById('messages')"
    c.check(b.eval("typeof window.pwned") == "undefined", "no injected script ran")
    c.check(b.eval("%s.querySelectorAll('img, script, svg, iframe, [onerror], [onclick], [onload]').length" % msgs_el) == 0,
            "no element made from the text: %s" % b.eval("%s.innerHTML" % msgs_el)[:800])
    c.check(b.eval("%s.querySelector('.msg.user .bubble').textContent" % msgs_el).startswith("<b>not bold</b><img"),
            "a user message is shown as typed")
    links = b.eval("[...%s.querySelectorAll('a')].map(a => [a.getAttribute('href'), a.getAttributeNames().sort()])" % msgs_el)
    c.check([h for h, _ in links] == ["https://example.invalid/a?b=1&c=2", "https://x.invalid/\"onmouseover=\"window.pwned=7",
                                      "https://x.invalid/i.png"] and all(names == ["href", "rel", "target"] for _, names in links),
            "only http(s) links are links (an image reference too: never loaded), a quote stays in its href: %s" % links)
    c.check("<b>entity</b>" not in b.eval("%s.innerHTML" % msgs_el) and
            "&lt;b&gt;entity" in b.eval("%s.querySelector('.answer').textContent" % msgs_el), "entities are shown as typed")
    c.check(b.eval("%s.querySelector('.answer h1').textContent" % msgs_el) == "Title <script>window.pwned=2</script>",
            "a heading, its tags as text")
    c.check(b.eval("%s.querySelector('.answer strong').textContent" % msgs_el) == "bold" and
            b.eval("%s.querySelector('.answer em').textContent" % msgs_el) == "it", "bold and italic")
    c.check(b.eval("%s.querySelector('.answer pre code').textContent" % msgs_el) == "<b onclick=\"window.pwned=5\">x</b>",
            "a code block keeps its text verbatim")
    c.check(b.eval("%s.querySelector('.answer pre .codehead span').textContent" % msgs_el) == "html", "the code block's language")
    c.check(b.eval("%s.querySelectorAll('.answer ul li').length" % msgs_el) == 2 and
            b.eval("%s.querySelectorAll('.answer ol li').length" % msgs_el) == 2, "lists")
    c.check(b.eval("%s.querySelector('.answer table td').textContent" % msgs_el) == "<u>1</u>", "a table, its cells as text")
    c.check(b.eval("%s.querySelector('.answer blockquote').textContent" % msgs_el) == "quote", "a quote")
    thinks = b.eval("[...%s.querySelectorAll('details.think')].map(d => [d.open, d.textContent])" % msgs_el)
    c.check(len(thinks) == 2 and not thinks[0][0] and not thinks[1][0] and "secret plan" in thinks[0][1] and
            "reasoning_content" in thinks[1][1], "thinking (a <think> block or reasoning_content) is folded: %s" % thinks)
    c.check("secret" not in b.eval("%s.querySelector('.answer').textContent" % msgs_el), "thinking stays out of the answer")
    c.check(not b.errors(), "no console errors: %s" % b.errors())
finally:
    b.close()
srv.stop()

# ---- an API key: the page asks for it, then sends it as Bearer --------------------------------
srv = Server(QHX, MODEL, "--parallel", "1", "--alias", "demo", "--api-key", "s3cret")
c.check(get(srv.url + "/")[0] == 200 and get(srv.url + "/v1/models")[0] == 401,
        "the page needs no key (it asks for it); the API does")
b = Browser(exe)
try:
    b.navigate(srv.url + "/")
    b.wait("document.getElementById('key-dialog').open", what="the page to ask for the API key")
    b.eval("document.getElementById('key-input').value = 's3cret', "
           "document.querySelector('#key-dialog button[value=ok]').click(), true")
    b.wait("document.getElementById('model').textContent.indexOf('demo') === 0", what="the model's name once the key is given")
    settings(max_tokens=8)
    send("Hail.")
    b.wait(idle(), what="an answer with the key")
    msgs = stored()[0]["messages"]
    c.check(not msgs[1].get("error") and msgs[1]["content"], "a request with the key is answered: %s" % msgs[1])
    other = [e for e in b.errors() if "401" not in e]
    c.check(not other, "no console errors but the first 401: %s" % other)
finally:
    b.close()
srv.stop()

# ---- an image, for a model with a vision tower ------------------------------------------------
srv = Server(QHX, VL, "--parallel", "1", "--alias", "vl")
b = Browser(exe)
try:
    b.navigate(srv.url + "/")
    b.wait("document.getElementById('model').textContent.indexOf('vl') === 0", what="the VL model's name")
    c.check(b.eval("document.getElementById('attach').hidden") is False, "the image button for a model with a vision tower")
    png = os.path.realpath(VL + "/image-64x96.png")  # the browser takes a plain absolute path
    node = b.call("DOM.querySelector", nodeId=b.call("DOM.getDocument")["root"]["nodeId"], selector="#file")["nodeId"]
    b.call("DOM.setFileInputFiles", nodeId=node, files=[png])
    b.wait("document.querySelectorAll('#attached img').length === 1", what="the image to be attached")
    settings(max_tokens=6, temperature=0)
    send("What is this?")
    b.wait(idle(), timeout=60, what="the answer about the image")
    msgs = stored()[0]["messages"]
    c.check(msgs[0].get("images", [""])[0].startswith("data:image/png;base64,") and not msgs[1].get("error")
            and msgs[1]["content"], "an image goes as a data: URL and is answered: %s" % str(msgs[1])[:300])
    c.check(b.eval("document.querySelectorAll('#messages .msg.user img').length") == 1, "the image shows in the message")
    c.check(not b.errors(), "no console errors: %s" % b.errors())
finally:
    b.close()
srv.stop()
c.done()
