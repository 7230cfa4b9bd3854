/* text/tok_chat: ChatML prompts as the models' chat templates render them.
 *
 * Templates followed (the tokenizer_config.json files of the parity fixtures carry no
 * chat_template, so these come from the released models' templates, summarized in
 * spec/qwen3_5.md §9.3 and spec/qwen3_vl.md §6.1):
 *   - Qwen3.5: the Qwen3.5 chat_template.jinja: contents rendered by its
 *     render_content macro and |trim'med; a system message only first; assistant turns after
 *     the last user query keep their reasoning as "<think>\n...\n</think>\n\n", earlier ones
 *     drop it; the generation prompt ends with "<think>\n" (thinking) or
 *     "<think>\n\n</think>\n\n" (not thinking); tools as its "# Tools" system block, an
 *     assistant's tool calls as <tool_call><function=...><parameter=...> blocks, and "tool"
 *     messages as <tool_response> blocks in one user turn per run of them.
 *   - Qwen3-VL: the Qwen3-VL Instruct chat_template (the 8B release's text): contents
 *     verbatim, images as <|vision_start|><|image_pad|><|vision_end|> (after "Picture N: " with
 *     add_vision_id), no <think> block; tools as its "# Tools" system block of tojson lines, an
 *     assistant's tool calls as <tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>, and
 *     "tool" messages as <tool_response> blocks in one user turn per run of them. */
#include "text/tok_internal.h"

#include "core/alloc.h"

#include <stdio.h>
#include <string.h>

typedef struct cstr {
    const char *p;
    size_t n;
} cstr;

/* Python's str.isspace (what Jinja's trim strips). */
static int py_space(uint32_t cp) {
    return (cp >= 9 && cp <= 13) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
           cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

static cstr trim(cstr s) {
    if (!s.p) return s; /* an empty message's buffer may not exist yet */
    const uint8_t *p = (const uint8_t *)s.p;
    size_t a = 0, b = s.n;
    while (a < b) {
        uint32_t cp;
        int k = qhx_tok_utf8_next(p + a, b - a, &cp);
        if (!k || !py_space(cp)) break;
        a += (size_t)k;
    }
    while (b > a) {
        size_t q = b - 1;
        while (q > a && (p[q] & 0xC0) == 0x80) q--;
        uint32_t cp;
        int k = qhx_tok_utf8_next(p + q, b - q, &cp);
        if (!k || (size_t)k != b - q || !py_space(cp)) break;
        b = q;
    }
    return (cstr){s.p + a, b - a};
}

static const char *find(cstr s, const char *needle) {
    size_t m = strlen(needle);
    if (m > s.n) return NULL;
    for (size_t i = 0; i + m <= s.n; i++)
        if (!memcmp(s.p + i, needle, m)) return s.p + i;
    return NULL;
}

static const char *rfind(cstr s, const char *needle) {
    size_t m = strlen(needle);
    if (m > s.n) return NULL;
    for (size_t i = s.n - m + 1; i-- > 0;)
        if (!memcmp(s.p + i, needle, m)) return s.p + i;
    return NULL;
}

typedef struct chat {
    qhx_chat_family fam;
    const qhx_chat_options *opt;
    tok_buf out;
    tok_buf tmp;
    int image_count;
    bool ok;
    qhx_error *err;
} chat;

static void put(chat *c, tok_buf *b, const char *s, size_t n) { c->ok &= qhx_tok_buf_put(b, s, n); }
static void puts_(chat *c, tok_buf *b, const char *s) { put(c, b, s, strlen(s)); }

/* The render_content macro: text parts verbatim, images as placeholders. */
static qhx_status render(chat *c, const qhx_chat_message *m, size_t idx, bool count, bool is_system,
                         bool images, tok_buf *b) {
    b->n = 0;
    if (!m->parts) {
        if (m->content) puts_(c, b, m->content);
        return QHX_OK;
    }
    for (size_t k = 0; k < m->n_parts; k++) {
        const qhx_chat_part *p = &m->parts[k];
        if (p->text) {
            put(c, b, p->text, p->text_len);
            continue;
        }
        if (is_system)
            return qhx_fail(c->err, QHX_E_ARG, "chat: message %zu: a system message cannot contain images", idx);
        if (!images) continue;
        if (p->image_tokens < 0 || p->image_tokens > (1 << 20))
            return qhx_fail(c->err, QHX_E_ARG, "chat: message %zu: %d image tokens", idx, (int)p->image_tokens);
        if (count) c->image_count++;
        if (c->opt->add_vision_id) {
            char pic[32];
            snprintf(pic, sizeof pic, "Picture %d: ", c->image_count);
            puts_(c, b, pic);
        }
        puts_(c, b, "<|vision_start|>");
        for (int32_t q = 0; q < (p->image_tokens ? p->image_tokens : 1); q++) puts_(c, b, "<|image_pad|>");
        puts_(c, b, "<|vision_end|>");
    }
    return QHX_OK;
}

static int role_is(const qhx_chat_message *m, const char *r) { return m->role && !strcmp(m->role, r); }

static qhx_status check_roles(chat *c, const qhx_chat_message *msgs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const qhx_chat_message *m = &msgs[i];
        if (!role_is(m, "system") && !role_is(m, "user") && !role_is(m, "assistant") && !role_is(m, "tool"))
            return qhx_fail(c->err, m->role ? QHX_E_UNSUPPORTED : QHX_E_ARG,
                            "chat: message %zu: role '%s' is not supported (system, user, assistant, tool)",
                            i, m->role ? m->role : "(none)");
        if (m->n_tool_calls && (!role_is(m, "assistant") || !m->tool_calls))
            return qhx_fail(c->err, QHX_E_ARG, "chat: message %zu: tool calls are for assistant messages", i);
        if (role_is(m, "system") && i != 0)
            return qhx_fail(c->err, QHX_E_ARG, "chat: message %zu: a system message must be the first", i);
        if (m->n_parts && !m->parts)
            return qhx_fail(c->err, QHX_E_ARG, "chat: message %zu: n_parts without parts", i);
        /* checked here, so the offset is the message's and not the rendered prompt's */
        for (size_t k = 0; k < (m->parts ? m->n_parts : 1); k++) {
            const char *t = m->parts ? m->parts[k].text : m->content;
            size_t len = m->parts ? m->parts[k].text_len : t ? strlen(t) : 0, ok;
            if (t && (ok = qhx_tok_utf8_check((const uint8_t *)t, len)) != len)
                return qhx_fail(c->err, QHX_E_FORMAT, "chat: message %zu: text is not valid UTF-8: byte 0x%02X at offset %zu",
                                i, (unsigned)(uint8_t)t[ok], ok);
        }
    }
    return QHX_OK;
}

/* The template's instructions after the tool list, word for word. */
static const char TOOLS_HOWTO[] =
    "\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n<tool_call>\n"
    "<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
    "<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n"
    "</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the "
    "specified format: an inner <function=...></function> block must be nested within <tool_call></tool_call> "
    "XML tags\n- Required parameters MUST be specified\n- You may provide optional reasoning for your function "
    "call in natural language BEFORE the function call, but NOT after\n- If there is no function call "
    "available, answer the question like normal with your current knowledge and do not tell the user about "
    "function calls\n</IMPORTANT>";

/* The system turn: the tools block (with the system message after it) or the system message. */
static qhx_status qwen35_system(chat *c, const qhx_chat_message *msgs, size_t n) {
    tok_buf *o = &c->out;
    cstr sys = {"", 0};
    bool has_sys = n && role_is(&msgs[0], "system");
    if (has_sys) {
        qhx_status rc = render(c, &msgs[0], 0, false, true, true, &c->tmp);
        if (rc) return rc;
        sys = trim((cstr){c->tmp.p, c->tmp.n});
    }
    if (c->opt->n_tools) {
        puts_(c, o, "<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>");
        for (size_t k = 0; k < c->opt->n_tools; k++) {
            if (!c->opt->tools || !c->opt->tools[k])
                return qhx_fail(c->err, QHX_E_ARG, "chat: tool %zu has no definition", k);
            puts_(c, o, "\n");
            puts_(c, o, c->opt->tools[k]);
        }
        puts_(c, o, "\n</tools>");
        puts_(c, o, TOOLS_HOWTO);
        if (sys.n) {
            puts_(c, o, "\n\n");
            put(c, o, sys.p, sys.n);
        }
        puts_(c, o, "<|im_end|>\n");
    } else if (has_sys) {
        puts_(c, o, "<|im_start|>system\n");
        put(c, o, sys.p, sys.n);
        puts_(c, o, "<|im_end|>\n");
    }
    return QHX_OK;
}

/* An assistant's tool calls, after its content (`content` as the template has it then). */
static qhx_status qwen35_tool_calls(chat *c, const qhx_chat_message *m, size_t idx, cstr content) {
    tok_buf *o = &c->out;
    for (size_t j = 0; j < m->n_tool_calls; j++) {
        const qhx_chat_tool_call *tc = &m->tool_calls[j];
        if (!tc->name || (tc->n_args && !tc->args))
            return qhx_fail(c->err, QHX_E_ARG, "chat: message %zu: tool call %zu has no name or arguments", idx, j);
        puts_(c, o, j ? "\n<tool_call>\n<function=" : trim(content).n ? "\n\n<tool_call>\n<function=" : "<tool_call>\n<function=");
        puts_(c, o, tc->name);
        puts_(c, o, ">\n");
        for (size_t k = 0; k < tc->n_args; k++) {
            if (!tc->args[k].name || !tc->args[k].value)
                return qhx_fail(c->err, QHX_E_ARG, "chat: message %zu: tool call %zu: argument %zu is empty", idx, j, k);
            puts_(c, o, "<parameter=");
            puts_(c, o, tc->args[k].name);
            puts_(c, o, ">\n");
            puts_(c, o, tc->args[k].value);
            puts_(c, o, "\n</parameter>\n");
        }
        puts_(c, o, "</function>\n</tool_call>");
    }
    return QHX_OK;
}

/* A tool's response: a run of tool messages is one user turn of <tool_response> blocks. */
static void qwen35_tool_response(chat *c, const qhx_chat_message *msgs, size_t n, size_t i, cstr content) {
    tok_buf *o = &c->out;
    if (i > 0 && !role_is(&msgs[i - 1], "tool")) puts_(c, o, "<|im_start|>user");
    puts_(c, o, "\n<tool_response>\n");
    put(c, o, content.p, content.n);
    puts_(c, o, "\n</tool_response>");
    if (i + 1 == n || !role_is(&msgs[i + 1], "tool")) puts_(c, o, "<|im_end|>\n");
}

static qhx_status qwen35(chat *c, const qhx_chat_message *msgs, size_t n) {
    qhx_status rc;
    tok_buf *o = &c->out;
    if ((rc = qwen35_system(c, msgs, n))) return rc;
    /* the last user message that is a real query (not a wrapped tool response) */
    size_t last_query = 0;
    int found = 0;
    for (size_t i = n; i-- > 0;) {
        if (!role_is(&msgs[i], "user")) continue;
        if ((rc = render(c, &msgs[i], i, false, false, true, &c->tmp))) return rc;
        cstr t = trim((cstr){c->tmp.p, c->tmp.n});
        static const char open[] = "<tool_response>", close[] = "</tool_response>";
        int wrapped = t.n >= sizeof open - 1 && !memcmp(t.p, open, sizeof open - 1) &&
                      t.n >= sizeof close - 1 && !memcmp(t.p + t.n - (sizeof close - 1), close, sizeof close - 1);
        if (!wrapped) {
            last_query = i;
            found = 1;
            break;
        }
    }
    if (!found) return qhx_fail(c->err, QHX_E_ARG, "chat: no user query found in the messages");
    for (size_t i = 0; i < n; i++) {
        const qhx_chat_message *m = &msgs[i];
        if ((rc = render(c, m, i, true, false, true, &c->tmp))) return rc;
        cstr t = trim((cstr){c->tmp.p, c->tmp.n});
        if (role_is(m, "system")) continue;
        if (role_is(m, "user")) {
            puts_(c, o, "<|im_start|>user\n");
            put(c, o, t.p, t.n);
            puts_(c, o, "<|im_end|>\n");
            continue;
        }
        if (role_is(m, "tool")) {
            qwen35_tool_response(c, msgs, n, i, t);
            continue;
        }
        /* assistant: split off the reasoning as the template does */
        cstr reasoning = {"", 0}, content = t;
        const char *close = find(t, "</think>");
        if (close) {
            cstr before = {t.p, (size_t)(close - t.p)};
            while (before.n && before.p[before.n - 1] == '\n') before.n--;
            const char *open = rfind(before, "<think>");
            if (open) before = (cstr){open + 7, before.n - (size_t)(open + 7 - before.p)};
            while (before.n && before.p[0] == '\n') before = (cstr){before.p + 1, before.n - 1};
            reasoning = before;
            const char *last = rfind(t, "</think>");
            content = (cstr){last + 8, t.n - (size_t)(last + 8 - t.p)};
            while (content.n && content.p[0] == '\n') content = (cstr){content.p + 1, content.n - 1};
        }
        reasoning = trim(reasoning);
        puts_(c, o, "<|im_start|>assistant\n");
        if (i > last_query) {
            puts_(c, o, "<think>\n");
            put(c, o, reasoning.p, reasoning.n);
            puts_(c, o, "\n</think>\n\n");
        }
        put(c, o, content.p, content.n);
        if ((rc = qwen35_tool_calls(c, m, i, content))) return rc;
        puts_(c, o, "<|im_end|>\n");
    }
    if (c->opt->add_generation_prompt) {
        puts_(c, o, "<|im_start|>assistant\n");
        puts_(c, o, c->opt->enable_thinking ? "<think>\n" : "<think>\n\n</think>\n\n");
    }
    return QHX_OK;
}

/* Qwen3-VL's tools block, before and after the definitions, word for word. */
static const char VL_TOOLS_HEAD[] =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with "
    "function signatures within <tools></tools> XML tags:\n<tools>";
static const char VL_TOOLS_TAIL[] =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\n</tool_call><|im_end|>\n";

/* The system turn: the system message's text (and, with tools, the tools block after it). */
static qhx_status qwen3vl_system(chat *c, const qhx_chat_message *msgs, size_t n) {
    tok_buf *o = &c->out;
    bool has_sys = n && role_is(&msgs[0], "system");
    if (!has_sys && !c->opt->n_tools) return QHX_OK;
    puts_(c, o, "<|im_start|>system\n");
    if (has_sys) {
        qhx_status rc = render(c, &msgs[0], 0, false, false, false, &c->tmp);
        if (rc) return rc;
        put(c, o, c->tmp.p, c->tmp.n);
    }
    if (!c->opt->n_tools) {
        puts_(c, o, "<|im_end|>\n");
        return QHX_OK;
    }
    if (has_sys) puts_(c, o, "\n\n");
    puts_(c, o, VL_TOOLS_HEAD);
    for (size_t k = 0; k < c->opt->n_tools; k++) {
        if (!c->opt->tools || !c->opt->tools[k]) return qhx_fail(c->err, QHX_E_ARG, "chat: tool %zu has no definition", k);
        puts_(c, o, "\n");
        puts_(c, o, c->opt->tools[k]);
    }
    puts_(c, o, VL_TOOLS_TAIL);
    return QHX_OK;
}

/* An assistant's tool calls as JSON objects; a newline before each but a first one that
 * follows no content (the template tests the content's truth: a non-empty string or list). */
static qhx_status qwen3vl_tool_calls(chat *c, const qhx_chat_message *m, size_t idx) {
    tok_buf *o = &c->out;
    bool content = m->parts ? m->n_parts > 0 : m->content && m->content[0];
    for (size_t j = 0; j < m->n_tool_calls; j++) {
        const qhx_chat_tool_call *tc = &m->tool_calls[j];
        if (!tc->name) return qhx_fail(c->err, QHX_E_ARG, "chat: message %zu: tool call %zu has no name", idx, j);
        if (j || content) puts_(c, o, "\n");
        puts_(c, o, "<tool_call>\n{\"name\": \"");
        puts_(c, o, tc->name);
        puts_(c, o, "\", \"arguments\": ");
        puts_(c, o, tc->arguments ? tc->arguments : "{}");
        puts_(c, o, "}\n</tool_call>");
    }
    return QHX_OK;
}

static qhx_status qwen3vl(chat *c, const qhx_chat_message *msgs, size_t n) {
    qhx_status rc;
    tok_buf *o = &c->out;
    if ((rc = qwen3vl_system(c, msgs, n))) return rc;
    for (size_t i = 0; i < n; i++) {
        const qhx_chat_message *m = &msgs[i];
        if (role_is(m, "system")) continue; /* the first message only, rendered above */
        bool assistant = role_is(m, "assistant");
        /* user and tool contents hold images; an assistant's renders its text parts only */
        if ((rc = render(c, m, i, true, false, !assistant, &c->tmp))) return rc;
        if (role_is(m, "tool")) {
            if (i == 0 || !role_is(&msgs[i - 1], "tool")) puts_(c, o, "<|im_start|>user");
            puts_(c, o, "\n<tool_response>\n");
            put(c, o, c->tmp.p, c->tmp.n);
            puts_(c, o, "\n</tool_response>");
            if (i + 1 == n || !role_is(&msgs[i + 1], "tool")) puts_(c, o, "<|im_end|>\n");
            continue;
        }
        puts_(c, o, assistant ? "<|im_start|>assistant\n" : "<|im_start|>user\n");
        put(c, o, c->tmp.p, c->tmp.n);
        if (assistant && (rc = qwen3vl_tool_calls(c, m, i))) return rc;
        puts_(c, o, "<|im_end|>\n");
    }
    if (c->opt->add_generation_prompt) puts_(c, o, "<|im_start|>assistant\n");
    return QHX_OK;
}

qhx_status qhx_tok_chat_format(qhx_chat_family family, const qhx_chat_message *msgs,
                               size_t n_msgs, const qhx_chat_options *opt, char **out,
                               size_t *len_out, qhx_error *err) {
    *out = NULL;
    *len_out = 0;
    static const qhx_chat_options dflt = {.add_generation_prompt = 1};
    if (!msgs && n_msgs) return qhx_fail(err, QHX_E_ARG, "chat: no messages");
    if (family != QHX_CHAT_QWEN35 && family != QHX_CHAT_QWEN3VL)
        return qhx_fail(err, QHX_E_ARG, "chat: unknown family %d", (int)family);
    chat c = {.fam = family, .opt = opt ? opt : &dflt, .ok = true, .err = err};
    qhx_status rc = check_roles(&c, msgs, n_msgs);
    if (!rc) rc = family == QHX_CHAT_QWEN35 ? qwen35(&c, msgs, n_msgs) : qwen3vl(&c, msgs, n_msgs);
    if (!rc && !(c.ok && qhx_tok_buf_put(&c.out, "", 1)))
        rc = qhx_fail(err, QHX_E_NOMEM, "chat: out of memory");
    qhx_free(c.tmp.p);
    if (rc) {
        qhx_free(c.out.p);
        return rc;
    }
    *out = c.out.p;
    *len_out = c.out.n - 1;
    return QHX_OK;
}
