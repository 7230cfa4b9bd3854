/* devices/profile.c: the timing wrapper around a device (devices/profile.h). Every op forwards
 * to the inner device through the forwarding base (devices/forward.h), timed by its hooks under
 * the op's counter; the linear ops have entries of their own (weight bytes and formats). The
 * counters are atomics, since sessions of one model may run ops from several threads at once. */
#include "devices/profile.h"

#include "devices/forward.h"

#include "core/alloc.h"
#include "core/time.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct prof_dev {
    qhx_fwd_dev fwd; /* first: the forwarding base (devices/forward.h) */
    _Atomic int64_t calls[QHX_PROF_COUNT], ns[QHX_PROF_COUNT], bytes[QHX_PROF_COUNT];
    _Atomic int64_t fmt_calls[QHX_W_COUNT], fmt_ns[QHX_W_COUNT], fmt_bytes[QHX_W_COUNT];
} prof_dev;

static const char *const NAMES[QHX_PROF_COUNT] = {
    [QHX_PROF_LINEAR] = "linear",       [QHX_PROF_LINEARS_MULTI] = "linears_multi",
    [QHX_PROF_EMBED] = "embed",         [QHX_PROF_NORM] = "norm",
    [QHX_PROF_ELEMENTWISE] = "elementwise", [QHX_PROF_ATTENTION] = "attention",
    [QHX_PROF_GDN_PREP] = "gdn_prep",   [QHX_PROF_GDN_DELTA] = "gdn_delta",
    [QHX_PROF_VIT_ATTENTION] = "vit_attention", [QHX_PROF_MEMORY] = "memory",
};

const char *qhx_prof_op_name(qhx_prof_op op) { return op >= 0 && op < QHX_PROF_COUNT ? NAMES[op] : "?"; }

int64_t qhx_weight_bytes(const qhx_weight *w) {
    const int64_t n = w->rows * w->cols, g = w->group > 0 ? w->group : 1;
    const int64_t groups = w->rows * ((w->cols + g - 1) / g);
    switch (w->fmt) {
    case QHX_W_F32: return 4 * n;
    case QHX_W_F16:
    case QHX_W_BF16: return 2 * n;
    case QHX_W_Q8: return n + 4 * w->rows;
    case QHX_W_Q4: return n / 2 + 2 * groups;
    case QHX_W_Q6: return n / 2 + n / 4 + 2 * groups;
    case QHX_W_Q4A: return n / 2 + 2 * groups + 2 * w->rows * ((w->cols + 255) / 256);
    case QHX_W_GGML: return w->rows * w->row_bytes;
    case QHX_W_COUNT: break;
    }
    return 0;
}

bool qhx_profile_wanted(void) {
    const char *v = getenv("QHX_PROFILE");
    return v && *v && strcmp(v, "0") != 0;
}

static prof_dev *P(const qhx_device *d) { return (prof_dev *)d->impl; }
static const qhx_device *IN(const qhx_device *d) { return qhx_fwd_inner(d); }
#define INNER_OP(d) IN(d)->op

/* fmt: the weight format of a linear op, QHX_W_COUNT for the others */
static void note_fmt(const qhx_device *d, qhx_prof_op op, qhx_wfmt fmt, uint64_t t0, int64_t bytes) {
    prof_dev *p = P(d);
    const int64_t ns = (int64_t)(qhx_time_ns() - t0);
    atomic_fetch_add_explicit(&p->calls[op], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->ns[op], ns, memory_order_relaxed);
    if (bytes) atomic_fetch_add_explicit(&p->bytes[op], bytes, memory_order_relaxed);
    if (fmt >= 0 && fmt < QHX_W_COUNT) {
        atomic_fetch_add_explicit(&p->fmt_calls[fmt], 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&p->fmt_ns[fmt], ns, memory_order_relaxed);
        atomic_fetch_add_explicit(&p->fmt_bytes[fmt], bytes, memory_order_relaxed);
    }
}

/* ---- the ops forwarded through the base: timed by counter, or untimed ---------------------- */

/* The counter of each op the base forwards, plus one; 0: not timed (lifetime, information,
 * allocation, weights, and an op added to the list until it is given a counter here). The
 * linear ops have their own entries below (they count weight bytes and formats). */
static const unsigned char COUNTER[QHX_DOP_COUNT] = {
    [QHX_DOP_set] = QHX_PROF_MEMORY + 1,       [QHX_DOP_get] = QHX_PROF_MEMORY + 1,
    [QHX_DOP_copy] = QHX_PROF_MEMORY + 1,      [QHX_DOP_zero] = QHX_PROF_MEMORY + 1,
    [QHX_DOP_embed_rows] = QHX_PROF_EMBED + 1, [QHX_DOP_rmsnorm] = QHX_PROF_NORM + 1,
    [QHX_DOP_add_rmsnorm] = QHX_PROF_NORM + 1, [QHX_DOP_layernorm] = QHX_PROF_NORM + 1,
    [QHX_DOP_add] = QHX_PROF_ELEMENTWISE + 1,  [QHX_DOP_split_heads] = QHX_PROF_ELEMENTWISE + 1,
    [QHX_DOP_bias_rows] = QHX_PROF_ELEMENTWISE + 1, [QHX_DOP_act] = QHX_PROF_ELEMENTWISE + 1,
    [QHX_DOP_rope_rows] = QHX_PROF_ELEMENTWISE + 1, [QHX_DOP_attention] = QHX_PROF_ATTENTION + 1,
    [QHX_DOP_gdn_prep] = QHX_PROF_GDN_PREP + 1, [QHX_DOP_gdn_delta] = QHX_PROF_GDN_DELTA + 1,
    [QHX_DOP_vit_attention] = QHX_PROF_VIT_ATTENTION + 1,
};

static uint64_t p_before(qhx_fwd_dev *f, qhx_dev_op op) {
    (void)f;
    return COUNTER[op] ? qhx_time_ns() : 0;
}

static void p_after(qhx_fwd_dev *f, qhx_dev_op op, uint64_t t0) {
    if (COUNTER[op]) note_fmt(&f->self, (qhx_prof_op)(COUNTER[op] - 1), QHX_W_COUNT, t0, 0);
}

/* ---- linear layers ------------------------------------------------------------------------ */

/* Run `call` on the inner device and count it under op, for weights of format fmt. */
#define TIMED_W(d, op, fmt, bytes, call)                                                                              \
    do {                                                                                                              \
        const uint64_t t0_ = qhx_time_ns();                                                                          \
        call;                                                                                                         \
        note_fmt(d, op, fmt, t0_, bytes);                                                                             \
    } while (0)

static void p_linear(const qhx_device *d, const qhx_weight *w, qhx_dv X, int64_t ldx, qhx_dv Y, int64_t ldy, int64_t n) {
    TIMED_W(d, QHX_PROF_LINEAR, w->fmt, qhx_weight_bytes(w), INNER_OP(d)->linear(IN(d), w, X, ldx, Y, ldy, n));
}
static void p_linears(const qhx_device *d, const qhx_dlin *ls, int n_ls, qhx_dv X, int64_t ldx, int64_t n) {
    int64_t b = 0;
    for (int i = 0; i < n_ls; i++) b += qhx_weight_bytes(ls[i].w);
    TIMED_W(d, QHX_PROF_LINEAR, n_ls > 0 ? ls[0].w->fmt : QHX_W_COUNT, b, INNER_OP(d)->linears(IN(d), ls, n_ls, X, ldx, n));
}
static void p_swiglu_linear(const qhx_device *d, const qhx_weight *gate, const qhx_weight *up, qhx_dv X, int64_t ldx,
                            qhx_dv G, qhx_dv U, int64_t ld, int64_t n) {
    TIMED_W(d, QHX_PROF_LINEAR, gate->fmt, qhx_weight_bytes(gate) + qhx_weight_bytes(up),
            INNER_OP(d)->swiglu_linear(IN(d), gate, up, X, ldx, G, U, ld, n));
}
static void p_linears_multi(const qhx_device *d, const qhx_dlin_multi *ls, int n_ls, const qhx_dv *X, int64_t nb,
                            bool swiglu) {
    int64_t b = 0;
    for (int i = 0; i < n_ls; i++) b += qhx_weight_bytes(ls[i].w);
    TIMED_W(d, QHX_PROF_LINEARS_MULTI, n_ls > 0 ? ls[0].w->fmt : QHX_W_COUNT, b,
            INNER_OP(d)->linears_multi(IN(d), ls, n_ls, X, nb, swiglu));
}

static void p_destroy(qhx_device *d) { qhx_free(P(d)); }

qhx_status qhx_profile_wrap(qhx_device *inner, qhx_device **out, qhx_error *err) {
    *out = NULL;
    prof_dev *p = qhx_calloc(1, sizeof *p);
    if (!p) return qhx_fail(err, QHX_E_NOMEM, "profile: out of memory");
    qhx_fwd_init(&p->fwd, inner, p_destroy);
    p->fwd.before = p_before;
    p->fwd.after = p_after;
    p->fwd.ops.linear = p_linear;
    p->fwd.ops.linears = p_linears;
    p->fwd.ops.swiglu_linear = p_swiglu_linear;
    p->fwd.ops.linears_multi = p_linears_multi;
    *out = &p->fwd.self;
    return QHX_OK;
}

bool qhx_profile_read(qhx_device *d, qhx_op_profile *out, bool clear) {
    memset(out, 0, sizeof *out);
    if (!d || d->op->destroy != p_destroy) return false; /* not a timing wrapper */
    prof_dev *p = P(d);
    for (int i = 0; i < QHX_PROF_COUNT; i++) {
        out->calls[i] = clear ? atomic_exchange(&p->calls[i], 0) : atomic_load(&p->calls[i]);
        out->ns[i] = clear ? atomic_exchange(&p->ns[i], 0) : atomic_load(&p->ns[i]);
        out->weight_bytes[i] = clear ? atomic_exchange(&p->bytes[i], 0) : atomic_load(&p->bytes[i]);
    }
    for (int f = 0; f < QHX_W_COUNT; f++) {
        out->fmt_calls[f] = clear ? atomic_exchange(&p->fmt_calls[f], 0) : atomic_load(&p->fmt_calls[f]);
        out->fmt_ns[f] = clear ? atomic_exchange(&p->fmt_ns[f], 0) : atomic_load(&p->fmt_ns[f]);
        out->fmt_bytes[f] = clear ? atomic_exchange(&p->fmt_bytes[f], 0) : atomic_load(&p->fmt_bytes[f]);
    }
    return true;
}
