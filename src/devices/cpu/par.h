/* devices/cpu/par.h: splitting family work over the model's thread pool (core/pool.h).
 *
 * Every helper here keeps results independent of the thread count: work is cut into pieces
 * chosen from the problem size (or, for linear layers, into row ranges, where each output row is
 * one kernel call whatever the range), each piece writes only its own outputs, and nothing is
 * reduced across pieces in completion order. So 1, 2 or N threads give bitwise-identical
 * results. A NULL pool runs everything on the calling thread. */
#ifndef QHX_DEVICES_CPU_PAR_H
#define QHX_DEVICES_CPU_PAR_H

#include "core/pool.h"
#include "kernels/kernels.h"

#include <stdint.h>

/* Output rows per piece are a multiple of this (SIMD row tiles stay whole). */
#define QHX_PAR_ROW_ALIGN 16

/* Y (n, w->rows) stride ldy = X (n, w->cols) stride ldx @ W^T through k (matvec for n == 1,
 * matmul else), output rows split over the pool. */
void qhx_par_linear(struct qhx_pool *pool, const qhx_kernels *k, const qhx_weight *w, const float *X,
                    int64_t ldx, float *Y, int64_t ldy, int64_t n);

/* Several linear layers over the same input in one parallel region (one barrier instead of
 * one per layer): ls[i].Y (n, ls[i].w->rows) stride ls[i].ldy = X @ ls[i].w^T. */
typedef struct qhx_par_lin {
    const qhx_weight *w;
    float *Y;
    int64_t ldy;
} qhx_par_lin;
void qhx_par_linears(struct qhx_pool *pool, const qhx_kernels *k, const qhx_par_lin *ls, int n_ls, const float *X,
                     int64_t ldx, int64_t n);

/* The same layers for nb independent rows at once (one decode step of nb sequences): row b reads
 * X[b] (cols,) and writes ls[i].Y[b] (rows,). Each piece computes its row chunk for every row in
 * turn, so a chunk's weights are read from memory once for all of them; chunks and kernels are a
 * single row's (qhx_par_linears / qhx_par_swiglu with n == 1), so every output has the bits of
 * the single-row call. swiglu: ls[0] is gate, ls[1] up, and Y of ls[0] becomes silu(G) * U. */
typedef struct qhx_par_lin_multi {
    const qhx_weight *w;
    float *const *Y; /* (nb) rows out */
} qhx_par_lin_multi;
void qhx_par_linears_multi(struct qhx_pool *pool, const qhx_kernels *k, const qhx_par_lin_multi *ls, int n_ls,
                           const float *const *X, int64_t nb, int swiglu);

/* The gate and up projections of a SwiGLU MLP and the SwiGLU itself in one region: G <- X @ gate^T,
 * U <- X @ up^T, then G <- silu(G) * U (the op table's swiglu per element), each piece on its own
 * rows. gate and up have the same shape; G and U are (n, rows) with stride ld. */
void qhx_par_swiglu(struct qhx_pool *pool, const qhx_kernels *k, const qhx_weight *gate, const qhx_weight *up,
                    const float *X, int64_t ldx, float *G, float *U, int64_t ld, int64_t n);

/* fn(ctx, i0, i1, thread_index) over [0, n) in pieces of `chunk` items (the last may be
 * shorter); pieces may run in any order on any thread. thread_index < qhx_pool_n_threads(pool)
 * is for per-thread scratch only. */
typedef void (*qhx_par_fn)(void *ctx, int64_t i0, int64_t i1, int thread_index);
void qhx_par_range(struct qhx_pool *pool, int64_t n, int64_t chunk, qhx_par_fn fn, void *ctx);

#endif
