/* core/arena: bump allocation over one aligned block. */
#include "core/arena.h"

#include <stdint.h>
#include <string.h>

size_t qhx_arena_need(size_t size) {
    size_t r;
    if (!qhx_size_add(size ? size : 1, QHX_ALIGN - 1, &r)) return SIZE_MAX;
    return r & ~(size_t)(QHX_ALIGN - 1);
}

qhx_status qhx_arena_init(qhx_arena *a, size_t capacity, qhx_error *err) {
    memset(a, 0, sizeof *a);
    if (capacity == 0) return QHX_OK;
    size_t cap = qhx_arena_need(capacity);
    if (cap == SIZE_MAX) return qhx_fail(err, QHX_E_LIMIT, "arena: %zu bytes is too large", capacity);
    a->base = qhx_aligned_alloc(cap);
    if (!a->base) return qhx_fail(err, QHX_E_NOMEM, "arena: cannot allocate %zu bytes", cap);
    a->capacity = cap;
    a->owned = 1;
    return QHX_OK;
}

qhx_status qhx_arena_init_buffer(qhx_arena *a, void *buf, size_t size, qhx_error *err) {
    memset(a, 0, sizeof *a);
    if (size == 0) return QHX_OK;
    if (!buf || ((uintptr_t)buf & (QHX_ALIGN - 1)))
        return qhx_fail(err, QHX_E_ARG, "arena: buffer %p is not %d-byte aligned", buf, QHX_ALIGN);
    a->base = buf;
    a->capacity = size & ~(size_t)(QHX_ALIGN - 1);
    return QHX_OK;
}

void qhx_arena_deinit(qhx_arena *a) {
    if (!a) return;
    if (a->owned) qhx_aligned_free(a->base);
    memset(a, 0, sizeof *a);
}

void *qhx_arena_alloc(qhx_arena *a, size_t size) {
    size_t need = qhx_arena_need(size);
    if (need == SIZE_MAX || need > a->capacity - a->used) return NULL;
    void *p = a->base + a->used;
    a->used += need;
    if (a->used > a->high_water) a->high_water = a->used;
    return p;
}

void qhx_arena_reset(qhx_arena *a) { a->used = 0; }

void qhx_arena_rewind(qhx_arena *a, size_t mark) {
    if (mark <= a->used) a->used = mark;
}
