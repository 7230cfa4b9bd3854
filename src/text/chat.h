/* text/chat.h: the helpers a family's chat format renders with (text/tokenizer.h
 * qhx_chat_style). A format's render function writes the prompt into r->out; the content of a
 * message (text parts, images as the format's runs of pads) is made by qhx_chat_render_content into
 * r->tmp. Allocation failures are sticky (r->ok false) and reported once by
 * qhx_tok_chat_format. */
#ifndef QHX_TEXT_CHAT_H
#define QHX_TEXT_CHAT_H

#include "text/tokenizer.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct qhx_chat_buf {
    char *p;
    size_t n, cap;
} qhx_chat_buf;

typedef struct qhx_chat_str { /* a borrowed run of bytes */
    const char *p;
    size_t n;
} qhx_chat_str;

struct qhx_chat_render {
    const qhx_chat_style *fmt;
    const qhx_chat_options *opt;
    qhx_chat_buf out; /* the prompt */
    qhx_chat_buf tmp; /* the last qhx_chat_render_content */
    int image_count;  /* images numbered so far (add_vision_id) */
    int video_count;  /* videos numbered so far (add_vision_id) */
    bool ok;          /* false once an allocation failed */
    qhx_error *err;
};

void qhx_chat_put(qhx_chat_render *r, qhx_chat_buf *b, const char *s, size_t n);
void qhx_chat_puts(qhx_chat_render *r, qhx_chat_buf *b, const char *s);
static inline void qhx_chat_puts_str(qhx_chat_render *r, qhx_chat_buf *b, qhx_chat_str s) { qhx_chat_put(r, b, s.p, s.n); }

enum {
    QHX_CHAT_COUNT = 1u << 0,  /* number the images (add_vision_id) */
    QHX_CHAT_SYSTEM = 1u << 1, /* a system message: an image is an error */
    QHX_CHAT_IMAGES = 1u << 2, /* write images (else they are left out) */
};
/* The content of message idx into r->tmp (emptied first): its text, or its parts in order with
 * each image as image_start, its pads, image_end (after the label with add_vision_id). */
qhx_status qhx_chat_render_content(qhx_chat_render *r, const qhx_chat_message *m, size_t idx, unsigned flags);
static inline qhx_chat_str qhx_chat_tmp(const qhx_chat_render *r) { return (qhx_chat_str){r->tmp.p, r->tmp.n}; }

/* Jinja's trim: Python's str.isspace characters off both ends. */
qhx_chat_str qhx_chat_trim(qhx_chat_str s);
/* First / last occurrence of needle in s, or NULL. */
const char *qhx_chat_find(qhx_chat_str s, const char *needle);
const char *qhx_chat_rfind(qhx_chat_str s, const char *needle);
bool qhx_chat_role_is(const qhx_chat_message *m, const char *role);

#endif
