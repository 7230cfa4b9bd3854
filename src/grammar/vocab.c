/* grammar/vocab.c: token masks. The vocabulary's byte strings are sorted once; a mask walks
 * them in that order keeping one matcher set per byte depth, so a token shares the work of
 * the prefix it has in common with the one before (a trie walk without the trie), and a byte
 * that kills every stack skips all the following tokens that start with the same bytes.
 * Masks are cached per state (the sorted stack ids), which hash-consing makes comparable. */
#include "grammar/gm_match.h"

#include "core/alloc.h"

#include <stdlib.h>
#include <string.h>

struct qhx_gm_vocab {
    int32_t n;          /* ids */
    int32_t n_text;     /* ids of kind TEXT, sorted by bytes in order[] */
    int32_t *order;     /* [n_text] ids */
    uint32_t *lcp;      /* [n_text] bytes shared with the previous one in order */
    uint64_t *off;      /* [n] offset of id's bytes in bytes */
    uint32_t *len;      /* [n] */
    uint8_t *bytes;
    uint8_t *kind;      /* [n] */
    uint32_t max_len;
};

typedef struct sort_key {
    const uint8_t *p;
    uint32_t len;
    int32_t id;
} sort_key;

static int cmp_tok(const void *a, const void *b) {
    const sort_key *x = a, *y = b;
    uint32_t l = x->len < y->len ? x->len : y->len;
    int c = gm_cmp(x->p, y->p, l);
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

void qhx_gm_vocab_free(qhx_gm_vocab *v) {
    if (!v) return;
    qhx_free(v->order);
    qhx_free(v->lcp);
    qhx_free(v->off);
    qhx_free(v->len);
    qhx_free(v->bytes);
    qhx_free(v->kind);
    qhx_free(v);
}

int32_t qhx_gm_vocab_n(const qhx_gm_vocab *v) { return v ? v->n : 0; }

int qhx_gm_vocab_kind(const qhx_gm_vocab *v, int32_t id) {
    return v && id >= 0 && id < v->n ? v->kind[id] : QHX_GM_TOK_NEVER;
}

qhx_status qhx_gm_vocab_new(int32_t n, const uint8_t *const *bytes, const uint32_t *lens, const uint8_t *kind,
                            qhx_gm_vocab **out, qhx_error *err) {
    if (!out) return qhx_fail(err, QHX_E_ARG, "vocab: out is NULL");
    *out = NULL;
    if (n <= 0 || n > (1 << 24) || !bytes || !lens || !kind)
        return qhx_fail(err, QHX_E_ARG, "vocab: %d ids (1 to 2^24, with bytes, lengths and kinds)", (int)n);
    qhx_gm_vocab *v = qhx_calloc(1, sizeof *v);
    if (!v) return qhx_fail(err, QHX_E_NOMEM, "vocab: out of memory");
    v->n = n;
    uint64_t total = 0;
    for (int32_t i = 0; i < n; i++)
        if (kind[i] == QHX_GM_TOK_TEXT) total += lens[i];
    v->off = qhx_malloc((size_t)n * sizeof *v->off);
    v->len = qhx_calloc((size_t)n, sizeof *v->len);
    v->kind = qhx_malloc((size_t)n);
    v->order = qhx_malloc((size_t)n * sizeof *v->order);
    v->lcp = qhx_malloc((size_t)n * sizeof *v->lcp);
    v->bytes = total < ((uint64_t)1 << 32) ? qhx_malloc((size_t)total + 1) : NULL;
    if (!v->off || !v->len || !v->kind || !v->order || !v->lcp || !v->bytes) {
        qhx_gm_vocab_free(v);
        return qhx_fail(err, QHX_E_NOMEM, "vocab: out of memory for %d ids", (int)n);
    }
    uint64_t at = 0;
    for (int32_t i = 0; i < n; i++) {
        v->kind[i] = kind[i] <= QHX_GM_TOK_NEVER ? kind[i] : QHX_GM_TOK_NEVER;
        if (v->kind[i] == QHX_GM_TOK_TEXT && lens[i] == 0) v->kind[i] = QHX_GM_TOK_NEVER; /* empty: no progress */
        v->off[i] = at;
        if (v->kind[i] != QHX_GM_TOK_TEXT) continue;
        gm_copy(v->bytes + at, bytes[i], lens[i]);
        v->len[i] = lens[i];
        at += lens[i];
        if (lens[i] > v->max_len) v->max_len = lens[i];
        v->order[v->n_text++] = i;
    }
    sort_key *keys = qhx_malloc(((size_t)v->n_text + 1) * sizeof *keys);
    if (!keys) {
        qhx_gm_vocab_free(v);
        return qhx_fail(err, QHX_E_NOMEM, "vocab: out of memory for %d ids", (int)n);
    }
    for (int32_t k = 0; k < v->n_text; k++) {
        int32_t id = v->order[k];
        keys[k] = (sort_key){v->bytes + v->off[id], v->len[id], id};
    }
    qsort(keys, (size_t)v->n_text, sizeof *keys, cmp_tok);
    for (int32_t k = 0; k < v->n_text; k++) v->order[k] = keys[k].id;
    qhx_free(keys);
    for (int32_t k = 0; k < v->n_text; k++) {
        uint32_t l = 0;
        if (k) {
            int32_t a = v->order[k - 1], b = v->order[k];
            uint32_t lim = v->len[a] < v->len[b] ? v->len[a] : v->len[b];
            while (l < lim && v->bytes[v->off[a] + l] == v->bytes[v->off[b] + l]) l++;
        }
        v->lcp[k] = l;
    }
    *out = v;
    return QHX_OK;
}

/* ---- the cache ------------------------------------------------------------------------------ */

static uint64_t state_hash(const qhx_gm_match *m) {
    uint64_t h = 0x243F6A8885A308D3ull ^ (uint64_t)m->cur_end;
    for (int32_t i = 0; i < m->n_cur; i++) {
        h ^= (uint64_t)(uint32_t)m->cur[i];
        h *= 0x100000001B3ull;
        h ^= h >> 31;
    }
    return h;
}

static gm_cache_entry *cache_find(qhx_gm_match *m, const qhx_gm_vocab *v, uint64_t h) {
    for (int k = 0; k < m->n_cache; k++) {
        gm_cache_entry *e = &m->cache[k];
        if (e->v == v && e->hash == h && e->n == m->n_cur && e->end == m->cur_end &&
            !gm_cmp(e->ids, m->cur, (size_t)m->n_cur * sizeof *m->cur))
            return e;
    }
    return NULL;
}

static void cache_put(qhx_gm_match *m, const qhx_gm_vocab *v, uint64_t h, const uint64_t *words, size_t n_words) {
    if (!m->cache && !(m->cache = qhx_calloc(QHX_GM_CACHE_SLOTS, sizeof *m->cache))) return;
    int k = m->n_cache < QHX_GM_CACHE_SLOTS ? m->n_cache++ : m->next_slot;
    m->next_slot = (k + 1) % QHX_GM_CACHE_SLOTS;
    gm_cache_entry *e = &m->cache[k];
    qhx_free(e->ids);
    qhx_free(e->mask);
    e->ids = qhx_malloc((size_t)(m->n_cur ? m->n_cur : 1) * sizeof *e->ids);
    e->mask = qhx_malloc(n_words * sizeof *e->mask);
    if (!e->ids || !e->mask) { /* no room: just do not cache */
        qhx_free(e->ids);
        qhx_free(e->mask);
        *e = (gm_cache_entry){0};
        if (k == m->n_cache - 1) m->n_cache--;
        return;
    }
    gm_copy(e->ids, m->cur, (size_t)m->n_cur * sizeof *e->ids);
    gm_copy(e->mask, words, n_words * sizeof *words);
    e->v = v, e->hash = h, e->n = m->n_cur, e->end = m->cur_end;
}

/* ---- the walk ------------------------------------------------------------------------------- */

/* The walk over sets: sid[d] is the set after the first d bytes of the current token. */
static int walk(qhx_gm_match *m, const qhx_gm_vocab *v, uint64_t *words, qhx_error *err) {
    if ((size_t)v->max_len + 1 > m->cap_levels) {
        int32_t *l = qhx_realloc(m->levels, ((size_t)v->max_len + 1) * sizeof *l);
        if (!l) return qhx_fail(err, QHX_E_NOMEM, "grammar: out of memory"), -1;
        m->levels = l;
        m->cap_levels = (size_t)v->max_len + 1;
    }
    int32_t *sid = m->levels;
    if ((sid[0] = gm_set_cur(m, err)) < 0) return -1;
    uint32_t have = 0; /* sid[0 .. have] are valid for the previous token's bytes */
    for (int32_t k = 0; k < v->n_text; k++) {
        int32_t id = v->order[k];
        uint32_t d = v->lcp[k] < have ? v->lcp[k] : have, L = v->len[id];
        const uint8_t *b = v->bytes + v->off[id];
        while (d < L) {
            if (m->set_n[sid[d]] == 0) break; /* the sentence is complete: nothing continues */
            int32_t nx = gm_set_step(m, sid[d], b[d], err);
            m->cnt.walk_bytes++;
            if (nx == -2) return -1;
            if (nx < 0) break;
            sid[++d] = nx;
        }
        if (d == L) {
            words[id >> 6] |= (uint64_t)1 << (id & 63);
            have = L;
            continue;
        }
        /* rejected at byte d: every following token with the same first d + 1 bytes is too */
        have = d;
        while (k + 1 < v->n_text && v->lcp[k + 1] > d) k++;
    }
    return 0;
}

int qhx_gm_mask(qhx_gm_match *m, const qhx_gm_vocab *v, uint64_t *words, qhx_error *err) {
    size_t n_words = ((size_t)v->n + 63) / 64;
    m->cnt.masks++;
    uint64_t h = state_hash(m);
    const gm_cache_entry *e = cache_find(m, v, h);
    if (e) {
        gm_copy(words, e->mask, n_words * sizeof *words);
        m->cnt.cache_hits++;
        return 0;
    }
    memset(words, 0, n_words * sizeof *words);
    if (walk(m, v, words, err)) return -1;
    if (m->cur_end)
        for (int32_t i = 0; i < v->n; i++)
            if (v->kind[i] == QHX_GM_TOK_END) words[i >> 6] |= (uint64_t)1 << (i & 63);
    cache_put(m, v, h, words, n_words);
    return 0;
}

int qhx_gm_allows(qhx_gm_match *m, const qhx_gm_vocab *v, int32_t id, qhx_error *err) {
    if (id < 0 || id >= v->n || v->kind[id] == QHX_GM_TOK_NEVER) return 0;
    if (v->kind[id] == QHX_GM_TOK_END) return m->cur_end;
    if (gm_scratch_cur(m, err)) return -1;
    gm_level lv = {.off = 0, .n = m->n_cur, .end = m->cur_end};
    const uint8_t *b = v->bytes + v->off[id];
    for (uint32_t i = 0; i < v->len[id]; i++) {
        gm_level nx;
        if (gm_step(m, lv.off, lv.n, b[i], &nx, err)) return -1;
        if (nx.n == 0 && !nx.end) return 0;
        lv = nx;
    }
    return 1;
}

int qhx_gm_accept(qhx_gm_match *m, const qhx_gm_vocab *v, int32_t id, qhx_error *err) {
    if (id < 0 || id >= v->n || v->kind[id] == QHX_GM_TOK_NEVER) return 0;
    if (v->kind[id] == QHX_GM_TOK_END) return m->cur_end;
    return qhx_gm_match_bytes(m, v->bytes + v->off[id], v->len[id], err);
}
