/* ops/blocks.c: the shared decoder pieces (ops/blocks.h). */
#include "ops/blocks.h"

#include "core/alloc.h"

void qhx_op_swiglu_mlp(const qhx_device *d, const qhx_weight *gate, const qhx_weight *up, const qhx_weight *down,
                       qhx_dv xn, int64_t H, qhx_dv mg, qhx_dv mu, int64_t I, qhx_dv out, int64_t n) {
    d->op->swiglu_linear(d, gate, up, xn, H, mg, mu, I, n);
    d->op->linear(d, down, mg, I, out, H, n);
}

void qhx_op_lm_head(const qhx_device *d, qhx_norm_kind kind, qhx_dv x, const float *final_norm, float eps, qhx_dv xn,
                    const qhx_weight *head, qhx_dv logits, int64_t H, int64_t V, int64_t n, bool all) {
    int64_t t0 = all ? 0 : n - 1, nr = all ? n : 1;
    d->op->rmsnorm(d, kind, qhx_dv_f(x, t0 * H), final_norm, qhx_dv_f(xn, t0 * H), nr, H, eps);
    d->op->linear(d, head, qhx_dv_f(xn, t0 * H), H, logits, V, nr);
}

qhx_status qhx_op_lm_head_rows(const qhx_device *d, qhx_norm_kind kind, const float *hidden, const float *final_norm,
                               float eps, const qhx_weight *head, float *logits, int64_t H, int64_t V, int64_t n,
                               qhx_error *err) {
    size_t bytes, lbytes;
    if (n < 1 || !qhx_size_mul((size_t)n, (size_t)H * sizeof(float), &bytes) ||
        !qhx_size_mul((size_t)n, (size_t)V * sizeof(float), &lbytes))
        return qhx_fail(err, QHX_E_LIMIT, "lm_head: %lld rows of %lld values", (long long)n, (long long)H);
    qhx_dbuf *xn;
    if (d->op->buf_alloc(d, bytes, &xn, NULL))
        return qhx_fail(err, QHX_E_NOMEM, "lm_head: out of memory for %lld rows", (long long)n);
    qhx_dbuf hb = qhx_dbuf_host((void *)hidden, bytes), lb = qhx_dbuf_host(logits, lbytes);
    qhx_op_lm_head(d, kind, qhx_dv_of(&hb, 0), final_norm, eps, qhx_dv_of(xn, 0), head, qhx_dv_of(&lb, 0), H, V, n,
                   true);
    d->op->buf_free(d, xn);
    return QHX_OK;
}

qhx_status qhx_op_final_norm_rows(const qhx_device *d, qhx_norm_kind kind, const float *hidden, const float *final_norm,
                                  float eps, float *out, int64_t H, int64_t n, qhx_error *err) {
    size_t bytes;
    if (n < 1 || !qhx_size_mul((size_t)n, (size_t)H * sizeof(float), &bytes))
        return qhx_fail(err, QHX_E_LIMIT, "final norm: %lld rows of %lld values", (long long)n, (long long)H);
    qhx_dbuf hb = qhx_dbuf_host((void *)hidden, bytes), ob = qhx_dbuf_host(out, bytes);
    d->op->rmsnorm(d, kind, qhx_dv_of(&hb, 0), final_norm, qhx_dv_of(&ob, 0), n, H, eps);
    return QHX_OK;
}

qhx_status qhx_op_batches(int64_t n, int64_t step, int64_t V, float *logits, bool all, qhx_op_step_fn fn, void *ctx,
                          qhx_error *err) {
    for (int64_t t0 = 0; t0 < n; t0 += step) {
        int64_t nt = n - t0 < step ? n - t0 : step;
        float *lg = NULL;
        if (logits && all) lg = logits + t0 * V;
        else if (logits && t0 + nt == n) lg = logits;
        qhx_status rc = fn(ctx, t0, nt, lg, err);
        if (rc) return rc;
    }
    return QHX_OK;
}

void qhx_op_rows_cb_call(const qhx_device *d, qhx_op_rows_cb cb, void *user, int64_t layer, int64_t pos0, qhx_dv x,
                         int64_t n, int64_t H) {
    const float *in_place = qhx_dv_host(x);
    if (in_place) {
        cb(user, layer, pos0, in_place, n);
        return;
    }
    size_t bytes;
    float *rows = qhx_size_mul((size_t)(n * H), sizeof(float), &bytes) ? qhx_malloc(bytes) : NULL;
    if (!rows) return;
    d->op->get(d, x, rows, bytes);
    cb(user, layer, pos0, rows, n);
    qhx_free(rows);
}
