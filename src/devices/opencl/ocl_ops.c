/* devices/opencl/ocl_ops.c: the linear layers, the embedding lookup, norms, residuals and the
 * element-wise ops of the OpenCL device (kernels/10_linear.cl, 20_norm.cl, 00_common.cl). */
#include "devices/opencl/ocl_impl.h"

/* the kernels' format number (kernels/10_linear.cl wval) is qhx_wfmt's order */
static ocl_kid lin_kernel(qhx_wfmt f, bool swiglu) { return (ocl_kid)((swiglu ? OK_SWIGLU_F32 : OK_LINEAR_F32) + (int)f); }

static void a_weight(ocl_args *a, const ocl_ref r[3]) {
    for (int i = 0; i < 3; i++) qhx_ocl_a_ref(a, r[i]);
}

/* one launch of the linear kernel; the mutex held */
static void linear_locked(ocl_dev *o, const qhx_weight *w, ocl_ref x, int64_t ldx, ocl_ref y, int64_t ldy, int64_t n) {
    ocl_ref wr[3];
    qhx_ocl_weight(o, w, wr);
    ocl_args a = qhx_ocl_args(o, lin_kernel(w->fmt, false));
    a_weight(&a, wr);
    qhx_ocl_a_i64(&a, w->cols);
    qhx_ocl_a_i64(&a, w->group);
    qhx_ocl_a_ref(&a, x);
    qhx_ocl_a_i64(&a, ldx);
    qhx_ocl_a_ref(&a, y);
    qhx_ocl_a_i64(&a, ldy);
    qhx_ocl_a_i64(&a, n);
    qhx_ocl_launch(&a, (size_t)w->rows * o->wg, (size_t)((n + OCL_TT - 1) / OCL_TT), 1, o->wg);
}

void qhx_ocl_linear(const qhx_device *d, const qhx_weight *w, qhx_dv X, int64_t ldx, qhx_dv Y, int64_t ldy,
                    int64_t n) {
    ocl_dev *o = ocl_of(d);
    qhx_ocl_op_begin(o);
    linear_locked(o, w, qhx_ocl_view(o, X, false), ldx, qhx_ocl_view(o, Y, true), ldy, n);
    qhx_ocl_op_end(o);
}

/* every layer the same kernel as linear: the bits of linear */
void qhx_ocl_linears(const qhx_device *d, const qhx_dlin *ls, int n_ls, qhx_dv X, int64_t ldx, int64_t n) {
    ocl_dev *o = ocl_of(d);
    qhx_ocl_op_begin(o);
    ocl_ref x = qhx_ocl_view(o, X, false);
    for (int i = 0; i < n_ls; i++) linear_locked(o, ls[i].w, x, ldx, qhx_ocl_view(o, ls[i].Y, true), ls[i].ldy, n);
    qhx_ocl_op_end(o);
}

/* A gate and an up matrix of two formats (a q4a bundle's narrow rows keep up_proj at Q6, a
 * --tensor-precision rule may pick either): the fused kernel reads one format, so each is a
 * linear of its own, then G = silu(G) * U. */
static void swiglu_two_formats(ocl_dev *o, const qhx_weight *gate, const qhx_weight *up, ocl_ref x, int64_t ldx,
                               ocl_ref g, ocl_ref u, int64_t ld, int64_t n) {
    linear_locked(o, gate, x, ldx, g, ld, n);
    linear_locked(o, up, x, ldx, u, ld, n);
    ocl_args a = qhx_ocl_args(o, OK_SILU_MUL);
    qhx_ocl_a_ref(&a, g);
    qhx_ocl_a_ref(&a, u);
    qhx_ocl_a_i64(&a, ld);
    qhx_ocl_a_i64(&a, gate->rows);
    qhx_ocl_launch(&a, (size_t)gate->rows, (size_t)n, 1, 0);
}

static void swiglu_locked(ocl_dev *o, const qhx_weight *gate, const qhx_weight *up, ocl_ref x, int64_t ldx, ocl_ref g,
                          ocl_ref u, int64_t ld, int64_t n) {
    if (gate->fmt != up->fmt) {
        swiglu_two_formats(o, gate, up, x, ldx, g, u, ld, n);
        return;
    }
    ocl_ref gr[3], ur[3];
    qhx_ocl_weight(o, gate, gr);
    qhx_ocl_weight(o, up, ur);
    ocl_args a = qhx_ocl_args(o, lin_kernel(gate->fmt, true));
    a_weight(&a, gr);
    a_weight(&a, ur);
    qhx_ocl_a_i64(&a, gate->cols);
    qhx_ocl_a_i64(&a, gate->group);
    qhx_ocl_a_ref(&a, x);
    qhx_ocl_a_i64(&a, ldx);
    qhx_ocl_a_ref(&a, g);
    qhx_ocl_a_ref(&a, u);
    qhx_ocl_a_i64(&a, ld);
    qhx_ocl_a_i64(&a, n);
    qhx_ocl_launch(&a, (size_t)gate->rows * o->wg, (size_t)((n + OCL_TT - 1) / OCL_TT), 1, o->wg);
}

void qhx_ocl_swiglu_linear(const qhx_device *d, const qhx_weight *gate, const qhx_weight *up, qhx_dv X, int64_t ldx,
                           qhx_dv G, qhx_dv U, int64_t ld, int64_t n) {
    ocl_dev *o = ocl_of(d);
    qhx_ocl_op_begin(o);
    if (gate->rows != up->rows || gate->cols != up->cols) {
        qhx_ocl_refuse(o, QHX_E_UNSUPPORTED, "swiglu_linear over gate and up weights of two shapes"); /* no model binds such a pair */
    } else {
        swiglu_locked(o, gate, up, qhx_ocl_view(o, X, false), ldx, qhx_ocl_view(o, G, true), qhx_ocl_view(o, U, true),
                      ld, n);
    }
    qhx_ocl_op_end(o);
}

/* Each row through the single-row kernels: the bits of linear / swiglu_linear by construction. */
void qhx_ocl_linears_multi(const qhx_device *d, const qhx_dlin_multi *ls, int n_ls, const qhx_dv *X, int64_t nb,
                           bool swiglu) {
    ocl_dev *o = ocl_of(d);
    if (nb < 1 || nb > QHX_DEV_MULTI_MAX) return;
    qhx_ocl_op_begin(o);
    for (int64_t r = 0; r < nb; r++) {
        ocl_ref x = qhx_ocl_view(o, X[r], false);
        if (swiglu && n_ls >= 2 && (ls[0].w->rows != ls[1].w->rows || ls[0].w->cols != ls[1].w->cols)) {
            qhx_ocl_refuse(o, QHX_E_UNSUPPORTED, "swiglu_linear over gate and up weights of two shapes");
        } else if (swiglu && n_ls >= 2) {
            const qhx_weight *w = ls[0].w;
            swiglu_locked(o, w, ls[1].w, x, w->cols, qhx_ocl_view(o, ls[0].Y[r], true),
                          qhx_ocl_view(o, ls[1].Y[r], true), w->rows, 1);
        } else {
            for (int i = 0; i < n_ls; i++)
                linear_locked(o, ls[i].w, x, ls[i].w->cols, qhx_ocl_view(o, ls[i].Y[r], true), ls[i].w->rows, 1);
        }
    }
    qhx_ocl_op_end(o);
}

void qhx_ocl_embed_rows(const qhx_device *d, const qhx_weight *w, const int32_t *ids, int64_t n, qhx_dv out) {
    ocl_dev *o = ocl_of(d);
    if (n < 1) return;
    qhx_ocl_op_begin(o);
    ocl_ref wr[3];
    qhx_ocl_weight(o, w, wr);
    ocl_args a = qhx_ocl_args(o, OK_EMBED);
    qhx_ocl_a_i32(&a, (int)w->fmt);
    a_weight(&a, wr);
    qhx_ocl_a_i64(&a, w->cols);
    qhx_ocl_a_i64(&a, w->group);
    qhx_ocl_a_ref(&a, qhx_ocl_host(o, ids, (size_t)n * sizeof *ids));
    qhx_ocl_a_ref(&a, qhx_ocl_view(o, out, true));
    qhx_ocl_launch(&a, (size_t)w->cols, (size_t)n, 1, 0);
    qhx_ocl_op_end(o);
}

/* ---- norms and residuals ---------------------------------------------------------------- */

static void norm(ocl_dev *o, qhx_norm_kind kind, qhx_dv x, qhx_dv add, const float *w, qhx_dv out, int64_t n,
                 int64_t H, float eps) {
    if (n < 1) return;
    qhx_ocl_op_begin(o);
    ocl_args a = qhx_ocl_args(o, OK_RMSNORM);
    qhx_ocl_a_i32(&a, kind == QHX_NORM_ZERO_CENTRED);
    const bool same = out.b == x.b && out.off == x.off;
    ocl_ref xr = qhx_ocl_view(o, x, true);
    qhx_ocl_a_ref(&a, xr);
    qhx_ocl_a_ref(&a, qhx_ocl_view(o, add, false));
    qhx_ocl_a_i32(&a, !qhx_dv_null(add));
    qhx_ocl_a_ref(&a, qhx_ocl_host(o, w, (size_t)H * sizeof *w));
    qhx_ocl_a_ref(&a, same ? xr : qhx_ocl_view(o, out, true));
    qhx_ocl_a_i64(&a, H);
    qhx_ocl_a_f32(&a, eps);
    qhx_ocl_launch(&a, (size_t)n * o->wg, 1, 1, o->wg);
    qhx_ocl_op_end(o);
}

void qhx_ocl_rmsnorm(const qhx_device *d, qhx_norm_kind kind, qhx_dv x, const float *w, qhx_dv out, int64_t n,
                     int64_t H, float eps) {
    norm(ocl_of(d), kind, x, (qhx_dv){0}, w, out, n, H, eps);
}

void qhx_ocl_add_rmsnorm(const qhx_device *d, qhx_norm_kind kind, qhx_dv x, qhx_dv add, const float *w, qhx_dv out,
                         int64_t n, int64_t H, float eps) {
    norm(ocl_of(d), kind, x, add, w, out, n, H, eps);
}

void qhx_ocl_add(const qhx_device *d, qhx_dv x, qhx_dv add, int64_t count) {
    ocl_dev *o = ocl_of(d);
    qhx_ocl_op_begin(o);
    ocl_args a = qhx_ocl_args(o, OK_ADD);
    qhx_ocl_a_ref(&a, qhx_ocl_view(o, x, true));
    qhx_ocl_a_ref(&a, qhx_ocl_view(o, add, false));
    qhx_ocl_a_i64(&a, count);
    qhx_ocl_launch(&a, (size_t)count, 1, 1, 0);
    qhx_ocl_op_end(o);
}

void qhx_ocl_split_heads(const qhx_device *d, qhx_dv src, qhx_dv av, qhx_dv bv, int64_t n, int64_t nh, int64_t hd) {
    ocl_dev *o = ocl_of(d);
    qhx_ocl_op_begin(o);
    ocl_args a = qhx_ocl_args(o, OK_SPLIT_HEADS);
    qhx_ocl_a_ref(&a, qhx_ocl_view(o, src, false));
    qhx_ocl_a_ref(&a, qhx_ocl_view(o, av, true));
    qhx_ocl_a_ref(&a, qhx_ocl_view(o, bv, true));
    qhx_ocl_a_i64(&a, nh);
    qhx_ocl_a_i64(&a, hd);
    qhx_ocl_launch(&a, (size_t)hd, (size_t)nh, (size_t)n, 0);
    qhx_ocl_op_end(o);
}
