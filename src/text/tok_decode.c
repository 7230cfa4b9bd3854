/* text/tok_decode: ids -> text, whole or as a stream. */
#include "text/tok_internal.h"

#include "core/alloc.h"

#include <string.h>

/* Concatenate the bytes of the ids (the library's decode chain): byte-level tokens give
 * their bytes; with no decoder, token strings are joined by spaces. */
static bool gather(const qhx_tok *tok, const int32_t *ids, size_t n, unsigned flags, tok_buf *b) {
    int first = 1;
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= tok->n_ids || !tok->id_kind[id]) continue; /* unknown: skipped */
        if ((flags & QHX_TOK_SKIP_SPECIAL) && (tok->id_kind[id] & TOK_ID_SPECIAL)) continue;
        if (tok->decoder == TOK_DEC_NONE && !first && !qhx_tok_buf_put(b, " ", 1)) return false;
        first = 0;
        if (!qhx_tok_buf_put(b, tok->dec + tok->dec_off[id], tok->dec_off[id + 1] - tok->dec_off[id]))
            return false;
    }
    return true;
}

static qhx_status decode_buf(const qhx_tok *tok, const int32_t *ids, size_t n_ids, unsigned flags,
                             tok_buf *out, qhx_error *err) {
    if (!tok) return qhx_fail(err, QHX_E_ARG, "tokenizer: no tokenizer");
    if (!ids && n_ids) return qhx_fail(err, QHX_E_ARG, "tokenizer: no ids");
    tok_buf raw = {0};
    bool ok = gather(tok, ids, n_ids, flags, &raw) &&
              qhx_tok_utf8_lossy(out, (const uint8_t *)raw.p, raw.n, false, NULL) &&
              qhx_tok_buf_reserve(out, 1);
    qhx_free(raw.p);
    if (!ok) return qhx_fail(err, QHX_E_NOMEM, "tokenizer: out of memory decoding %zu ids", n_ids);
    out->p[out->n] = '\0';
    return QHX_OK;
}

qhx_status qhx_tok_decode(const qhx_tok *tok, const int32_t *ids, size_t n_ids, unsigned flags,
                          char *text, size_t cap, size_t *len_out, qhx_error *err) {
    *len_out = 0;
    if (!text && cap) return qhx_fail(err, QHX_E_ARG, "tokenizer: no output buffer");
    tok_buf b = {0};
    qhx_status rc = decode_buf(tok, ids, n_ids, flags, &b, err);
    if (rc == QHX_OK) {
        *len_out = b.n;
        if (b.n && cap) memcpy(text, b.p, b.n < cap ? b.n : cap);
        if (b.n > cap)
            rc = qhx_fail(err, QHX_E_LIMIT, "tokenizer: text has %zu bytes, the buffer holds %zu",
                          b.n, cap);
    }
    qhx_free(b.p);
    return rc;
}

qhx_status qhx_tok_decode_alloc(const qhx_tok *tok, const int32_t *ids, size_t n_ids,
                                unsigned flags, char **text_out, size_t *len_out, qhx_error *err) {
    tok_buf b = {0};
    *text_out = NULL;
    *len_out = 0;
    qhx_status rc = decode_buf(tok, ids, n_ids, flags, &b, err);
    if (rc) {
        qhx_free(b.p);
        return rc;
    }
    *text_out = b.p;
    *len_out = b.n;
    return QHX_OK;
}

/* ---- streaming ------------------------------------------------------------------------- */

struct qhx_tok_stream {
    const qhx_tok *tok;
    unsigned flags;
    int any; /* a token was pushed (for the no-decoder space join) */
    tok_buf pending; /* bytes of an incomplete UTF-8 sequence (at most 3) + new token bytes */
    tok_buf out;
};

qhx_status qhx_tok_stream_create(const qhx_tok *tok, unsigned flags, qhx_tok_stream **out,
                                 qhx_error *err) {
    *out = NULL;
    if (!tok) return qhx_fail(err, QHX_E_ARG, "tokenizer: no tokenizer");
    qhx_tok_stream *st = qhx_calloc(1, sizeof *st);
    if (!st) return qhx_fail(err, QHX_E_NOMEM, "tokenizer: out of memory");
    st->tok = tok;
    st->flags = flags;
    *out = st;
    return QHX_OK;
}

qhx_status qhx_tok_stream_push(qhx_tok_stream *st, int32_t id, const char **text, size_t *len,
                               qhx_error *err) {
    *text = "";
    *len = 0;
    if (!st) return qhx_fail(err, QHX_E_ARG, "tokenizer: no stream");
    st->out.n = 0;
    const qhx_tok *tok = st->tok;
    int32_t one = id;
    size_t before = st->pending.n;
    if (tok->decoder == TOK_DEC_NONE && st->any && id >= 0 && id < tok->n_ids && tok->id_kind[id] &&
        !((st->flags & QHX_TOK_SKIP_SPECIAL) && (tok->id_kind[id] & TOK_ID_SPECIAL)) &&
        !qhx_tok_buf_put(&st->pending, " ", 1))
        goto nomem;
    if (!gather(tok, &one, 1, st->flags, &st->pending)) goto nomem;
    if (st->pending.n > before) st->any = 1;
    size_t used;
    if (!qhx_tok_utf8_lossy(&st->out, (const uint8_t *)st->pending.p, st->pending.n, true, &used))
        goto nomem;
    if (used < st->pending.n) memmove(st->pending.p, st->pending.p + used, st->pending.n - used);
    st->pending.n -= used;
    *text = st->out.n ? st->out.p : "";
    *len = st->out.n;
    return QHX_OK;
nomem:
    st->pending.n = before; /* as if the token had not been pushed */
    return qhx_fail(err, QHX_E_NOMEM, "tokenizer: out of memory");
}

qhx_status qhx_tok_stream_flush(qhx_tok_stream *st, const char **text, size_t *len,
                                qhx_error *err) {
    *text = "";
    *len = 0;
    if (!st) return qhx_fail(err, QHX_E_ARG, "tokenizer: no stream");
    st->out.n = 0;
    if (!qhx_tok_utf8_lossy(&st->out, (const uint8_t *)st->pending.p, st->pending.n, false, NULL))
        return qhx_fail(err, QHX_E_NOMEM, "tokenizer: out of memory");
    st->pending.n = 0;
    st->any = 0;
    *text = st->out.n ? st->out.p : "";
    *len = st->out.n;
    return QHX_OK;
}

void qhx_tok_stream_free(qhx_tok_stream *st) {
    if (!st) return;
    qhx_free(st->pending.p);
    qhx_free(st->out.p);
    qhx_free(st);
}

const uint8_t *qhx_tok_id_bytes(const qhx_tok *tok, int32_t id, size_t *len, int *added) {
    *len = 0;
    *added = 0;
    if (!tok || id < 0 || id >= tok->n_ids || !tok->id_kind[id]) return NULL;
    *added = (tok->id_kind[id] & TOK_ID_ADDED) != 0;
    *len = tok->dec_off[id + 1] - tok->dec_off[id];
    return tok->dec + tok->dec_off[id];
}
