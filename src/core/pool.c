/* core/pool: persistent workers, an atomic claim word, spin-then-park waiting.
 *
 * The claim word packs (generation << 32) | tasks_left. A run publishes its job (fn, ctx,
 * n_tasks, base) and then stores the word with a new generation and tasks_left = n_tasks. A
 * thread claims a task with a compare-and-swap that decrements tasks_left only if the word is
 * unchanged; the task claimed is n_tasks - tasks_left. A word with tasks_left == 0 is never
 * swapped, so a worker holding a finished run's word cannot claim anything while the caller
 * rewrites the job fields for the next run (the claim check uses only the word, never the
 * fields, which may already belong to the next run at that moment). A successful swap proves
 * the run was still open, and a run's fields are rewritten only after all of its tasks have been
 * claimed and finished, so the fields read between the acquire of the word and the swap are that
 * run's. Completion is counted per task (n_done), not per worker, so the caller never waits on a
 * worker that is asleep or descheduled - it simply runs the remaining tasks itself. */
#include "core/pool.h"

#include "core/alloc.h"
#include "core/cpu.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

/* Pause iterations a waiting thread spins before it sleeps (workers) or yields (caller); about
 * 0.2-1 ms on current x86. Long enough to bridge the gaps between the parallel regions of one
 * token, short enough not to burn a core between requests. */
#define SPIN_LIMIT (1 << 14)
#define SPIN_YIELD_EVERY 1024 /* yield now and then so oversubscribed machines still progress */
#define MAX_ROUND_TASKS ((int64_t)INT32_MAX)

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __asm__ volatile("pause" ::: "memory");
#elif defined(__aarch64__)
    __asm__ volatile("yield" ::: "memory");
#else
    atomic_signal_fence(memory_order_seq_cst);
#endif
}

struct worker {
    qhx_pool *pool;
    int index;
};

struct qhx_pool {
    int n_threads;
    int n_started;        /* workers actually running (for teardown after a failed start) */
    pthread_t *threads;   /* [n_threads - 1] */
    struct worker *workers;
    uint32_t gen;         /* caller side: generation of the last run */

    _Alignas(64) _Atomic uint64_t word; /* (generation << 32) | tasks not yet claimed */
    _Alignas(64) _Atomic int64_t n_done;
    _Alignas(64) _Atomic(qhx_pool_fn) fn;
    _Atomic(void *) ctx;
    _Atomic int64_t n_tasks;              /* tasks in this round (<= MAX_ROUND_TASKS) */
    _Atomic int64_t base;                 /* task index of the round's first task */
    _Alignas(64) _Atomic int busy;        /* a run is in progress */
    _Atomic int shutdown;
    _Atomic int n_sleeping;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

/* Claim and run tasks of the generation in `w` until none are left or a newer run began. */
static void work(qhx_pool *p, uint64_t w, int thread_index) {
    const uint32_t gen = (uint32_t)(w >> 32);
    for (;;) {
        uint32_t left = (uint32_t)w;
        if ((uint32_t)(w >> 32) != gen || left == 0) return;
        qhx_pool_fn fn = atomic_load_explicit(&p->fn, memory_order_relaxed);
        void *ctx = atomic_load_explicit(&p->ctx, memory_order_relaxed);
        int64_t n = atomic_load_explicit(&p->n_tasks, memory_order_relaxed);
        int64_t base = atomic_load_explicit(&p->base, memory_order_relaxed);
        /* Success proves the run was still open, so the fields read above are its own. */
        if (atomic_compare_exchange_weak_explicit(&p->word, &w, w - 1, memory_order_acq_rel,
                                                  memory_order_acquire)) {
            fn(ctx, base + (n - (int64_t)left), thread_index);
            atomic_fetch_add_explicit(&p->n_done, 1, memory_order_release);
            w = atomic_load_explicit(&p->word, memory_order_acquire);
        }
    }
}

static void *worker_main(void *arg) {
    struct worker *wk = arg;
    qhx_pool *p = wk->pool;
    uint32_t seen = 0;
    for (;;) {
        uint64_t w;
        int spins = 0;
        for (;;) {
            w = atomic_load_explicit(&p->word, memory_order_acquire);
            if ((uint32_t)(w >> 32) != seen || atomic_load(&p->shutdown)) break;
            if (++spins < SPIN_LIMIT) {
                cpu_relax();
                if (spins % SPIN_YIELD_EVERY == 0) sched_yield();
                continue;
            }
            /* Park. n_sleeping is raised before the last look at the word; the caller stores
             * the word before it reads n_sleeping (both seq_cst), so one of the two sees the
             * other and no wake-up is lost. */
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->n_sleeping, 1);
            while ((uint32_t)(atomic_load(&p->word) >> 32) == seen && !atomic_load(&p->shutdown))
                pthread_cond_wait(&p->cv, &p->mu);
            atomic_fetch_sub(&p->n_sleeping, 1);
            pthread_mutex_unlock(&p->mu);
            spins = 0;
        }
        if (atomic_load(&p->shutdown)) return NULL;
        seen = (uint32_t)(w >> 32);
        work(p, w, wk->index);
    }
}

static void wake_all(qhx_pool *p) {
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

qhx_status qhx_pool_create(int n_threads, qhx_pool **out, qhx_error *err) {
    *out = NULL;
    if (n_threads < 0 || n_threads > QHX_POOL_MAX_THREADS)
        return qhx_fail(err, QHX_E_ARG, "thread pool: %d threads requested, allowed 1..%d (0 = one per core)",
                        n_threads, QHX_POOL_MAX_THREADS);
    if (n_threads == 0) n_threads = qhx_cpu_n_physical();
    if (n_threads < 1) n_threads = 1;
    if (n_threads > QHX_POOL_MAX_THREADS) n_threads = QHX_POOL_MAX_THREADS;

    qhx_pool *p = qhx_aligned_alloc(sizeof *p);
    if (!p) return qhx_fail(err, QHX_E_NOMEM, "thread pool: out of memory");
    p->n_threads = n_threads;
    atomic_init(&p->word, 0);
    atomic_init(&p->n_done, 0);
    atomic_init(&p->fn, NULL);
    atomic_init(&p->ctx, NULL);
    atomic_init(&p->n_tasks, 0);
    atomic_init(&p->base, 0);
    atomic_init(&p->busy, 0);
    atomic_init(&p->shutdown, 0);
    atomic_init(&p->n_sleeping, 0);
    if (pthread_mutex_init(&p->mu, NULL) != 0) {
        qhx_aligned_free(p);
        return qhx_fail(err, QHX_E_INTERNAL, "thread pool: cannot create a mutex");
    }
    if (pthread_cond_init(&p->cv, NULL) != 0) {
        pthread_mutex_destroy(&p->mu);
        qhx_aligned_free(p);
        return qhx_fail(err, QHX_E_INTERNAL, "thread pool: cannot create a condition variable");
    }
    int n_workers = n_threads - 1;
    if (n_workers > 0) {
        p->threads = qhx_calloc((size_t)n_workers, sizeof *p->threads);
        p->workers = qhx_calloc((size_t)n_workers, sizeof *p->workers);
        if (!p->threads || !p->workers) {
            qhx_pool_free(p);
            return qhx_fail(err, QHX_E_NOMEM, "thread pool: out of memory");
        }
    }
    for (int i = 0; i < n_workers; i++) {
        p->workers[i].pool = p;
        p->workers[i].index = i + 1;
        int rc = pthread_create(&p->threads[i], NULL, worker_main, &p->workers[i]);
        if (rc != 0) {
            qhx_pool_free(p);
            return qhx_fail(err, QHX_E_INTERNAL, "thread pool: cannot start thread %d of %d: %s", i + 1,
                            n_threads, strerror(rc));
        }
        p->n_started++;
    }
    *out = p;
    return QHX_OK;
}

void qhx_pool_free(qhx_pool *p) {
    if (!p) return;
    atomic_store(&p->shutdown, 1);
    wake_all(p);
    for (int i = 0; i < p->n_started; i++) pthread_join(p->threads[i], NULL);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    qhx_free(p->threads);
    qhx_free(p->workers);
    qhx_aligned_free(p);
}

int qhx_pool_n_threads(const qhx_pool *p) { return p ? p->n_threads : 1; }

static void run_serial(qhx_pool_fn fn, void *ctx, int64_t n_tasks) {
    for (int64_t t = 0; t < n_tasks; t++) fn(ctx, t, 0);
}

/* One round of at most MAX_ROUND_TASKS tasks starting at `base`. */
static void run_round(qhx_pool *p, qhx_pool_fn fn, void *ctx, int64_t base, int64_t n) {
    atomic_store_explicit(&p->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&p->ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&p->n_tasks, n, memory_order_relaxed);
    atomic_store_explicit(&p->base, base, memory_order_relaxed);
    atomic_store_explicit(&p->n_done, 0, memory_order_relaxed);
    p->gen++;
    uint64_t w = ((uint64_t)p->gen << 32) | (uint64_t)n;
    atomic_store(&p->word, w); /* seq_cst: publishes the job, ordered before the n_sleeping read */
    if (atomic_load(&p->n_sleeping) > 0) wake_all(p);
    work(p, w, 0);
    int spins = 0;
    while (atomic_load_explicit(&p->n_done, memory_order_acquire) < n) {
        if (++spins % SPIN_YIELD_EVERY == 0 || spins > SPIN_LIMIT) sched_yield();
        else cpu_relax();
    }
}

void qhx_pool_run(qhx_pool *p, qhx_pool_fn fn, void *ctx, int64_t n_tasks) {
    if (n_tasks <= 0) return;
    if (!p || p->n_threads == 1 || n_tasks == 1) {
        run_serial(fn, ctx, n_tasks);
        return;
    }
    int expected = 0;
    if (!atomic_compare_exchange_strong(&p->busy, &expected, 1)) {
        run_serial(fn, ctx, n_tasks); /* nested or concurrent call */
        return;
    }
    for (int64_t base = 0; base < n_tasks; base += MAX_ROUND_TASKS) {
        int64_t n = n_tasks - base < MAX_ROUND_TASKS ? n_tasks - base : MAX_ROUND_TASKS;
        run_round(p, fn, ctx, base, n);
    }
    atomic_store_explicit(&p->busy, 0, memory_order_release);
}

void qhx_pool_split(int64_t n, int64_t n_parts, int64_t part, int64_t align, int64_t *begin,
                    int64_t *end) {
    *begin = *end = 0;
    if (n <= 0 || n_parts < 1 || part < 0 || part >= n_parts) return;
    if (align < 1) align = 1;
    int64_t n_blocks = n / align + (n % align != 0);
    int64_t per = n_blocks / n_parts, extra = n_blocks % n_parts;
    int64_t b0 = part * per + (part < extra ? part : extra);
    int64_t nb = per + (part < extra);
    /* b0 * align can exceed INT64_MAX only past n; clamp in unsigned arithmetic. */
    uint64_t lo = (uint64_t)b0 * (uint64_t)align, hi = (uint64_t)(b0 + nb) * (uint64_t)align;
    *begin = lo > (uint64_t)n ? n : (int64_t)lo;
    *end = hi > (uint64_t)n ? n : (int64_t)hi;
}
