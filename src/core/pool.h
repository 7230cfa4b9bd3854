/* core/pool: one small persistent thread pool.
 *
 * qhx_pool_create(n) starts n-1 workers that live until qhx_pool_free; the thread that calls
 * qhx_pool_run is worker 0 and works too. A run hands out task indices 0..n_tasks-1 through an
 * atomic counter; any thread may take any task, in any order, so:
 *
 *   RESULTS MUST NOT DEPEND ON WHICH THREAD RUNS A TASK. A task computes a fixed piece of work
 *   from its index alone (e.g. rows [16*t, 16*t+16) of a matvec) and writes only its own
 *   outputs. Choose the split from the problem size (qhx_pool_split), or from n_threads only
 *   where every output element is computed by one task in the same order whatever the split
 *   (disjoint row ranges): then 1 and N threads give bitwise-identical results. Never reduce
 *   across tasks in completion order.
 *
 * thread_index (0..n_threads-1) is only for per-thread scratch: each thread runs one task at a
 * time, so scratch[thread_index] is never shared.
 *
 * Every run ends at an implicit barrier: when qhx_pool_run returns, all tasks have finished and
 * their writes are visible to the caller. Runs are cheap (a decode step makes 100+): idle
 * workers spin on an atomic generation counter with a pause instruction for a short while,
 * then sleep on a condition variable until the next run.
 *
 * Threading contract: one run at a time per pool. A nested call (from inside a task) or a call
 * from a second thread while a run is in progress does not deadlock: it runs its tasks
 * serially on the calling thread, passing thread_index 0 - so code that uses per-thread
 * scratch must not nest, and scratch indexed by thread_index must belong to the caller (a
 * session), never to something two callers share (the model): two sessions running at once
 * both see thread_index 0 (tests/test_session_threads.c, under TSan). Tasks must not block
 * waiting for other tasks of the same run. */
#ifndef QHX_CORE_POOL_H
#define QHX_CORE_POOL_H

#include "core/status.h"

#include <stdint.h>

#define QHX_POOL_MAX_THREADS 512

typedef struct qhx_pool qhx_pool;

/* One task: `task` in [0, n_tasks), `thread_index` in [0, n_threads). */
typedef void (*qhx_pool_fn)(void *ctx, int64_t task, int thread_index);

/* Start a pool of n_threads threads in all (n_threads - 1 workers; the caller is the last
 * one). n_threads == 0 means qhx_cpu_n_physical(). n_threads outside [0, QHX_POOL_MAX_THREADS]
 * gives QHX_E_ARG; a failed thread start gives QHX_E_INTERNAL (the partial pool is torn down).
 * *out is NULL on failure. */
qhx_status qhx_pool_create(int n_threads, qhx_pool **out /* OUT, owned: qhx_pool_free */,
                           qhx_error *err);

/* Stop and join the workers, then free the pool. NULL allowed. Must not race a run. */
void qhx_pool_free(qhx_pool *pool);

/* Threads in the pool, caller included (>= 1). A NULL pool counts as 1. */
int qhx_pool_n_threads(const qhx_pool *pool);

/* Run fn(ctx, t, thread_index) for every t in [0, n_tasks) and return when all are done.
 * n_tasks <= 0 does nothing. pool == NULL runs every task on the calling thread, in order, so
 * single-threaded callers need no pool. Never fails. */
void qhx_pool_run(qhx_pool *pool, qhx_pool_fn fn, void *ctx, int64_t n_tasks);

/* Split [0, n) into n_parts contiguous ranges; part `part` gets [*begin, *end). Every interior
 * boundary is a multiple of `align` (>= 1; e.g. 16 rows for a SIMD kernel's row tile), the
 * first range starts at 0 and the last ends at n. Whole blocks of `align` are shared out as
 * evenly as possible (the first parts take one extra), so some parts may be empty when
 * n_parts exceeds the block count. Depends only on its arguments. Out-of-range arguments
 * (n < 0, n_parts < 1, part outside [0, n_parts)) give an empty range. */
void qhx_pool_split(int64_t n, int64_t n_parts, int64_t part, int64_t align, int64_t *begin,
                    int64_t *end);

#endif
