/* text/tok_chat: the checks every chat format shares and the helpers formats render with
 * (text/chat.h). The formats (how a family writes turns, thinking, tools and images) are the
 * families' own (src/families/<name>/chat.c). */
#include "text/chat.h"
#include "text/tok_internal.h"

#include "core/alloc.h"

#include <stdio.h>
#include <string.h>

/* Python's str.isspace (what Jinja's trim strips). */
static int py_space(uint32_t cp) {
    return (cp >= 9 && cp <= 13) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
           cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

qhx_chat_str qhx_chat_trim(qhx_chat_str s) {
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
    return (qhx_chat_str){s.p + a, b - a};
}

const char *qhx_chat_find(qhx_chat_str s, const char *needle) {
    size_t m = strlen(needle);
    if (m > s.n) return NULL;
    for (size_t i = 0; i + m <= s.n; i++)
        if (!memcmp(s.p + i, needle, m)) return s.p + i;
    return NULL;
}

const char *qhx_chat_rfind(qhx_chat_str s, const char *needle) {
    size_t m = strlen(needle);
    if (m > s.n) return NULL;
    for (size_t i = s.n - m + 1; i-- > 0;)
        if (!memcmp(s.p + i, needle, m)) return s.p + i;
    return NULL;
}

void qhx_chat_put(qhx_chat_render *r, qhx_chat_buf *b, const char *s, size_t n) {
    if (!r->ok || !n) return;
    if (n > SIZE_MAX / 2 - b->n - 1) {
        r->ok = false;
        return;
    }
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *q = qhx_realloc(b->p, cap);
        if (!q) {
            r->ok = false;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

void qhx_chat_puts(qhx_chat_render *r, qhx_chat_buf *b, const char *s) { qhx_chat_put(r, b, s, strlen(s)); }

bool qhx_chat_role_is(const qhx_chat_message *m, const char *r) { return m->role && !strcmp(m->role, r); }

/* The templates' render_content macro: text parts verbatim, images as placeholders. */
qhx_status qhx_chat_render_content(qhx_chat_render *r, const qhx_chat_message *m, size_t idx, unsigned flags) {
    qhx_chat_buf *b = &r->tmp;
    const qhx_chat_style *f = r->fmt;
    b->n = 0;
    if (b->p) b->p[0] = '\0';
    if (!m->parts) {
        if (m->content) qhx_chat_puts(r, b, m->content);
        return QHX_OK;
    }
    for (size_t k = 0; k < m->n_parts; k++) {
        const qhx_chat_part *p = &m->parts[k];
        if (p->text) {
            qhx_chat_put(r, b, p->text, p->text_len);
            continue;
        }
        if (flags & QHX_CHAT_SYSTEM)
            return qhx_fail(r->err, QHX_E_ARG, "chat: message %zu: a system message cannot contain images", idx);
        if (!(flags & QHX_CHAT_IMAGES)) continue;
        if (p->video) {
            if (!f->image_start || !f->image_end)
                return qhx_fail(r->err, QHX_E_ARG, "chat: message %zu: the %s format writes no videos", idx, f->name);
            if (flags & QHX_CHAT_COUNT) r->video_count++;
            if (r->opt->add_vision_id && f->image_label) {
                char num[16];
                snprintf(num, sizeof num, "%d", r->video_count);
                qhx_chat_puts(r, b, "Video ");
                qhx_chat_puts(r, b, num);
                qhx_chat_puts(r, b, f->image_label_end ? f->image_label_end : "");
            }
            qhx_chat_puts(r, b, f->image_start);
            qhx_chat_puts(r, b, p->video[0] ? p->video : f->video_pad ? f->video_pad : "");
            qhx_chat_puts(r, b, f->image_end);
            continue;
        }
        if (p->image_tokens < 0 || p->image_tokens > (1 << 20))
            return qhx_fail(r->err, QHX_E_ARG, "chat: message %zu: %d image tokens", idx, (int)p->image_tokens);
        if (!f->image_start || !f->image_pad || !f->image_end)
            return qhx_fail(r->err, QHX_E_ARG, "chat: message %zu: the %s format writes no images", idx, f->name);
        if (flags & QHX_CHAT_COUNT) r->image_count++;
        if (r->opt->add_vision_id && f->image_label) {
            char num[16];
            snprintf(num, sizeof num, "%d", r->image_count);
            qhx_chat_puts(r, b, f->image_label);
            qhx_chat_puts(r, b, num);
            qhx_chat_puts(r, b, f->image_label_end ? f->image_label_end : "");
        }
        qhx_chat_puts(r, b, f->image_start);
        for (int32_t q = 0; q < (p->image_tokens ? p->image_tokens : 1); q++) qhx_chat_puts(r, b, f->image_pad);
        qhx_chat_puts(r, b, f->image_end);
    }
    return QHX_OK;
}

static qhx_status check_roles(qhx_chat_render *c, const qhx_chat_message *msgs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const qhx_chat_message *m = &msgs[i];
        if (!qhx_chat_role_is(m, "system") && !qhx_chat_role_is(m, "user") && !qhx_chat_role_is(m, "assistant") &&
            !qhx_chat_role_is(m, "tool"))
            return qhx_fail(c->err, m->role ? QHX_E_UNSUPPORTED : QHX_E_ARG,
                            "chat: message %zu: role '%s' is not supported (system, user, assistant, tool)",
                            i, m->role ? m->role : "(none)");
        if (m->n_tool_calls && (!qhx_chat_role_is(m, "assistant") || !m->tool_calls))
            return qhx_fail(c->err, QHX_E_ARG, "chat: message %zu: tool calls are for assistant messages", i);
        if (qhx_chat_role_is(m, "system") && i != 0)
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

qhx_status qhx_tok_chat_format(qhx_chat_family family, const qhx_chat_message *msgs,
                               size_t n_msgs, const qhx_chat_options *opt, char **out,
                               size_t *len_out, qhx_error *err) {
    *out = NULL;
    *len_out = 0;
    static const qhx_chat_options dflt = {.add_generation_prompt = 1};
    if (!msgs && n_msgs) return qhx_fail(err, QHX_E_ARG, "chat: no messages");
    if (!family || !family->render) return qhx_fail(err, QHX_E_ARG, "chat: no chat format");
    qhx_chat_render c = {.fmt = family, .opt = opt ? opt : &dflt, .ok = true, .err = err};
    qhx_status rc = check_roles(&c, msgs, n_msgs);
    if (!rc) rc = family->render(&c, msgs, n_msgs);
    if (!rc && !c.ok) rc = qhx_fail(err, QHX_E_NOMEM, "chat: out of memory");
    if (!rc && !c.out.p) { /* an empty prompt still comes back as a string */
        c.out.p = qhx_malloc(1);
        if (c.out.p) c.out.p[0] = '\0';
        else rc = qhx_fail(err, QHX_E_NOMEM, "chat: out of memory");
    }
    qhx_free(c.tmp.p);
    if (rc) {
        qhx_free(c.out.p);
        return rc;
    }
    *out = c.out.p;
    *len_out = c.out.n;
    return QHX_OK;
}
