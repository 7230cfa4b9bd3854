/* models/par.c: linear layers and ranges over the pool (see par.h). */
#include "models/par.h"

typedef struct lin_job {
    const qhx_kernels *k;
    const qhx_weight *w;
    const float *X;
    float *Y;
    int64_t ldx, ldy, n, chunk;
} lin_job;

static void lin_task(void *ctx, int64_t task, int thread_index) {
    (void)thread_index;
    const lin_job *j = ctx;
    int64_t r0 = task * j->chunk, r1 = r0 + j->chunk < j->w->rows ? r0 + j->chunk : j->w->rows;
    if (j->n == 1)
        j->k->matvec[j->w->fmt](j->w, j->X, j->Y, r0, r1);
    else
        j->k->matmul[j->w->fmt](j->w, j->X, j->ldx, j->Y, j->ldy, j->n, r0, r1);
}

void qhx_par_linear(struct qhx_pool *pool, const qhx_kernels *k, const qhx_weight *w, const float *X,
                    int64_t ldx, float *Y, int64_t ldy, int64_t n) {
    const int64_t rows = w->rows, nt = qhx_pool_n_threads(pool);
    /* Several pieces per thread so a thread slowed by a neighbour on a shared machine hands
     * work to the others; never less than one row tile per piece. */
    int64_t chunk = rows;
    if (nt > 1) {
        int64_t per = rows / (8 * nt);
        chunk = per < QHX_PAR_ROW_ALIGN ? QHX_PAR_ROW_ALIGN : per - per % QHX_PAR_ROW_ALIGN;
    }
    if (chunk >= rows) {
        if (n == 1)
            k->matvec[w->fmt](w, X, Y, 0, rows);
        else
            k->matmul[w->fmt](w, X, ldx, Y, ldy, n, 0, rows);
        return;
    }
    lin_job j = {.k = k, .w = w, .X = X, .Y = Y, .ldx = ldx, .ldy = ldy, .n = n, .chunk = chunk};
    qhx_pool_run(pool, lin_task, &j, (rows + chunk - 1) / chunk);
}

typedef struct range_job {
    qhx_par_fn fn;
    void *ctx;
    int64_t n, chunk;
} range_job;

static void range_task(void *ctx, int64_t task, int thread_index) {
    const range_job *j = ctx;
    int64_t i0 = task * j->chunk, i1 = i0 + j->chunk < j->n ? i0 + j->chunk : j->n;
    j->fn(j->ctx, i0, i1, thread_index);
}

void qhx_par_range(struct qhx_pool *pool, int64_t n, int64_t chunk, qhx_par_fn fn, void *ctx) {
    if (n <= 0) return;
    if (chunk < 1) chunk = 1;
    if (chunk >= n || qhx_pool_n_threads(pool) == 1) {
        /* the same pieces, in order, on this thread */
        for (int64_t i0 = 0; i0 < n; i0 += chunk) fn(ctx, i0, i0 + chunk < n ? i0 + chunk : n, 0);
        return;
    }
    range_job j = {.fn = fn, .ctx = ctx, .n = n, .chunk = chunk};
    qhx_pool_run(pool, range_task, &j, (n + chunk - 1) / chunk);
}
