/* grammar/match.c: the matcher. A state is the set of live parse stacks whose top is a byte
 * class, plus whether the input so far is a whole sentence. Stacks are nodes (position, parent)
 * interned in a hash table, so two stacks with the same contents are the same node id: a state
 * is a list of ids, duplicates vanish for free, and the state a loop comes back to (a string's
 * characters, say) is the same list, which is what lets masks be cached per state. A reference
 * that ends an alternative does not push a return node (a tail call), so loops written as right
 * recursion (x* becomes S ::= x S | empty) keep the stack flat. */
#include "grammar/gm_match.h"

#include "core/alloc.h"

#include <stdlib.h>
#include <string.h>

/* The interned sets' tables (sets.c) and the mask cache (vocab.c) live as long as the matcher's
 * nodes: dropped here, where nodes are renumbered and freed. */
void gm_cache_clear(qhx_gm_match *m) {
    for (int k = 0; k < m->n_cache; k++) {
        qhx_free(m->cache[k].ids);
        qhx_free(m->cache[k].mask);
        m->cache[k] = (gm_cache_entry){0};
    }
    m->n_cache = 0;
    m->next_slot = 0;
}

void gm_sets_free(qhx_gm_match *m) {
    qhx_free(m->set_ids);
    qhx_free(m->set_off);
    qhx_free(m->set_n);
    qhx_free(m->set_end);
    qhx_free(m->set_ht);
    for (int32_t s = 0; s < m->n_sets && m->rows; s++) qhx_free(m->rows[s]);
    qhx_free(m->rows);
    m->set_ids = NULL, m->set_off = m->set_n = NULL, m->set_end = NULL, m->set_ht = NULL;
    m->rows = NULL;
    m->n_set_ids = m->cap_set_ids = 0;
    m->n_sets = m->cap_sets = m->cap_rows = 0;
    m->set_ht_mask = m->n_rows = 0;
}

void gm_sets_clear(qhx_gm_match *m) {
    for (int32_t s = 0; s < m->n_sets && m->rows; s++) {
        qhx_free(m->rows[s]);
        m->rows[s] = NULL;
    }
    m->n_set_ids = 0;
    m->n_sets = 0;
    m->n_rows = 0;
    if (m->set_ht) memset(m->set_ht, 0xFF, (m->set_ht_mask + 1) * sizeof *m->set_ht);
}

static size_t hash_node(int32_t pos, int32_t par) {
    uint64_t h = (uint64_t)(uint32_t)pos * 0x9E3779B97F4A7C15ull ^ ((uint64_t)(uint32_t)par + 1) * 0xC2B2AE3D27D4EB4Full;
    return (size_t)(h ^ (h >> 29));
}

static int grow_nodes(qhx_gm_match *m, qhx_error *err) {
    if (m->n_nodes >= QHX_GM_MAX_NODES) {
        qhx_fail(err, QHX_E_LIMIT, "grammar: more than %d parse stack nodes (the grammar is too ambiguous)", QHX_GM_MAX_NODES);
        return -1;
    }
    int32_t cap = m->cap_nodes ? m->cap_nodes * 2 : 1024;
    int32_t *pos = qhx_realloc(m->pos, (size_t)cap * sizeof *pos);
    if (pos) m->pos = pos;
    int32_t *par = pos ? qhx_realloc(m->par, (size_t)cap * sizeof *par) : NULL;
    if (par) m->par = par;
    uint32_t *mark = par ? qhx_realloc(m->mark, (size_t)cap * sizeof *mark) : NULL;
    if (!mark) {
        qhx_fail(err, QHX_E_NOMEM, "grammar: out of memory for parse stacks");
        return -1;
    }
    memset(mark + m->cap_nodes, 0, (size_t)(cap - m->cap_nodes) * sizeof *mark);
    m->mark = mark;
    m->cap_nodes = cap;
    /* the table stays at most half full */
    size_t want = (size_t)cap * 2;
    if (want > m->ht_mask + 1) {
        int32_t *ht = qhx_malloc(want * sizeof *ht);
        if (!ht) {
            qhx_fail(err, QHX_E_NOMEM, "grammar: out of memory for parse stacks");
            return -1;
        }
        memset(ht, 0xFF, want * sizeof *ht);
        for (int32_t id = 0; id < m->n_nodes; id++) {
            size_t h = hash_node(m->pos[id], m->par[id]) & (want - 1);
            while (ht[h] >= 0) h = (h + 1) & (want - 1);
            ht[h] = id;
        }
        qhx_free(m->ht);
        m->ht = ht;
        m->ht_mask = want - 1;
    }
    return 0;
}

/* The id of stack (pos, par), interned; -1 when a cap or the memory ran out (err set). */
static int32_t node(qhx_gm_match *m, int32_t pos, int32_t par, qhx_error *err) {
    if (m->ht) {
        size_t h = hash_node(pos, par) & m->ht_mask;
        for (int32_t id; (id = m->ht[h]) >= 0; h = (h + 1) & m->ht_mask)
            if (m->pos[id] == pos && m->par[id] == par) return id;
    }
    if (m->n_nodes == m->cap_nodes && grow_nodes(m, err)) return -1;
    int32_t id = m->n_nodes++;
    m->pos[id] = pos;
    m->par[id] = par;
    size_t h = hash_node(pos, par) & m->ht_mask;
    while (m->ht[h] >= 0) h = (h + 1) & m->ht_mask;
    m->ht[h] = id;
    return id;
}

static int buf_reserve(qhx_gm_match *m, size_t extra, qhx_error *err) {
    if (m->n_buf + extra <= m->cap_buf) return 0;
    size_t cap = m->cap_buf ? m->cap_buf : 1024;
    while (cap < m->n_buf + extra) cap *= 2;
    int32_t *b = qhx_realloc(m->buf, cap * sizeof *b);
    if (!b) {
        qhx_fail(err, QHX_E_NOMEM, "grammar: out of memory");
        return -1;
    }
    m->buf = b;
    m->cap_buf = cap;
    return 0;
}

static int work_push(qhx_gm_match *m, int32_t id, qhx_error *err) {
    if (m->n_work == m->cap_work) {
        size_t cap = m->cap_work ? m->cap_work * 2 : 256;
        int32_t *w = qhx_realloc(m->work, cap * sizeof *w);
        if (!w) {
            qhx_fail(err, QHX_E_NOMEM, "grammar: out of memory");
            return -1;
        }
        m->work = w;
        m->cap_work = cap;
    }
    m->work[m->n_work++] = id;
    return 0;
}

/* Expand the stacks on the work list until every one has a byte class on top; those are
 * appended to buf (each once: marks of generation m->gen), *end set when a stack empties. */
static int closure(qhx_gm_match *m, bool *end, qhx_error *err) {
    const qhx_gm *g = m->g;
    int32_t added = 0;
    while (m->n_work) {
        int32_t id = m->work[--m->n_work];
        if (id < 0) { /* the bottom: the whole input is a sentence */
            *end = true;
            continue;
        }
        if (m->mark[id] == m->gen) continue;
        m->mark[id] = m->gen;
        int32_t p = m->pos[id];
        const gm_elem *e = &g->elems[p];
        if (e->kind == GM_CLASS) {
            /* stacks that differ in their top position are the grammar's alternatives side by
             * side (a list of 10000 words has 10000 before the first byte, and the first byte
             * ends all but a few): the grammar's class positions are free, ambiguity is what
             * comes on top of them */
            if (++added > QHX_GM_MAX_STACKS + g->n_class_elems) {
                qhx_fail(err, QHX_E_LIMIT, "grammar: more than %d live parse stacks (%d over the grammar's %d "
                         "character positions: the grammar is too ambiguous)",
                         QHX_GM_MAX_STACKS + g->n_class_elems, QHX_GM_MAX_STACKS, g->n_class_elems);
                return -1;
            }
            if (buf_reserve(m, 1, err)) return -1;
            m->buf[m->n_buf++] = id;
        } else if (e->kind == GM_END) {
            if (work_push(m, m->par[id], err)) return -1;
        } else {
            int32_t cont = g->elems[p + 1].kind == GM_END ? m->par[id] : node(m, p + 1, m->par[id], err);
            if (cont < 0 && g->elems[p + 1].kind != GM_END) return -1;
            for (int32_t a = g->rule_alt[e->arg]; a < g->rule_alt[e->arg + 1]; a++) {
                int32_t c = node(m, g->alt_pos[a], cont, err);
                if (c < 0 || work_push(m, c, err)) return -1;
            }
        }
    }
    return 0;
}

static void next_gen(qhx_gm_match *m) {
    if (++m->gen == 0) { /* wrapped: clear the marks once in 2^32 steps */
        memset(m->mark, 0, (size_t)m->cap_nodes * sizeof *m->mark);
        m->gen = 1;
    }
}

int gm_step(qhx_gm_match *m, size_t in_off, int32_t in_n, uint8_t byte, gm_level *out, qhx_error *err) {
    const qhx_gm *g = m->g;
    next_gen(m);
    out->off = m->n_buf;
    out->end = false;
    m->n_work = 0;
    for (int32_t i = 0; i < in_n; i++) {
        int32_t id = m->buf[in_off + (size_t)i];
        int32_t p = m->pos[id];
        if (!gm_cls_has(&g->cls[g->elems[p].arg], byte)) continue;
        int32_t nx = g->elems[p + 1].kind == GM_END ? m->par[id] : node(m, p + 1, m->par[id], err);
        if (nx < 0 && g->elems[p + 1].kind != GM_END) return -1;
        if (work_push(m, nx, err)) return -1;
        if (closure(m, &out->end, err)) return -1;
    }
    out->n = (int32_t)(m->n_buf - out->off);
    return 0;
}

/* ---- the committed state ------------------------------------------------------------------ */

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

static int set_cur(qhx_gm_match *m, const int32_t *ids, int32_t n, bool end, qhx_error *err) {
    if (n > m->cap_cur) {
        int32_t *c = qhx_realloc(m->cur, (size_t)n * sizeof *c);
        if (!c) {
            qhx_fail(err, QHX_E_NOMEM, "grammar: out of memory");
            return -1;
        }
        m->cur = c;
        m->cap_cur = n;
    }
    gm_copy(m->cur, ids, (size_t)n * sizeof *ids);
    if (n > 1) qsort(m->cur, (size_t)n, sizeof *m->cur, cmp_i32); /* cur may be NULL when n is 0 */
    m->n_cur = n;
    m->cur_end = end;
    return 0;
}

/* Keep only the nodes the current state reaches, renumbered; the mask cache goes with the old
 * numbering. Done between steps when the arena has grown large. */
static int compact(qhx_gm_match *m, qhx_error *err) {
    int32_t n_old = m->n_nodes;
    int32_t *map = qhx_malloc((size_t)n_old * sizeof *map), *opos = m->pos, *opar = m->par, *chain = NULL;
    int32_t n_chain = 0, cap_chain = 0;
    if (!map) return qhx_fail(err, QHX_E_NOMEM, "grammar: out of memory"), -1;
    memset(map, 0xFF, (size_t)n_old * sizeof *map);
    m->pos = m->par = NULL;
    qhx_free(m->mark);
    m->mark = NULL;
    qhx_free(m->ht);
    m->ht = NULL;
    m->ht_mask = 0;
    m->n_nodes = m->cap_nodes = 0;
    int rc = 0;
    for (int32_t i = 0; i < m->n_cur && !rc; i++) {
        n_chain = 0; /* the chain from the top down to a node already mapped (or the bottom) */
        for (int32_t id = m->cur[i]; id >= 0 && map[id] < 0; id = opar[id]) {
            if (n_chain == cap_chain) {
                cap_chain = cap_chain ? cap_chain * 2 : 64;
                int32_t *c = qhx_realloc(chain, (size_t)cap_chain * sizeof *c);
                if (!c) {
                    rc = -1;
                    qhx_fail(err, QHX_E_NOMEM, "grammar: out of memory");
                    break;
                }
                chain = c;
            }
            chain[n_chain++] = id;
        }
        for (int32_t k = n_chain - 1; k >= 0 && !rc; k--) {
            int32_t id = chain[k], par = opar[id] < 0 ? -1 : map[opar[id]];
            int32_t nid = node(m, opos[id], par, err);
            if (nid < 0) rc = -1;
            else map[id] = nid;
        }
        if (!rc) m->cur[i] = map[m->cur[i]];
    }
    qhx_free(chain);
    qhx_free(map);
    qhx_free(opos);
    qhx_free(opar);
    if (!rc && m->n_cur > 1) qsort(m->cur, (size_t)m->n_cur, sizeof *m->cur, cmp_i32);
    gm_cache_clear(m);
    gm_sets_clear(m);
    m->gen = 0;
    next_gen(m);
    return rc;
}

int gm_commit(qhx_gm_match *m, const gm_level *lv, qhx_error *err) {
    if (set_cur(m, m->buf + lv->off, lv->n, lv->end, err)) return -1;
    if (m->n_nodes > QHX_GM_COMPACT_NODES && compact(m, err)) return -1;
    return 0;
}

static int start_state(qhx_gm_match *m, qhx_error *err) {
    const qhx_gm *g = m->g;
    next_gen(m);
    m->n_buf = 0;
    m->n_work = 0;
    if (buf_reserve(m, 1, err)) return -1; /* never NULL, even for a state of no stacks */
    bool end = false;
    for (int32_t a = g->rule_alt[g->root]; a < g->rule_alt[g->root + 1]; a++) {
        int32_t c = node(m, g->alt_pos[a], -1, err);
        if (c < 0 || work_push(m, c, err)) return -1;
    }
    if (closure(m, &end, err)) return -1;
    return set_cur(m, m->buf, (int32_t)m->n_buf, end, err);
}

qhx_status qhx_gm_match_new(const qhx_gm *g, qhx_gm_match **out, qhx_error *err) {
    if (!out) return qhx_fail(err, QHX_E_ARG, "grammar: out is NULL");
    *out = NULL;
    if (!g) return qhx_fail(err, QHX_E_ARG, "grammar: grammar is NULL");
    qhx_gm_match *m = qhx_calloc(1, sizeof *m);
    if (!m) return qhx_fail(err, QHX_E_NOMEM, "grammar: out of memory");
    m->g = g;
    if (grow_nodes(m, err) || start_state(m, err)) {
        qhx_status rc = err ? err->code : QHX_E_NOMEM;
        qhx_gm_match_free(m);
        return rc ? rc : QHX_E_NOMEM;
    }
    *out = m;
    return QHX_OK;
}

void qhx_gm_match_free(qhx_gm_match *m) {
    if (!m) return;
    gm_cache_clear(m);
    qhx_free(m->cache);
    qhx_free(m->pos);
    qhx_free(m->par);
    qhx_free(m->mark);
    qhx_free(m->ht);
    qhx_free(m->cur);
    qhx_free(m->buf);
    qhx_free(m->work);
    qhx_free(m->levels);
    gm_sets_free(m);
    qhx_free(m);
}

void qhx_gm_match_reset(qhx_gm_match *m) {
    if (!m) return;
    if (start_state(m, NULL)) m->n_cur = 0, m->cur_end = false; /* only out of memory: a dead state */
}

int qhx_gm_match_bytes(qhx_gm_match *m, const uint8_t *p, size_t n, qhx_error *err) {
    if (n == 0) return 1;
    if (gm_scratch_cur(m, err)) return -1;
    gm_level lv = {.off = 0, .n = m->n_cur, .end = m->cur_end};
    for (size_t i = 0; i < n; i++) {
        gm_level nx;
        if (gm_step(m, lv.off, lv.n, p[i], &nx, err)) return -1;
        if (nx.n == 0 && !nx.end) return 0;
        lv = nx;
    }
    return gm_commit(m, &lv, err) ? -1 : 1;
}

int gm_scratch_cur(qhx_gm_match *m, qhx_error *err) {
    m->n_buf = 0;
    if (buf_reserve(m, (size_t)m->n_cur, err)) return -1;
    gm_copy(m->buf, m->cur, (size_t)m->n_cur * sizeof *m->cur);
    m->n_buf = (size_t)m->n_cur;
    return 0;
}

int qhx_gm_match_can_end(const qhx_gm_match *m) { return m && m->cur_end; }
int qhx_gm_match_can_continue(const qhx_gm_match *m) { return m && m->n_cur > 0; }

void qhx_gm_match_counters(const qhx_gm_match *m, qhx_gm_counters *out) {
    if (m) *out = m->cnt;
    else memset(out, 0, sizeof *out);
}
