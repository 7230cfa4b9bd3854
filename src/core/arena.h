/* core/arena: a bump allocator over one 64-byte-aligned block, for per-session scratch.
 * The block is allocated once (qhx_arena_init) or lent by the caller (qhx_arena_init_buffer);
 * qhx_arena_alloc only moves a cursor, so a hot path that draws from an arena makes no heap
 * calls. Not thread-safe: one arena per session, or one per worker thread.
 *
 * Sizing: sum qhx_arena_need(size) over every planned allocation (the planning pass allocates
 * nothing), then init with that total. */
#ifndef QHX_CORE_ARENA_H
#define QHX_CORE_ARENA_H

#include "core/alloc.h"
#include "core/status.h"

#include <stddef.h>

typedef struct qhx_arena {
    unsigned char *base; /* QHX_ALIGN-aligned block, or NULL for an empty arena */
    size_t capacity;     /* bytes in the block */
    size_t used;         /* bytes handed out since the last reset (multiple of QHX_ALIGN) */
    size_t high_water;   /* largest `used` ever seen: for sizing arenas from a trial run */
    int owned;           /* 1 when base came from qhx_aligned_alloc (freed by deinit) */
} qhx_arena;

/* Allocate a zeroed block of `capacity` bytes (rounded up to QHX_ALIGN). capacity 0 gives an
 * empty arena whose allocations all fail. On failure *a is zeroed and QHX_E_NOMEM returned. */
qhx_status qhx_arena_init(qhx_arena *a /* OUT */, size_t capacity, qhx_error *err);

/* Use caller-owned memory: `buf` must be QHX_ALIGN-aligned and outlive the arena; deinit
 * leaves it alone. Returns QHX_E_ARG if buf is misaligned. */
qhx_status qhx_arena_init_buffer(qhx_arena *a /* OUT */, void *buf, size_t size, qhx_error *err);

/* Free the block if owned and zero *a. NULL or a zeroed arena is fine. */
void qhx_arena_deinit(qhx_arena *a);

/* A QHX_ALIGN-aligned region of `size` bytes (size 0 still takes one aligned slot so every
 * call returns a distinct pointer), or NULL if it does not fit. The memory is NOT re-zeroed
 * after a reset. */
void *qhx_arena_alloc(qhx_arena *a, size_t size);

/* Bytes qhx_arena_alloc(size) consumes, or SIZE_MAX on overflow: for planning a capacity. */
size_t qhx_arena_need(size_t size);

/* Forget every allocation (the block stays). Pointers handed out before become invalid. */
void qhx_arena_reset(qhx_arena *a);

/* Rewind to a mark taken with qhx_arena_used(): frees everything allocated after it. A mark
 * beyond the current use is ignored. */
void qhx_arena_rewind(qhx_arena *a, size_t mark);

static inline size_t qhx_arena_used(const qhx_arena *a) { return a->used; }
static inline size_t qhx_arena_capacity(const qhx_arena *a) { return a->capacity; }

#endif
