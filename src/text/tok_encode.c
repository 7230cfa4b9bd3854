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

#define CACHE_LINES (1u << 15) /* 2 MiB */
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

/* Min-heap of candidate merges, ordered by (rank, position); each remembers the pair it was
 * made for, so a stale entry is recognized without looking the pair up again. */
typedef struct cand {
    uint64_t key; /* rank << 32 | position of the left symbol */
    int32_t left, right, id;
} cand;


typedef struct enc {
    qhx_tok *tok;
    tok_ids *out;
    tok_cache *cache; /* NULL when another call holds it */
    pcre2_match_data *md;
    pcre2_match_context *mctx; /* this input's: its match limit changes per attempt */
    uint64_t budget;           /* regex steps this input may still be charged */
    size_t text_len;
    int (*abort)(void *); /* polled every ABORT_POLL matches; NULL: never */
    void *abort_user;
    unsigned matches;
    tok_buf norm, pfx, bl;
    spanv lv[QHX_TOK_MAX_SPLITS + 1];
    sym *syms;
    size_t syms_cap;
    cand *heap; /* 3 entries per symbol: one per initial pair, two per merge */
    int extra; /* the current text holds letters PCRE2 does not know: use the full patterns */
    qhx_tok_piece_fn fn;
    void *fn_ctx;
    qhx_error *err;
} enc;

static qhx_status nomem(enc *e) { return qhx_fail(e->err, QHX_E_NOMEM, "tokenizer: out of memory"); }

/* ---- word cache ------------------------------------------------------------------------ */

static bool cache_get(const tok_cache *c, const uint8_t *s, size_t n, uint64_t h, tok_ids *out) {
    uint32_t tag = (uint32_t)(h >> 32) | 1;
    size_t i = (size_t)h & (CACHE_LINES - 1) & ~(size_t)1;
    for (int w = 0; w < 2; w++) {
        const tok_cache_line *l = &c->lines[i + (size_t)w];
        if (l->tag == tag && l->key_len == n && !memcmp(l->key, s, n)) {
            for (int q = 0; q < l->n_ids; q++)
                if (!qhx_tok_ids_push(out, l->ids[q])) return false;
            return true;
        }
    }
    return false;
}

static void cache_put(tok_cache *c, const uint8_t *s, size_t n, uint64_t h, const int32_t *ids,
                      size_t k) {
    if (n > TOK_CACHE_KEY || k > TOK_CACHE_IDS) return;
    size_t i = (size_t)h & (CACHE_LINES - 1) & ~(size_t)1;
    /* the empty way, else the second way (the first keeps the older, often hotter word) */
    tok_cache_line *l = &c->lines[i + (c->lines[i].tag != 0)];
    l->tag = (uint32_t)(h >> 32) | 1;
    l->key_len = (uint8_t)n;
    l->n_ids = (uint8_t)k;
    memcpy(l->key, s, n);
    if (k) memcpy(l->ids, ids, k * sizeof *ids);
}

/* ---- BPE --------------------------------------------------------------------------------- */

static bool grow_syms(enc *e, size_t n) {
    if (n <= e->syms_cap) return true;
    size_t cap = e->syms_cap ? e->syms_cap : 64;
    while (cap < n) cap *= 2;
    size_t b1, b3;
    if (!qhx_size_mul(cap, sizeof *e->syms, &b1) || !qhx_size_mul(cap, 3 * sizeof *e->heap, &b3))
        return false;
    sym *s = qhx_realloc(e->syms, b1);
    if (!s) return false;
    e->syms = s;
    cand *h = qhx_realloc(e->heap, b3);
    if (!h) return false;
    e->heap = h;
    e->syms_cap = cap;
    return true;
}

/* Merge rank and result of (a, b) (INT32_MAX / -1: none). `hot`, when given, is a small
 * direct-mapped cache in front of the merge table: long words (CJK runs) look up the same
 * pairs again and again, and the table itself does not fit in the CPU caches. */
#define HOT_PAIRS 8192
static inline void pair_rank(const qhx_tok *tok, tok_merge *hot, int32_t a, int32_t b, int32_t *rank,
                             int32_t *id) {
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    tok_merge *h = hot ? &hot[qhx_tok_merge_slot(key, HOT_PAIRS - 1)] : NULL;
    if (h && h->key == key) {
        *rank = h->rank;
        *id = h->id;
        return;
    }
    const tok_merge *m = qhx_tok_merge_find(tok, a, b);
    *rank = m ? m->rank : INT32_MAX;
    *id = m ? m->id : -1;
    if (h) *h = (tok_merge){key, *rank, *id};
}

/* Short words: a rank per adjacent pair, lowest rank (leftmost on ties) merged first. */
static size_t bpe_small(const qhx_tok *tok, tok_merge *hot, int32_t *ids, int32_t *ranks, int32_t *mids,
                        size_t m) {
    for (size_t i = 0; i + 1 < m; i++) pair_rank(tok, hot, ids[i], ids[i + 1], &ranks[i], &mids[i]);
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
        if (pos + 1 < m) pair_rank(tok, hot, ids[pos], ids[pos + 1], &ranks[pos], &mids[pos]);
        if (pos > 0) pair_rank(tok, hot, ids[pos - 1], ids[pos], &ranks[pos - 1], &mids[pos - 1]);
    }
    return m;
}

static void heap_push(cand *h, size_t *n, cand v) {
    size_t i = (*n)++;
    while (i) {
        size_t p = (i - 1) / 2;
        if (h[p].key <= v.key) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = v;
}

static cand heap_pop(cand *h, size_t *n) {
    cand top = h[0], v = h[--*n];
    size_t i = 0, m = *n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= m) break;
        if (c + 1 < m && h[c + 1].key < h[c].key) c++;
        if (h[c].key >= v.key) break;
        h[i] = h[c];
        i = c;
    }
    if (m) h[i] = v;
    return top;
}

static inline void push_pair(const qhx_tok *tok, tok_merge *hot, cand *h, size_t *hn, const sym *s,
                             int32_t pos) {
    int32_t nx = s[pos].next, rank, id;
    pair_rank(tok, hot, s[pos].id, s[nx].id, &rank, &id);
    if (id >= 0) heap_push(h, hn, (cand){(uint64_t)(uint32_t)rank << 32 | (uint32_t)pos, s[pos].id, s[nx].id, id});
}

/* Long words: symbols in a linked list, candidate merges in a heap. */
static size_t bpe_large(enc *e, sym *s, size_t m) {
    const qhx_tok *tok = e->tok;
    tok_merge *hot = e->cache ? e->cache->hot : NULL;
    cand *h = e->heap;
    size_t hn = 0;
    for (size_t i = 0; i < m; i++) {
        s[i].prev = (int32_t)i - 1;
        s[i].next = i + 1 < m ? (int32_t)i + 1 : -1;
    }
    for (size_t i = 0; i + 1 < m; i++) push_pair(tok, hot, h, &hn, s, (int32_t)i);
    while (hn) {
        cand c = heap_pop(h, &hn);
        int32_t pos = (int32_t)(c.key & 0xffffffffu), nx = s[pos].next;
        /* stale: the left symbol was merged away or changed, or its right neighbour did */
        if (s[pos].id != c.left || nx < 0 || s[nx].id != c.right) continue;
        s[pos].id = c.id;
        s[nx].id = -1;
        s[pos].next = s[nx].next;
        if (s[nx].next >= 0) s[s[nx].next].prev = pos;
        if (s[pos].prev >= 0) push_pair(tok, hot, h, &hn, s, s[pos].prev);
        if (s[pos].next >= 0) push_pair(tok, hot, h, &hn, s, pos);
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
    bool cacheable = e->cache && e->cache->lines && n <= TOK_CACHE_KEY;
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
        m = bpe_small(tok, e->cache ? e->cache->hot : NULL, tmp, r, mi, m);
        for (size_t i = 0; i < m; i++)
            if (!qhx_tok_ids_push(e->out, tmp[i])) return nomem(e);
    } else {
        m = bpe_large(e, e->syms, m);
        for (size_t i = 0; i < m; i++)
            if (!qhx_tok_ids_push(e->out, e->syms[i].id)) return nomem(e);
    }
    if (cacheable) cache_put(e->cache, s, n, h, e->out->n > start ? e->out->p + start : NULL, e->out->n - start);
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
            m = bpe_small(tok, NULL, tmp, r, mi, m);
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

#define ABORT_POLL 4096u /* matches between two polls of the abort callback */

/* One pcre2 match from `start` under the input's budget. A first attempt of QHX_TOK_MATCH_FREE
 * steps costs nothing; each attempt that runs out is charged its limit, and the next gets four
 * times as many steps. So the work done is at most FREE steps per match plus about 4/3 of what
 * was charged: linear in the input however the pattern backtracks. Returns pcre2's result;
 * *spent is set when the input's budget ran out (the result is then PCRE2_ERROR_MATCHLIMIT). */
static int budget_match(enc *e, const pcre2_code *re, int jit, const uint8_t *s, size_t n, size_t start,
                        int *spent) {
    uint64_t limit = QHX_TOK_MATCH_FREE;
    *spent = 0;
    for (;;) {
        pcre2_set_match_limit(e->mctx, (uint32_t)limit);
        int r = jit ? pcre2_jit_match(re, s, n, start, 0, e->md, e->mctx)
                    : pcre2_match(re, s, n, start, PCRE2_NO_UTF_CHECK, e->md, e->mctx);
        if (r != PCRE2_ERROR_MATCHLIMIT || limit >= QHX_TOK_MATCH_MAX) return r;
        if (limit >= e->budget) {
            *spent = 1;
            return r;
        }
        e->budget -= limit;
        limit *= 4;
        if (limit > QHX_TOK_MATCH_MAX) limit = QHX_TOK_MATCH_MAX;
        if (limit > e->budget) limit = e->budget;
    }
}

/* Next match of sp->re in s[0..n) from *last_end, with the library's (Oniguruma iterator's)
 * rule for empty matches. Returns 1 with the match in [*ms, *me), 0 at the end. */
static int next_match(enc *e, const tok_split *sp, const uint8_t *s, size_t n, size_t *last_end,
                      size_t *last_match_end, int *have_last, size_t *ms, size_t *me,
                      qhx_status *rc) {
    for (;;) {
        if (*last_end > n) return 0;
        int plain = sp->re_plain && !e->extra;
        const pcre2_code *re = plain ? sp->re_plain : sp->re;
        if (e->abort && ++e->matches % ABORT_POLL == 0 && e->abort(e->abort_user)) {
            *rc = qhx_fail(e->err, QHX_E_ABORTED, "tokenizer: interrupted at byte %zu of a %zu-byte piece", *last_end, n);
            return -1;
        }
        int spent;
        int r = budget_match(e, re, plain ? sp->jit_plain : sp->jit, s, n, *last_end, &spent);
        if (r == PCRE2_ERROR_NOMATCH) return 0;
        if (spent) {
            *rc = qhx_fail(e->err, QHX_E_LIMIT,
                           "tokenizer: the pre-tokenizer regex used up its budget of %llu steps for this "
                           "%zu-byte text (at byte %zu of a %zu-byte piece): the pattern backtracks too much",
                           (unsigned long long)QHX_TOK_MATCH_BUDGET +
                               (unsigned long long)QHX_TOK_MATCH_PER_BYTE * e->text_len,
                           e->text_len, *last_end, n);
            return -1;
        }
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
    /* NFC never brings in characters newer than Unicode 9.0: the flags hold for its output */
    unsigned flags = qhx_tok_scan(s, n);
    e->extra = (flags & TOK_SCAN_EXTRA) != 0;
    if (tok->normalizer == TOK_NORM_NFC && (flags & TOK_SCAN_NFC) && !qhx_tok_nfc_quick(s, n)) {
        e->norm.n = 0;
        if (!qhx_tok_nfc(s, n, &e->norm)) return nomem(e);
        s = e->norm.p;
        n = e->norm.n;
    }
    if (tok->has_norm_added) return added_split(e, &tok->trie_norm, 2, s, n);
    return stage(e, 0, s, n);
}

/* ---- entry points ---------------------------------------------------------------------- */

static qhx_status run_abortable(qhx_tok *tok, const char *text, size_t len, tok_ids *out, qhx_tok_piece_fn fn,
                                void *ctx, int (*abort)(void *), void *abort_user, qhx_error *err) {
    if (!tok) return qhx_fail(err, QHX_E_ARG, "tokenizer: no tokenizer");
    if (!text && len) return qhx_fail(err, QHX_E_ARG, "tokenizer: no text");
    if (!len) return QHX_OK;
    size_t bad = qhx_tok_utf8_check((const uint8_t *)text, len);
    if (bad != len)
        return qhx_fail(err, QHX_E_FORMAT,
                        "text is not valid UTF-8: byte 0x%02X at offset %zu does not start a well-formed sequence",
                        (unsigned)(uint8_t)text[bad], bad);
    enc e = {.tok = tok, .out = out, .fn = fn, .fn_ctx = ctx, .err = err, .abort = abort, .abort_user = abort_user};
    e.md = pcre2_match_data_create(1, tok->gctx);
    e.mctx = pcre2_match_context_copy(tok->mctx);
    e.text_len = len;
    e.budget = QHX_TOK_MATCH_BUDGET + (uint64_t)QHX_TOK_MATCH_PER_BYTE * len;
    if (!e.md || !e.mctx) {
        pcre2_match_data_free(e.md);
        pcre2_match_context_free(e.mctx);
        return qhx_fail(err, QHX_E_NOMEM, "tokenizer: out of memory");
    }
    if (!fn && tok->cache.mu_ready && pthread_mutex_trylock(&tok->cache.mu) == 0) {
        e.cache = &tok->cache;
        if (!e.cache->hot && (e.cache->hot = qhx_malloc(HOT_PAIRS * sizeof(tok_merge))))
            memset(e.cache->hot, 0xff, HOT_PAIRS * sizeof(tok_merge)); /* all keys empty */
        if (!e.cache->lines) e.cache->lines = qhx_aligned_alloc(CACHE_LINES * sizeof(tok_cache_line));
    }
    qhx_status rc = added_split(&e, &tok->trie_raw, 1, text, len);
    if (rc == QHX_E_ABORTED && !abort) qhx_fail(err, rc, "tokenizer: stopped by the callback");
    if (e.cache) pthread_mutex_unlock(&tok->cache.mu);
    pcre2_match_data_free(e.md);
    pcre2_match_context_free(e.mctx);
    qhx_free(e.norm.p);
    qhx_free(e.pfx.p);
    qhx_free(e.bl.p);
    for (int k = 0; k <= QHX_TOK_MAX_SPLITS; k++) qhx_free(e.lv[k].p);
    qhx_free(e.syms);
    qhx_free(e.heap);
    return rc;
}

static qhx_status run(qhx_tok *tok, const char *text, size_t len, tok_ids *out, qhx_tok_piece_fn fn, void *ctx,
                      qhx_error *err) {
    return run_abortable(tok, text, len, out, fn, ctx, NULL, NULL, err);
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
    return qhx_tok_encode_alloc_abortable(tok, text, len, NULL, NULL, ids_out, n_out, err);
}

qhx_status qhx_tok_encode_alloc_abortable(qhx_tok *tok, const char *text, size_t len, int (*abort)(void *),
                                          void *user, int32_t **ids_out, size_t *n_out, qhx_error *err) {
    tok_ids v = {0};
    *ids_out = NULL;
    *n_out = 0;
    qhx_status rc = run_abortable(tok, text, len, &v, NULL, NULL, abort, user, err);
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
