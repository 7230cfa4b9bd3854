/* core/alloc: allocation funnel with fault injection. The counters are process-wide atomics,
 * like a malloc wrapper's; they carry no model state. */
#include "core/alloc.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static _Atomic int64_t alloc_count;
static _Atomic int64_t fail_at = -1; /* absolute allocation index that fails, or -1 */
static _Atomic int fail_fired;

static bool should_fail(void) {
    int64_t idx = atomic_fetch_add(&alloc_count, 1);
    int64_t at = atomic_load(&fail_at);
    if (at >= 0 && idx >= at) {
        atomic_store(&fail_fired, 1);
        return true;
    }
    return false;
}

void qhx_alloc_fail_after(int64_t n) {
    atomic_store(&fail_fired, 0);
    atomic_store(&fail_at, n < 0 ? -1 : atomic_load(&alloc_count) + n);
}

int64_t qhx_alloc_count(void) { return atomic_load(&alloc_count); }
bool qhx_alloc_failed(void) { return atomic_load(&fail_fired) != 0; }

void *qhx_malloc(size_t size) {
    if (should_fail()) return NULL;
    return malloc(size ? size : 1);
}

void *qhx_calloc(size_t n, size_t size) {
    if (should_fail()) return NULL;
    if (n == 0 || size == 0) n = size = 1;
    return calloc(n, size);
}

void *qhx_realloc(void *p, size_t size) {
    if (should_fail()) return NULL;
    return realloc(p, size ? size : 1);
}

void qhx_free(void *p) { free(p); }

void *qhx_aligned_alloc(size_t size) {
    if (should_fail()) return NULL;
    size_t rounded;
    if (!qhx_size_add(size ? size : 1, QHX_ALIGN - 1, &rounded)) return NULL;
    rounded &= ~(size_t)(QHX_ALIGN - 1);
    void *p = NULL;
    if (posix_memalign(&p, QHX_ALIGN, rounded) != 0) return NULL;
    memset(p, 0, rounded);
    return p;
}

void qhx_aligned_free(void *p) { free(p); }

char *qhx_strndup(const char *s, size_t n) {
    size_t len = strnlen(s, n);
    char *d = qhx_malloc(len + 1);
    if (!d) return NULL;
    memcpy(d, s, len);
    d[len] = '\0';
    return d;
}

char *qhx_strdup(const char *s) { return qhx_strndup(s, strlen(s)); }
