/* devices/calib.c: the statistics-taking wrapper around a device (devices/calib.h). Linear ops
 * add their inputs to the statistics, then forward; every other op goes through the forwarding
 * base (devices/forward.h) as it is. */
#include "devices/calib.h"

#include "core/alloc.h"
#include "devices/forward.h"

#include <string.h>

// ---- the statistics ------------------------------------------------------------------------------

/* Entries in first-seen order, found through an open-addressing table of indices by key. */
struct qhx_calib_stats {
    qhx_calib_entry *e;
    int64_t n, cap;
    int64_t *slot; /* (n_slots) index into e, -1 free */
    int64_t n_slots;
    int64_t missed;
};

qhx_status qhx_calib_stats_create(qhx_calib_stats **out, qhx_error *err) {
    *out = qhx_calloc(1, sizeof **out);
    return *out ? QHX_OK : qhx_fail(err, QHX_E_NOMEM, "calibration: out of memory");
}

void qhx_calib_stats_free(qhx_calib_stats *s) {
    if (!s) return;
    for (int64_t i = 0; i < s->n; i++) qhx_free(s->e[i].sum_x2);
    qhx_free(s->e);
    qhx_free(s->slot);
    qhx_free(s);
}

static uint64_t key_hash(const void *key) {
    uint64_t h = (uint64_t)(uintptr_t)key * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 29);
}

static int64_t lookup(const qhx_calib_stats *s, const void *key) {
    if (!s->n_slots) return -1;
    for (uint64_t h = key_hash(key);; h++) {
        int64_t i = s->slot[h & (uint64_t)(s->n_slots - 1)];
        if (i < 0) return -1;
        if (s->e[i].key == key) return i;
    }
}

/* Keep the table at most half full; rebuild it from the entries when it grows. */
static int grow_slots(qhx_calib_stats *s) {
    if (2 * (s->n + 1) <= s->n_slots) return 0;
    int64_t ns = s->n_slots ? 2 * s->n_slots : 64;
    int64_t *slot = qhx_malloc((size_t)ns * sizeof *slot);
    if (!slot) return -1;
    for (int64_t k = 0; k < ns; k++) slot[k] = -1;
    for (int64_t i = 0; i < s->n; i++) {
        uint64_t h = key_hash(s->e[i].key);
        while (slot[h & (uint64_t)(ns - 1)] >= 0) h++;
        slot[h & (uint64_t)(ns - 1)] = i;
    }
    qhx_free(s->slot);
    s->slot = slot, s->n_slots = ns;
    return 0;
}

/* The entry of w, made on first sight; NULL when out of memory. */
static qhx_calib_entry *entry_for(qhx_calib_stats *s, const qhx_weight *w) {
    int64_t i = lookup(s, w->data);
    if (i >= 0) return &s->e[i];
    if (grow_slots(s)) return NULL;
    if (s->n == s->cap) {
        int64_t cap = s->cap ? 2 * s->cap : 64;
        qhx_calib_entry *e = qhx_realloc(s->e, (size_t)cap * sizeof *e);
        if (!e) return NULL;
        s->e = e, s->cap = cap;
    }
    double *sum = qhx_calloc((size_t)(w->cols > 0 ? w->cols : 1), sizeof *sum);
    if (!sum) return NULL;
    qhx_calib_entry *e = &s->e[s->n];
    *e = (qhx_calib_entry){.key = w->data, .fmt = w->fmt, .rows = w->rows, .cols = w->cols, .sum_x2 = sum};
    uint64_t h = key_hash(w->data);
    while (s->slot[h & (uint64_t)(s->n_slots - 1)] >= 0) h++;
    s->slot[h & (uint64_t)(s->n_slots - 1)] = s->n++;
    return e;
}

int qhx_calib_stats_add(qhx_calib_stats *s, const qhx_weight *w, const float *X, int64_t ldx, int64_t n) {
    qhx_calib_entry *e = entry_for(s, w);
    if (!e) {
        s->missed++;
        return -1;
    }
    for (int64_t t = 0; t < n; t++) {
        const float *x = X + t * ldx;
        for (int64_t c = 0; c < e->cols; c++) e->sum_x2[c] += (double)x[c] * (double)x[c];
    }
    e->n_rows += n;
    return 0;
}

int64_t qhx_calib_stats_count(const qhx_calib_stats *s) { return s->n; }
const qhx_calib_entry *qhx_calib_stats_at(const qhx_calib_stats *s, int64_t i) {
    return i >= 0 && i < s->n ? &s->e[i] : NULL;
}
const qhx_calib_entry *qhx_calib_stats_find(const qhx_calib_stats *s, const void *key) {
    int64_t i = lookup(s, key);
    return i >= 0 ? &s->e[i] : NULL;
}
int64_t qhx_calib_stats_missed(const qhx_calib_stats *s) { return s->missed; }

int qhx_calib_importance(const qhx_calib_entry *e, double floor_frac, float *imp) {
    if (e->n_rows <= 0 || e->cols <= 0) return -1;
    double total = 0.0;
    for (int64_t c = 0; c < e->cols; c++) total += e->sum_x2[c];
    const double mean_all = total / ((double)e->n_rows * (double)e->cols);
    if (!(mean_all > 0.0)) return -1;
    const double floor = floor_frac * mean_all;
    for (int64_t c = 0; c < e->cols; c++) imp[c] = (float)(e->sum_x2[c] / (double)e->n_rows + floor);
    return 0;
}

// ---- the wrapper ---------------------------------------------------------------------------------

typedef struct calib_dev {
    qhx_fwd_dev fwd; /* first: the forwarding base (devices/forward.h) */
    qhx_calib_stats *stats;
} calib_dev;

static calib_dev *C(const qhx_device *d) { return (calib_dev *)d->impl; }
static const qhx_device *IN(const qhx_device *d) { return qhx_fwd_inner(d); }
#define INNER_OP(d) IN(d)->op

/* Count n rows of X (stride ldx) for w, when the host can read them. */
static void observe(const qhx_device *d, const qhx_weight *w, qhx_dv X, int64_t ldx, int64_t n) {
    const float *x = qhx_dv_host(X);
    if (!x) {
        C(d)->stats->missed++;
        return;
    }
    qhx_calib_stats_add(C(d)->stats, w, x, ldx, n);
}

static void c_linear(const qhx_device *d, const qhx_weight *w, qhx_dv X, int64_t ldx, qhx_dv Y, int64_t ldy, int64_t n) {
    observe(d, w, X, ldx, n);
    INNER_OP(d)->linear(IN(d), w, X, ldx, Y, ldy, n);
}
static void c_linears(const qhx_device *d, const qhx_dlin *ls, int n_ls, qhx_dv X, int64_t ldx, int64_t n) {
    for (int i = 0; i < n_ls; i++) observe(d, ls[i].w, X, ldx, n);
    INNER_OP(d)->linears(IN(d), ls, n_ls, X, ldx, n);
}
static void c_swiglu_linear(const qhx_device *d, const qhx_weight *gate, const qhx_weight *up, qhx_dv X, int64_t ldx,
                            qhx_dv G, qhx_dv U, int64_t ld, int64_t n) {
    observe(d, gate, X, ldx, n);
    observe(d, up, X, ldx, n);
    INNER_OP(d)->swiglu_linear(IN(d), gate, up, X, ldx, G, U, ld, n);
}
static void c_linears_multi(const qhx_device *d, const qhx_dlin_multi *ls, int n_ls, const qhx_dv *X, int64_t nb,
                            bool swiglu) {
    for (int i = 0; i < n_ls; i++)
        for (int64_t b = 0; b < nb; b++) observe(d, ls[i].w, X[b], 0, 1);
    INNER_OP(d)->linears_multi(IN(d), ls, n_ls, X, nb, swiglu);
}

static void c_destroy(qhx_device *d) { qhx_free(C(d)); }

qhx_status qhx_calib_wrap(qhx_device *inner, qhx_calib_stats *stats, qhx_device **out, qhx_error *err) {
    *out = NULL;
    calib_dev *c = qhx_calloc(1, sizeof *c);
    if (!c) return qhx_fail(err, QHX_E_NOMEM, "calibration: out of memory");
    qhx_fwd_init(&c->fwd, inner, c_destroy);
    c->fwd.ops.linear = c_linear;
    c->fwd.ops.linears = c_linears;
    c->fwd.ops.swiglu_linear = c_swiglu_linear;
    c->fwd.ops.linears_multi = c_linears_multi;
    c->stats = stats;
    *out = &c->fwd.self;
    return QHX_OK;
}
