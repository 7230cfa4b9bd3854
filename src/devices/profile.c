/* devices/profile.c: the timing wrapper around a device (devices/profile.h). Each op forwards
 * to the inner device with the inner device as its `d`; the counters are atomics, since
 * sessions of one model may run ops from several threads at once. */
#include "devices/profile.h"

#include "core/alloc.h"
#include "core/time.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct prof_dev {
    qhx_device self;
    qhx_device *inner;
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
static const qhx_device *IN(const qhx_device *d) { return P(d)->inner; }

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

static void note(const qhx_device *d, qhx_prof_op op, uint64_t t0, int64_t bytes) {
    note_fmt(d, op, QHX_W_COUNT, t0, bytes);
}

/* Run `call` on the inner device and count it under op. */
#define TIMED(d, op, bytes, call)                                                                                     \
    do {                                                                                                              \
        const uint64_t t0_ = qhx_time_ns();                                                                          \
        call;                                                                                                         \
        note(d, op, t0_, bytes);                                                                                      \
    } while (0)
/* The same for a linear op over weights of format fmt. */
#define TIMED_W(d, op, fmt, bytes, call)                                                                              \
    do {                                                                                                              \
        const uint64_t t0_ = qhx_time_ns();                                                                          \
        call;                                                                                                         \
        note_fmt(d, op, fmt, t0_, bytes);                                                                             \
    } while (0)
#define INNER_OP(d) IN(d)->op

/* ---- what is forwarded untimed: lifetime, information, allocation, weights ---------------- */

static void p_destroy(qhx_device *d) { qhx_free(P(d)); }
static void p_info(const qhx_device *d, qhx_device_info *out) { INNER_OP(d)->info(IN(d), out); }
static qhx_status p_buf_alloc(const qhx_device *d, size_t bytes, qhx_dbuf **out, qhx_error *err) {
    return INNER_OP(d)->buf_alloc(IN(d), bytes, out, err);
}
static void p_buf_free(const qhx_device *d, qhx_dbuf *b) { INNER_OP(d)->buf_free(IN(d), b); }
static bool p_supports(const qhx_device *d, qhx_wfmt fmt) { return INNER_OP(d)->supports(IN(d), fmt); }
static qhx_status p_weight_prepare(const qhx_device *d, qhx_weight *w, qhx_error *err) {
    return INNER_OP(d)->weight_prepare(IN(d), w, err);
}
static int64_t p_attn_work(const qhx_device *d, int64_t n_ctx, int64_t nkv, int64_t rep, int64_t hd, qhx_kv_type t) {
    return INNER_OP(d)->attn_work(IN(d), n_ctx, nkv, rep, hd, t);
}
static int64_t p_gdn_work(const qhx_device *d, int64_t dk, int64_t dv) { return INNER_OP(d)->gdn_work(IN(d), dk, dv); }
static int64_t p_vit_attn_work(const qhx_device *d, int64_t N, int64_t D, int64_t H) {
    return INNER_OP(d)->vit_attn_work(IN(d), N, D, H);
}

/* ---- memory ------------------------------------------------------------------------------ */

static void p_set(const qhx_device *d, qhx_dv dst, const void *src, size_t bytes) {
    TIMED(d, QHX_PROF_MEMORY, 0, INNER_OP(d)->set(IN(d), dst, src, bytes));
}
static void p_get(const qhx_device *d, qhx_dv src, void *dst, size_t bytes) {
    TIMED(d, QHX_PROF_MEMORY, 0, INNER_OP(d)->get(IN(d), src, dst, bytes));
}
static void p_copy(const qhx_device *d, qhx_dv dst, qhx_dv src, size_t bytes) {
    TIMED(d, QHX_PROF_MEMORY, 0, INNER_OP(d)->copy(IN(d), dst, src, bytes));
}
static void p_zero(const qhx_device *d, qhx_dv dst, size_t bytes) {
    TIMED(d, QHX_PROF_MEMORY, 0, INNER_OP(d)->zero(IN(d), dst, bytes));
}

/* ---- linear layers ------------------------------------------------------------------------ */

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
static void p_embed_rows(const qhx_device *d, const qhx_weight *w, const int32_t *ids, int64_t n, qhx_dv out) {
    TIMED(d, QHX_PROF_EMBED, 0, INNER_OP(d)->embed_rows(IN(d), w, ids, n, out));
}

/* ---- the rest ----------------------------------------------------------------------------- */

static void p_rmsnorm(const qhx_device *d, qhx_norm_kind kind, qhx_dv x, const float *w, qhx_dv out, int64_t n,
                      int64_t H, float eps) {
    TIMED(d, QHX_PROF_NORM, 0, INNER_OP(d)->rmsnorm(IN(d), kind, x, w, out, n, H, eps));
}
static void p_add_rmsnorm(const qhx_device *d, qhx_norm_kind kind, qhx_dv x, qhx_dv add, const float *w, qhx_dv out,
                          int64_t n, int64_t H, float eps) {
    TIMED(d, QHX_PROF_NORM, 0, INNER_OP(d)->add_rmsnorm(IN(d), kind, x, add, w, out, n, H, eps));
}
static void p_add(const qhx_device *d, qhx_dv x, qhx_dv add, int64_t count) {
    TIMED(d, QHX_PROF_ELEMENTWISE, 0, INNER_OP(d)->add(IN(d), x, add, count));
}
static void p_split_heads(const qhx_device *d, qhx_dv src, qhx_dv a, qhx_dv b, int64_t n, int64_t nh, int64_t hd) {
    TIMED(d, QHX_PROF_ELEMENTWISE, 0, INNER_OP(d)->split_heads(IN(d), src, a, b, n, nh, hd));
}
static void p_attention(const qhx_device *d, const qhx_dattn *a) {
    TIMED(d, QHX_PROF_ATTENTION, 0, INNER_OP(d)->attention(IN(d), a));
}
static void p_gdn_prep(const qhx_device *d, const qhx_dgdn *g) {
    TIMED(d, QHX_PROF_GDN_PREP, 0, INNER_OP(d)->gdn_prep(IN(d), g));
}
static void p_gdn_delta(const qhx_device *d, const qhx_dgdn *g) {
    TIMED(d, QHX_PROF_GDN_DELTA, 0, INNER_OP(d)->gdn_delta(IN(d), g));
}
static void p_bias_rows(const qhx_device *d, qhx_dv Y, int64_t ldy, const float *b, int64_t cols, int64_t n) {
    TIMED(d, QHX_PROF_ELEMENTWISE, 0, INNER_OP(d)->bias_rows(IN(d), Y, ldy, b, cols, n));
}
static void p_act(const qhx_device *d, qhx_act a, qhx_dv x, int64_t count) {
    TIMED(d, QHX_PROF_ELEMENTWISE, 0, INNER_OP(d)->act(IN(d), a, x, count));
}
static void p_layernorm(const qhx_device *d, qhx_dv x, const float *w, const float *b, qhx_dv y, int64_t n,
                        int64_t width, float eps) {
    TIMED(d, QHX_PROF_NORM, 0, INNER_OP(d)->layernorm(IN(d), x, w, b, y, n, width, eps));
}
static void p_rope_rows(const qhx_device *d, qhx_dv x, int64_t ld, int64_t n, int64_t nh, int64_t hd, const float *cos,
                        const float *sin) {
    TIMED(d, QHX_PROF_ELEMENTWISE, 0, INNER_OP(d)->rope_rows(IN(d), x, ld, n, nh, hd, cos, sin));
}
static void p_vit_attention(const qhx_device *d, qhx_dv qkv, int64_t N, int64_t D, int64_t H, qhx_dv kv, qhx_dv work,
                            qhx_dv att) {
    TIMED(d, QHX_PROF_VIT_ATTENTION, 0, INNER_OP(d)->vit_attention(IN(d), qkv, N, D, H, kv, work, att));
}

static const qhx_device_ops PROF_OPS = {
    .destroy = p_destroy,
    .info = p_info,
    .buf_alloc = p_buf_alloc,
    .buf_free = p_buf_free,
    .set = p_set,
    .get = p_get,
    .copy = p_copy,
    .zero = p_zero,
    .supports = p_supports,
    .weight_prepare = p_weight_prepare,
    .attn_work = p_attn_work,
    .gdn_work = p_gdn_work,
    .vit_attn_work = p_vit_attn_work,
    .linear = p_linear,
    .linears = p_linears,
    .swiglu_linear = p_swiglu_linear,
    .linears_multi = p_linears_multi,
    .embed_rows = p_embed_rows,
    .rmsnorm = p_rmsnorm,
    .add_rmsnorm = p_add_rmsnorm,
    .add = p_add,
    .split_heads = p_split_heads,
    .attention = p_attention,
    .gdn_prep = p_gdn_prep,
    .gdn_delta = p_gdn_delta,
    .bias_rows = p_bias_rows,
    .act = p_act,
    .layernorm = p_layernorm,
    .rope_rows = p_rope_rows,
    .vit_attention = p_vit_attention,
};

qhx_status qhx_profile_wrap(qhx_device *inner, qhx_device **out, qhx_error *err) {
    *out = NULL;
    prof_dev *p = qhx_calloc(1, sizeof *p);
    if (!p) return qhx_fail(err, QHX_E_NOMEM, "profile: out of memory");
    p->inner = inner;
    p->self = (qhx_device){.name = inner->name, .op = &PROF_OPS, .impl = p};
    *out = &p->self;
    return QHX_OK;
}

bool qhx_profile_read(qhx_device *d, qhx_op_profile *out, bool clear) {
    memset(out, 0, sizeof *out);
    if (!d || d->op != &PROF_OPS) return false;
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
