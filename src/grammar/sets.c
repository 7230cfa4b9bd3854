/* grammar/sets.c: interned sets of parse stacks and the memo of their byte transitions, for
 * mask walks (vocab.c). A set is the sorted list of its node ids plus its end flag; equal lists
 * get one id. The tables are dropped whole when nodes are renumbered (compaction) or when they
 * pass their cap, never during a walk (match.c drops them: gm_sets_clear, gm_sets_free). */
#include "grammar/gm_match.h"

#include "core/alloc.h"

#include <stdlib.h>
#include <string.h>

#define MAX_ROWS ((size_t)1 << 14) /* 16 MiB of transition rows, then the tables start over */

static uint64_t hash_ids(const int32_t *ids, int32_t n, bool end) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)end;
    for (int32_t i = 0; i < n; i++) {
        h ^= (uint64_t)(uint32_t)ids[i];
        h *= 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
    }
    return h;
}

static int nomem(qhx_error *err) {
    qhx_fail(err, QHX_E_NOMEM, "grammar: out of memory for the mask tables");
    return -1;
}

static int grow_set_ht(qhx_gm_match *m, qhx_error *err) {
    size_t cap = m->set_ht ? (m->set_ht_mask + 1) * 2 : 1024;
    int32_t *ht = qhx_malloc(cap * sizeof *ht);
    if (!ht) return nomem(err);
    memset(ht, 0xFF, cap * sizeof *ht);
    for (int32_t s = 0; s < m->n_sets; s++) {
        size_t h = hash_ids(m->set_ids + m->set_off[s], m->set_n[s], m->set_end[s]) & (cap - 1);
        while (ht[h] >= 0) h = (h + 1) & (cap - 1);
        ht[h] = s;
    }
    qhx_free(m->set_ht);
    m->set_ht = ht;
    m->set_ht_mask = cap - 1;
    return 0;
}

/* The id of the set ids[0..n) (sorted) with end; added when new. -1 on failure. */
static int32_t intern(qhx_gm_match *m, const int32_t *ids, int32_t n, bool end, qhx_error *err) {
    if (!m->set_ht || (size_t)m->n_sets * 2 >= m->set_ht_mask + 1) {
        if (grow_set_ht(m, err)) return -1;
    }
    uint64_t hv = hash_ids(ids, n, end);
    size_t h = hv & m->set_ht_mask;
    for (int32_t s; (s = m->set_ht[h]) >= 0; h = (h + 1) & m->set_ht_mask)
        if (m->set_n[s] == n && m->set_end[s] == end && !gm_cmp(m->set_ids + m->set_off[s], ids, (size_t)n * sizeof *ids))
            return s;
    if (m->n_sets == m->cap_sets) {
        int32_t cap = m->cap_sets ? m->cap_sets * 2 : 256;
        int32_t *o = qhx_realloc(m->set_off, (size_t)cap * sizeof *o);
        if (o) m->set_off = o;
        int32_t *c = o ? qhx_realloc(m->set_n, (size_t)cap * sizeof *c) : NULL;
        if (c) m->set_n = c;
        uint8_t *e = c ? qhx_realloc(m->set_end, (size_t)cap) : NULL;
        if (!e) return nomem(err);
        m->set_end = e;
        m->cap_sets = cap;
    }
    if (!m->set_ids || m->n_set_ids + (size_t)n > m->cap_set_ids) { /* allocated even for an empty set */
        size_t cap = m->cap_set_ids ? m->cap_set_ids : 4096;
        while (cap < m->n_set_ids + (size_t)n) cap *= 2;
        int32_t *p = qhx_realloc(m->set_ids, cap * sizeof *p);
        if (!p) return nomem(err);
        m->set_ids = p;
        m->cap_set_ids = cap;
    }
    if (m->n_sets == m->cap_rows) {
        int32_t cap = m->cap_rows ? m->cap_rows * 2 : 256;
        int32_t **r = qhx_realloc(m->rows, (size_t)cap * sizeof *r);
        if (!r) return nomem(err);
        memset(r + m->cap_rows, 0, (size_t)(cap - m->cap_rows) * sizeof *r);
        m->rows = r;
        m->cap_rows = cap;
    }
    int32_t s = m->n_sets++;
    m->set_off[s] = (int32_t)m->n_set_ids;
    m->set_n[s] = n;
    m->set_end[s] = end;
    gm_copy(m->set_ids + m->n_set_ids, ids, (size_t)n * sizeof *ids);
    m->n_set_ids += (size_t)n;
    m->set_ht[h] = s;
    return s;
}

int32_t gm_set_cur(qhx_gm_match *m, qhx_error *err) {
    /* the tables are dropped between walks once they pass their cap */
    if (m->n_rows > MAX_ROWS || m->n_set_ids > ((size_t)1 << 24)) gm_sets_clear(m);
    return intern(m, m->cur, m->n_cur, m->cur_end, err);
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

int32_t gm_set_step(qhx_gm_match *m, int32_t sid, uint8_t byte, qhx_error *err) {
    int32_t *row = m->rows[sid];
    if (row && row[byte] != -3) return row[byte];
    if (!row) {
        if (!(row = qhx_malloc(256 * sizeof *row))) return nomem(err), -2;
        for (int i = 0; i < 256; i++) row[i] = -3;
        m->rows[sid] = row;
        m->n_rows++;
    }
    /* not seen: step the set's stacks through the matcher (the ids go to the scratch buffer) */
    m->n_buf = 0;
    int32_t n = m->set_n[sid];
    if (m->cap_buf < (size_t)n) {
        size_t cap = m->cap_buf ? m->cap_buf : 1024;
        while (cap < (size_t)n) cap *= 2;
        int32_t *b = qhx_realloc(m->buf, cap * sizeof *b);
        if (!b) return nomem(err), -2;
        m->buf = b;
        m->cap_buf = cap;
    }
    gm_copy(m->buf, m->set_ids + m->set_off[sid], (size_t)n * sizeof *m->buf);
    m->n_buf = (size_t)n;
    gm_level out;
    if (gm_step(m, 0, n, byte, &out, err)) return -2;
    int32_t r = -1;
    if (out.n || out.end) {
        if (out.n > 1) qsort(m->buf + out.off, (size_t)out.n, sizeof *m->buf, cmp_i32);
        r = intern(m, m->buf + out.off, out.n, out.end, err);
        if (r < 0) return -2;
    }
    m->rows[sid][byte] = r; /* rows may have moved while interning: index again */
    return r;
}
