// ctest-labels: unit;tsan
/* Thread pool: every task runs exactly once at 1..4 threads, results do not depend on the
 * thread count, runs are cheap (many tiny runs), nesting and NULL pools run serially, and
 * pools can be created and freed repeatedly. Also run under TSan (label tsan). */
#include "core/alloc.h"
#include "core/pool.h"
#include "core/time.h"
#include "t.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SLOW_BUILD 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define SLOW_BUILD 1
#endif
#endif
#ifndef SLOW_BUILD
#define SLOW_BUILD 0
#endif

/* ---- every task once, thread indices in range ---- */
struct count_ctx {
    _Atomic int *hits;     /* [n_tasks] */
    int n_threads;
    _Atomic int bad_thread;
};

static void count_task(void *vctx, int64_t task, int thread_index) {
    struct count_ctx *c = vctx;
    atomic_fetch_add_explicit(&c->hits[task], 1, memory_order_relaxed);
    if (thread_index < 0 || thread_index >= c->n_threads) atomic_store(&c->bad_thread, 1);
}

static void test_each_task_once(void) {
    for (int nt = 1; nt <= 4; nt++) {
        qhx_pool *p;
        qhx_error err;
        CHECK_EQ(qhx_pool_create(nt, &p, &err), QHX_OK);
        CHECK_EQ(qhx_pool_n_threads(p), nt);
        const int64_t sizes[] = {1, 2, 3, 7, 64, 1000, 4097};
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            int64_t n = sizes[s];
            struct count_ctx c = {calloc((size_t)n, sizeof(_Atomic int)), nt, 0};
            for (int rep = 0; rep < 3; rep++) qhx_pool_run(p, count_task, &c, n);
            int wrong = 0;
            for (int64_t i = 0; i < n; i++) wrong += atomic_load(&c.hits[i]) != 3;
            CHECK_EQ(wrong, 0);
            CHECK_EQ(atomic_load(&c.bad_thread), 0);
            free((void *)c.hits);
        }
        qhx_pool_run(p, count_task, NULL, 0); /* no tasks: fn never called */
        qhx_pool_run(p, count_task, NULL, -5);
        qhx_pool_free(p);
    }
}

/* ---- results independent of thread count: fixed split, per-task partial sums ---- */
struct sum_ctx {
    const float *x;
    int64_t n;
    int64_t n_parts;
    double *partial; /* [n_parts], one per task, reduced in task order afterwards */
    float *y;        /* y[i] = x[i] * x[i] + 1, row-parallel */
};

static void sum_task(void *vctx, int64_t task, int thread_index) {
    (void)thread_index;
    struct sum_ctx *c = vctx;
    int64_t b, e;
    qhx_pool_split(c->n, c->n_parts, task, 16, &b, &e);
    float acc = 0.0f; /* float on purpose: the order of additions matters bitwise */
    for (int64_t i = b; i < e; i++) {
        acc += c->x[i] * 0.37f;
        c->y[i] = c->x[i] * c->x[i] + 1.0f;
    }
    c->partial[task] = acc;
}

static void run_sum(qhx_pool *p, const float *x, int64_t n, double *total, float *y) {
    struct sum_ctx c = {x, n, 37, calloc(37, sizeof(double)), y};
    qhx_pool_run(p, sum_task, &c, c.n_parts);
    double t = 0;
    for (int64_t i = 0; i < c.n_parts; i++) t += c.partial[i];
    *total = t;
    free(c.partial);
}

static void test_reproducible(void) {
    const int64_t n = 100003;
    float *x = malloc(n * sizeof *x);
    uint32_t s = 12345;
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)(s >> 8) / 16777216.0f - 0.5f;
    }
    double ref_total;
    float *ref_y = malloc(n * sizeof *ref_y), *y = malloc(n * sizeof *y);
    run_sum(NULL, x, n, &ref_total, ref_y);
    for (int nt = 1; nt <= 4; nt++) {
        qhx_pool *p;
        CHECK_EQ(qhx_pool_create(nt, &p, NULL), QHX_OK);
        for (int rep = 0; rep < 5; rep++) {
            double total;
            run_sum(p, x, n, &total, y);
            CHECK(total == ref_total);
            CHECK(memcmp(y, ref_y, n * sizeof *y) == 0);
        }
        qhx_pool_free(p);
    }
    free(x);
    free(y);
    free(ref_y);
}

/* ---- many tiny runs: the barrier really waits, and runs are cheap ---- */
struct tiny_ctx {
    int64_t *slots;         /* [4] plain writes: the barrier must publish them to the caller */
    _Atomic int64_t by_workers; /* tasks run by threads other than the caller */
};

static void tiny_task(void *vctx, int64_t task, int thread_index) {
    struct tiny_ctx *c = vctx;
    c->slots[task] += task + 1;
    if (thread_index != 0) atomic_fetch_add_explicit(&c->by_workers, 1, memory_order_relaxed);
}

static void test_many_tiny_runs(void) {
    const int runs = SLOW_BUILD ? 20000 : 100000;
    for (int nt = 2; nt <= 4; nt += 2) {
        qhx_pool *p;
        CHECK_EQ(qhx_pool_create(nt, &p, NULL), QHX_OK);
        int64_t slots[4] = {0};
        struct tiny_ctx c = {slots, 0};
        uint64_t t0 = qhx_time_ns();
        int wrong = 0;
        for (int r = 0; r < runs; r++) {
            qhx_pool_run(p, tiny_task, &c, 4);
            /* the caller reads every task's write right after the run: no lost update */
            if (slots[3] != 4 * (int64_t)(r + 1) || slots[0] != r + 1) wrong++;
        }
        double us = (double)(qhx_time_ns() - t0) / 1e3 / runs;
        CHECK_EQ(wrong, 0);
        fprintf(stderr, "pool: %d threads, %d runs of 4 tasks: %.2f us per run, %lld tasks run by workers\n",
                nt, runs, us, (long long)atomic_load(&c.by_workers));
        qhx_pool_free(p);
    }
}

/* ---- runs whose tasks take a little while, so workers take part; plain (non-atomic) writes
 * by every task must be visible to the caller after each run ---- */
struct busy_ctx {
    int64_t *out;  /* [n_tasks] */
    int64_t round;
    _Atomic int64_t by_workers;
};

static void busy_task(void *vctx, int64_t task, int thread_index) {
    struct busy_ctx *c = vctx;
    volatile int64_t acc = 0;
    for (int i = 0; i < 300; i++) acc += i ^ task;
    c->out[task] = c->round * 1000 + task + (acc & 0);
    if (thread_index != 0) atomic_fetch_add_explicit(&c->by_workers, 1, memory_order_relaxed);
}

static void test_busy_runs(void) {
    const int runs = SLOW_BUILD ? 2000 : 20000;
    qhx_pool *p;
    CHECK_EQ(qhx_pool_create(4, &p, NULL), QHX_OK);
    int64_t out[16];
    struct busy_ctx c = {out, 0, 0};
    int wrong = 0;
    uint64_t t0 = qhx_time_ns();
    for (int r = 0; r < runs; r++) {
        c.round = r;
        qhx_pool_run(p, busy_task, &c, 16);
        for (int64_t t = 0; t < 16; t++) wrong += out[t] != r * 1000 + t;
    }
    CHECK_EQ(wrong, 0);
    fprintf(stderr, "pool: 4 threads, %d runs of 16 small tasks: %.2f us per run, %lld of %d tasks run by workers\n",
            runs, (double)(qhx_time_ns() - t0) / 1e3 / runs, (long long)atomic_load(&c.by_workers), runs * 16);
    qhx_pool_free(p);
}

/* ---- run sizes that change from run to run, each job on the stack of a fresh call: a worker
 * still holding the previous run's claim word must not claim a task of the next run while the
 * caller is writing that run's job (an earlier claim scheme compared the word's task index with
 * the next run's larger task count and ran a task twice, or after the caller had returned) ---- */
struct resize_job {
    uint64_t tag;            /* round * 2654435761 + n: the job as the caller wrote it */
    int64_t round, n;
    _Atomic int *hits;       /* [n] */
    _Atomic int *bad;
};

static void resize_task(void *vctx, int64_t task, int thread_index) {
    struct resize_job *j = vctx;
    (void)thread_index;
    volatile int spin = 0;
    for (int i = 0; i < (int)(task % 3) * 40; i++) spin += i;
    if (task < 0 || task >= j->n || j->tag != (uint64_t)j->round * 2654435761u + (uint64_t)j->n) {
        atomic_store(j->bad, 1);
        return;
    }
    atomic_fetch_add_explicit(&j->hits[task], 1, memory_order_relaxed);
}

static int resize_run(qhx_pool *p, int64_t round, int64_t n, _Atomic int *hits, _Atomic int *bad) {
    struct resize_job j = {(uint64_t)round * 2654435761u + (uint64_t)n, round, n, hits, bad};
    for (int64_t t = 0; t < n; t++) atomic_store_explicit(&hits[t], 0, memory_order_relaxed);
    qhx_pool_run(p, resize_task, &j, n);
    int wrong = 0;
    for (int64_t t = 0; t < n; t++) wrong += atomic_load_explicit(&hits[t], memory_order_relaxed) != 1;
    j.tag = 0; /* what a late reader of this job would see */
    j.n = 0;
    return wrong;
}

static void test_changing_run_sizes(void) {
    const int runs = SLOW_BUILD ? 20000 : 200000;
    static const int64_t sizes[] = {2, 17, 3, 64, 2, 5, 33};
    _Atomic int hits[64], bad = 0;
    for (int nt = 2; nt <= 3; nt++) {
        qhx_pool *p;
        CHECK_EQ(qhx_pool_create(nt, &p, NULL), QHX_OK);
        int wrong = 0;
        for (int r = 0; r < runs; r++) wrong += resize_run(p, r, sizes[r % 7], hits, &bad);
        CHECK_EQ(wrong, 0);
        CHECK_EQ(atomic_load(&bad), 0);
        qhx_pool_free(p);
    }
}

/* ---- workers that went to sleep wake up for the next run ---- */
static void test_wake_after_idle(void) {
    qhx_pool *p;
    CHECK_EQ(qhx_pool_create(3, &p, NULL), QHX_OK);
    for (int rep = 0; rep < 3; rep++) {
        struct timespec ts = {0, 20 * 1000 * 1000}; /* long enough for workers to park */
        nanosleep(&ts, NULL);
        int64_t n = 64;
        struct count_ctx c = {calloc((size_t)n, sizeof(_Atomic int)), 3, 0};
        qhx_pool_run(p, count_task, &c, n);
        int wrong = 0;
        for (int64_t i = 0; i < n; i++) wrong += atomic_load(&c.hits[i]) != 1;
        CHECK_EQ(wrong, 0);
        free((void *)c.hits);
    }
    qhx_pool_free(p);
}

/* ---- nested calls run serially instead of deadlocking ---- */
struct nest_ctx {
    qhx_pool *pool;
    _Atomic int inner_hits;
};

static void inner_task(void *vctx, int64_t task, int thread_index) {
    (void)task;
    (void)thread_index;
    struct nest_ctx *c = vctx;
    atomic_fetch_add(&c->inner_hits, 1);
}

static void outer_task(void *vctx, int64_t task, int thread_index) {
    (void)task;
    (void)thread_index;
    struct nest_ctx *c = vctx;
    qhx_pool_run(c->pool, inner_task, c, 5);
}

static void test_nested(void) {
    qhx_pool *p;
    CHECK_EQ(qhx_pool_create(3, &p, NULL), QHX_OK);
    struct nest_ctx c = {p, 0};
    qhx_pool_run(p, outer_task, &c, 8);
    CHECK_EQ(atomic_load(&c.inner_hits), 40);
    qhx_pool_free(p);
}

/* ---- NULL pool, create/free churn, bad arguments, allocation failure ---- */
static void test_lifecycle(void) {
    CHECK_EQ(qhx_pool_n_threads(NULL), 1);
    int64_t n = 10;
    struct count_ctx c = {calloc((size_t)n, sizeof(_Atomic int)), 1, 0};
    qhx_pool_run(NULL, count_task, &c, n);
    for (int64_t i = 0; i < n; i++) CHECK_EQ(atomic_load(&c.hits[i]), 1);
    free((void *)c.hits);
    qhx_pool_free(NULL);

    const int churn = SLOW_BUILD ? 50 : 300;
    for (int i = 0; i < churn; i++) {
        qhx_pool *p;
        CHECK_EQ(qhx_pool_create(1 + i % 4, &p, NULL), QHX_OK);
        if (i % 2) {
            int64_t slots[4] = {0};
            struct tiny_ctx t = {slots, 0};
            qhx_pool_run(p, tiny_task, &t, 4);
            CHECK_EQ(slots[2], 3);
        }
        qhx_pool_free(p); /* right after create, or after a run */
    }

    qhx_pool *p = (qhx_pool *)1;
    qhx_error err;
    CHECK_EQ(qhx_pool_create(-1, &p, &err), QHX_E_ARG);
    CHECK(p == NULL);
    CHECK_CONTAINS(err.msg, "-1 threads");
    CHECK_EQ(qhx_pool_create(QHX_POOL_MAX_THREADS + 1, &p, &err), QHX_E_ARG);
    CHECK_EQ(qhx_pool_create(0, &p, &err), QHX_OK); /* default: one per physical core */
    CHECK(qhx_pool_n_threads(p) >= 1);
    qhx_pool_free(p);

    for (int64_t k = 0; k < 4; k++) { /* fail each allocation of create in turn */
        qhx_alloc_fail_after(k);
        qhx_status rc = qhx_pool_create(3, &p, &err);
        int fired = qhx_alloc_failed();
        qhx_alloc_fail_after(-1);
        if (rc == QHX_OK) {
            CHECK(!fired);
            qhx_pool_free(p);
            break;
        }
        CHECK_EQ(rc, QHX_E_NOMEM);
        CHECK(p == NULL);
    }
}

/* ---- the split helper ---- */
static void test_split(void) {
    int64_t b, e;
    /* 100 rows, 16-row blocks (7 blocks) over 3 parts: 3, 2, 2 blocks */
    qhx_pool_split(100, 3, 0, 16, &b, &e);
    CHECK(b == 0 && e == 48);
    qhx_pool_split(100, 3, 1, 16, &b, &e);
    CHECK(b == 48 && e == 80);
    qhx_pool_split(100, 3, 2, 16, &b, &e);
    CHECK(b == 80 && e == 100);
    /* more parts than blocks: trailing parts empty */
    qhx_pool_split(20, 4, 1, 16, &b, &e);
    CHECK(b == 16 && e == 20);
    qhx_pool_split(20, 4, 3, 16, &b, &e);
    CHECK(b == 20 && e == 20);
    /* bad arguments: empty */
    qhx_pool_split(10, 0, 0, 1, &b, &e);
    CHECK(b == 0 && e == 0);
    qhx_pool_split(10, 2, 2, 1, &b, &e);
    CHECK(b == 0 && e == 0);
    qhx_pool_split(-1, 2, 0, 1, &b, &e);
    CHECK(b == 0 && e == 0);
    qhx_pool_split(10, 2, 0, 0, &b, &e); /* align < 1 acts as 1 */
    CHECK(b == 0 && e == 5);
    /* exhaustive: partitions [0, n) exactly, boundaries aligned, sizes balanced */
    int bad = 0;
    for (int64_t n = 0; n < 200; n += 7)
        for (int64_t parts = 1; parts <= 9; parts++)
            for (int64_t align = 1; align <= 32; align *= 2) {
                int64_t prev = 0, min_blocks = INT64_MAX, max_blocks = 0;
                for (int64_t t = 0; t < parts; t++) {
                    qhx_pool_split(n, parts, t, align, &b, &e);
                    if (b != prev || e < b) bad++;
                    if (t < parts - 1 && e % align != 0 && e != n) bad++;
                    int64_t nb = (e - b + align - 1) / align;
                    if (nb < min_blocks) min_blocks = nb;
                    if (nb > max_blocks) max_blocks = nb;
                    prev = e;
                }
                if (prev != n) bad++;
                if (max_blocks - min_blocks > 1) bad++;
            }
    CHECK_EQ(bad, 0);
    qhx_pool_split(INT64_MAX, 3, 2, 1 << 20, &b, &e); /* no overflow near the top */
    CHECK(e == INT64_MAX && b < e);
}

int main(void) {
    test_split();
    test_each_task_once();
    test_reproducible();
    test_many_tiny_runs();
    test_busy_runs();
    test_changing_run_sizes();
    test_wake_after_idle();
    test_nested();
    test_lifecycle();
    return t_done("test_pool");
}
