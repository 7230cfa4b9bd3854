/* grammar/gm_match.h: the matcher's insides, shared by match.c (stacks, steps) and vocab.c
 * (masks over a vocabulary, their cache). Not for other layers. */
#ifndef QHX_GRAMMAR_MATCH_H
#define QHX_GRAMMAR_MATCH_H

#include "grammar/gm_internal.h"

/* Past this many nodes, the nodes the current state no longer reaches are dropped between
 * steps (mask walks make many that die). */
#define QHX_GM_COMPACT_NODES (1 << 19)
/* Masks kept per matcher: states a JSON output comes back to are few (a string's inside, the
 * place after a comma, ...). */
#define QHX_GM_CACHE_SLOTS 32

/* A set of stacks in the scratch buffer: ids buf[off .. off + n), end: a sentence ends here. */
typedef struct gm_level {
    size_t off;
    int32_t n;
    bool end;
} gm_level;

typedef struct gm_cache_entry {
    const qhx_gm_vocab *v;
    uint64_t hash;
    int32_t *ids; /* the state: sorted ids */
    int32_t n;
    bool end;
    uint64_t *mask;
} gm_cache_entry;

struct qhx_gm_match {
    const qhx_gm *g;
    int32_t *pos, *par; /* stack nodes: position, parent (-1: the bottom) */
    uint32_t *mark;     /* closure marks (generation gen) */
    int32_t n_nodes, cap_nodes;
    uint32_t gen;
    int32_t *ht;        /* node ids by (pos, par); -1 empty */
    size_t ht_mask;
    int32_t *cur;       /* the committed state, sorted */
    int32_t n_cur, cap_cur;
    bool cur_end;
    int32_t *buf;       /* scratch sets */
    size_t n_buf, cap_buf;
    int32_t *work;
    size_t n_work, cap_work;
    gm_level *levels;   /* mask walks: one set per byte depth */
    size_t cap_levels;
    gm_cache_entry *cache;
    int n_cache, next_slot;
    qhx_gm_counters cnt;
};

/* The stacks after byte from the set buf[in_off .. in_off + in_n), appended to buf. */
int gm_step(qhx_gm_match *m, size_t in_off, int32_t in_n, uint8_t byte, gm_level *out, qhx_error *err);
/* Make the set lv (in buf) the committed state. */
int gm_commit(qhx_gm_match *m, const gm_level *lv, qhx_error *err);
/* buf := the committed state (at offset 0). */
int gm_scratch_cur(qhx_gm_match *m, qhx_error *err);
void gm_cache_clear(qhx_gm_match *m);

#endif
