/* bench_kernels: speed of the SIMD matvec (decode) and matmul (prefill) variants at Qwen3.5-2B
 * shapes, next to a streaming-read bandwidth probe on the same machine.
 *
 *   qhx_bench_kernels [--threads N] [--reps N] [--isa avx2|avx512|neon] [--no-lmhead] [--quick]
 *                     [--matmul-only] [--runtime-split] [--only NAME,NAME...]
 *
 * matvec: GB/s = weight bytes / time. Each rep walks enough copies of the matrix (>= 512 MiB)
 * that the weights come from DRAM, as in decode where the other layers evict them.
 * matmul: GFLOP/s = 2 * rows * cols * n / time, one matrix (blocking keeps it in cache); for the
 * int8-activation kernels the same count ("GFLOP/s-equivalent": integer multiply-adds count as
 * f32 ones). Threads take one row range each, or with --runtime-split the pieces the runtime's
 * linear layers use (models/par.c: rows / (8 threads), multiples of 16, claimed in turn), which
 * makes each call smaller and is what prefill actually runs.
 * Every figure is the median of the reps; threads split rows and meet at a barrier per call, as
 * the runtime's pool does. The probe sums a 1 GiB buffer (SSE2 64-bit adds, baseline x86-64).
 *
 * Two columns per figure: "wall" divides by elapsed time; "cpu" divides by the process CPU time
 * per thread (CPU seconds / threads), i.e. the speed while the threads actually run. On a
 * machine shared with other work the wall figure measures the neighbours too; "cpu" is the one
 * to compare kernels with (for memory-bound runs it still depends on their memory traffic). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/fp16.h"
#include "kernels/kernels.h"

#include "core/cpu.h"
#include "kernels/quant.h"
#if defined(QHX_HAVE_X86)
#include "kernels/x86/ops_x86.h"
#include "kernels/x86/x86.h"
#elif defined(QHX_HAVE_ARM) && defined(__aarch64__)
#include "kernels/arm/arm.h"
#endif

#define MAX_THREADS 64

static double clock_s(clockid_t c) {
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Elapsed and CPU time of a timed region. */
typedef struct stamp { double wall, cpu; } stamp;
static stamp stamp_now(void) { return (stamp){clock_s(CLOCK_MONOTONIC), clock_s(CLOCK_PROCESS_CPUTIME_ID)}; }

/* Rates for `work` units done since s0 by nt threads: r[0] per wall second, r[1] per CPU second
 * of each thread. */
static void rates(stamp s0, double work, int nt, double *wall, double *cpu) {
    stamp s1 = stamp_now();
    *wall = work / (s1.wall - s0.wall);
    *cpu = work / ((s1.cpu - s0.cpu) / nt);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Bytes a matrix of rows x cols takes (Q4: codes plus one f32 scale per group of 32). */
static size_t wbytes(qhx_wfmt f, int64_t rows, int64_t cols) {
    size_t n = (size_t)(rows * cols);
    switch (f) {
    case QHX_W_F32: return 4 * n;
    case QHX_W_F16: case QHX_W_BF16: return 2 * n;
    case QHX_W_Q8: return n + 4 * (size_t)rows;
    case QHX_W_Q4A: return n / 2 + n / 16 + (size_t)(rows * ((cols / 32 + 7) / 8)) * 2;
    default: return n / 2 + n / 32 * 4;
    }
}
static const char *fmt_name(qhx_wfmt f) {
    static const char *n[] = {"f32", "f16", "bf16", "q8", "q4", "q6", "q4a"};
    return f < QHX_W_COUNT ? n[f] : "?";
}

// ---- a tiny fork-join team: each call runs fn(arg, thread, nthreads) on every thread -------

typedef void (*team_fn)(void *arg, int ti, int nt);
typedef struct team {
    int nt;
    pthread_t th[MAX_THREADS];
    pthread_barrier_t start, done;
    team_fn fn;
    void *arg;
    int quit;
} team;
typedef struct team_slot { team *tm; int ti; } team_slot;
static team_slot slots[MAX_THREADS];

static void *team_worker(void *p) {
    team_slot *s = p;
    for (;;) {
        pthread_barrier_wait(&s->tm->start);
        if (s->tm->quit) return NULL;
        s->tm->fn(s->tm->arg, s->ti, s->tm->nt);
        pthread_barrier_wait(&s->tm->done);
    }
}
static void team_init(team *tm, int nt) {
    memset(tm, 0, sizeof *tm);
    tm->nt = nt;
    pthread_barrier_init(&tm->start, NULL, (unsigned)nt);
    pthread_barrier_init(&tm->done, NULL, (unsigned)nt);
    for (int i = 1; i < nt; i++) {
        slots[i] = (team_slot){tm, i};
        pthread_create(&tm->th[i], NULL, team_worker, &slots[i]);
    }
}
static void team_run(team *tm, team_fn fn, void *arg) {
    tm->fn = fn;
    tm->arg = arg;
    if (tm->nt > 1) pthread_barrier_wait(&tm->start);
    fn(arg, 0, tm->nt);
    if (tm->nt > 1) pthread_barrier_wait(&tm->done);
}
static void team_free(team *tm) {
    tm->quit = 1;
    if (tm->nt > 1) pthread_barrier_wait(&tm->start);
    for (int i = 1; i < tm->nt; i++) pthread_join(tm->th[i], NULL);
    pthread_barrier_destroy(&tm->start);
    pthread_barrier_destroy(&tm->done);
}

// ---- bandwidth probe ---------------------------------------------------------------------------

typedef struct probe_job {
    const uint8_t *buf;
    size_t n;
    qhx_kernels k;              /* read_fold: the best streaming read the CPU has */
    uint64_t sum[MAX_THREADS];  /* keeps the loads */
} probe_job;

static void probe_fn(void *arg, int ti, int nt) {
    probe_job *p = arg;
    size_t a = p->n * (size_t)ti / (size_t)nt, b = p->n * (size_t)(ti + 1) / (size_t)nt;
    a &= ~(size_t)127;
    b = ti == nt - 1 ? p->n : b & ~(size_t)127;
    p->sum[ti] ^= p->k.read_fold(p->buf + a, b - a);
}

/* A figure: medians of the wall and cpu rates. */
typedef struct fig { double wall, cpu; } fig;
static fig fig_of(double *w, double *c, int reps) { return (fig){median(w, reps), median(c, reps)}; }

static fig bandwidth_probe(team *tm, int reps) {
    size_t bytes = (size_t)1 << 30;
    uint8_t *buf = aligned_alloc(64, bytes);
    if (!buf) return (fig){0, 0};
    memset(buf, 1, bytes);
    probe_job p = {.buf = buf, .n = bytes};
    qhx_kern_select(QHX_ISA_BEST, &p.k);
    double w[64], c[64];
    team_run(tm, probe_fn, &p); /* warm-up */
    for (int r = 0; r < reps; r++) {
        stamp s0 = stamp_now();
        team_run(tm, probe_fn, &p);
        rates(s0, (double)bytes / 1e9, tm->nt, &w[r], &c[r]);
    }
    free(buf);
    return fig_of(w, c, reps);
}

// ---- matvec and matmul ------------------------------------------------------------------------

typedef struct job {
    qhx_matvec_fn mv;
    qhx_matmul_fn mm;
    const qhx_weight *w; /* ncopies weights */
    int ncopies;
    const float *x;
    float *y;
    int64_t n;
    int64_t piece;        /* matmul: rows per piece, 0 = one range per thread */
} job;

static void rows_of(int64_t rows, int ti, int nt, int64_t *r0, int64_t *r1) {
    /* split on multiples of 16 rows so every thread runs whole register blocks */
    int64_t blocks = (rows + 15) / 16;
    *r0 = blocks * ti / nt * 16;
    *r1 = blocks * (ti + 1) / nt * 16;
    if (*r0 > rows) *r0 = rows;
    if (*r1 > rows) *r1 = rows;
}

static void matvec_fn(void *arg, int ti, int nt) {
    job *j = arg;
    int64_t r0, r1;
    rows_of(j->w[0].rows, ti, nt, &r0, &r1);
    for (int c = 0; c < j->ncopies; c++) j->mv(&j->w[c], j->x, j->y, r0, r1);
}

static void matmul_fn(void *arg, int ti, int nt) {
    job *j = arg;
    const int64_t rows = j->w[0].rows;
    if (j->piece > 0) { /* pieces dealt round-robin: the same split as a pool with no stragglers */
        for (int64_t r0 = ti * j->piece; r0 < rows; r0 += nt * j->piece)
            j->mm(&j->w[0], j->x, j->w[0].cols, j->y, rows, j->n, r0, r0 + j->piece < rows ? r0 + j->piece : rows);
        return;
    }
    int64_t r0, r1;
    rows_of(rows, ti, nt, &r0, &r1);
    j->mm(&j->w[0], j->x, j->w[0].cols, j->y, rows, j->n, r0, r1);
}

/* Rows per piece as models/par.c cuts a linear layer over nt threads. */
static int64_t runtime_piece(int64_t rows, int nt) {
    if (nt <= 1) return rows;
    int64_t per = rows / (8 * nt);
    return per < 16 ? 16 : per - per % 16;
}

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint32_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 20);
}

static void *make_data(qhx_wfmt fmt, size_t n) {
    size_t es = fmt == QHX_W_F32 ? 4 : fmt == QHX_W_F16 || fmt == QHX_W_BF16 ? 2 : 1;
    if (fmt == QHX_W_Q4 || fmt == QHX_W_Q4A) n /= 2;
    void *d = malloc(n * es);
    if (!d) return NULL;
    for (size_t i = 0; i < n; i++) {
        float v = (float)(rnd() % 2001) * 1e-3f - 1.0f;
        switch (fmt) {
        case QHX_W_F32: ((float *)d)[i] = v; break;
        case QHX_W_F16: ((uint16_t *)d)[i] = qhx_f32_to_f16(v); break;
        case QHX_W_BF16: ((uint16_t *)d)[i] = qhx_f32_to_bf16(v); break;
        default: ((int8_t *)d)[i] = (int8_t)(rnd() % 255 - 127); break;
        }
    }
    return d;
}

/* ncopies matrices sharing one scale array (Q4's scales are 1/8 of its bytes and counted in
 * its GB/s, but read from cache after the first copy: a small flattery, noted in the output). */
static int make_weights(qhx_weight *w, int ncopies, qhx_wfmt fmt, int64_t rows, int64_t cols) {
    size_t ns = fmt == QHX_W_Q4 ? (size_t)(rows * cols / QHX_Q4_GROUP) : (size_t)rows;
    if (fmt == QHX_W_Q4A) ns = (size_t)(rows * qhx_q4a_row_supers(cols));
    float *scales = malloc(ns * sizeof(float));
    uint16_t *gscales = malloc(ns * sizeof(uint16_t));
    uint8_t *sub = fmt == QHX_W_Q4A ? malloc((size_t)(rows * qhx_q4a_row_sub_bytes(cols))) : NULL;
    if (!scales || !gscales || (fmt == QHX_W_Q4A && !sub)) {
        free(scales);
        free(gscales);
        free(sub);
        return -1;
    }
    for (size_t r = 0; r < ns; r++) scales[r] = 0.01f, gscales[r] = qhx_f32_to_f16(0.01f);
    for (int64_t i = 0; sub && i < rows * qhx_q4a_row_sub_bytes(cols); i++) sub[i] = (uint8_t)(1 + rnd() % 255);
    for (int c = 0; c < ncopies; c++) {
        w[c] = (qhx_weight){.fmt = fmt, .rows = rows, .cols = cols, .scales = scales, .gscales = gscales, .sub = sub,
                            .group = fmt == QHX_W_Q4 || fmt == QHX_W_Q4A ? QHX_Q4_GROUP : 0};
        w[c].data = make_data(fmt, (size_t)(rows * cols));
        if (!w[c].data) {
            for (int i = 0; i < c; i++) free((void *)w[i].data);
            free(scales);
            free(gscales);
            return -1;
        }
    }
    return 0;
}
static void free_weights(qhx_weight *w, int ncopies) {
    free((void *)w[0].scales);
    free((void *)w[0].gscales);
    free((void *)w[0].sub);
    for (int c = 0; c < ncopies; c++) free((void *)w[c].data);
}

typedef struct variant {
    const char *isa;
    qhx_wfmt fmt;
    qhx_matvec_fn mv;
    qhx_matmul_fn mm;
    const char *label; /* instead of the format name */
} variant;
static const char *vname(const variant *v) { return v->label ? v->label : fmt_name(v->fmt); }

static fig bench_matvec(team *tm, const variant *v, int64_t rows, int64_t cols, int reps) {
    size_t bytes = wbytes(v->fmt, rows, cols);
    int ncopies = (int)(((size_t)512 << 20) / bytes) + 1;
    if (ncopies > 64) ncopies = 64;
    qhx_weight w[64];
    if (make_weights(w, ncopies, v->fmt, rows, cols) != 0) return (fig){-1, -1};
    float *x = malloc((size_t)cols * sizeof(float)), *y = malloc((size_t)rows * sizeof(float));
    for (int64_t c = 0; c < cols; c++) x[c] = (float)(rnd() % 2001) * 1e-3f - 1.0f;
    job j = {.mv = v->mv, .w = w, .ncopies = ncopies, .x = x, .y = y};
    double wr[64], cr[64];
    team_run(tm, matvec_fn, &j);
    for (int r = 0; r < reps; r++) {
        stamp s0 = stamp_now();
        team_run(tm, matvec_fn, &j);
        rates(s0, (double)bytes * ncopies / 1e9, tm->nt, &wr[r], &cr[r]);
    }
    free(x), free(y);
    free_weights(w, ncopies);
    return fig_of(wr, cr, reps);
}

/* Compute ceiling: a 256 x 2048 matrix that stays in L2, 1 thread; rate in G weights/s. */
static fig bench_matvec_cached(const variant *v, int reps) {
    const int64_t rows = 256, cols = 2048, calls = 200;
    qhx_weight w[1];
    if (make_weights(w, 1, v->fmt, rows, cols) != 0) return (fig){-1, -1};
    float *x = malloc((size_t)cols * sizeof(float)), *y = malloc((size_t)rows * sizeof(float));
    for (int64_t c = 0; c < cols; c++) x[c] = (float)(rnd() % 2001) * 1e-3f - 1.0f;
    double wr[64], cr[64];
    v->mv(w, x, y, 0, rows);
    for (int r = 0; r < reps; r++) {
        stamp s0 = stamp_now();
        for (int64_t i = 0; i < calls; i++) v->mv(w, x, y, 0, rows);
        rates(s0, (double)(rows * cols * calls) / 1e9, 1, &wr[r], &cr[r]);
    }
    free(x), free(y);
    free_weights(w, 1);
    return fig_of(wr, cr, reps);
}

static fig bench_matmul(team *tm, const variant *v, int64_t rows, int64_t cols, int64_t n, int reps, int split) {
    qhx_weight w[1];
    if (make_weights(w, 1, v->fmt, rows, cols) != 0) return (fig){-1, -1};
    float *X = malloc((size_t)(n * cols) * sizeof(float)), *Y = malloc((size_t)(n * rows) * sizeof(float));
    for (int64_t i = 0; i < n * cols; i++) X[i] = (float)(rnd() % 2001) * 1e-3f - 1.0f;
    job j = {.mm = v->mm, .w = w, .ncopies = 1, .x = X, .y = Y, .n = n,
             .piece = split ? runtime_piece(rows, tm->nt) : 0};
    double wr[64], cr[64];
    team_run(tm, matmul_fn, &j);
    for (int r = 0; r < reps; r++) {
        stamp s0 = stamp_now();
        team_run(tm, matmul_fn, &j);
        rates(s0, 2.0 * (double)rows * (double)cols * (double)n / 1e9, tm->nt, &wr[r], &cr[r]);
    }
    free(X), free(Y);
    free_weights(w, 1);
    return fig_of(wr, cr, reps);
}

int main(int argc, char **argv) {
    int max_threads = 2, reps = 7, lmhead = 1, quick = 0, matmul_only = 0, split = 0;
    const char *want_isa = NULL, *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) max_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--isa") && i + 1 < argc) want_isa = argv[++i];
        else if (!strcmp(argv[i], "--no-lmhead")) lmhead = 0;
        else if (!strcmp(argv[i], "--quick")) quick = 1, reps = 3;
        else if (!strcmp(argv[i], "--matmul-only")) matmul_only = 1;
        else if (!strcmp(argv[i], "--runtime-split")) split = 1;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--threads N] [--reps N] [--isa avx2|avx512|neon] [--no-lmhead] [--quick]\n"
                            "       [--matmul-only] [--runtime-split] [--only NAME,NAME...]\n", argv[0]);
            return 2;
        }
    }
    if (max_threads < 1) max_threads = 1;
    if (max_threads > MAX_THREADS) max_threads = MAX_THREADS;
    if (reps < 1) reps = 1;
    if (reps > 64) reps = 64;

    variant vs[40];
    int nv = 0;
#if defined(QHX_HAVE_X86)
    qhx_cpu_info cpu;
    qhx_cpu_detect(&cpu);
#define ADD(isa, f, F) vs[nv++] = (variant){#isa, F, qhx_k_matvec_##f##_##isa, qhx_k_matmul_##f##_##isa, NULL}
    if ((cpu.features & QHX_CPU_GROUP_AVX512) == QHX_CPU_GROUP_AVX512 &&
        (!want_isa || !strcmp(want_isa, "avx512"))) {
        ADD(avx512, f32, QHX_W_F32);
        ADD(avx512, f16, QHX_W_F16);
        ADD(avx512, bf16, QHX_W_BF16);
        ADD(avx512, q8, QHX_W_Q8);
        ADD(avx512, q4, QHX_W_Q4);
        if (cpu.features & QHX_CPU_AVX512_VNNI) {
            vs[nv++] = (variant){"avx512", QHX_W_Q4, qhx_k_matvec_q4_i8x_avx512, qhx_k_matmul_q4_i8x_avx512, "q4i8x"};
            vs[nv++] = (variant){"avx512", QHX_W_Q8, NULL, qhx_k_matmul_q8_i8gemm_avx512, "q8i8gemm"};
            vs[nv++] = (variant){"avx512", QHX_W_Q4, NULL, qhx_k_matmul_q4_i8gemm_avx512, "q4i8gemm"};
            vs[nv++] = (variant){"avx512", QHX_W_Q4A, NULL, qhx_k_matmul_q4a_i8gemm_avx512, "q4ai8gemm"};
        }
    }
    if ((cpu.features & QHX_CPU_GROUP_AVX2) == QHX_CPU_GROUP_AVX2 && (!want_isa || !strcmp(want_isa, "avx2"))) {
        ADD(avx2, f32, QHX_W_F32);
        ADD(avx2, f16, QHX_W_F16);
        ADD(avx2, bf16, QHX_W_BF16);
        ADD(avx2, q8, QHX_W_Q8);
        ADD(avx2, q4, QHX_W_Q4);
        vs[nv++] = (variant){"avx2", QHX_W_Q4, qhx_k_matvec_q4_i8x_avx2, qhx_k_matmul_q4_i8x_avx2, "q4i8x"};
        vs[nv++] = (variant){"avx2", QHX_W_Q4A, qhx_k_matvec_q4a_i8x_avx2, qhx_k_matmul_q4a_i8x_avx2, "q4ai8x"};
        /* decode only: the int16-activation matvecs (Q8 default, Q4 under decode_math f32) */
        vs[nv++] = (variant){"avx2", QHX_W_Q8, qhx_k_matvec_q8_x16_avx2, NULL, "q8x16"};
        vs[nv++] = (variant){"avx2", QHX_W_Q4, qhx_k_matvec_q4_x16_avx2, NULL, "q4x16"};
        /* prefill only: the packed f32 GEMM installed today, and the int8-activation GEMM */
        vs[nv++] = (variant){"avx2", QHX_W_F16, NULL, qhx_k_matmul_f16_gemm_avx2, "f16gemm"};
        vs[nv++] = (variant){"avx2", QHX_W_BF16, NULL, qhx_k_matmul_bf16_gemm_avx2, "bf16gemm"};
        vs[nv++] = (variant){"avx2", QHX_W_Q8, NULL, qhx_k_matmul_q8_gemm_avx2, "q8gemm"};
        vs[nv++] = (variant){"avx2", QHX_W_Q4, NULL, qhx_k_matmul_q4_gemm_avx2, "q4gemm"};
        vs[nv++] = (variant){"avx2", QHX_W_Q8, NULL, qhx_k_matmul_q8_i8gemm_avx2, "q8i8gemm"};
        vs[nv++] = (variant){"avx2", QHX_W_Q4, NULL, qhx_k_matmul_q4_i8gemm_avx2, "q4i8gemm"};
        vs[nv++] = (variant){"avx2", QHX_W_Q4A, NULL, qhx_k_matmul_q4a_i8gemm_avx2, "q4ai8gemm"};
        if (cpu.features & QHX_CPU_AVX_VNNI) { /* the same kernels built for AVX-VNNI */
            vs[nv++] = (variant){"avxvnni", QHX_W_Q4, qhx_k_matvec_q4_i8x_avxvnni, qhx_k_matmul_q4_i8x_avxvnni, "q4i8x"};
            vs[nv++] = (variant){"avxvnni", QHX_W_Q4A, qhx_k_matvec_q4a_i8x_avxvnni, qhx_k_matmul_q4a_i8x_avxvnni,
                                 "q4ai8x"};
            vs[nv++] = (variant){"avxvnni", QHX_W_Q8, NULL, qhx_k_matmul_q8_i8gemm_avxvnni, "q8i8gemm"};
            vs[nv++] = (variant){"avxvnni", QHX_W_Q4, NULL, qhx_k_matmul_q4_i8gemm_avxvnni, "q4i8gemm"};
            vs[nv++] = (variant){"avxvnni", QHX_W_Q4A, NULL, qhx_k_matmul_q4a_i8gemm_avxvnni, "q4ai8gemm"};
        }
    }
#undef ADD
#elif defined(QHX_HAVE_ARM) && defined(__aarch64__)
    qhx_cpu_info cpu;
    qhx_cpu_detect(&cpu);
#define ADD(f, F) vs[nv++] = (variant){"neon", F, qhx_k_matvec_##f##_neon, qhx_k_matmul_##f##_neon, NULL}
    if ((cpu.features & QHX_CPU_NEON) && (!want_isa || !strcmp(want_isa, "neon"))) {
        ADD(f32, QHX_W_F32);
        ADD(f16, QHX_W_F16);
        ADD(bf16, QHX_W_BF16);
        ADD(q8, QHX_W_Q8);
        ADD(q4, QHX_W_Q4);
    }
#undef ADD
#endif
    if (only) { /* keep the variants named in the comma-separated list */
        int kept = 0;
        for (int i = 0; i < nv; i++) {
            const char *name = vname(&vs[i]), *at = strstr(only, name);
            size_t len = strlen(name);
            while (at && !((at == only || at[-1] == ',') && (at[len] == ',' || at[len] == '\0')))
                at = strstr(at + 1, name);
            if (at) vs[kept++] = vs[i];
        }
        nv = kept;
    }
    if (nv == 0) {
        fprintf(stderr, "no SIMD variant for this CPU%s%s\n", want_isa ? " and --isa " : "",
                want_isa ? want_isa : "");
        return 1;
    }

    static const int64_t mv_shapes[][2] = {{6144, 2048}, {2048, 6144}, {248320, 2048}};
    static const int64_t mm_ns[] = {64, 512};
    static const int64_t mm_shapes[][2] = {{6144, 2048}, {2048, 6144}}; /* gate/up, down */
    int n_mv = lmhead ? 3 : 2;

    printf("qhx_bench_kernels: medians of %d reps (lm-head %d), threads 1..%d; wall = per elapsed "
           "second, cpu = per CPU second of each thread\n", reps, reps > 3 ? 3 : reps, max_threads);
    fig probe[MAX_THREADS + 1];
    for (int nt = 1; nt <= max_threads && !matmul_only; nt++) {
        team tm;
        team_init(&tm, nt);
        probe[nt] = bandwidth_probe(&tm, reps);
        team_free(&tm);
        printf("read bandwidth probe (1 GiB, %d thr): wall %.1f GB/s, cpu %.1f GB/s\n", nt, probe[nt].wall,
               probe[nt].cpu);
    }
    if (!matmul_only) printf("\n%-7s %-6s %-14s %3s %21s\n", "matvec", "fmt", "in L2", "thr", "cpu G weights/s");
    for (int i = 0; i < nv; i++) {
        if (matmul_only || !vs[i].mv) continue;
        fig g = bench_matvec_cached(&vs[i], reps);
        printf("%-7s %-6s %-14s %3d %21.1f\n", vs[i].isa, vname(&vs[i]), "256x2048", 1, g.cpu);
    }
    if (!matmul_only)
        printf("\n%-7s %-6s %-14s %3s %8s %8s %7s\n", "matvec", "fmt", "shape", "thr", "wall GB/s", "cpu GB/s",
               "cpu/probe");
    for (int i = 0; i < nv; i++)
        for (int s = 0; s < n_mv && !matmul_only && vs[i].mv; s++)
            for (int nt = 1; nt <= max_threads; nt++) {
                team tm;
                team_init(&tm, nt);
                int r = s == 2 && reps > 3 ? 3 : reps;
                fig g = bench_matvec(&tm, &vs[i], mv_shapes[s][0], mv_shapes[s][1], r);
                team_free(&tm);
                char shape[32];
                snprintf(shape, sizeof shape, "%lldx%lld", (long long)mv_shapes[s][0],
                         (long long)mv_shapes[s][1]);
                if (g.wall < 0) printf("%-7s %-6s %-14s %3d   (out of memory)\n", vs[i].isa, vname(&vs[i]), shape, nt);
                else printf("%-7s %-6s %-14s %3d %9.1f %8.1f %6.0f%%\n", vs[i].isa, vname(&vs[i]), shape, nt,
                            g.wall, g.cpu, 100.0 * g.cpu / probe[nt].cpu);
                fflush(stdout);
            }
    printf("\n%-7s %-8s %-14s %4s %3s %12s %11s   (%s)\n", "matmul", "fmt", "shape", "n", "thr", "wall GFLOP/s",
           "cpu GFLOP/s", split ? "runtime split" : "one range per thread");
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < nv; i++)
            for (int in = 0; in < 2; in++)
                for (int nt = 1; nt <= max_threads; nt++) {
                    if (!vs[i].mm || (quick && (in == 1 || s == 1))) continue;
                    team tm;
                    team_init(&tm, nt);
                    fig g = bench_matmul(&tm, &vs[i], mm_shapes[s][0], mm_shapes[s][1], mm_ns[in], reps > 5 ? 5 : reps,
                                         split);
                    team_free(&tm);
                    char shape[32];
                    snprintf(shape, sizeof shape, "%lldx%lld", (long long)mm_shapes[s][0], (long long)mm_shapes[s][1]);
                    printf("%-7s %-8s %-14s %4lld %3d %12.1f %11.1f\n", vs[i].isa, vname(&vs[i]), shape,
                           (long long)mm_ns[in], nt, g.wall, g.cpu);
                    fflush(stdout);
                }
    return 0;
}
