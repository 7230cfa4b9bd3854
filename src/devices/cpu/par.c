/* devices/cpu/par.c: linear layers and ranges over the pool (see par.h). */
#include "devices/cpu/par.h"

#include "kernels/ref.h"

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

/* Rows per piece: several pieces per thread so a thread slowed by a neighbour on a shared
 * machine hands work to the others; never less than one row tile per piece. Prefill (n > 1)
 * cuts 4 pieces per thread instead of 8: the int8 GEMMs quantize X once per piece, which at
 * 8 pieces cost a fifth of the GEMM's time (BENCHMARKS.md, "AVX-512 and VNNI"). */
static int64_t row_chunk(int64_t rows, int64_t nt, int64_t n) {
    if (nt <= 1) return rows > 0 ? rows : 1;
    int64_t per = rows / ((n > 1 ? 4 : 8) * nt);
    return per < QHX_PAR_ROW_ALIGN ? QHX_PAR_ROW_ALIGN : per - per % QHX_PAR_ROW_ALIGN;
}

static void lin_rows(const qhx_kernels *k, const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                     int64_t n, int64_t r0, int64_t r1) {
    if (n == 1)
        k->matvec[w->fmt](w, X, Y, r0, r1);
    else
        k->matmul[w->fmt](w, X, ldx, Y, ldy, n, r0, r1);
}

void qhx_par_linear(struct qhx_pool *pool, const qhx_kernels *k, const qhx_weight *w, const float *X,
                    int64_t ldx, float *Y, int64_t ldy, int64_t n) {
    const int64_t rows = w->rows, nt = qhx_pool_n_threads(pool);
    int64_t chunk = row_chunk(rows, nt, n);
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

#define MAX_LINS 8

typedef struct lins_job {
    const qhx_kernels *k;
    const qhx_par_lin *ls;
    int n_ls;
    const float *X;
    int64_t ldx, n;
    int64_t first[MAX_LINS + 1]; /* first task of each layer; first[n_ls] = all tasks */
    int64_t chunk[MAX_LINS];
    /* SwiGLU: layer 0 is gate, layer 1 is up; a task computes the same rows of both */
    int swiglu;
} lins_job;

static void lins_task(void *ctx, int64_t task, int thread_index) {
    (void)thread_index;
    const lins_job *j = ctx;
    int i = 0;
    while (task >= j->first[i + 1]) i++;
    const qhx_par_lin *l = &j->ls[i];
    int64_t r0 = (task - j->first[i]) * j->chunk[i], r1 = r0 + j->chunk[i] < l->w->rows ? r0 + j->chunk[i] : l->w->rows;
    lin_rows(j->k, l->w, j->X, j->ldx, l->Y, l->ldy, j->n, r0, r1);
    if (j->swiglu) {
        const qhx_par_lin *u = &j->ls[1];
        lin_rows(j->k, u->w, j->X, j->ldx, u->Y, u->ldy, j->n, r0, r1);
        for (int64_t t = 0; t < j->n; t++)
            j->k->swiglu(l->Y + t * l->ldy + r0, u->Y + t * u->ldy + r0, l->Y + t * l->ldy + r0, r1 - r0);
    }
}

static void lins_run(struct qhx_pool *pool, lins_job *j) {
    const int64_t nt = qhx_pool_n_threads(pool);
    int n_layers = j->swiglu ? 1 : j->n_ls; /* with SwiGLU the up rows ride along with the gate's */
    j->first[0] = 0;
    for (int i = 0; i < n_layers; i++) {
        j->chunk[i] = row_chunk(j->ls[i].w->rows, nt, j->n);
        j->first[i + 1] = j->first[i] + (j->ls[i].w->rows + j->chunk[i] - 1) / j->chunk[i];
    }
    for (int i = n_layers; i < MAX_LINS; i++) j->first[i + 1] = j->first[n_layers];
    qhx_pool_run(pool, lins_task, j, j->first[n_layers]);
}

void qhx_par_linears(struct qhx_pool *pool, const qhx_kernels *k, const qhx_par_lin *ls, int n_ls, const float *X,
                     int64_t ldx, int64_t n) {
    for (int b = 0; b < n_ls; b += MAX_LINS) {
        lins_job j = {.k = k, .ls = ls + b, .n_ls = n_ls - b < MAX_LINS ? n_ls - b : MAX_LINS, .X = X, .ldx = ldx, .n = n};
        lins_run(pool, &j);
    }
}

void qhx_par_swiglu(struct qhx_pool *pool, const qhx_kernels *k, const qhx_weight *gate, const qhx_weight *up,
                    const float *X, int64_t ldx, float *G, float *U, int64_t ld, int64_t n) {
    qhx_par_lin ls[2] = {{gate, G, ld}, {up, U, ld}};
    lins_job j = {.k = k, .ls = ls, .n_ls = 2, .X = X, .ldx = ldx, .n = n, .swiglu = 1};
    lins_run(pool, &j);
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

/* ---- several independent rows (one decode step of several sequences) -------------------- */

typedef struct multi_job {
    const qhx_kernels *k;
    const qhx_par_lin_multi *ls;
    int n_ls;
    const float *const *X;
    int64_t nb;
    int64_t first[MAX_LINS + 1];
    int64_t chunk[MAX_LINS];
    int swiglu;
} multi_job;

/* Bytes of one weight row (its share of the scales included). */
static int64_t row_bytes(const qhx_weight *w) {
    switch (w->fmt) {
    case QHX_W_F32: return 4 * w->cols;
    case QHX_W_F16:
    case QHX_W_BF16: return 2 * w->cols;
    case QHX_W_Q8: return w->cols + 4;
    case QHX_W_Q6: return w->cols / 2 + w->cols / 4 + (w->group ? 2 * w->cols / w->group : 0);
    case QHX_W_Q4A: return w->cols / 2 + w->cols / 16 + 2 * ((w->cols / 32 + 7) / 8);
    case QHX_W_GGML: return w->row_bytes;
    default: return w->cols / 2 + (w->group ? 2 * w->cols / w->group : 0);
    }
}

#define MULTI_BLOCK_BYTES (192 * 1024) /* weights of one sub-block: stays in L2 while every row uses it */

/* Rows of a sub-block of w: MULTI_BLOCK_BYTES of weights, whole row tiles. */
static int64_t block_rows(const qhx_weight *w) {
    int64_t r = MULTI_BLOCK_BYTES / (row_bytes(w) > 0 ? row_bytes(w) : 1);
    r -= r % QHX_PAR_ROW_ALIGN;
    return r < QHX_PAR_ROW_ALIGN ? QHX_PAR_ROW_ALIGN : r;
}

/* Rows [r0, r1) of layer l (and of u, the SwiGLU's up, when not NULL) for every row b with the
 * single-row matvec: the chunk is walked in sub-blocks that fit the cache, each used by every
 * row in turn, so the weights come from memory once for all rows. */
static void multi_rows_one_by_one(const multi_job *j, const qhx_par_lin_multi *l, const qhx_par_lin_multi *u,
                                  int64_t r0, int64_t r1) {
    const int64_t step = block_rows(l->w);
    for (int64_t a = r0; a < r1; a += step) {
        int64_t e = a + step < r1 ? a + step : r1;
        for (int64_t b = 0; b < j->nb; b++) {
            j->k->matvec[l->w->fmt](l->w, j->X[b], l->Y[b], a, e);
            if (u) j->k->matvec[u->w->fmt](u->w, j->X[b], u->Y[b], a, e);
        }
    }
}

/* One row chunk of one layer for every row b: with the format's multi-row twin of the matvec
 * where the table has one (each weight row read and unpacked once for all rows), else the
 * single-row matvec per row. Either gives each output row the bits of the single-row call: a
 * matvec gives a row the same bits whatever range it is called on (the pool splits rows
 * freely, devices/cpu/par.h), the twin is bitwise its matvec per row (kernels.h), and the SwiGLU runs
 * on the whole chunk as lins_task does with n == 1. */
static void multi_task(void *ctx, int64_t task, int thread_index) {
    (void)thread_index;
    const multi_job *j = ctx;
    int i = 0;
    while (task >= j->first[i + 1]) i++;
    const qhx_par_lin_multi *l = &j->ls[i], *u = j->swiglu ? &j->ls[1] : NULL;
    int64_t r0 = (task - j->first[i]) * j->chunk[i], r1 = r0 + j->chunk[i] < l->w->rows ? r0 + j->chunk[i] : l->w->rows;
    qhx_matvec_multi_fn ml = j->k->matvec_multi[l->w->fmt], mu = u ? j->k->matvec_multi[u->w->fmt] : NULL;
    if (ml && (!u || mu)) {
        ml(l->w, j->X, l->Y, j->nb, r0, r1);
        if (u) mu(u->w, j->X, u->Y, j->nb, r0, r1);
    } else {
        multi_rows_one_by_one(j, l, u, r0, r1);
    }
    for (int64_t b = 0; u && b < j->nb; b++) j->k->swiglu(l->Y[b] + r0, u->Y[b] + r0, l->Y[b] + r0, r1 - r0);
}

void qhx_par_linears_multi(struct qhx_pool *pool, const qhx_kernels *k, const qhx_par_lin_multi *ls, int n_ls,
                           const float *const *X, int64_t nb, int swiglu) {
    const int64_t nt = qhx_pool_n_threads(pool);
    for (int b0 = 0; b0 < n_ls; b0 += MAX_LINS) {
        multi_job j = {.k = k, .ls = ls + b0, .n_ls = n_ls - b0 < MAX_LINS ? n_ls - b0 : MAX_LINS, .X = X, .nb = nb,
                       .swiglu = swiglu};
        int n_layers = swiglu ? 1 : j.n_ls;
        j.first[0] = 0;
        for (int i = 0; i < n_layers; i++) {
            /* a single row's pieces (row_chunk with n == 1); qhx_par_linear's one-piece case
               (chunk >= rows) is the same rows in one call */
            j.chunk[i] = row_chunk(j.ls[i].w->rows, nt, 1);
            if (j.chunk[i] > j.ls[i].w->rows) j.chunk[i] = j.ls[i].w->rows;
            j.first[i + 1] = j.first[i] + (j.ls[i].w->rows + j.chunk[i] - 1) / j.chunk[i];
        }
        for (int i = n_layers; i < MAX_LINS; i++) j.first[i + 1] = j.first[n_layers];
        qhx_pool_run(pool, multi_task, &j, j.first[n_layers]);
    }
}
