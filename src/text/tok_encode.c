/* text/tok_encode: text -> ids.
 *
 * As the library's encode(text, add_special_tokens=false):
 *   1. added tokens are found in the raw text (leftmost-longest) and split it;
 *   2. each other piece is normalized (NFC), then split again by the added tokens flagged
 *      "normalized" (if any);
 *   3. each remaining piece goes through the pre-tokenizer's Split stages (PCRE2) and the
 *      ByteLevel stage;
 *   4. each pre-token is BPE-merged by merge rank (a heap over a linked list of symbols, or a
 *      rank array for short words), with a cache of pre-token -> ids. */
#include "text/tok_internal.h"

#include "core/alloc.h"

#include <limits.h>
#include <string.h>

#define CACHE_SLOTS (1u << 17)
#define CACHE_MAX_ENT (1u << 16)
#define CACHE_MAX_KEY 64
#define CACHE_MAX_KEY_BYTES ((size_t)4 << 20)
#define CACHE_MAX_IDS ((size_t)1 << 20)
#define BPE_SMALL 48

typedef struct span {
    size_t a, b;
    int m;
} span;

typedef struct spanv {
    span *p;
    size_t n, cap;
} spanv;

typedef struct sym {
    int32_t id, prev, next;
} sym;

typedef struct enc {
    qhx_tok *tok;
    tok_ids *out;
    tok_cache *cache; /* NULL when another call holds it */
    pcre2_match_data *md;
    tok_buf norm, pfx, bl;
    spanv lv[QHX_TOK_MAX_SPLITS + 1];
    sym *syms;
    size_t syms_cap;
    uint64_t *heap; /* 3 entries per symbol: one per initial pair, two per merge */
    qhx_tok_piece_fn fn;
    void *fn_ctx;
    qhx_error *err;
} enc;

static qhx_status nomem(enc *e) { return qhx_fail(e->err, QHX_E_NOMEM, "tokenizer: out of memory"); }

/* ---- word cache ------------------------------------------------------------------------ */

static void cache_reset(tok_cache *c) {
    if (c->slots) memset(c->slots, 0, CACHE_SLOTS * sizeof *c->slots);
    c->n_ent = 0;
    c->keys.n = 0;
    c->ids.n = 0;
}

static bool cache_get(const tok_cache *c, const uint8_t *s, size_t n, uint64_t h, tok_ids *out) {
    if (!c->slots) return false;
    size_t i = (size_t)h & (CACHE_SLOTS - 1);
    for (;;) {
        uint32_t k = c->slots[i];
        if (!k) return false;
        const struct tok_cache_ent *en = &c->ent[k - 1];
        if (en->hash == h && en->key_len == n && !memcmp(c->keys.p + en->key_off, s, n)) {
            for (uint32_t q = 0; q < en->n_ids; q++)
                if (!qhx_tok_ids_push(out, c->ids.p[en->ids_off + q])) return false;
            return true;
        }
        i = (i + 1) & (CACHE_SLOTS - 1);
    }
}

static void cache_put(tok_cache *c, const uint8_t *s, size_t n, uint64_t h, const int32_t *ids,
                      size_t k) {
    if (!c->slots) {
        c->slots = qhx_calloc(CACHE_SLOTS, sizeof *c->slots);
        c->ent = qhx_malloc(CACHE_MAX_ENT * sizeof *c->ent);
        if (!c->slots || !c->ent) {
            qhx_free(c->slots);
            qhx_free(c->ent);
            c->slots = NULL;
            c->ent = NULL;
            return;
        }
    }
    if (c->n_ent >= CACHE_MAX_ENT || c->keys.n + n > CACHE_MAX_KEY_BYTES ||
        c->ids.n + k > CACHE_MAX_IDS)
        cache_reset(c);
    size_t key_off = c->keys.n, ids_off = c->ids.n;
    if (!qhx_tok_buf_put(&c->keys, s, n)) return;
    for (size_t q = 0; q < k; q++)
        if (!qhx_tok_ids_push(&c->ids, ids[q])) {
            c->keys.n = key_off;
            c->ids.n = ids_off;
            return;
        }
    size_t i = (size_t)h & (CACHE_SLOTS - 1);
    while (c->slots[i]) i = (i + 1) & (CACHE_SLOTS - 1);
    c->ent[c->n_ent] = (struct tok_cache_ent){h, (uint32_t)key_off, (uint32_t)n, (uint32_t)ids_off,
                                              (uint32_t)k};
    c->slots[i] = (uint32_t)++c->n_ent;
}

/* ---- BPE --------------------------------------------------------------------------------- */

static bool grow_syms(enc *e, size_t n) {
    if (n <= e->syms_cap) return true;
    size_t cap = e->syms_cap ? e->syms_cap : 64;
    while (cap < n) cap *= 2;
    size_t b1, b3;
    if (!qhx_size_mul(cap, sizeof *e->syms, &b1) || !qhx_size_mul(cap, 3 * sizeof(uint64_t), &b3))
        return false;
    sym *s = qhx_realloc(e->syms, b1);
    if (!s) return false;
    e->syms = s;
    uint64_t *h = qhx_realloc(e->heap, b3);
    if (!h) return false;
    e->heap = h;
    e->syms_cap = cap;
    return true;
}

static inline void pair_rank(const qhx_tok *tok, int32_t a, int32_t b, int32_t *rank, int32_t *id) {
    const tok_merge *m = qhx_tok_merge_find(tok, a, b);
    *rank = m ? m->rank : INT32_MAX;
    *id = m ? m->id : -1;
}

/* Short words: a rank per adjacent pair, lowest rank (leftmost on ties) merged first. */
static size_t bpe_small(const qhx_tok *tok, int32_t *ids, int32_t *ranks, int32_t *mids, size_t m) {
    for (size_t i = 0; i + 1 < m; i++) pair_rank(tok, ids[i], ids[i + 1], &ranks[i], &mids[i]);
    while (m > 1) {
        int32_t best = INT32_MAX;
        size_t pos = 0;
        for (size_t i = 0; i + 1 < m; i++)
            if (ranks[i] < best) {
                best = ranks[i];
                pos = i;
            }
        if (best == INT32_MAX) break;
        ids[pos] = mids[pos];
        /* drop symbol pos+1 and the pair it started */
        memmove(ids + pos + 1, ids + pos + 2, (m - pos - 2) * sizeof *ids);
        if (m - pos - 2 > 0) {
            memmove(ranks + pos + 1, ranks + pos + 2, (m - pos - 3) * sizeof *ranks);
            memmove(mids + pos + 1, mids + pos + 2, (m - pos - 3) * sizeof *mids);
        }
        m--;
        if (pos + 1 < m) pair_rank(tok, ids[pos], ids[pos + 1], &ranks[pos], &mids[pos]);
        if (pos > 0) pair_rank(tok, ids[pos - 1], ids[pos], &ranks[pos - 1], &mids[pos - 1]);
    }
    return m;
}

/* Min-heap of (rank << 32 | position). */
static void heap_push(uint64_t *h, size_t *n, uint64_t v) {
    size_t i = (*n)++;
    while (i) {
        size_t p = (i - 1) / 2;
        if (h[p] <= v) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = v;
}

static uint64_t heap_pop(uint64_t *h, size_t *n) {
    uint64_t top = h[0], v = h[--*n];
    size_t i = 0, m = *n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= m) break;
        if (c + 1 < m && h[c + 1] < h[c]) c++;
        if (h[c] >= v) break;
        h[i] = h[c];
        i = c;
    }
    if (m) h[i] = v;
    return top;
}

/* Long words: symbols in a linked list, candidate merges in a heap, stale entries skipped. */
static size_t bpe_large(enc *e, sym *s, size_t m) {
    const qhx_tok *tok = e->tok;
    uint64_t *h = e->heap;
    size_t hn = 0;
    for (size_t i = 0; i < m; i++) {
        s[i].prev = (int32_t)i - 1;
        s[i].next = i + 1 < m ? (int32_t)i + 1 : -1;
    }
    for (size_t i = 0; i + 1 < m; i++) {
        const tok_merge *mg = qhx_tok_merge_find(tok, s[i].id, s[i + 1].id);
        if (mg) heap_push(h, &hn, (uint64_t)(uint32_t)mg->rank << 32 | i);
    }
    while (hn) {
        uint64_t top = heap_pop(h, &hn);
        int32_t rank = (int32_t)(top >> 32), pos = (int32_t)(top & 0xffffffffu);
        if (s[pos].id < 0) continue;
        int32_t nx = s[pos].next;
        if (nx < 0) continue;
        const tok_merge *mg = qhx_tok_merge_find(tok, s[pos].id, s[nx].id);
        if (!mg || mg->rank != rank) continue; /* stale: the pair has changed */
        s[pos].id = mg->id;
        s[nx].id = -1;
        s[pos].next = s[nx].next;
        if (s[nx].next >= 0) s[s[nx].next].prev = pos;
        if (s[pos].prev >= 0) {
            const tok_merge *l = qhx_tok_merge_find(tok, s[s[pos].prev].id, s[pos].id);
            if (l) heap_push(h, &hn, (uint64_t)(uint32_t)l->rank << 32 | (uint32_t)s[pos].prev);
        }
        if (s[pos].next >= 0) {
            const tok_merge *r = qhx_tok_merge_find(tok, s[pos].id, s[s[pos].next].id);
            if (r) heap_push(h, &hn, (uint64_t)(uint32_t)r->rank << 32 | (uint32_t)pos);
        }
    }
    size_t k = 0;
    for (int32_t i = 0; i >= 0; i = s[i].next) s[k++].id = s[i].id;
    return k;
}

/* One pre-token (raw bytes) -> ids appended to e->out. */
static qhx_status word(enc *e, const uint8_t *s, size_t n) {
    qhx_tok *tok = e->tok;
    if (!n) return QHX_OK;
    if (e->fn) return e->fn(e->fn_ctx, (const char *)s, n, -1) ? QHX_E_ABORTED : QHX_OK;
    uint64_t h = 0;
    bool cacheable = e->cache && n <= CACHE_MAX_KEY;
    if (cacheable) {
        h = qhx_tok_hash(s, n);
        size_t before = e->out->n;
        if (cache_get(e->cache, s, n, h, e->out)) return QHX_OK;
        if (e->out->n != before) return nomem(e);
    }
    size_t start = e->out->n;
    if (tok->ignore_merges) { /* the whole word, if it is a token */
        e->bl.n = 0;
        if (!qhx_tok_buf_reserve(&e->bl, n * 2)) return nomem(e);
        for (size_t i = 0; i < n; i++) e->bl.n += qhx_tok_utf8_put(e->bl.p + e->bl.n, qhx_tok_byte_to_cp[s[i]]);
        int32_t id = qhx_tok_vocab_find(tok, e->bl.p, e->bl.n);
        if (id >= 0) {
            if (!qhx_tok_ids_push(e->out, id)) return nomem(e);
            if (cacheable) cache_put(e->cache, s, n, h, &id, 1);
            return QHX_OK;
        }
    }
    if (!grow_syms(e, n)) return nomem(e);
    size_t m = 0;
    int prev_unk = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = tok->byte_id[s[i]];
        if (id >= 0) {
            e->syms[m++].id = id;
            prev_unk = 0;
        } else if (tok->unk_id >= 0) { /* no unk: the library drops the symbol */
            if (tok->fuse_unk && prev_unk) continue;
            e->syms[m++].id = tok->unk_id;
            prev_unk = 1;
        }
    }
    if (m <= BPE_SMALL) {
        int32_t tmp[BPE_SMALL], r[BPE_SMALL], mi[BPE_SMALL];
        for (size_t i = 0; i < m; i++) tmp[i] = e->syms[i].id;
        m = bpe_small(tok, tmp, r, mi, m);
        for (size_t i = 0; i < m; i++)
            if (!qhx_tok_ids_push(e->out, tmp[i])) return nomem(e);
    } else {
        m = bpe_large(e, e->syms, m);
        for (size_t i = 0; i < m; i++)
            if (!qhx_tok_ids_push(e->out, e->syms[i].id)) return nomem(e);
    }
    /* out->p is NULL when nothing was ever pushed (every byte unknown), and NULL + 0 is undefined */
    if (cacheable) cache_put(e->cache, s, n, h, e->out->p ? e->out->p + start : NULL, e->out->n - start);
    return QHX_OK;
}

/* For tests: BPE of one pre-token by the short-word (use_heap = 0) or the heap path. */
qhx_status qhx_tok_bpe_path(qhx_tok *tok, const uint8_t *s, size_t n, int use_heap, tok_ids *out,
                            qhx_error *err) {
    enc e = {.tok = tok, .out = out, .err = err};
    qhx_status rc = QHX_OK;
    if (!grow_syms(&e, n ? n : 1)) rc = nomem(&e);
    size_t m = 0;
    for (size_t i = 0; !rc && i < n; i++)
        if (tok->byte_id[s[i]] >= 0) e.syms[m++].id = tok->byte_id[s[i]];
    if (!rc && !use_heap && m > BPE_SMALL) rc = qhx_fail(err, QHX_E_ARG, "word too long for the short path");
    if (!rc) {
        if (use_heap) m = bpe_large(&e, e.syms, m);
        else {
            int32_t tmp[BPE_SMALL], r[BPE_SMALL], mi[BPE_SMALL];
            for (size_t i = 0; i < m; i++) tmp[i] = e.syms[i].id;
            m = bpe_small(tok, tmp, r, mi, m);
            for (size_t i = 0; i < m; i++) e.syms[i].id = tmp[i];
        }
        for (size_t i = 0; i < m && !rc; i++)
            if (!qhx_tok_ids_push(out, e.syms[i].id)) rc = nomem(&e);
    }
    qhx_free(e.syms);
    qhx_free(e.heap);
    return rc;
}

/* ---- pre-tokenizer --------------------------------------------------------------------- */

static size_t char_len(const uint8_t *s, size_t n) {
    uint32_t cp;
    int k = qhx_tok_utf8_next(s, n, &cp);
    return k ? (size_t)k : 1;
}

static bool spans_push(spanv *v, size_t a, size_t b, int m) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64, bytes;
        if (!qhx_size_mul(cap, sizeof *v->p, &bytes)) return false;
        span *p = qhx_realloc(v->p, bytes);
        if (!p) return false;
        v->p = p;
        v->cap = cap;
    }
    v->p[v->n++] = (span){a, b, m};
    return true;
}

static qhx_status stage(enc *e, int k, const char *s, size_t n);

/* Next match of sp->re in s[0..n) from *last_end, with the library's (Oniguruma iterator's)
 * rule for empty matches. Returns 1 with the match in [*ms, *me), 0 at the end. */
static int next_match(enc *e, const tok_split *sp, const uint8_t *s, size_t n, size_t *last_end,
                      size_t *last_match_end, int *have_last, size_t *ms, size_t *me,
                      qhx_status *rc) {
    for (;;) {
        if (*last_end > n) return 0;
        int r = sp->jit ? pcre2_jit_match(sp->re, s, n, *last_end, 0, e->md, e->tok->mctx)
                        : pcre2_match(sp->re, s, n, *last_end, PCRE2_NO_UTF_CHECK, e->md, e->tok->mctx);
        if (r == PCRE2_ERROR_NOMATCH) return 0;
        if (r < 0) {
            PCRE2_UCHAR msg[120];
            if (pcre2_get_error_message(r, msg, sizeof msg) < 0) strcpy((char *)msg, "error");
            *rc = qhx_fail(e->err, r == PCRE2_ERROR_NOMEMORY ? QHX_E_NOMEM : QHX_E_LIMIT,
                           "tokenizer: pre-tokenizer regex failed at byte %zu of a %zu-byte piece: %s",
                           *last_end, n, (const char *)msg);
            return -1;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(e->md);
        size_t a = ov[0], b = ov[1];
        if (b < a || b > n) { /* not reachable without \K, which is refused */
            *rc = qhx_fail(e->err, QHX_E_INTERNAL, "tokenizer: bad regex match");
            return -1;
        }
        if (a == b && *have_last && *last_match_end == b) {
            *last_end += *last_end < n ? char_len(s + *last_end, n - *last_end) : 1;
            continue;
        }
        *last_end = b;
        *last_match_end = b;
        *have_last = 1;
        *ms = a;
        *me = b;
        return 1;
    }
}

static qhx_status split_stage(enc *e, int k, const char *text, size_t n) {
    const tok_split *sp = &e->tok->splits[k];
    const uint8_t *s = (const uint8_t *)text;
    size_t last_end = 0, last_match_end = 0, ms, me, prev = 0;
    int have_last = 0, r;
    qhx_status rc = QHX_OK;
    if (sp->behavior == TOK_SPLIT_ISOLATED && !sp->invert) {
        /* streaming: gaps and matches each become a piece, in order */
        while ((r = next_match(e, sp, s, n, &last_end, &last_match_end, &have_last, &ms, &me, &rc)) > 0) {
            if (ms > prev && (rc = stage(e, k + 1, text + prev, ms - prev))) return rc;
            if (me > ms && (rc = stage(e, k + 1, text + ms, me - ms))) return rc;
            prev = me;
        }
        if (r < 0) return rc;
        if (n > prev) return stage(e, k + 1, text + prev, n - prev);
        return QHX_OK;
    }
    spanv *v = &e->lv[k];
    v->n = 0;
    while ((r = next_match(e, sp, s, n, &last_end, &last_match_end, &have_last, &ms, &me, &rc)) > 0) {
        if (ms > prev && !spans_push(v, prev, ms, sp->invert)) return nomem(e);
        if (!spans_push(v, ms, me, !sp->invert)) return nomem(e);
        prev = me;
    }
    if (r < 0) return rc;
    if (n > prev && !spans_push(v, prev, n, sp->invert)) return nomem(e);
    /* apply the behavior in place (the library's SplitDelimiterBehavior) */
    size_t w = 0;
    int prev_match = 0;
    switch (sp->behavior) {
    case TOK_SPLIT_ISOLATED: w = v->n; break;
    case TOK_SPLIT_REMOVED:
        for (size_t i = 0; i < v->n; i++)
            if (!v->p[i].m) v->p[w++] = v->p[i];
        break;
    case TOK_SPLIT_MERGED_PREV:
        for (size_t i = 0; i < v->n; i++) {
            span x = v->p[i];
            if (x.m && !prev_match && w) v->p[w - 1].b = x.b;
            else v->p[w++] = x;
            prev_match = x.m;
        }
        break;
    case TOK_SPLIT_MERGED_NEXT: {
        /* walk backwards, then the pieces are stored from the end */
        size_t out = v->n;
        for (size_t i = v->n; i-- > 0;) {
            span x = v->p[i];
            if (x.m && !prev_match && out < v->n) v->p[out].a = x.a;
            else v->p[--out] = x;
            prev_match = x.m;
        }
        memmove(v->p, v->p + out, (v->n - out) * sizeof *v->p);
        w = v->n - out;
        break;
    }
    case TOK_SPLIT_CONTIGUOUS:
        for (size_t i = 0; i < v->n; i++) {
            span x = v->p[i];
            if (w && x.m == prev_match) v->p[w - 1].b = x.b;
            else v->p[w++] = x;
            prev_match = x.m;
        }
        break;
    }
    v->n = w;
    /* the vector of this level is reused by deeper calls only through e->lv[k+1..] */
    for (size_t i = 0; i < v->n; i++) {
        span x = e->lv[k].p[i];
        if (x.b > x.a && (rc = stage(e, k + 1, text + x.a, x.b - x.a))) return rc;
    }
    return QHX_OK;
}

static qhx_status stage(enc *e, int k, const char *s, size_t n) {
    const qhx_tok *tok = e->tok;
    if (!n) return QHX_OK;
    if (k == tok->prefix_stage && tok->add_prefix_space && s[0] != ' ') {
        e->pfx.n = 0;
        if (!qhx_tok_buf_put(&e->pfx, " ", 1) || !qhx_tok_buf_put(&e->pfx, s, n)) return nomem(e);
        s = e->pfx.p;
        n = e->pfx.n;
    }
    if (k == tok->n_splits) return word(e, (const uint8_t *)s, n);
    return split_stage(e, k, s, n);
}

/* ---- added tokens and normalization ----------------------------------------------------- */

static int is_ws(uint32_t cp) {
    return (cp >= 9 && cp <= 13) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
           cp == 0x205F || cp == 0x3000;
}

static qhx_status emit_added(enc *e, const tok_added *a, const char *s, size_t n) {
    if (e->fn) return e->fn(e->fn_ctx, s, n, a->id) ? QHX_E_ABORTED : QHX_OK;
    return qhx_tok_ids_push(e->out, a->id) ? QHX_OK : nomem(e);
}

static qhx_status piece(enc *e, int phase, const char *s, size_t n);

/* Split s at the added tokens of trie t; other pieces go to piece(phase). */
static qhx_status added_split(enc *e, const tok_trie *t, int phase, const char *text, size_t n) {
    const uint8_t *s = (const uint8_t *)text;
    size_t start_offset = 0, i = 0;
    qhx_status rc;
    while (i < n) {
        if (t->root_child[s[i]] < 0) {
            i++;
            continue;
        }
        size_t len = 0;
        int32_t k = qhx_tok_trie_match(t, s + i, n - i, &len);
        if (k < 0) {
            i++;
            continue;
        }
        const tok_added *a = &e->tok->added[k];
        size_t start = i, stop = i + len;
        if (a->lstrip) /* swallow the whitespace before it (not already taken) */
            while (start > start_offset) {
                size_t p = start - 1;
                while (p > start_offset && (s[p] & 0xC0) == 0x80) p--;
                uint32_t cp;
                if (!qhx_tok_utf8_next(s + p, start - p, &cp) || !is_ws(cp)) break;
                start = p;
            }
        if (a->rstrip)
            while (stop < n) {
                uint32_t cp;
                int q = qhx_tok_utf8_next(s + stop, n - stop, &cp);
                if (!q || !is_ws(cp)) break;
                stop += (size_t)q;
            }
        if (start > start_offset && (rc = piece(e, phase, text + start_offset, start - start_offset)))
            return rc;
        if ((rc = emit_added(e, a, text + start, stop - start))) return rc;
        start_offset = i = stop;
    }
    if (n > start_offset) return piece(e, phase, text + start_offset, n - start_offset);
    return QHX_OK;
}

static qhx_status piece(enc *e, int phase, const char *s, size_t n) {
    const qhx_tok *tok = e->tok;
    if (phase == 2) return stage(e, 0, s, n);
    if (tok->normalizer == TOK_NORM_NFC && !qhx_tok_nfc_quick(s, n)) {
        e->norm.n = 0;
        if (!qhx_tok_nfc(s, n, &e->norm)) return nomem(e);
        s = e->norm.p;
        n = e->norm.n;
    }
    if (tok->has_norm_added) return added_split(e, &tok->trie_norm, 2, s, n);
    return stage(e, 0, s, n);
}

/* ---- entry points ---------------------------------------------------------------------- */

static qhx_status run(qhx_tok *tok, const char *text, size_t len, tok_ids *out,
                      qhx_tok_piece_fn fn, void *ctx, qhx_error *err) {
    if (!tok) return qhx_fail(err, QHX_E_ARG, "tokenizer: no tokenizer");
    if (!text && len) return qhx_fail(err, QHX_E_ARG, "tokenizer: no text");
    if (!len) return QHX_OK;
    size_t bad = qhx_tok_utf8_check((const uint8_t *)text, len);
    if (bad != len)
        return qhx_fail(err, QHX_E_FORMAT,
                        "text is not valid UTF-8: byte 0x%02X at offset %zu does not start a well-formed sequence",
                        (unsigned)(uint8_t)text[bad], bad);
    enc e = {.tok = tok, .out = out, .fn = fn, .fn_ctx = ctx, .err = err};
    e.md = pcre2_match_data_create(1, tok->gctx);
    if (!e.md) return qhx_fail(err, QHX_E_NOMEM, "tokenizer: out of memory");
    if (!fn && tok->cache.mu_ready && pthread_mutex_trylock(&tok->cache.mu) == 0) e.cache = &tok->cache;
    qhx_status rc = added_split(&e, &tok->trie_raw, 1, text, len);
    if (rc == QHX_E_ABORTED) qhx_fail(err, rc, "tokenizer: stopped by the callback");
    if (e.cache) pthread_mutex_unlock(&tok->cache.mu);
    pcre2_match_data_free(e.md);
    qhx_free(e.norm.p);
    qhx_free(e.pfx.p);
    qhx_free(e.bl.p);
    for (int k = 0; k <= QHX_TOK_MAX_SPLITS; k++) qhx_free(e.lv[k].p);
    qhx_free(e.syms);
    qhx_free(e.heap);
    return rc;
}

qhx_status qhx_tok_encode(qhx_tok *tok, const char *text, size_t len, int32_t *ids, size_t cap,
                          size_t *n_out, qhx_error *err) {
    tok_ids v = {0};
    *n_out = 0;
    if (!ids && cap) return qhx_fail(err, QHX_E_ARG, "tokenizer: no output buffer");
    qhx_status rc = run(tok, text, len, &v, NULL, NULL, err);
    if (rc == QHX_OK) {
        *n_out = v.n;
        if (v.n && cap) memcpy(ids, v.p, (v.n < cap ? v.n : cap) * sizeof *ids);
        if (v.n > cap)
            rc = qhx_fail(err, QHX_E_LIMIT, "tokenizer: text has %zu tokens, the buffer holds %zu",
                          v.n, cap);
    }
    qhx_free(v.p);
    return rc;
}

qhx_status qhx_tok_encode_alloc(qhx_tok *tok, const char *text, size_t len, int32_t **ids_out,
                                size_t *n_out, qhx_error *err) {
    tok_ids v = {0};
    *ids_out = NULL;
    *n_out = 0;
    qhx_status rc = run(tok, text, len, &v, NULL, NULL, err);
    if (rc) {
        qhx_free(v.p);
        return rc;
    }
    *ids_out = v.p;
    *n_out = v.n;
    return QHX_OK;
}

qhx_status qhx_tok_pretokenize(qhx_tok *tok, const char *text, size_t len, qhx_tok_piece_fn fn,
                               void *ctx, qhx_error *err) {
    if (!fn) return qhx_fail(err, QHX_E_ARG, "tokenizer: no callback");
    return run(tok, text, len, NULL, fn, ctx, err);
}
