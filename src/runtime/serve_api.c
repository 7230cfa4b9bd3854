/* runtime/serve_api.c: the public calls a server needs (qhx.h, "Serving"): chat prompts built
 * in memory (tools, tool calls, reasoning, encoded image bytes), a sampler per request, a
 * streaming detokenizer, in-memory checkpoints of a session's state and one decode step over
 * several sessions. Thin wrappers over the tokenizer's chat format, the sampler, the Qwen3-VL
 * image path and the model state's regions. */
#include "core/alloc.h"
#include "image/image.h"
#include "runtime/constrain.h"
#include "runtime/model.h"
#include "runtime/sample.h"
#include "runtime/session.h"
#include "runtime/session_impl.h"
#include "text/tokenizer.h"

#include <string.h>

#define MAX_TURNS 4096
#define MAX_IMAGES 64
#define DEFAULT_MAX_IMAGES 8
#define DEFAULT_MAX_PIXELS ((int64_t)16 << 20)

/* ==== prompts ================================================================================ */

struct qhx_prompt {
    const qhx_model *m;
    int32_t *ids;
    size_t n;
    size_t reusable;          /* first id standing for an image (its run's start), or n */
    size_t images_end;        /* one past the last image-pad id (0 without images) */
    qhx_image_embed *images;  /* (n_images), in the order of their pads */
    int n_images;
};

void qhx_prompt_free(qhx_prompt *p) {
    if (!p) return;
    qhx_free(p->ids);
    for (int i = 0; i < p->n_images; i++) qhx_image_embed_deinit(&p->images[i]);
    qhx_free(p->images);
    qhx_model_release(p->m);
    qhx_free(p);
}

const qhx_token *qhx_prompt_ids(const qhx_prompt *p, size_t *n) {
    if (n) *n = p ? p->n : 0;
    return p ? p->ids : NULL;
}

size_t qhx_prompt_reusable(const qhx_prompt *p) { return p ? p->reusable : 0; }

static void find_reusable(qhx_prompt *p) {
    p->reusable = p->n;
    p->images_end = 0;
    if (p->n_images == 0) return;
    const qhx_chat_style *f = qhx_model_chat_style(p->m);
    int32_t vs = f->image_start ? qhx_tok_token_to_id(p->m->tok, f->image_start) : -1;
    int64_t pad = p->m->cfg.image_token_id;
    for (size_t i = 0; i < p->n; i++) {
        if ((p->ids[i] == vs || p->ids[i] == pad) && p->reusable == p->n) p->reusable = i;
        if (p->ids[i] == pad) p->images_end = i + 1;
    }
}

qhx_status qhx_prompt_from_ids(const qhx_model *m, const qhx_token *ids, size_t n, qhx_prompt **out,
                               qhx_error *err) {
    if (!out) return qhx_fail(err, QHX_E_ARG, "prompt: out is NULL");
    *out = NULL;
    if (!m || (!ids && n)) return qhx_fail(err, QHX_E_ARG, "prompt: model and ids are required");
    if (n == 0) return qhx_fail(err, QHX_E_ARG, "prompt: no tokens");
    int64_t vocab = qhx_model_n_vocab(m);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab)
            return qhx_fail(err, QHX_E_ARG, "prompt: token %zu: id %d is outside the vocabulary [0, %lld)", i, ids[i],
                            (long long)vocab);
    qhx_prompt *p = qhx_calloc(1, sizeof *p);
    if (!p || !(p->ids = qhx_malloc(n * sizeof *p->ids))) {
        qhx_free(p);
        return qhx_fail(err, QHX_E_NOMEM, "prompt: out of memory for %zu ids", n);
    }
    p->m = qhx_model_retain(m);
    memcpy(p->ids, ids, n * sizeof *ids);
    p->n = p->reusable = n;
    *out = p;
    return QHX_OK;
}

/* Decode and encode one image of a chat spec through the model's vision graph. */
static qhx_status encode_image(const qhx_model *m, const qhx_chat_spec *spec, const qhx_chat_content *c,
                               qhx_image_embed *out, qhx_error *err) {
    if (!qhx_model_takes_images(m))
        return qhx_fail(err, QHX_E_ARG, "image: this model (%s, host-op %s) takes no images", qhx_model_family_title(m),
                        qhx_model_host_op(m));
    if (!c->image || !c->image_size) return qhx_fail(err, QHX_E_FORMAT, "image: no bytes");
    int64_t max_px = spec->max_image_pixels > 0 ? spec->max_image_pixels : DEFAULT_MAX_PIXELS;
    qhx_image_limits lim = qhx_image_default_limits();
    if ((uint64_t)max_px * 3u < lim.max_bytes) lim.max_bytes = (size_t)max_px * 3u;
    qhx_image img;
    qhx_status rc = qhx_image_decode(c->image, c->image_size, &lim, "image", &img, err);
    if (rc) return rc;
    rc = qhx_model_image_encode(m, &img, out, err);
    qhx_image_deinit(&img);
    if (rc) return rc;
    if (spec->max_image_tokens > 0 && out->n_tokens > spec->max_image_tokens) {
        int64_t n = out->n_tokens;
        qhx_image_embed_deinit(out);
        return qhx_fail(err, QHX_E_LIMIT, "image: it takes %lld tokens, the cap is %lld", (long long)n,
                        (long long)spec->max_image_tokens);
    }
    return QHX_OK;
}

/* The tokenizer's chat messages for spec: parts, tool calls and reasoning carried over; the one
 * image (if any) becomes a placeholder of image_tokens pads. Text made here is kept in *owned. */
typedef struct chat_build {
    qhx_chat_message *msgs;
    qhx_chat_part *parts;
    qhx_chat_tool_call *calls;
    qhx_chat_tool_arg *args;
    char **owned;
    size_t n_owned;
} chat_build;

static void chat_build_free(chat_build *b, size_t n_turns) {
    for (size_t i = 0; b->owned && i < n_turns; i++) qhx_free(b->owned[i]);
    qhx_free(b->owned);
    qhx_free(b->msgs);
    qhx_free(b->parts);
    qhx_free(b->calls);
    qhx_free(b->args);
}

static size_t count_parts(const qhx_chat_spec *spec, size_t *n_calls, size_t *n_args, size_t *n_images) {
    size_t parts = 0;
    *n_calls = *n_args = *n_images = 0;
    for (size_t i = 0; i < spec->n_turns; i++) {
        const qhx_chat_turn *t = &spec->turns[i];
        parts += t->parts ? t->n_parts : 0;
        for (size_t k = 0; t->parts && k < t->n_parts; k++) *n_images += t->parts[k].text == NULL;
        *n_calls += t->calls ? t->n_calls : 0;
        for (size_t k = 0; t->calls && k < t->n_calls; k++) *n_args += t->calls[k].n_args;
    }
    return parts;
}

/* reasoning goes back into the content as the template reads it there */
static qhx_status with_reasoning(const qhx_chat_style *f, chat_build *b, size_t i, const qhx_chat_turn *t,
                                 qhx_error *err) {
    const char *content = t->content ? t->content : "";
    size_t a = strlen(t->reasoning), c = strlen(content);
    size_t o = strlen(f->reasoning_open), e = strlen(f->reasoning_close);
    char *s = qhx_malloc(o + a + e + c + 1);
    if (!s) return qhx_fail(err, QHX_E_NOMEM, "chat: out of memory");
    memcpy(s, f->reasoning_open, o);
    memcpy(s + o, t->reasoning, a);
    memcpy(s + o + a, f->reasoning_close, e);
    memcpy(s + o + a + e, content, c + 1);
    b->owned[i] = s;
    b->msgs[i].content = s;
    return QHX_OK;
}

/* f->reasoning_open: the family's template reads reasoning (else it drops it) */
static qhx_status build_messages(const qhx_chat_spec *spec, const qhx_prompt *p, const qhx_chat_style *f,
                                 chat_build *b, qhx_error *err) {
    size_t n_calls, n_args, n_images;
    size_t n_parts = count_parts(spec, &n_calls, &n_args, &n_images);
    b->msgs = qhx_calloc(spec->n_turns, sizeof *b->msgs);
    b->parts = qhx_calloc(n_parts ? n_parts : 1, sizeof *b->parts);
    b->calls = qhx_calloc(n_calls ? n_calls : 1, sizeof *b->calls);
    b->args = qhx_calloc(n_args ? n_args : 1, sizeof *b->args);
    b->owned = qhx_calloc(spec->n_turns, sizeof *b->owned);
    if (!b->msgs || !b->parts || !b->calls || !b->args || !b->owned) return qhx_fail(err, QHX_E_NOMEM, "chat: out of memory");
    size_t pi = 0, ci = 0, ai = 0;
    int img = 0;
    for (size_t i = 0; i < spec->n_turns; i++) {
        const qhx_chat_turn *t = &spec->turns[i];
        qhx_chat_message *m = &b->msgs[i];
        if (!t->role) return qhx_fail(err, QHX_E_ARG, "chat: message %zu has no role", i);
        m->role = t->role;
        m->content = t->content ? t->content : "";
        if (t->parts && t->n_parts) {
            m->parts = &b->parts[pi];
            m->n_parts = t->n_parts;
            for (size_t k = 0; k < t->n_parts; k++, pi++) {
                const qhx_chat_content *c = &t->parts[k];
                b->parts[pi] = c->text ? (qhx_chat_part){.text = c->text, .text_len = c->text_len}
                                       : (qhx_chat_part){.text = NULL, .image_tokens = (int32_t)p->images[img++].n_tokens};
                /* both templates render images in user and tool contents, never elsewhere */
                if (!c->text && strcmp(t->role, "user") && strcmp(t->role, "tool"))
                    return qhx_fail(err, QHX_E_ARG,
                                    "chat: message %zu: an image in a %s message (only user and tool messages take images)",
                                    i, t->role);
            }
        }
        if (t->calls && t->n_calls) {
            m->tool_calls = &b->calls[ci];
            m->n_tool_calls = t->n_calls;
            for (size_t k = 0; k < t->n_calls; k++, ci++) {
                const qhx_chat_call *c = &t->calls[k];
                if (c->n_args && !c->args) return qhx_fail(err, QHX_E_ARG, "chat: message %zu: call %zu has no arguments", i, k);
                b->calls[ci] = (qhx_chat_tool_call){.name = c->name, .args = &b->args[ai], .n_args = c->n_args,
                                                    .arguments = c->arguments};
                for (size_t j = 0; j < c->n_args; j++, ai++)
                    b->args[ai] = (qhx_chat_tool_arg){.name = c->args[j].name, .value = c->args[j].value};
            }
        }
        if (t->reasoning && f->reasoning_open && f->reasoning_close) {
            if (m->parts) return qhx_fail(err, QHX_E_ARG, "chat: message %zu: reasoning with a content list", i);
            qhx_status rc = with_reasoning(f, b, i, t, err);
            if (rc) return rc;
        }
    }
    return QHX_OK;
}

/* text (qhx_malloc'd, len bytes) += s: the forced start of the answer, after the generation
 * prompt, tokenized with the rest (so it is part of this prompt's ids only). */
static qhx_status append_text(char **text, size_t *len, const char *s, qhx_error *err) {
    size_t n = strlen(s);
    char *t = qhx_realloc(*text, *len + n + 1);
    if (!t) return qhx_fail(err, QHX_E_NOMEM, "chat: out of memory");
    memcpy(t + *len, s, n + 1);
    *text = t;
    *len += n;
    return QHX_OK;
}

static qhx_status render_and_encode(const qhx_model *m, const qhx_chat_spec *spec, qhx_prompt *p, qhx_error *err) {
    chat_build b = {0};
    char *text = NULL;
    size_t len = 0;
    qhx_status rc = build_messages(spec, p, qhx_model_chat_style(m), &b, err);
    if (!rc) {
        qhx_chat_options opt = {.add_generation_prompt = 1, .enable_thinking = spec->thinking,
                                .add_vision_id = spec->add_vision_id,
                                .tools = spec->tools, .n_tools = spec->tools ? spec->n_tools : 0};
        qhx_chat_family fam = qhx_model_chat_style(m);
        rc = qhx_tok_chat_format(fam, b.msgs, spec->n_turns, &opt, &text, &len, err);
        if (rc == QHX_E_UNSUPPORTED) rc = QHX_E_ARG; /* a role the format does not take: the caller's request */
    }
    chat_build_free(&b, spec->n_turns);
    if (!rc && spec->answer_prefix) rc = append_text(&text, &len, spec->answer_prefix, err);
    if (!rc) rc = qhx_tok_encode_alloc(m->tok, text, len, &p->ids, &p->n, err);
    qhx_free(text);
    if (!rc && p->n == 0) rc = qhx_fail(err, QHX_E_ARG, "chat: the prompt is empty");
    return rc;
}

qhx_status qhx_prompt_from_chat(const qhx_model *m, const qhx_chat_spec *spec, qhx_prompt **out, qhx_error *err) {
    if (!out) return qhx_fail(err, QHX_E_ARG, "chat: out is NULL");
    *out = NULL;
    if (!m || !spec) return qhx_fail(err, QHX_E_ARG, "chat: model and spec are required");
    if (!m->tok) return qhx_fail(err, QHX_E_ARG, "chat: the model has no tokenizer");
    if (!spec->turns || spec->n_turns == 0 || spec->n_turns > MAX_TURNS)
        return qhx_fail(err, QHX_E_ARG, "chat: 1 to %d messages are needed", MAX_TURNS);
    size_t n_calls, n_args, n_images;
    count_parts(spec, &n_calls, &n_args, &n_images);
    int64_t max_images = spec->max_images > 0 ? spec->max_images : DEFAULT_MAX_IMAGES;
    if (max_images > MAX_IMAGES) max_images = MAX_IMAGES;
    if ((int64_t)n_images > max_images)
        return qhx_fail(err, QHX_E_LIMIT, "chat: %zu images, at most %lld per request", n_images, (long long)max_images);
    qhx_prompt *p = qhx_calloc(1, sizeof *p);
    if (!p || (n_images && !(p->images = qhx_calloc(n_images, sizeof *p->images)))) {
        qhx_free(p);
        return qhx_fail(err, QHX_E_NOMEM, "chat: out of memory");
    }
    p->m = qhx_model_retain(m);
    qhx_status rc = QHX_OK;
    for (size_t i = 0; !rc && n_images && i < spec->n_turns; i++)
        for (size_t k = 0; !rc && spec->turns[i].parts && k < spec->turns[i].n_parts; k++)
            if (!spec->turns[i].parts[k].text) {
                rc = encode_image(m, spec, &spec->turns[i].parts[k], &p->images[p->n_images], err);
                if (!rc) p->n_images++;
            }
    if (!rc) rc = render_and_encode(m, spec, p, err);
    if (rc) {
        qhx_prompt_free(p);
        return rc;
    }
    find_reusable(p);
    *out = p;
    return QHX_OK;
}

qhx_status qhx_session_feed_prompt(qhx_session *s, const qhx_prompt *p, size_t from, size_t to, qhx_error *err) {
    if (!s || !p) return qhx_fail(err, QHX_E_ARG, "feed prompt: session and prompt are required");
    if (from >= to || to > p->n)
        return qhx_fail(err, QHX_E_ARG, "feed prompt: [%zu, %zu) is not a range inside the %zu ids", from, to, p->n);
    /* the images' ids [reusable, images_end) go in one piece, all of them or none */
    bool has_images = p->n_images && from < p->images_end && to > p->reusable;
    if (has_images && (from > p->reusable || to < p->images_end))
        return qhx_fail(err, QHX_E_ARG, "feed prompt: [%zu, %zu) cuts through the images' ids [%zu, %zu)", from, to,
                        p->reusable, p->images_end);
    if (!has_images) return qhx_session_feed(s, p->ids + from, to - from, err);
    qhx_status rc = qhx_session_guard_enter(s, "feed prompt", err);
    if (rc) return rc;
    if (qhx_session_n_past(s) + (int64_t)(to - from) > qhx_session_n_ctx(s)) {
        rc = qhx_fail(err, QHX_E_LIMIT, "context full: %lld tokens held + %zu new exceed the context of %lld",
                      (long long)qhx_session_n_past(s), to - from, (long long)qhx_session_n_ctx(s));
        return qhx_session_guard_leave(s, rc);
    }
    rc = qhx_session_feed_announced(s, p->ids + from, to - from, p->images, p->n_images, err);
    return qhx_session_guard_leave(s, rc);
}

/* ==== sampling and text ====================================================================== */

struct qhx_sampler_handle {
    qhx_sampler *smp;
};

qhx_status qhx_sampler_create(const qhx_model *m, const qhx_sample_params *params, qhx_sampler_handle **out,
                              qhx_error *err) {
    if (!out) return qhx_fail(err, QHX_E_ARG, "sampler: out is NULL");
    *out = NULL;
    if (!m || !params) return qhx_fail(err, QHX_E_ARG, "sampler: model and params are required");
    qhx_sampler_handle *h = qhx_calloc(1, sizeof *h);
    if (!h) return qhx_fail(err, QHX_E_NOMEM, "sampler: out of memory");
    qhx_status rc = qhx_sampler_create_raw(params, qhx_model_n_vocab(m), &h->smp, err);
    if (rc) {
        qhx_free(h);
        return rc;
    }
    *out = h;
    return QHX_OK;
}

void qhx_sampler_free(qhx_sampler_handle *h) {
    if (!h) return;
    qhx_sampler_free_raw(h->smp);
    qhx_free(h);
}

/* the former names (deprecated in qhx.h) */
qhx_status qhx_sampler_new(const qhx_model *m, const qhx_sample_params *params, qhx_sampler_handle **out,
                           qhx_error *err) {
    return qhx_sampler_create(m, params, out, err);
}

void qhx_sampler_delete(qhx_sampler_handle *h) { qhx_sampler_free(h); }

void qhx_sampler_push(qhx_sampler_handle *h, qhx_token t) {
    if (h) qhx_sampler_accept(h->smp, t);
}

qhx_token qhx_sampler_pick(qhx_sampler_handle *h, const float *logits) {
    return h && logits ? qhx_sampler_sample(h->smp, logits) : -1;
}

qhx_token qhx_constraint_pick(qhx_constraint *c, qhx_sampler_handle *h, const float *logits, int allow_end,
                              qhx_error *err) {
    if (!c || !h || !logits) return qhx_fail(err, QHX_E_ARG, "constraint: constraint, sampler and logits are required"), -1;
    return qhx_constraint_sample(c, h->smp, logits, allow_end, err);
}

struct qhx_text_stream {
    qhx_tok_stream *st;
    const qhx_model *m; /* a reference: the stream reads its tokenizer */
};

qhx_status qhx_text_stream_new(const qhx_model *m, qhx_text_stream **out, qhx_error *err) {
    if (!out) return qhx_fail(err, QHX_E_ARG, "text stream: out is NULL");
    *out = NULL;
    if (!m || !m->tok) return qhx_fail(err, QHX_E_ARG, "text stream: the model has no tokenizer");
    qhx_text_stream *t = qhx_calloc(1, sizeof *t);
    if (!t) return qhx_fail(err, QHX_E_NOMEM, "text stream: out of memory");
    qhx_status rc = qhx_tok_stream_create(m->tok, 0, &t->st, err);
    if (rc) {
        qhx_free(t);
        return rc;
    }
    t->m = qhx_model_retain(m);
    *out = t;
    return QHX_OK;
}

qhx_status qhx_text_stream_push(qhx_text_stream *t, qhx_token token, const char **text, size_t *len, qhx_error *err) {
    if (!t || !text || !len) return qhx_fail(err, QHX_E_ARG, "text stream: stream and outputs are required");
    return qhx_tok_stream_push(t->st, token, text, len, err);
}

qhx_status qhx_text_stream_flush(qhx_text_stream *t, const char **text, size_t *len, qhx_error *err) {
    if (!t || !text || !len) return qhx_fail(err, QHX_E_ARG, "text stream: stream and outputs are required");
    return qhx_tok_stream_flush(t->st, text, len, err);
}

void qhx_text_stream_free(qhx_text_stream *t) {
    if (!t) return;
    qhx_tok_stream_free(t->st);
    qhx_model_release(t->m);
    qhx_free(t);
}

/* ==== checkpoints ============================================================================ */

struct qhx_checkpoint {
    const qhx_session *owner;
    int64_t n_past;
    qhx_session_snapshot snap;
    size_t bytes;   /* of data */
    uint8_t *data;  /* the regions that are not per token, in order, then the logits */
};

static int state_regions(qhx_session *s, qhx_state_region *r) {
    return qhx_model_state_regions(qhx_session_state(s), r, QHX_STATE_MAX_REGIONS);
}

static size_t fixed_bytes(const qhx_state_region *r, int nr, size_t logit_bytes) {
    size_t b = logit_bytes;
    for (int i = 0; i < nr; i++)
        if (!r[i].per_token) b += (size_t)r[i].n_rows * r[i].row_bytes;
    return b;
}

qhx_status qhx_session_checkpoint(qhx_session *s, qhx_checkpoint **out, qhx_error *err) {
    if (!out) return qhx_fail(err, QHX_E_ARG, "checkpoint: out is NULL");
    *out = NULL;
    if (!s) return qhx_fail(err, QHX_E_ARG, "checkpoint: session is NULL");
    qhx_state_region *r = qhx_malloc(QHX_STATE_MAX_REGIONS * sizeof *r);
    qhx_checkpoint *cp = qhx_calloc(1, sizeof *cp);
    if (!r || !cp) goto nomem;
    int nr = state_regions(s, r);
    if (nr <= 0) {
        qhx_free(r);
        qhx_free(cp);
        return qhx_fail(err, QHX_E_UNSUPPORTED, "checkpoint: this model family has no state description");
    }
    size_t lb = (size_t)qhx_session_n_vocab(s) * sizeof(float);
    cp->bytes = fixed_bytes(r, nr, lb);
    if (!(cp->data = qhx_malloc(cp->bytes))) goto nomem;
    uint8_t *d = cp->data;
    for (int i = 0; i < nr; i++) {
        if (r[i].per_token) continue;
        size_t b = (size_t)r[i].n_rows * r[i].row_bytes;
        qhx_state_read(&r[i], 0, d, b); /* through the device that holds it */
        d += b;
    }
    memcpy(d, qhx_session_logits(s), lb);
    cp->owner = s;
    cp->n_past = qhx_session_n_past(s);
    qhx_session_get_snapshot(s, &cp->snap);
    qhx_free(r);
    *out = cp;
    return QHX_OK;
nomem:
    qhx_free(r);
    qhx_checkpoint_free(cp);
    return qhx_fail(err, QHX_E_NOMEM, "checkpoint: out of memory");
}

qhx_status qhx_session_rollback(qhx_session *s, const qhx_checkpoint *cp, qhx_error *err) {
    if (!s || !cp) return qhx_fail(err, QHX_E_ARG, "rollback: session and checkpoint are required");
    if (cp->owner != s) return qhx_fail(err, QHX_E_ARG, "rollback: the checkpoint was taken on another session");
    qhx_status rc = qhx_session_guard_enter(s, "rollback", err);
    if (rc) return rc;
    qhx_state_region *r = qhx_malloc(QHX_STATE_MAX_REGIONS * sizeof *r);
    if (!r) return qhx_session_guard_leave(s, qhx_fail(err, QHX_E_NOMEM, "rollback: out of memory"));
    int nr = state_regions(s, r);
    size_t lb = (size_t)qhx_session_n_vocab(s) * sizeof(float);
    if (nr <= 0 || fixed_bytes(r, nr, lb) != cp->bytes) {
        qhx_free(r);
        return qhx_session_guard_leave(s, qhx_fail(err, QHX_E_ARG, "rollback: the checkpoint does not fit this session"));
    }
    const uint8_t *d = cp->data;
    for (int i = 0; i < nr; i++) {
        if (r[i].per_token) continue;
        size_t b = (size_t)r[i].n_rows * r[i].row_bytes;
        qhx_state_write(&r[i], 0, d, b);
        d += b;
    }
    memcpy(qhx_session_logits_mut(s), d, lb);
    qhx_model_state_set_n_past(qhx_session_state(s), cp->n_past);
    qhx_session_spec_forget(s); /* the MTP block's cache is not in a checkpoint */
    qhx_session_set_snapshot(s, &cp->snap);
    qhx_free(r);
    return qhx_session_guard_leave(s, QHX_OK);
}

int64_t qhx_checkpoint_n_past(const qhx_checkpoint *cp) { return cp ? cp->n_past : 0; }
size_t qhx_checkpoint_bytes(const qhx_checkpoint *cp) { return cp ? cp->bytes + sizeof *cp : 0; }

void qhx_checkpoint_free(qhx_checkpoint *cp) {
    if (!cp) return;
    qhx_free(cp->data);
    qhx_free(cp);
}

/* ==== several sessions ======================================================================= */

/* One batched forward when every session can take it (same model, idle, nothing pending) and
 * the backend has the batched step; else one qhx_session_feed after the other. */
static bool batchable(qhx_session *const *ss, size_t n) {
    if (n < 2 || n > QHX_MAX_BATCH) return false;
    for (size_t i = 0; i < n; i++) /* speculation follows every forward of its session: fed alone */
        if (!ss[i] || ss[i]->m != ss[0]->m || ss[i]->busy || ss[i]->broken || ss[i]->pending >= 0 ||
            (ss[i]->spec && !qhx_spec_retired(ss[i]->spec)))
            return false;
    return true;
}

/* ==== speculative decoding for a front end's own loop (the engine of qhx serve) ============== */

int qhx_session_spec_enabled(const qhx_session *s) { return s && s->spec != NULL; }

int qhx_session_spec_retired(const qhx_session *s) { return s && qhx_spec_retired(s->spec); }

qhx_status qhx_session_spec_step(qhx_session *s, qhx_sampler_handle *smp, qhx_token t, int room, int draft,
                                 qhx_token turn_end, int ignore_stop, qhx_token *out, int *n_out, qhx_error *err) {
    if (n_out) *n_out = 0;
    if (!smp) return qhx_fail(err, QHX_E_ARG, "speculative step: session, sampler and out are required");
    return qhx_session_spec_step_with(s, smp->smp, t, room, draft, turn_end, ignore_stop, out, n_out, err);
}

qhx_status qhx_sessions_spec_step(qhx_spec_step_item *items, size_t n) {
    if (n && !items) return QHX_E_ARG;
    if (n > QHX_MAX_BATCH) return qhx_sessions_spec_step_with(items, NULL, n);
    qhx_spec_src src[QHX_MAX_BATCH];
    for (size_t i = 0; i < n; i++) {
        const qhx_spec_step_item *it = &items[i];
        src[i] = (qhx_spec_src){it->sampler ? it->sampler->smp : NULL, it->turn_end, it->ignore_stop};
        if (it->decoder && qhx_decoder_spec_args(it->decoder, &src[i].smp, &src[i].turn_end, &src[i].ignore_stop, NULL))
            src[i].smp = NULL; /* not a speculative decoder: refused */
    }
    return qhx_sessions_spec_step_with(items, src, n);
}

qhx_status qhx_session_spec_cut(qhx_session *s, qhx_sampler_handle *smp, int k, qhx_error *err) {
    if (!smp) return qhx_fail(err, QHX_E_ARG, "speculative cut: no speculative session");
    return qhx_session_spec_cut_with(s, smp->smp, k, err);
}

void qhx_session_spec_totals(const qhx_session *s, int64_t out[4]) {
    qhx_spec_stats a = {0};
    if (s && s->spec) qhx_spec_get_stats(s->spec, &a);
    out[0] = a.steps, out[1] = a.drafted, out[2] = a.accepted, out[3] = a.emitted;
}

qhx_status qhx_sessions_decode(qhx_session *const *ss, const qhx_token *tokens, size_t n, size_t *n_done,
                               qhx_error *err) {
    if (n_done) *n_done = 0;
    if (n && (!ss || !tokens)) return qhx_fail(err, QHX_E_ARG, "decode: sessions and tokens are required");
    if (batchable(ss, n)) {
        qhx_seq *sts[QHX_MAX_BATCH];
        float *lg[QHX_MAX_BATCH];
        for (size_t i = 0; i < n; i++) sts[i] = ss[i]->st, lg[i] = ss[i]->logits;
        for (size_t i = 0; i < n; i++) ss[i]->busy = true;
        qhx_status rc = qhx_model_decode_multi(ss[0]->m, sts, tokens, (int64_t)n, lg, err);
        for (size_t i = 0; i < n; i++) ss[i]->busy = false;
        if (rc == QHX_OK) {
            for (size_t i = 0; i < n; i++) {
                qhx_sampler_accept(ss[i]->smp, tokens[i]);
                ss[i]->has_logits = true;
                ss[i]->n_fed++;
            }
            if (n_done) *n_done = n;
            return QHX_OK;
        }
        if (rc != QHX_E_UNSUPPORTED) return rc; /* refused before anything was fed */
        if (err) *err = (qhx_error){0};
    }
    for (size_t i = 0; i < n; i++) {
        qhx_status rc = qhx_session_feed(ss[i], &tokens[i], 1, err);
        if (rc) return rc;
        if (n_done) *n_done = i + 1;
    }
    return QHX_OK;
}
