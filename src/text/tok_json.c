/* text/tok_json: reading tokenizer.json.
 *
 * The file is validated as a whole by the strict JSON scanner of core/json_scan.h (RFC 8259,
 * UTF-8, depth cap), which also reads the two bulky members, model.vocab and model.merges (about 300,000
 * strings for Qwen), straight into the tokenizer. Every other member is small and is parsed
 * with jansson from its byte range. A full jansson tree of the 11 MB file takes longer to
 * build and free than the whole load budget (see docs/tokenizer.md).
 *
 * What is not supported is refused by name; nothing in the file is silently ignored except
 * members that carry no meaning for ids (version, offsets trimming flags). */
#include "text/tok_internal.h"

#include "core/alloc.h"

#include <jansson.h>
#include <string.h>

/* ---- the document's layout ----------------------------------------------------------- */

enum {
    M_VERSION, M_TRUNCATION, M_PADDING, M_ADDED, M_NORMALIZER, M_PRETOK, M_POSTPROC,
    M_DECODER, M_MODEL, /* top level */
    M_TYPE, M_DROPOUT, M_UNK, M_CSP, M_EOWS, M_FUSE_UNK, M_BYTE_FALLBACK, M_IGNORE_MERGES,
    M_VOCAB, M_MERGES, /* model */
    M_COUNT
};
static const char *const MEMBER_NAMES[M_COUNT] = {
    "version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer",
    "post_processor", "decoder", "model", "type", "dropout", "unk_token",
    "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk", "byte_fallback",
    "ignore_merges", "vocab", "merges"};

typedef struct layout {
    qhx_jspan m[M_COUNT];
} layout;

typedef struct loader {
    qhx_tok *tok;
    qhx_jscan j;
    layout L;
    const char *name;
    qhx_error *err;
    struct vocab_ctx *vc;
    int vocab_built;          /* model.vocab read and indexed */
    tok_merge_rec *merges;    /* model.merges resolved to ids, in rank order */
    size_t n_merges;
    int merges_done;
} loader;

static qhx_status read_vocab_here(loader *ld);
static qhx_status read_merges_here(loader *ld);

/* Record where a member's value lies. model.vocab is read in place; so is model.merges when
 * the vocab came before it (as in every file the library writes); otherwise it is skipped
 * now and read afterwards from its recorded range. */
static qhx_status record(qhx_jscan *j, loader *ld, int lo, int hi, const char *key, size_t keylen,
                         const char *where, int depth) {
    layout *L = &ld->L;
    for (int k = lo; k < hi; k++) {
        if (strlen(MEMBER_NAMES[k]) != keylen || memcmp(MEMBER_NAMES[k], key, keylen)) continue;
        if (L->m[k].b)
            return qhx_fail(j->err, QHX_E_FORMAT, "%s: duplicate member '%s%s' at byte %zu",
                            j->name, where, MEMBER_NAMES[k], j->i);
        L->m[k].a = j->i;
        qhx_status rc;
        if (k == M_VOCAB) rc = read_vocab_here(ld);
        else if (k == M_MERGES) rc = ld->vocab_built ? read_merges_here(ld) : qhx_jscan_fast_skip(j);
        else rc = qhx_jscan_skip(j, depth);
        L->m[k].b = j->i;
        return rc;
    }
    return qhx_jscan_skip(j, depth); /* a member that does not concern us */
}

static qhx_status model_member(qhx_jscan *j, void *ctx, const char *key, size_t keylen) {
    return record(j, ctx, M_TYPE, M_COUNT, key, keylen, "model.", 2);
}

static qhx_status top_member(qhx_jscan *j, void *ctx, const char *key, size_t keylen) {
    loader *ld = ctx;
    if (keylen == 5 && !memcmp(key, "model", 5)) {
        if (ld->L.m[M_MODEL].b)
            return qhx_fail(j->err, QHX_E_FORMAT, "%s: duplicate member 'model'", j->name);
        ld->L.m[M_MODEL].a = j->i;
        qhx_status rc = qhx_jscan_object(j, 1, model_member, ld);
        ld->L.m[M_MODEL].b = j->i;
        return rc;
    }
    return record(j, ld, M_VERSION, M_MODEL, key, keylen, "", 1);
}

/* ---- jansson for the small members ----------------------------------------------------- */

static qhx_status jparse(loader *ld, int member, json_t **out) {
    *out = NULL;
    qhx_jspan sp = ld->L.m[member];
    if (!sp.b) return QHX_OK;
    json_error_t je;
    *out = json_loadb((const char *)ld->j.s + sp.a, sp.b - sp.a,
                      JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!*out)
        return qhx_fail(ld->err, QHX_E_FORMAT, "%s: '%s': %s (byte %zu)", ld->name,
                        MEMBER_NAMES[member], je.text, sp.a + (size_t)je.position);
    return QHX_OK;
}

static int jtype_is(json_t *o, const char *type) {
    json_t *t = json_object_get(o, "type");
    return json_is_string(t) && !strcmp(json_string_value(t), type);
}

/* Read an optional boolean member; absent -> dflt. */
static qhx_status jbool(loader *ld, json_t *o, const char *key, int dflt, const char *where,
                        int *out) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        *out = dflt;
        return QHX_OK;
    }
    if (!json_is_boolean(v))
        return qhx_fail(ld->err, QHX_E_FORMAT, "%s: %s.%s: expected true or false", ld->name,
                        where, key);
    *out = json_is_true(v);
    return QHX_OK;
}

/* The name of an object's "type" for messages (borrowed), or "(no type)". */
static const char *type_name(json_t *o) {
    json_t *t = json_object_get(o, "type");
    return json_is_string(t) ? json_string_value(t) : "(no type)";
}

/* ---- model.vocab ---------------------------------------------------------------------- */

typedef struct vocab_rec {
    int32_t id;
    uint32_t off, len;
} vocab_rec;

typedef struct vocab_ctx {
    loader *ld;
    tok_buf strs;
    vocab_rec *recs;
    size_t n, cap;
    int32_t max_id;
} vocab_ctx;

static qhx_status parse_vocab(loader *ld, vocab_ctx *vc) {
    qhx_jscan *j = &ld->j;
    qhx_status rc;
    if ((rc = qhx_jscan_expect(j, '{', "model.vocab: expected an object"))) return rc;
    qhx_jscan_ws(j);
    if (j->i < j->n && j->s[j->i] == '}') {
        j->i++;
        return QHX_OK;
    }
    for (;;) {
        qhx_jscan_ws(j);
        size_t at = j->i, off = vc->strs.n;
        if (!qhx_tok_buf_put(&vc->strs, "\0\0\0\0\0\0\0\0", TOK_STR_HDR)) goto nomem;
        if ((rc = qhx_jscan_string(j, &vc->strs))) return rc;
        size_t len = vc->strs.n - off - TOK_STR_HDR;
        if (len == 0)
            return qhx_fail(ld->err, QHX_E_FORMAT, "%s: model.vocab: empty token at byte %zu",
                            ld->name, at);
        if (len > QHX_TOK_MAX_TOKEN_BYTES)
            return qhx_fail(ld->err, QHX_E_LIMIT,
                            "%s: model.vocab: token at byte %zu has %zu bytes, the limit is %d",
                            ld->name, at, len, QHX_TOK_MAX_TOKEN_BYTES);
        if (!qhx_tok_buf_put(&vc->strs, "", 1)) goto nomem;
        if (vc->strs.n > UINT32_MAX)
            return qhx_fail(ld->err, QHX_E_LIMIT, "%s: model.vocab: too many bytes", ld->name);
        if ((rc = qhx_jscan_expect(j, ':', "expected ':'"))) return rc;
        qhx_jscan_ws(j);
        uint64_t id = 0;
        if ((rc = qhx_jscan_uint(j, QHX_TOK_MAX_IDS - 1, "model.vocab id", &id))) return rc;
        if (vc->n == vc->cap) {
            size_t cap = vc->cap ? vc->cap * 2 : 1024, bytes;
            if (cap > QHX_TOK_MAX_IDS)
                return qhx_fail(ld->err, QHX_E_LIMIT, "%s: model.vocab has more than %d entries",
                                ld->name, QHX_TOK_MAX_IDS);
            if (!qhx_size_mul(cap, sizeof *vc->recs, &bytes)) goto nomem;
            vocab_rec *r = qhx_realloc(vc->recs, bytes);
            if (!r) goto nomem;
            vc->recs = r;
            vc->cap = cap;
        }
        uint32_t id32 = (uint32_t)id, len32 = (uint32_t)len;
        memcpy(vc->strs.p + off, &id32, 4);
        memcpy(vc->strs.p + off + 4, &len32, 4);
        vc->recs[vc->n++] = (vocab_rec){(int32_t)id, (uint32_t)off, (uint32_t)len};
        if ((int32_t)id > vc->max_id) vc->max_id = (int32_t)id;
        qhx_jscan_ws(j);
        if (j->i < j->n && j->s[j->i] == ',') {
            j->i++;
            continue;
        }
        if (j->i < j->n && j->s[j->i] == '}') {
            j->i++;
            return QHX_OK;
        }
        return qhx_jscan_fail(j, "model.vocab: expected ',' or '}'");
    }
nomem:
    return qhx_fail(ld->err, QHX_E_NOMEM, "%s: out of memory reading model.vocab", ld->name);
}

/* ---- model.merges --------------------------------------------------------------------- */


/* Merges are resolved to ids in batches: the three vocab lookups of each merge miss the
 * cache, so a batch first hashes and prefetches, then looks up. */
#define MERGE_BATCH 64

typedef struct pending_merge {
    size_t at;
    uint32_t off[3], len[3]; /* left, right, merged token in the batch buffer */
    uint64_t h[3];
} pending_merge;

typedef struct merge_batch {
    pending_merge p[MERGE_BATCH];
    int n;
    tok_buf buf;
    tok_merge_rec *recs;
    size_t n_recs, cap;
} merge_batch;

static qhx_status flush_merges(loader *ld, merge_batch *mb) {
    static const char *const what[3] = {"left token", "right token", "merged token"};
    const char *base = mb->buf.p ? mb->buf.p : ""; /* NULL while every token so far was "" */
    for (int k = 0; k < mb->n; k++)
        for (int q = 0; q < 3; q++) {
            pending_merge *p = &mb->p[k];
            p->h[q] = qhx_tok_hash(base + p->off[q], p->len[q]);
            qhx_tok_vocab_prefetch(ld->tok, p->h[q], 0);
        }
    for (int k = 0; k < mb->n; k++)
        for (int q = 0; q < 3; q++) qhx_tok_vocab_prefetch(ld->tok, mb->p[k].h[q], 1);
    if (mb->n_recs + (size_t)mb->n > mb->cap) {
        size_t cap = mb->cap ? mb->cap * 2 : 4096, bytes;
        if (!qhx_size_mul(cap, sizeof *mb->recs, &bytes)) goto nomem;
        tok_merge_rec *r = qhx_realloc(mb->recs, bytes);
        if (!r) goto nomem;
        mb->recs = r;
        mb->cap = cap;
    }
    for (int k = 0; k < mb->n; k++) {
        pending_merge *p = &mb->p[k];
        int32_t id[3];
        for (int q = 0; q < 3; q++) {
            const char *s = base + p->off[q];
            id[q] = qhx_tok_vocab_find_h(ld->tok, s, p->len[q], p->h[q]);
            if (id[q] < 0)
                return qhx_fail(ld->err, QHX_E_FORMAT,
                                "%s: model.merges: entry at byte %zu: %s '%.*s' is not in the vocab",
                                ld->name, p->at, what[q], (int)(p->len[q] > 64 ? 64 : p->len[q]), s);
        }
        mb->recs[mb->n_recs++] = (tok_merge_rec){id[0], id[1], id[2]};
    }
    mb->n = 0;
    mb->buf.n = 0;
    return QHX_OK;
nomem:
    return qhx_fail(ld->err, QHX_E_NOMEM, "%s: out of memory reading model.merges", ld->name);
}

static qhx_status parse_merges(loader *ld, tok_merge_rec **out, size_t *n_out) {
    qhx_jscan *j = &ld->j;
    merge_batch mb = {.n = 0};
    qhx_status rc = QHX_OK;
    *out = NULL;
    *n_out = 0;
    if ((rc = qhx_jscan_expect(j, '[', "model.merges: expected an array"))) return rc;
    qhx_jscan_ws(j);
    if (j->i < j->n && j->s[j->i] == ']') {
        j->i++;
        return QHX_OK;
    }
    for (;;) {
        qhx_jscan_ws(j);
        pending_merge *p = &mb.p[mb.n];
        size_t off = mb.buf.n;
        p->at = j->i;
        if (!qhx_tok_buf_reserve(&mb.buf, 16)) goto nomem; /* never a NULL buffer below */
        if (j->i < j->n && j->s[j->i] == '"') { /* legacy form "left right" */
            if ((rc = qhx_jscan_string(j, &mb.buf))) goto fail;
            size_t n = mb.buf.n - off;
            if (n == 0) { /* "" (the buffer may still be NULL then: no pointer arithmetic on it) */
                rc = qhx_fail(ld->err, QHX_E_FORMAT,
                              "%s: model.merges: entry at byte %zu is not two tokens separated by one space",
                              ld->name, p->at);
                goto fail;
            }
            char *s = mb.buf.p + off;
            if (n >= 8 && !memcmp(s, "#version", 8)) { /* as the library skips such lines */
                mb.buf.n = off;
                goto next;
            }
            char *sp1 = memchr(s, ' ', n);
            if (!sp1 || memchr(sp1 + 1, ' ', n - (size_t)(sp1 + 1 - s))) {
                rc = qhx_fail(ld->err, QHX_E_FORMAT,
                              "%s: model.merges: entry at byte %zu is not two tokens separated by one space",
                              ld->name, p->at);
                goto fail;
            }
            size_t la = (size_t)(sp1 - s), lb = n - la - 1;
            /* the merged token: both without the space, appended */
            if (!qhx_tok_buf_reserve(&mb.buf, la + lb)) goto nomem;
            s = mb.buf.p + off;
            memcpy(mb.buf.p + mb.buf.n, s, la);
            memcpy(mb.buf.p + mb.buf.n + la, s + la + 1, lb);
            *p = (pending_merge){p->at, {(uint32_t)off, (uint32_t)(off + la + 1), (uint32_t)mb.buf.n},
                                 {(uint32_t)la, (uint32_t)lb, (uint32_t)(la + lb)}, {0, 0, 0}};
            mb.buf.n += la + lb;
        } else { /* pair form ["left", "right"] */
            if ((rc = qhx_jscan_expect(j, '[', "model.merges: expected a string or a pair"))) goto fail;
            qhx_jscan_ws(j);
            if ((rc = qhx_jscan_string(j, &mb.buf))) goto fail;
            size_t la = mb.buf.n - off;
            if ((rc = qhx_jscan_expect(j, ',', "model.merges: expected a pair of strings"))) goto fail;
            qhx_jscan_ws(j);
            if ((rc = qhx_jscan_string(j, &mb.buf))) goto fail;
            if ((rc = qhx_jscan_expect(j, ']', "model.merges: expected a pair of strings"))) goto fail;
            size_t lb = mb.buf.n - off - la;
            *p = (pending_merge){p->at, {(uint32_t)off, (uint32_t)(off + la), (uint32_t)off},
                                 {(uint32_t)la, (uint32_t)lb, (uint32_t)(la + lb)}, {0, 0, 0}};
        }
        if (mb.n_recs + (size_t)mb.n >= QHX_TOK_MAX_MERGES) {
            rc = qhx_fail(ld->err, QHX_E_LIMIT, "%s: model.merges has more than %d entries",
                          ld->name, QHX_TOK_MAX_MERGES);
            goto fail;
        }
        if (++mb.n == MERGE_BATCH && (rc = flush_merges(ld, &mb))) goto fail;
    next:
        qhx_jscan_ws(j);
        if (j->i < j->n && j->s[j->i] == ',') {
            j->i++;
            continue;
        }
        if (j->i < j->n && j->s[j->i] == ']') {
            j->i++;
            break;
        }
        rc = qhx_jscan_fail(j, "model.merges: expected ',' or ']'");
        goto fail;
    }
    if (mb.n && (rc = flush_merges(ld, &mb))) goto fail;
    qhx_free(mb.buf.p);
    *out = mb.recs;
    *n_out = mb.n_recs;
    return QHX_OK;
nomem:
    rc = qhx_fail(ld->err, QHX_E_NOMEM, "%s: out of memory reading model.merges", ld->name);
fail:
    qhx_free(mb.buf.p);
    qhx_free(mb.recs);
    return rc;
}

/* ---- vocab -> tokenizer arrays --------------------------------------------------------- */

/* Take the parsed entries as the vocab and index it. Ids given twice are errors. */
static qhx_status build_vocab(loader *ld, vocab_ctx *vc, int32_t n_ids) {
    qhx_tok *tok = ld->tok;
    tok->n_ids = n_ids;
    tok->str_off = qhx_malloc((size_t)n_ids * sizeof *tok->str_off);
    if (!tok->str_off) return qhx_fail(ld->err, QHX_E_NOMEM, "%s: out of memory building the vocab", ld->name);
    memset(tok->str_off, 0xff, (size_t)n_ids * sizeof *tok->str_off);
    for (size_t k = 0; k < vc->n; k++) {
        vocab_rec r = vc->recs[k];
        if (tok->str_off[r.id] != TOK_NO_STR)
            return qhx_fail(ld->err, QHX_E_FORMAT, "%s: model.vocab: id %d is given to two tokens",
                            ld->name, (int)r.id);
        tok->str_off[r.id] = r.off;
    }
    tok->str = vc->strs.p;
    tok->str_bytes = vc->strs.n;
    vc->strs = (tok_buf){0};
    return qhx_tok_index_vocab(tok, ld->name, ld->err);
}

/* Grow the id space (added tokens may lie beyond the vocab). */
static qhx_status extend_ids(loader *ld, int32_t n_ids) {
    qhx_tok *tok = ld->tok;
    if (n_ids <= tok->n_ids) return QHX_OK;
    uint32_t *p = qhx_realloc(tok->str_off, (size_t)n_ids * sizeof *p);
    if (!p) return qhx_fail(ld->err, QHX_E_NOMEM, "%s: out of memory", ld->name);
    memset(p + tok->n_ids, 0xff, (size_t)(n_ids - tok->n_ids) * sizeof *p);
    tok->str_off = p;
    tok->n_ids = n_ids;
    return QHX_OK;
}

static qhx_status read_vocab_here(loader *ld) {
    qhx_jscan *j = &ld->j;
    qhx_jscan_ws(j);
    /* not an object, or a model type seen before it that is not BPE: leave it for read_model
     * to report by name */
    if (j->i >= j->n || j->s[j->i] != '{') return qhx_jscan_skip(j, 2);
    if (ld->L.m[M_TYPE].b) {
        json_t *t = NULL;
        qhx_status trc = jparse(ld, M_TYPE, &t);
        int bpe = json_is_string(t) && !strcmp(json_string_value(t), "BPE");
        json_decref(t);
        if (trc || !bpe) return qhx_jscan_fast_skip(j);
    }
    qhx_status rc = parse_vocab(ld, ld->vc);
    if (rc) return rc;
    if (ld->vc->max_id < 0) return qhx_fail(ld->err, QHX_E_FORMAT, "%s: model.vocab is empty", ld->name);
    if ((rc = build_vocab(ld, ld->vc, ld->vc->max_id + 1))) return rc;
    ld->vocab_built = 1;
    return QHX_OK;
}

static qhx_status read_merges_here(loader *ld) {
    qhx_status rc = parse_merges(ld, &ld->merges, &ld->n_merges);
    if (!rc) ld->merges_done = 1;
    return rc;
}

/* ---- model, added tokens, normalizer, pre-tokenizer, decoder --------------------------- */

static qhx_status read_model(loader *ld) {
    qhx_tok *tok = ld->tok;
    qhx_status rc;
    json_t *v = NULL;
    if (!ld->L.m[M_MODEL].b)
        return qhx_fail(ld->err, QHX_E_FORMAT, "%s: member 'model' is missing", ld->name);
    if ((rc = jparse(ld, M_TYPE, &v))) return rc;
    if (v && !(json_is_string(v) && !strcmp(json_string_value(v), "BPE"))) {
        rc = qhx_fail(ld->err, QHX_E_UNSUPPORTED, "%s: model type '%s' is not supported (only BPE)",
                      ld->name, json_is_string(v) ? json_string_value(v) : "?");
        json_decref(v);
        return rc;
    }
    json_decref(v);
    if ((rc = jparse(ld, M_DROPOUT, &v))) return rc;
    int bad = v && !json_is_null(v);
    json_decref(v);
    if (bad)
        return qhx_fail(ld->err, QHX_E_UNSUPPORTED, "%s: model.dropout is not supported", ld->name);
    for (int m = M_CSP; m <= M_EOWS; m++) {
        if ((rc = jparse(ld, m, &v))) return rc;
        bad = v && !json_is_null(v) && !(json_is_string(v) && json_string_length(v) == 0);
        json_decref(v);
        if (bad)
            return qhx_fail(ld->err, QHX_E_UNSUPPORTED, "%s: model.%s is not supported (only empty)",
                            ld->name, MEMBER_NAMES[m]);
    }
    int flags[3];
    for (int m = M_FUSE_UNK; m <= M_IGNORE_MERGES; m++) {
        if ((rc = jparse(ld, m, &v))) return rc;
        if (v && !json_is_null(v) && !json_is_boolean(v)) {
            json_decref(v);
            return qhx_fail(ld->err, QHX_E_FORMAT, "%s: model.%s: expected true or false",
                            ld->name, MEMBER_NAMES[m]);
        }
        flags[m - M_FUSE_UNK] = json_is_true(v);
        json_decref(v);
    }
    if (flags[1])
        return qhx_fail(ld->err, QHX_E_UNSUPPORTED, "%s: model.byte_fallback is not supported",
                        ld->name);
    tok->fuse_unk = flags[0];
    tok->ignore_merges = flags[2];
    return QHX_OK;
}

static qhx_status read_unk(loader *ld) {
    json_t *v = NULL;
    qhx_status rc = jparse(ld, M_UNK, &v);
    if (rc) return rc;
    ld->tok->unk_id = -1;
    if (v && !json_is_null(v)) {
        if (!json_is_string(v))
            rc = qhx_fail(ld->err, QHX_E_FORMAT, "%s: model.unk_token: expected a string", ld->name);
        else {
            ld->tok->unk_id = qhx_tok_vocab_find(ld->tok, json_string_value(v), json_string_length(v));
            if (ld->tok->unk_id < 0)
                rc = qhx_fail(ld->err, QHX_E_FORMAT, "%s: model.unk_token '%s' is not in the vocab",
                              ld->name, json_string_value(v));
        }
    }
    json_decref(v);
    return rc;
}

static qhx_status read_added(loader *ld, int32_t *max_id) {
    qhx_tok *tok = ld->tok;
    json_t *arr = NULL;
    qhx_status rc = jparse(ld, M_ADDED, &arr);
    if (rc || !arr || json_is_null(arr)) goto out;
    if (!json_is_array(arr)) {
        rc = qhx_fail(ld->err, QHX_E_FORMAT, "%s: added_tokens: expected an array", ld->name);
        goto out;
    }
    size_t n = json_array_size(arr), total = 0;
    if (n > QHX_TOK_MAX_ADDED) {
        rc = qhx_fail(ld->err, QHX_E_LIMIT, "%s: added_tokens: %zu entries, the limit is %d",
                      ld->name, n, QHX_TOK_MAX_ADDED);
        goto out;
    }
    tok->added = qhx_calloc(n ? n : 1, sizeof *tok->added);
    tok->added_str = qhx_malloc(n * (QHX_TOK_MAX_ADDED_BYTES + 1) + 1);
    if (!tok->added || !tok->added_str) {
        rc = qhx_fail(ld->err, QHX_E_NOMEM, "%s: out of memory for added_tokens", ld->name);
        goto out;
    }
    for (size_t k = 0; k < n; k++) {
        json_t *o = json_array_get(arr, k), *jid = json_object_get(o, "id"),
               *jc = json_object_get(o, "content");
        if (!json_is_object(o) || !json_is_integer(jid) || !json_is_string(jc)) {
            rc = qhx_fail(ld->err, QHX_E_FORMAT,
                          "%s: added_tokens[%zu]: expected an object with an integer 'id' and a string 'content'",
                          ld->name, k);
            goto out;
        }
        json_int_t id = json_integer_value(jid);
        size_t len = json_string_length(jc);
        const char *content = json_string_value(jc);
        if (id < 0 || id >= QHX_TOK_MAX_IDS) {
            rc = qhx_fail(ld->err, QHX_E_LIMIT, "%s: added_tokens[%zu]: id %lld is out of range [0, %d)",
                          ld->name, k, (long long)id, QHX_TOK_MAX_IDS);
            goto out;
        }
        if (len == 0 || len > QHX_TOK_MAX_ADDED_BYTES) {
            rc = qhx_fail(ld->err, len ? QHX_E_LIMIT : QHX_E_FORMAT,
                          "%s: added_tokens[%zu]: content has %zu bytes (allowed: 1 to %d)", ld->name,
                          k, len, QHX_TOK_MAX_ADDED_BYTES);
            goto out;
        }
        int special = 0, single_word = 0, lstrip = 0, rstrip = 0, normalized = 0;
        if ((rc = jbool(ld, o, "special", 0, "added_tokens[]", &special)) ||
            (rc = jbool(ld, o, "single_word", 0, "added_tokens[]", &single_word)) ||
            (rc = jbool(ld, o, "lstrip", 0, "added_tokens[]", &lstrip)) ||
            (rc = jbool(ld, o, "rstrip", 0, "added_tokens[]", &rstrip)) ||
            (rc = jbool(ld, o, "normalized", !special, "added_tokens[]", &normalized)))
            goto out;
        if (single_word) {
            rc = qhx_fail(ld->err, QHX_E_UNSUPPORTED,
                          "%s: added_tokens[%zu] '%s': single_word=true is not supported", ld->name,
                          k, content);
            goto out;
        }
        memcpy(tok->added_str + total, content, len);
        tok->added_str[total + len] = '\0';
        tok->added[k] = (tok_added){(int32_t)id, (uint32_t)total, (uint32_t)len, (uint8_t)special,
                                    (uint8_t)lstrip, (uint8_t)rstrip, (uint8_t)normalized};
        total += len + 1;
        tok->n_added = (int32_t)(k + 1);
        if ((int32_t)id > *max_id) *max_id = (int32_t)id;
    }
out:
    json_decref(arr);
    return rc;
}

static qhx_status read_normalizer(loader *ld) {
    json_t *v = NULL;
    qhx_status rc = jparse(ld, M_NORMALIZER, &v);
    if (rc) return rc;
    ld->tok->normalizer = TOK_NORM_NONE;
    if (v && !json_is_null(v)) {
        json_t *list = v;
        size_t n = 1;
        int seq = jtype_is(v, "Sequence");
        if (seq) {
            list = json_object_get(v, "normalizers");
            if (!json_is_array(list)) {
                rc = qhx_fail(ld->err, QHX_E_FORMAT, "%s: normalizer.normalizers: expected an array",
                              ld->name);
                goto out;
            }
            n = json_array_size(list);
        }
        for (size_t k = 0; k < n; k++) {
            json_t *o = seq ? json_array_get(list, k) : v;
            if (!json_is_object(o) || !jtype_is(o, "NFC")) {
                rc = qhx_fail(ld->err, QHX_E_UNSUPPORTED,
                              "%s: normalizer '%s' is not supported (only NFC)", ld->name,
                              json_is_object(o) ? type_name(o) : "?");
                goto out;
            }
            ld->tok->normalizer = TOK_NORM_NFC;
        }
    }
out:
    json_decref(v);
    return rc;
}

static const char GPT2_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static qhx_status read_split(loader *ld, json_t *o, size_t k) {
    qhx_tok *tok = ld->tok;
    char where[64];
    snprintf(where, sizeof where, "pre_tokenizer[%zu] (Split)", k);
    if (tok->n_splits >= QHX_TOK_MAX_SPLITS)
        return qhx_fail(ld->err, QHX_E_LIMIT, "%s: more than %d Split pre-tokenizers", ld->name,
                        QHX_TOK_MAX_SPLITS);
    json_t *pat = json_object_get(o, "pattern"), *beh = json_object_get(o, "behavior");
    json_t *re = json_object_get(pat, "Regex"), *lit = json_object_get(pat, "String");
    if (!json_is_object(pat) || (!json_is_string(re) && !json_is_string(lit)))
        return qhx_fail(ld->err, QHX_E_FORMAT, "%s: %s: 'pattern' must be {\"Regex\": ...} or {\"String\": ...}",
                        ld->name, where);
    static const char *const behaviors[] = {"Removed", "Isolated", "MergedWithPrevious",
                                            "MergedWithNext", "Contiguous"};
    int b = -1;
    for (int q = 0; q < 5 && json_is_string(beh); q++)
        if (!strcmp(json_string_value(beh), behaviors[q])) b = q;
    if (b < 0)
        return qhx_fail(ld->err, QHX_E_UNSUPPORTED, "%s: %s: behavior '%s' is not supported",
                        ld->name, where, json_is_string(beh) ? json_string_value(beh) : "?");
    int invert = 0;
    qhx_status rc = jbool(ld, o, "invert", 0, where, &invert);
    if (rc) return rc;
    json_t *p = json_is_string(re) ? re : lit;
    tok_split *sp = &tok->splits[tok->n_splits];
    rc = qhx_tok_compile_split(tok, json_string_value(p), json_string_length(p), p == lit, where,
                               sp, ld->err);
    if (rc) {
        qhx_fail_prefix(ld->err, "%s", ld->name);
        return rc;
    }
    sp->behavior = b;
    sp->invert = invert;
    tok->n_splits++;
    return QHX_OK;
}

static qhx_status read_pretok(loader *ld) {
    qhx_tok *tok = ld->tok;
    json_t *v = NULL;
    qhx_status rc = jparse(ld, M_PRETOK, &v);
    if (rc) return rc;
    if (!v || json_is_null(v)) {
        rc = qhx_fail(ld->err, QHX_E_UNSUPPORTED,
                      "%s: a BPE model without a ByteLevel pre-tokenizer is not supported", ld->name);
        goto out;
    }
    json_t *list = v;
    size_t n = 1;
    int seq = jtype_is(v, "Sequence");
    if (seq) {
        list = json_object_get(v, "pretokenizers");
        if (!json_is_array(list)) {
            rc = qhx_fail(ld->err, QHX_E_FORMAT, "%s: pre_tokenizer.pretokenizers: expected an array",
                          ld->name);
            goto out;
        }
        n = json_array_size(list);
    }
    int have_bl = 0;
    for (size_t k = 0; k < n; k++) {
        json_t *o = seq ? json_array_get(list, k) : v;
        if (!json_is_object(o)) {
            rc = qhx_fail(ld->err, QHX_E_FORMAT, "%s: pre_tokenizer[%zu]: expected an object",
                          ld->name, k);
            goto out;
        }
        if (have_bl) {
            rc = qhx_fail(ld->err, QHX_E_UNSUPPORTED,
                          "%s: pre_tokenizer[%zu] '%s' after ByteLevel is not supported", ld->name,
                          k, type_name(o));
            goto out;
        }
        if (jtype_is(o, "Split")) {
            if ((rc = read_split(ld, o, k))) goto out;
        } else if (jtype_is(o, "ByteLevel")) {
            int use_regex = 0;
            have_bl = 1;
            /* the library's defaults when a flag is absent: both true */
            if ((rc = jbool(ld, o, "add_prefix_space", 1, "pre_tokenizer (ByteLevel)",
                            &tok->add_prefix_space)) ||
                (rc = jbool(ld, o, "use_regex", 1, "pre_tokenizer (ByteLevel)", &use_regex)))
                goto out;
            tok->prefix_stage = tok->n_splits;
            if (use_regex) {
                tok_split *sp = &tok->splits[tok->n_splits];
                rc = qhx_tok_compile_split(tok, GPT2_PATTERN, sizeof GPT2_PATTERN - 1, 0,
                                           "ByteLevel regex", sp, ld->err);
                if (rc) goto out;
                sp->behavior = TOK_SPLIT_ISOLATED;
                sp->invert = 0;
                tok->n_splits++;
            }
        } else {
            rc = qhx_fail(ld->err, QHX_E_UNSUPPORTED, "%s: pre-tokenizer '%s' is not supported",
                          ld->name, type_name(o));
            goto out;
        }
    }
    if (!have_bl)
        rc = qhx_fail(ld->err, QHX_E_UNSUPPORTED,
                      "%s: a BPE model without a ByteLevel pre-tokenizer is not supported", ld->name);
out:
    json_decref(v);
    return rc;
}

static qhx_status read_decoder_postproc(loader *ld) {
    json_t *v = NULL;
    qhx_status rc = jparse(ld, M_DECODER, &v);
    if (rc) return rc;
    ld->tok->decoder = TOK_DEC_NONE;
    if (v && !json_is_null(v)) {
        if (!json_is_object(v) || !jtype_is(v, "ByteLevel"))
            rc = qhx_fail(ld->err, QHX_E_UNSUPPORTED, "%s: decoder '%s' is not supported (only ByteLevel)",
                          ld->name, json_is_object(v) ? type_name(v) : "?");
        ld->tok->decoder = TOK_DEC_BYTELEVEL;
    }
    json_decref(v);
    if (rc) return rc;
    if ((rc = jparse(ld, M_POSTPROC, &v))) return rc;
    if (v && !json_is_null(v) && !(json_is_object(v) && jtype_is(v, "ByteLevel")))
        rc = qhx_fail(ld->err, QHX_E_UNSUPPORTED,
                      "%s: post_processor '%s' is not supported (only ByteLevel)", ld->name,
                      json_is_object(v) ? type_name(v) : "?");
    json_decref(v);
    if (rc) return rc;
    for (int m = M_TRUNCATION; m <= M_PADDING; m++) {
        if ((rc = jparse(ld, m, &v))) return rc;
        int bad = v && !json_is_null(v);
        json_decref(v);
        if (bad)
            return qhx_fail(ld->err, QHX_E_UNSUPPORTED, "%s: '%s' is not supported (must be null)",
                            ld->name, MEMBER_NAMES[m]);
    }
    return QHX_OK;
}

/* ---- entry points ---------------------------------------------------------------------- */

qhx_status qhx_tok_load_buffer(const void *data, size_t size, const char *name, qhx_tok **out,
                               qhx_error *err) {
    *out = NULL;
    if (!name) name = "tokenizer.json";
    if (!data && size) return qhx_fail(err, QHX_E_ARG, "%s: no data", name);
    if (size > QHX_TOK_MAX_FILE_BYTES)
        return qhx_fail(err, QHX_E_LIMIT, "%s: %zu bytes, the limit is %zu", name, size,
                        QHX_TOK_MAX_FILE_BYTES);
    qhx_tok *tok;
    qhx_status rc = qhx_tok_new(name, &tok, err);
    if (rc) return rc;
    loader ld = {.tok = tok, .name = name, .err = err};
    ld.j = (qhx_jscan){.s = data, .n = size, .name = name, .err = err};
    vocab_ctx vc = {.ld = &ld, .max_id = -1};
    ld.vc = &vc;

    if ((rc = qhx_jscan_object(&ld.j, 0, top_member, &ld))) goto fail;
    qhx_jscan_ws(&ld.j);
    if (ld.j.i != ld.j.n) {
        rc = qhx_jscan_fail(&ld.j, "trailing characters after the top-level object");
        goto fail;
    }
    if ((rc = read_model(&ld))) goto fail;
    if (!ld.vocab_built) {
        rc = qhx_fail(err, QHX_E_FORMAT, "%s: model.vocab is %s", name,
                      ld.L.m[M_VOCAB].b ? "not an object" : "missing");
        goto fail;
    }
    qhx_free(vc.recs);
    vc.recs = NULL;
    int32_t max_id = tok->n_ids - 1;
    if ((rc = read_added(&ld, &max_id)) || (rc = extend_ids(&ld, max_id + 1))) goto fail;
    if ((rc = read_unk(&ld))) goto fail;
    if (!ld.merges_done) { /* merges came before the vocab: read them now */
        qhx_jspan sp = ld.L.m[M_MERGES];
        if (!sp.b) {
            rc = qhx_fail(err, QHX_E_FORMAT, "%s: model.merges is missing", name);
            goto fail;
        }
        ld.j.i = sp.a;
        if ((rc = read_merges_here(&ld))) goto fail;
        if (ld.j.i != sp.b) {
            rc = qhx_jscan_fail(&ld.j, "model.merges: malformed");
            goto fail;
        }
    }
    if ((rc = qhx_tok_index_merges(tok, ld.merges, ld.n_merges, name, err))) goto fail;
    qhx_free(ld.merges);
    ld.merges = NULL;
    if ((rc = read_normalizer(&ld)) || (rc = read_pretok(&ld)) || (rc = read_decoder_postproc(&ld)))
        goto fail;
    if ((rc = qhx_tok_derive(tok, name, err))) goto fail;
    tok->source_bytes = size;
    tok->source_hash = qhx_tok_file_hash(data, size);
    *out = tok;
    return QHX_OK;
fail:
    qhx_free(ld.merges);
    qhx_free(vc.recs);
    qhx_free(vc.strs.p);
    qhx_tok_free(tok);
    return rc;
}
