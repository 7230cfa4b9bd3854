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
    int32_t *levels;    /* mask walks: the interned set after each byte depth */
    size_t cap_levels;
    gm_cache_entry *cache;
    int n_cache, next_slot;
    qhx_gm_counters cnt;
    /* mask walks step whole sets: each set of stacks is interned (an id for its sorted node
     * ids), and (set, byte) -> set is remembered, so a walk repeats no matcher work; inside a
     * string, where each character leads back to the same set, a step is one lookup */
    int32_t *set_ids;     /* concatenated sorted node ids */
    size_t n_set_ids, cap_set_ids;
    int32_t *set_off, *set_n; /* per set */
    uint8_t *set_end;
    int32_t n_sets, cap_sets;
    int32_t *set_ht;      /* set ids by content; -1 empty */
    size_t set_ht_mask;
    int32_t **rows;       /* per set, NULL or 256 entries: the set after each byte (-1: nothing
                             lives, -3: not stepped yet); one load per step, hot rows in cache */
    int32_t cap_rows;
    size_t n_rows;
};

/* The stacks after byte from the set buf[in_off .. in_off + in_n), appended to buf. */
int gm_step(qhx_gm_match *m, size_t in_off, int32_t in_n, uint8_t byte, gm_level *out, qhx_error *err);
/* Make the set lv (in buf) the committed state. */
int gm_commit(qhx_gm_match *m, const gm_level *lv, qhx_error *err);
/* buf := the committed state (at offset 0). */
int gm_scratch_cur(qhx_gm_match *m, qhx_error *err);
void gm_cache_clear(qhx_gm_match *m);

/* Interned sets (sets.c). The id of the committed state's set; -1 on failure (err set). */
int32_t gm_set_cur(qhx_gm_match *m, qhx_error *err);
/* The set after byte from set sid (-1 when nothing lives: no stack and no end); -2 on failure. */
int32_t gm_set_step(qhx_gm_match *m, int32_t sid, uint8_t byte, qhx_error *err);
/* Forget every set and transition (node ids renumbered, or the tables grew past their cap). */
void gm_sets_clear(qhx_gm_match *m);
void gm_sets_free(qhx_gm_match *m);

#endif
