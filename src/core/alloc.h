/* core/alloc: the one allocation funnel (every heap byte of libqhx goes through here),
 * checked size arithmetic, and a fault-injection hook so tests can fail the Nth allocation. */
#ifndef QHX_CORE_ALLOC_H
#define QHX_CORE_ALLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define QHX_ALIGN 64 /* SIMD buffers: a cache line, enough for AVX-512 */

void *qhx_malloc(size_t size);              /* NULL on failure (or injected failure) */
void *qhx_calloc(size_t n, size_t size);    /* zeroed; NULL on overflow or failure */
void *qhx_realloc(void *p, size_t size);    /* as realloc; p untouched on failure */
void qhx_free(void *p);                      /* NULL allowed */
void *qhx_aligned_alloc(size_t size);       /* QHX_ALIGN-aligned, zeroed; free with qhx_aligned_free */
void qhx_aligned_free(void *p);             /* NULL allowed */
char *qhx_strdup(const char *s);            /* NULL on failure */
char *qhx_strndup(const char *s, size_t n); /* copies at most n bytes, NUL-terminates */

/* Fault injection (tests only): after `n` more successful allocations, the next one fails.
 * n < 0 disables. Returns the number of allocations since the last call (to size a sweep). */
void qhx_alloc_fail_after(int64_t n);
int64_t qhx_alloc_count(void);     /* allocations made since process start */
bool qhx_alloc_failed(void);       /* whether an injected failure has fired since armed */

/* Checked arithmetic: return false on overflow and leave *out untouched. */
static inline bool qhx_size_mul(size_t a, size_t b, size_t *out) {
    size_t r;
    if (__builtin_mul_overflow(a, b, &r)) return false;
    *out = r;
    return true;
}
static inline bool qhx_size_add(size_t a, size_t b, size_t *out) {
    size_t r;
    if (__builtin_add_overflow(a, b, &r)) return false;
    *out = r;
    return true;
}

#endif
