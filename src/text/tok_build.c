/* text/tok_build: the builder both loaders (tok_json.c, tok_binary.c) call: construction,
 * derived tables (byte symbols, decode strings, added-token tries), the destructor and the
 * vocabulary accessors. It calls neither loader; loading from a path is in tok_load.c. */
#include "text/tok_internal.h"

#include "core/alloc.h"
#include "core/file.h"

#include <string.h>

/* ---- added-token tries ------------------------------------------------------------------ */

static int32_t trie_child(const tok_trie *t, int32_t node, uint8_t b) {
    if (node == 0) return t->root_child[b];
    uint64_t key = ((uint64_t)node << 8 | b) + 1;
    size_t h = (size_t)qhx_tok_hash(&key, 8) & t->edge_mask;
    for (;;) {
        if (t->edge_keys[h] == key) return t->edge_child[h];
        if (!t->edge_keys[h]) return -1;
        h = (h + 1) & t->edge_mask;
    }
}

static void trie_free(tok_trie *t) {
    qhx_free(t->node_token);
    qhx_free(t->edge_keys);
    qhx_free(t->edge_child);
    memset(t, 0, sizeof *t);
}

/* Insert the given byte strings; cap = total bytes (bounds nodes and edges). */
static qhx_status trie_build(tok_trie *t, size_t total, const char *name, qhx_error *err) {
    size_t slots = 16;
    while (slots < total * 2 + 16) slots *= 2;
    t->node_token = qhx_malloc((total + 1) * sizeof *t->node_token);
    t->edge_keys = qhx_calloc(slots, sizeof *t->edge_keys);
    t->edge_child = qhx_malloc(slots * sizeof *t->edge_child);
    if (!t->node_token || !t->edge_keys || !t->edge_child)
        return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory for the added tokens", name);
    t->edge_mask = slots - 1;
    t->n_nodes = 1;
    t->node_token[0] = -1;
    for (int b = 0; b < 256; b++) t->root_child[b] = -1;
    return QHX_OK;
}

static qhx_status trie_insert(tok_trie *t, const char *s, size_t n, int32_t token,
                              const char *name, qhx_error *err) {
    int32_t node = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t b = (uint8_t)s[i];
        int32_t c = trie_child(t, node, b);
        if (c < 0) {
            c = (int32_t)t->n_nodes++;
            t->node_token[c] = -1;
            if (node == 0) t->root_child[b] = c;
            else {
                uint64_t key = ((uint64_t)node << 8 | b) + 1;
                size_t h = (size_t)qhx_tok_hash(&key, 8) & t->edge_mask;
                while (t->edge_keys[h]) h = (h + 1) & t->edge_mask;
                t->edge_keys[h] = key;
                t->edge_child[h] = c;
            }
        }
        node = c;
    }
    if (t->node_token[node] >= 0)
        return qhx_fail(err, QHX_E_FORMAT, "%s: added_tokens: content '%.*s' appears twice", name,
                        (int)n, s);
    t->node_token[node] = token;
    return QHX_OK;
}

/* Longest added token starting at s[0] (leftmost-longest, as the library's Aho-Corasick
 * search): its index in tok->added and length, or -1. */
int32_t qhx_tok_trie_match(const tok_trie *t, const uint8_t *s, size_t n, size_t *len) {
    if (!t->node_token || !n) return -1;
    int32_t node = t->root_child[s[0]], best = -1;
    size_t i = 1;
    while (node >= 0) {
        if (t->node_token[node] >= 0) {
            best = t->node_token[node];
            *len = i;
        }
        if (i >= n) break;
        node = trie_child(t, node, s[i++]);
    }
    return best;
}

/* ---- vocab and merge indexes --------------------------------------------------------- */

static size_t table_slots(size_t n, size_t num, size_t den) {
    size_t slots = 16;
    while (slots < n * num / den + 16) slots *= 2;
    return slots;
}

qhx_status qhx_tok_index_vocab(qhx_tok *tok, const char *name, qhx_error *err) {
    size_t n = 0;
    for (int32_t id = 0; id < tok->n_ids; id++) n += tok->str_off[id] != TOK_NO_STR;
    size_t slots = table_slots(n, 3, 2);
    tok->vocab_slots = qhx_calloc(slots, sizeof *tok->vocab_slots);
    if (!tok->vocab_slots) return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory for the vocab", name);
    tok->vocab_mask = slots - 1;
    enum { BATCH = 64 };
    uint64_t hs[BATCH];
    for (int32_t id = 0; id < tok->n_ids; id++) {
        if (id % BATCH == 0) /* hash a batch ahead and prefetch its slots: this loop is bound by cache misses */
            for (int32_t q = id; q < id + BATCH && q < tok->n_ids; q++) {
                uint32_t qlen;
                const char *qs = qhx_tok_vocab_str(tok, q, &qlen);
                if (!qs) continue;
                hs[q - id] = qhx_tok_hash(qs, qlen);
                __builtin_prefetch(&tok->vocab_slots[(size_t)hs[q - id] & tok->vocab_mask], 1);
            }
        uint32_t off = tok->str_off[id], len = 0;
        if (off == TOK_NO_STR) continue;
        const char *s = qhx_tok_vocab_str(tok, id, &len);
        uint64_t h = hs[id % BATCH], tag = h >> 32 << 32;
        size_t i = (size_t)h & tok->vocab_mask;
        for (; tok->vocab_slots[i]; i = (i + 1) & tok->vocab_mask) {
            uint64_t e = tok->vocab_slots[i];
            if ((e & ~0xffffffffull) != tag) continue;
            const char *o = tok->str + (uint32_t)(e - 1);
            uint32_t olen, oid;
            memcpy(&oid, o, 4);
            memcpy(&olen, o + 4, 4);
            if (olen == len && !memcmp(o + TOK_STR_HDR, s, len))
                return qhx_fail(err, QHX_E_FORMAT,
                                "%s: model.vocab: token '%.*s' appears twice (ids %u and %d)", name,
                                (int)(len > 64 ? 64 : len), s, oid, (int)id);
        }
        tok->vocab_slots[i] = tag | ((uint64_t)off + 1);
    }
    return QHX_OK;
}

int32_t qhx_tok_vocab_find(const qhx_tok *tok, const char *s, size_t n) {
    return qhx_tok_vocab_find_h(tok, s, n, qhx_tok_hash(s, n));
}

int32_t qhx_tok_vocab_find_h(const qhx_tok *tok, const char *s, size_t n, uint64_t h) {
    if (!tok->vocab_slots) return -1;
    uint64_t tag = h >> 32 << 32;
    for (size_t i = (size_t)h & tok->vocab_mask;; i = (i + 1) & tok->vocab_mask) {
        uint64_t e = tok->vocab_slots[i];
        if (!e) return -1;
        if ((e & ~0xffffffffull) != tag) continue;
        const char *o = tok->str + (uint32_t)(e - 1);
        uint32_t len, id;
        memcpy(&len, o + 4, 4);
        if (len == n && !memcmp(o + TOK_STR_HDR, s, n)) {
            memcpy(&id, o, 4);
            return (int32_t)id;
        }
    }
}

qhx_status qhx_tok_index_merges(qhx_tok *tok, const tok_merge_rec *recs, size_t n,
                                const char *name, qhx_error *err) {
    size_t slots = table_slots(n, 3, 2);
    tok->merges = qhx_malloc(slots * sizeof *tok->merges);
    if (!tok->merges) return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory for %zu merges", name, n);
    memset(tok->merges, 0xff, slots * sizeof *tok->merges);
    tok->merge_mask = slots - 1;
    tok->n_merges = (int32_t)n;
    enum { BATCH = 64 };
    size_t hs[BATCH];
    for (size_t r = 0; r < n; r++) {
        if (r % BATCH == 0)
            for (size_t q = r; q < r + BATCH && q < n; q++) {
                uint64_t k = (uint64_t)(uint32_t)recs[q].a << 32 | (uint32_t)recs[q].b;
                hs[q - r] = qhx_tok_merge_slot(k, tok->merge_mask);
                __builtin_prefetch(&tok->merges[hs[q - r]], 1);
            }
        uint64_t key = (uint64_t)(uint32_t)recs[r].a << 32 | (uint32_t)recs[r].b;
        size_t h = hs[r % BATCH];
        while (tok->merges[h].key != UINT64_MAX && tok->merges[h].key != key)
            h = (h + 1) & tok->merge_mask;
        tok->merges[h] = (tok_merge){key, (int32_t)r, recs[r].id};
    }
    return QHX_OK;
}

/* ---- finishing ----------------------------------------------------------------------- */

/* Append the bytes a token string stands for: each character of the byte-level alphabet is
 * one byte; a string with any other character is taken as its own UTF-8 (the library's
 * ByteLevel decoder does the same). */
static void bytelevel_decode(const char *s, size_t n, uint8_t *out, size_t *out_n) {
    size_t k = 0, i = 0;
    while (i < n) {
        uint32_t cp;
        int len = qhx_tok_utf8_next((const uint8_t *)s + i, n - i, &cp);
        int b = len ? qhx_tok_cp_to_byte(cp) : -1;
        if (b < 0) {
            memcpy(out, s, n);
            *out_n = n;
            return;
        }
        out[k++] = (uint8_t)b;
        i += (size_t)len;
    }
    *out_n = k;
}

qhx_status qhx_tok_derive(qhx_tok *tok, const char *name, qhx_error *err) {
    int32_t n = tok->n_ids;
    tok->id_kind = qhx_calloc((size_t)n, 1);
    tok->dec_off = qhx_calloc((size_t)n + 1, sizeof *tok->dec_off);
    size_t added_bytes = 0;
    for (int32_t k = 0; k < tok->n_added; k++) added_bytes += tok->added[k].len;
    size_t dec_cap = tok->str_bytes + added_bytes + 1;
    tok->dec = qhx_malloc(dec_cap);
    if (!tok->id_kind || !tok->dec_off || !tok->dec)
        return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", name);

    for (int32_t id = 0; id < n; id++)
        if (tok->str_off[id] != TOK_NO_STR) tok->id_kind[id] |= TOK_ID_VOCAB;
    for (int32_t k = 0; k < tok->n_added; k++) {
        tok_added *a = &tok->added[k];
        if (tok->id_kind[a->id] & TOK_ID_ADDED)
            return qhx_fail(err, QHX_E_FORMAT, "%s: added_tokens: id %d appears twice", name,
                            (int)a->id);
        tok->id_kind[a->id] |= TOK_ID_ADDED | (a->special ? TOK_ID_SPECIAL : 0);
        if (a->special) { /* the library skips by content: a vocab entry equal to it too */
            int32_t v = qhx_tok_vocab_find(tok, tok->added_str + a->off, a->len);
            if (v >= 0) tok->id_kind[v] |= TOK_ID_SPECIAL;
        }
    }

    /* decoded bytes per id: added tokens first, as the library looks them up first */
    int32_t *added_of = qhx_malloc((size_t)n * sizeof *added_of);
    if (!added_of) return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", name);
    for (int32_t id = 0; id < n; id++) added_of[id] = -1;
    for (int32_t k = 0; k < tok->n_added; k++) added_of[tok->added[k].id] = k;
    size_t off = 0;
    for (int32_t id = 0; id < n; id++) {
        tok->dec_off[id] = (uint32_t)off;
        const char *s = NULL;
        uint32_t len = 0;
        if (added_of[id] >= 0) {
            s = tok->added_str + tok->added[added_of[id]].off;
            len = tok->added[added_of[id]].len;
        } else {
            s = qhx_tok_vocab_str(tok, id, &len);
        }
        if (!s) continue;
        if (tok->decoder == TOK_DEC_BYTELEVEL) {
            size_t got;
            bytelevel_decode(s, len, tok->dec + off, &got);
            off += got;
        } else {
            memcpy(tok->dec + off, s, len);
            off += len;
        }
    }
    tok->dec_off[n] = (uint32_t)off;
    qhx_free(added_of);
    return qhx_tok_finish(tok, name, err);
}

qhx_status qhx_tok_finish(qhx_tok *tok, const char *name, qhx_error *err) {
    qhx_status rc;

    /* the merge filter: 16 bits per merge, at least 4096 */
    unsigned bits = 12;
    while (bits < 30 && ((size_t)1 << bits) < (size_t)tok->n_merges * 16) bits++;
    tok->merge_filter = qhx_calloc(((size_t)1 << bits) / 64, sizeof(uint64_t));
    if (!tok->merge_filter) return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", name);
    tok->filter_shift = 64 - bits;
    for (size_t k = 0; k <= tok->merge_mask; k++)
        if (tok->merges[k].key != UINT64_MAX) {
            size_t bit = qhx_tok_filter_bit(tok->merges[k].key, tok->filter_shift);
            tok->merge_filter[bit >> 6] |= 1ull << (bit & 63);
        }

    /* the one-byte symbols BPE starts from */
    for (int b = 0; b < 256; b++) {
        char s[4];
        size_t len = qhx_tok_utf8_put(s, qhx_tok_byte_to_cp[b]);
        tok->byte_id[b] = qhx_tok_vocab_find(tok, s, len);
    }

    /* added-token tries: raw text, and normalized text */
    size_t raw_bytes = 0, norm_bytes = 0;
    tok_buf norm = {0};
    for (int32_t k = 0; k < tok->n_added; k++) {
        if (tok->added[k].normalized) norm_bytes += tok->added[k].len * 3; /* NFC may grow 3x */
        else raw_bytes += tok->added[k].len;
    }
    if ((rc = trie_build(&tok->trie_raw, raw_bytes, name, err))) return rc;
    if (norm_bytes && (rc = trie_build(&tok->trie_norm, norm_bytes, name, err))) return rc;
    for (int32_t k = 0; k < tok->n_added; k++) {
        tok_added *a = &tok->added[k];
        const char *s = tok->added_str + a->off;
        if (!a->normalized) {
            rc = trie_insert(&tok->trie_raw, s, a->len, k, name, err);
        } else {
            norm.n = 0;
            bool ok = tok->normalizer == TOK_NORM_NFC ? qhx_tok_nfc(s, a->len, &norm)
                                                      : qhx_tok_buf_put(&norm, s, a->len);
            if (!ok) rc = qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", name);
            else if (norm.n == 0 || norm.n > a->len * 3)
                rc = qhx_fail(err, QHX_E_FORMAT, "%s: added token '%s' normalizes to %zu bytes",
                              name, s, norm.n);
            else rc = trie_insert(&tok->trie_norm, norm.p, norm.n, k, name, err);
            tok->has_norm_added = 1;
        }
        if (rc) break;
    }
    qhx_free(norm.p);
    if (rc) return rc;

    if (pthread_mutex_init(&tok->cache.mu, NULL) != 0)
        return qhx_fail(err, QHX_E_INTERNAL, "%s: cannot create a mutex", name);
    tok->cache.mu_ready = 1;
    return QHX_OK;
}

/* ---- construction and loading from a path ------------------------------------------------ */

static void *pcre_alloc(size_t n, void *data) {
    (void)data;
    return qhx_malloc(n);
}

static void pcre_release(void *p, void *data) {
    (void)data;
    qhx_free(p);
}

qhx_status qhx_tok_new(const char *name, qhx_tok **out, qhx_error *err) {
    *out = NULL;
    qhx_tok *tok = qhx_calloc(1, sizeof *tok);
    if (!tok) return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", name);
    tok->unk_id = -1;
    tok->gctx = pcre2_general_context_create(pcre_alloc, pcre_release, NULL);
    tok->mctx = tok->gctx ? pcre2_match_context_create(tok->gctx) : NULL;
    if (!tok->mctx) {
        qhx_tok_free(tok);
        return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", name);
    }
    /* patterns come from the file: bound the work of one match */
    pcre2_set_match_limit(tok->mctx, QHX_TOK_MATCH_MAX);
    pcre2_set_depth_limit(tok->mctx, 100000);
    pcre2_set_heap_limit(tok->mctx, 64 * 1024);
    *out = tok;
    return QHX_OK;
}

void qhx_tok_free(qhx_tok *tok) {
    if (!tok) return;
    for (int k = 0; k < tok->n_splits; k++) {
        pcre2_code_free(tok->splits[k].re);
        pcre2_code_free(tok->splits[k].re_plain);
        qhx_free(tok->splits[k].pattern);
    }
    pcre2_match_context_free(tok->mctx);
    pcre2_general_context_free(tok->gctx);
    if (!tok->borrowed) {
        qhx_free(tok->str_off);
        qhx_free(tok->str);
        qhx_free(tok->vocab_slots);
        qhx_free(tok->id_kind);
        qhx_free(tok->dec_off);
        qhx_free(tok->dec);
        qhx_free(tok->merges);
    }
    qhx_file_map_close(&tok->bin);
    qhx_aligned_free(tok->bin_copy);
    qhx_free(tok->bin_starts);
    qhx_free(tok->added);
    qhx_free(tok->added_str);
    trie_free(&tok->trie_raw);
    trie_free(&tok->trie_norm);
    if (tok->cache.mu_ready) pthread_mutex_destroy(&tok->cache.mu);
    qhx_aligned_free(tok->cache.lines);
    qhx_free(tok->cache.hot);
    qhx_free(tok->merge_filter);
    qhx_free(tok);
}

/* ---- vocabulary accessors ---------------------------------------------------------------- */

int32_t qhx_tok_n_vocab(const qhx_tok *tok) { return tok ? tok->n_ids : 0; }

uint64_t qhx_tok_identity(const qhx_tok *tok) {
    if (!tok) return 0;
    int64_t counts[3] = {tok->n_ids, tok->n_merges, tok->n_added};
    uint64_t h = qhx_tok_hash(counts, sizeof counts);
    if (tok->str && tok->str_bytes) h ^= qhx_tok_file_hash(tok->str, tok->str_bytes) * 0x9e3779b97f4a7c15ull;
    if (tok->dec && tok->dec_off && tok->dec_off[tok->n_ids])
        h ^= qhx_tok_file_hash(tok->dec, tok->dec_off[tok->n_ids]) * 0xbf58476d1ce4e5b9ull;
    for (int32_t k = 0; k < tok->n_added; k++) {
        const tok_added *a = &tok->added[k];
        h = h * 0x100000001b3ull ^ qhx_tok_hash(tok->added_str + a->off, a->len) ^ (uint64_t)a->id;
    }
    return h;
}

int32_t qhx_tok_token_to_id(const qhx_tok *tok, const char *token) {
    if (!tok || !token) return -1;
    size_t n = strlen(token), len;
    for (int t = 0; t < 2; t++) {
        const tok_trie *tr = t ? &tok->trie_norm : &tok->trie_raw;
        int32_t k = qhx_tok_trie_match(tr, (const uint8_t *)token, n, &len);
        if (k >= 0 && len == n) return tok->added[k].id;
    }
    return qhx_tok_vocab_find(tok, token, n);
}

const char *qhx_tok_id_to_token(const qhx_tok *tok, int32_t id) {
    if (!tok || id < 0 || id >= tok->n_ids) return NULL;
    if (tok->id_kind[id] & TOK_ID_ADDED)
        for (int32_t k = 0; k < tok->n_added; k++)
            if (tok->added[k].id == id) return tok->added_str + tok->added[k].off;
    uint32_t len;
    return qhx_tok_vocab_str(tok, id, &len);
}

int qhx_tok_is_special(const qhx_tok *tok, int32_t id) {
    return tok && id >= 0 && id < tok->n_ids && (tok->id_kind[id] & TOK_ID_SPECIAL);
}
