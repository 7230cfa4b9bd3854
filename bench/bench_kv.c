/* bench_kv: the attention of one decoded token over a KV cache of n_ctx positions in every
 * attention layer of the 2B shapes, with an f32 and an f16 cache (kernels/attn.h: the f16 rows
 * are read in place where the table has an f16 block kernel, else widened per block of 256 keys
 * and run through the f32 one), one thread.
 *
 *   qhx_bench_kv [--ctx N] [--reps N] [--isa ref|avx2|avx512|best]
 *
 * Each layer has its own cache, so the rows come from DRAM as in decode. Figures: the median
 * time of one token's attention over all layers (wall and CPU), and the cache bytes it reads. */
#include "core/fp16.h"
#include "kernels/attn.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct shape {
    const char *name;
    int64_t layers, nkv, hd, nh;
} shape;

static const shape SHAPES[] = {
    {"Qwen3.5-2B (6 of 24 layers attend)", 6, 2, 256, 8},
    {"Qwen3-VL-2B", 28, 8, 128, 16},
};

static double now(clockid_t c) {
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static uint64_t rng = 0x2545f4914f6cdd1dull;
static float rnd(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)(rng >> 40) / 16777216.0f - 0.5f;
}

/* One token over all layers: per KV head the blocks, then the combine (as attn_blk_task). */
static void token(const qhx_kernels *k, const shape *s, void *const *cache, bool f16, int64_t n_ctx, const float *q,
                  float *work, float *part, float *out) {
    const int64_t width = s->nkv * s->hd, rep = s->nh / s->nkv, nb = qhx_attn_n_blocks(n_ctx);
    const int64_t pf = qhx_attn_part_floats(rep, s->hd);
    const size_t elem = f16 ? 2 : 4;
    for (int64_t l = 0; l < s->layers; l++) {
        const char *K = cache[l], *V = K + (size_t)(n_ctx * width) * elem;
        for (int64_t g = 0; g < s->nkv; g++) {
            qhx_kv_view kv = {K + (size_t)(g * s->hd) * elem, V + (size_t)(g * s->hd) * elem, width,
                              f16 ? QHX_KV_F16 : QHX_KV_F32, 0, 0};
            for (int64_t b = 0; b < nb; b++)
                qhx_attn_block_kv(k, q + g * rep * s->hd, &kv, n_ctx, b, rep, s->hd, 0.08f, work, part + b * pf);
            qhx_attn_combine(part, nb, rep, s->hd, out + g * rep * s->hd);
        }
    }
}

static void bench(const qhx_kernels *k, const shape *s, int64_t n_ctx, int reps, bool f16) {
    const int64_t width = s->nkv * s->hd, rep = s->nh / s->nkv;
    const size_t elems = (size_t)(2 * n_ctx * width), bytes = elems * (f16 ? 2 : 4);
    void **cache = calloc((size_t)s->layers, sizeof *cache);
    float *row = malloc(elems * sizeof *row);
    for (size_t i = 0; i < elems; i++) row[i] = rnd();
    for (int64_t l = 0; l < s->layers; l++) {
        cache[l] = malloc(bytes);
        if (f16) qhx_f32_to_f16_row(row, cache[l], (int64_t)elems);
        else memcpy(cache[l], row, bytes);
    }
    float *q = malloc((size_t)(s->nh * s->hd) * sizeof *q), *out = malloc((size_t)(s->nh * s->hd) * sizeof *out);
    for (int64_t i = 0; i < s->nh * s->hd; i++) q[i] = rnd();
    float *work = malloc((size_t)qhx_attn_block_kv_work(rep, s->hd, f16 ? QHX_KV_F16 : QHX_KV_F32) * sizeof *work);
    float *part = malloc((size_t)(qhx_attn_n_blocks(n_ctx) * qhx_attn_part_floats(rep, s->hd)) * sizeof *part);
    double wall[64], cpu[64];
    token(k, s, cache, f16, n_ctx, q, work, part, out); /* warm-up */
    for (int r = 0; r < reps; r++) {
        double w0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID);
        token(k, s, cache, f16, n_ctx, q, work, part, out);
        wall[r] = 1e3 * (now(CLOCK_MONOTONIC) - w0), cpu[r] = 1e3 * (now(CLOCK_PROCESS_CPUTIME_ID) - c0);
    }
    qsort(wall, (size_t)reps, sizeof wall[0], cmp_double);
    qsort(cpu, (size_t)reps, sizeof cpu[0], cmp_double);
    printf("  %s KV: %7.1f MB read per token, attention %7.2f ms wall, %7.2f ms CPU (median of %d)\n",
           f16 ? "f16" : "f32", (double)bytes * (double)s->layers / 1e6, wall[reps / 2], cpu[reps / 2], reps);
    for (int64_t l = 0; l < s->layers; l++) free(cache[l]);
    free(cache), free(row), free(q), free(out), free(work), free(part);
}

int main(int argc, char **argv) {
    int64_t n_ctx = 4096;
    int reps = 9;
    qhx_isa isa = QHX_ISA_BEST;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--ctx")) n_ctx = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--isa")) {
            const char *v = argv[i + 1];
            isa = !strcmp(v, "ref") ? QHX_ISA_REF : !strcmp(v, "avx2") ? QHX_ISA_AVX2 : !strcmp(v, "avx512") ? QHX_ISA_AVX512 : QHX_ISA_BEST;
        }
    }
    if (n_ctx < 1 || reps < 1 || reps > 64) {
        fprintf(stderr, "usage: qhx_bench_kv [--ctx N] [--reps 1..64] [--isa ref|avx2|avx512|best]\n");
        return 2;
    }
    qhx_kernels k;
    qhx_kern_select(isa, &k);
    printf("decode attention of one token at context %lld, isa %s, 1 thread\n", (long long)n_ctx, qhx_isa_name(k.isa));
    for (size_t i = 0; i < sizeof SHAPES / sizeof SHAPES[0]; i++) {
        printf("%s: %lld layers x %lld KV heads x %lld\n", SHAPES[i].name, (long long)SHAPES[i].layers,
               (long long)SHAPES[i].nkv, (long long)SHAPES[i].hd);
        bench(&k, &SHAPES[i], n_ctx, reps, false);
        bench(&k, &SHAPES[i], n_ctx, reps, true);
    }
    return 0;
}
