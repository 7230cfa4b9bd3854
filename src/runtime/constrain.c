/* runtime/constrain.c: the public grammar and constraint calls (qhx.h) over src/grammar, and
 * the constrained pick the generate loop and the server share. The model's vocabulary as byte
 * strings is built once, on first use, under the model's lock. */
#include "runtime/constrain.h"

#include "core/alloc.h"
#include "core/time.h"
#include "grammar/grammar.h"
#include "runtime/model.h"

#include <math.h>
#include <string.h>

struct qhx_grammar {
    qhx_gm *gm;
};

struct qhx_constraint {
    const qhx_model *m;
    const qhx_gm_vocab *v;
    qhx_gm_match *match;
    int64_t n_vocab;
    uint64_t *words; /* the last mask */
    float *scratch;  /* masked logits */
    uint64_t picks, ns;
};

static qhx_status wrap(qhx_gm *gm, qhx_status rc, qhx_grammar **out, qhx_error *err) {
    if (rc) return rc;
    qhx_grammar *g = qhx_calloc(1, sizeof *g);
    if (!g) {
        qhx_gm_free(gm);
        return qhx_fail(err, QHX_E_NOMEM, "grammar: out of memory");
    }
    g->gm = gm;
    *out = g;
    return QHX_OK;
}

qhx_status qhx_grammar_parse(const char *gbnf, size_t len, const char *root, qhx_grammar **out, qhx_error *err) {
    if (!out) return qhx_fail(err, QHX_E_ARG, "grammar: out is NULL");
    *out = NULL;
    qhx_gm *gm = NULL;
    qhx_status rc = qhx_gm_parse(gbnf, len, root, &gm, err);
    return wrap(gm, rc, out, err);
}

qhx_status qhx_grammar_from_json_schema(const char *schema, size_t len, qhx_grammar **out, qhx_error *err) {
    if (!out) return qhx_fail(err, QHX_E_ARG, "json schema: out is NULL");
    *out = NULL;
    qhx_gm *gm = NULL;
    qhx_status rc = qhx_gm_from_schema(schema, len, &gm, err);
    return wrap(gm, rc, out, err);
}

qhx_status qhx_grammar_json_object(qhx_grammar **out, qhx_error *err) {
    if (!out) return qhx_fail(err, QHX_E_ARG, "grammar: out is NULL");
    *out = NULL;
    qhx_gm *gm = NULL;
    qhx_status rc = qhx_gm_json_object(&gm, err);
    return wrap(gm, rc, out, err);
}

qhx_status qhx_grammar_tool_call(const qhx_model *m, const char *const *tools, size_t n_tools, const char *name,
                                 qhx_grammar **out, qhx_error *err) {
    if (!out) return qhx_fail(err, QHX_E_ARG, "tool call grammar: out is NULL");
    *out = NULL;
    if (!m || (!tools && n_tools)) return qhx_fail(err, QHX_E_ARG, "tool call grammar: model and tools are required");
    /* how the family's chat format writes a call: blocks of parameters, or one JSON object */
    const qhx_chat_family style = qhx_model_chat_style(m);
    if (!style || !style->tool_open)
        return qhx_fail(err, QHX_E_UNSUPPORTED, "tool call grammar: the %s chat format takes no tools", qhx_model_family_title(m));
    const qhx_gm_call_syntax syntax = {.json = style->tool_json, .named = style->tool_named,
                                       .param_open = style->tool_param_open,
                                       .param_open_end = style->tool_param_open_end,
                                       .param_close = style->tool_param_close, .call_end = style->tool_call_end};
    char *text = NULL;
    qhx_status rc = qhx_gm_tool_call_gbnf(tools, n_tools, name, &syntax, &text, err);
    qhx_gm *gm = NULL;
    if (!rc) rc = qhx_gm_parse(text, strlen(text), "root", &gm, err);
    qhx_free(text);
    return wrap(gm, rc, out, err);
}

void qhx_grammar_free(qhx_grammar *g) {
    if (!g) return;
    qhx_gm_free(g->gm);
    qhx_free(g);
}

/* ---- the model's vocabulary ---------------------------------------------------------------- */

/* Stop ids and the end-of-turn token end an output; added tokens (markers) never come
 * under a grammar; ids past the tokenizer (padding rows) neither. */
static qhx_status build_vocab(const qhx_model *m, qhx_gm_vocab **out, qhx_error *err) {
    int32_t n = (int32_t)qhx_model_n_vocab(m);
    const uint8_t **bytes = qhx_calloc((size_t)n, sizeof *bytes);
    uint32_t *lens = qhx_calloc((size_t)n, sizeof *lens);
    uint8_t *kind = qhx_malloc((size_t)n);
    qhx_status rc = QHX_OK;
    if (!bytes || !lens || !kind) rc = qhx_fail(err, QHX_E_NOMEM, "grammar: out of memory for the vocabulary");
    qhx_token im_end = qhx_model_turn_end(m);
    for (int32_t i = 0; !rc && i < n; i++) {
        size_t len;
        int added;
        bytes[i] = qhx_tok_id_bytes(m->tok, i, &len, &added);
        lens[i] = (uint32_t)len;
        if (qhx_model_is_stop(m, i) || i == im_end) kind[i] = QHX_GM_TOK_END;
        else if (!bytes[i] || added) kind[i] = QHX_GM_TOK_NEVER;
        else kind[i] = QHX_GM_TOK_TEXT;
    }
    if (!rc) rc = qhx_gm_vocab_new(n, bytes, lens, kind, out, err);
    qhx_free(bytes);
    qhx_free(lens);
    qhx_free(kind);
    return rc;
}

static qhx_status model_vocab(const qhx_model *m, const qhx_gm_vocab **out, qhx_error *err) {
    qhx_model *mm = (qhx_model *)m; /* the lazily built table is the one mutable part, locked */
    qhx_status rc = QHX_OK;
    pthread_mutex_lock(&mm->gm_lock);
    if (!mm->gm_vocab) rc = build_vocab(m, &mm->gm_vocab, err);
    *out = mm->gm_vocab;
    pthread_mutex_unlock(&mm->gm_lock);
    return rc;
}

/* ---- constraints ---------------------------------------------------------------------------- */

qhx_status qhx_constraint_new(const qhx_model *m, const qhx_grammar *g, qhx_constraint **out, qhx_error *err) {
    if (!out) return qhx_fail(err, QHX_E_ARG, "constraint: out is NULL");
    *out = NULL;
    if (!m || !g) return qhx_fail(err, QHX_E_ARG, "constraint: model and grammar are required");
    if (!m->tok) return qhx_fail(err, QHX_E_ARG, "constraint: the model has no tokenizer (a grammar needs the tokens' bytes)");
    qhx_constraint *c = qhx_calloc(1, sizeof *c);
    if (!c) return qhx_fail(err, QHX_E_NOMEM, "constraint: out of memory");
    c->m = qhx_model_retain(m); /* the vocabulary below is the model's: keep it alive (qhx.h) */
    c->n_vocab = qhx_model_n_vocab(m);
    qhx_status rc = model_vocab(m, &c->v, err);
    if (!rc) rc = qhx_gm_match_new(g->gm, &c->match, err);
    if (!rc) {
        c->words = qhx_malloc(((size_t)c->n_vocab + 63) / 64 * sizeof *c->words);
        c->scratch = qhx_malloc((size_t)c->n_vocab * sizeof *c->scratch);
        if (!c->words || !c->scratch) rc = qhx_fail(err, QHX_E_NOMEM, "constraint: out of memory");
    }
    if (rc) {
        qhx_constraint_free(c);
        return rc;
    }
    *out = c;
    return QHX_OK;
}

void qhx_constraint_free(qhx_constraint *c) {
    if (!c) return;
    qhx_gm_match_free(c->match);
    qhx_free(c->words);
    qhx_free(c->scratch);
    qhx_model_release(c->m);
    qhx_free(c);
}

void qhx_constraint_reset(qhx_constraint *c) {
    if (c) qhx_gm_match_reset(c->match);
}

static int bit(const uint64_t *w, int64_t i) { return (int)((w[i >> 6] >> (i & 63)) & 1u); }

qhx_status qhx_constraint_mask(qhx_constraint *c, float *logits, qhx_error *err) {
    if (!c || !logits) return qhx_fail(err, QHX_E_ARG, "constraint: constraint and logits are required");
    if (qhx_gm_mask(c->match, c->v, c->words, err)) return err ? err->code : QHX_E_LIMIT;
    for (int64_t i = 0; i < c->n_vocab; i++)
        if (!bit(c->words, i)) logits[i] = -INFINITY;
    return QHX_OK;
}

int qhx_constraint_allows(qhx_constraint *c, qhx_token t) {
    return c && qhx_gm_allows(c->match, c->v, t, NULL) == 1;
}

qhx_status qhx_constraint_accept(qhx_constraint *c, qhx_token t, qhx_error *err) {
    if (!c) return qhx_fail(err, QHX_E_ARG, "constraint: constraint is NULL");
    uint64_t t0 = qhx_time_ns();
    int r = qhx_gm_accept(c->match, c->v, t, err);
    c->ns += qhx_time_ns() - t0;
    if (r < 0) return err ? err->code : QHX_E_LIMIT;
    if (r == 0) return qhx_fail(err, QHX_E_ARG, "constraint: token %d cannot come next in the grammar", (int)t);
    return QHX_OK;
}

int qhx_constraint_can_end(const qhx_constraint *c) { return c && qhx_gm_match_can_end(c->match); }
int qhx_constraint_can_continue(const qhx_constraint *c) { return c && qhx_gm_match_can_continue(c->match); }

int qhx_constraint_is_end(const qhx_constraint *c, qhx_token t) {
    return c && qhx_gm_vocab_kind(c->v, t) == QHX_GM_TOK_END;
}

static qhx_token sample(qhx_constraint *c, qhx_sampler *smp, const float *logits, int allow_end, qhx_error *err);

qhx_token qhx_constraint_sample(qhx_constraint *c, qhx_sampler *smp, const float *logits, int allow_end,
                                qhx_error *err) {
    uint64_t t0 = qhx_time_ns();
    qhx_token t = sample(c, smp, logits, allow_end, err);
    c->ns += qhx_time_ns() - t0;
    c->picks++;
    return t;
}

void qhx_constraint_get_stats(const qhx_constraint *c, qhx_constraint_stats *out) {
    memset(out, 0, sizeof *out);
    if (!c) return;
    qhx_gm_counters k;
    qhx_gm_match_counters(c->match, &k);
    out->picks = c->picks;
    out->masks = k.masks;
    out->cached = k.cache_hits;
    out->ns = c->ns;
}

static qhx_token sample(qhx_constraint *c, qhx_sampler *smp, const float *logits, int allow_end, qhx_error *err) {
    if (qhx_sampler_is_greedy(smp)) { /* the argmax, when allowed, is the masked argmax too */
        qhx_token t = qhx_sampler_sample(smp, logits);
        if (t < 0) return qhx_fail(err, QHX_E_FORMAT, "constraint: the logits are not finite"), -1;
        int ok = qhx_gm_allows(c->match, c->v, t, err);
        if (ok < 0) return -1;
        if (ok && (allow_end || !qhx_constraint_is_end(c, t))) return t;
    }
    if (qhx_gm_mask(c->match, c->v, c->words, err)) return -1;
    int64_t n_ok = 0, any = -1;
    for (int64_t i = 0; i < c->n_vocab; i++) {
        int ok = bit(c->words, i) && (allow_end || qhx_gm_vocab_kind(c->v, (int32_t)i) != QHX_GM_TOK_END);
        c->scratch[i] = ok ? logits[i] : -INFINITY;
        if (ok) n_ok++, any = i;
    }
    if (!n_ok) { /* complete only when the text so far is a sentence */
        if (qhx_gm_match_can_end(c->match)) return -2;
        return qhx_fail(err, QHX_E_UNSUPPORTED, "constraint: no token of the vocabulary can continue the output, "
                                                "and it is not a whole sentence of the grammar (the grammar needs "
                                                "bytes the tokenizer cannot write)"), -1;
    }
    qhx_token t = qhx_sampler_sample(smp, c->scratch);
    if (t < 0) return qhx_fail(err, QHX_E_FORMAT, "constraint: the logits are not finite"), -1;
    return c->scratch[t] > -INFINITY ? t : (qhx_token)any; /* every allowed logit -inf: any allowed one */
}
