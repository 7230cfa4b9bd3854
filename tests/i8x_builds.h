/* i8x_builds.h: the rebuilds of kernels/x86/q4i8x_avx2.c (the same source with vpdpbusd), each
 * with the CPU features it needs, for the tests that check every build against the AVX2 one.
 * x86 only; include after kernels/x86/x86.h and core/cpu.h. */
#ifndef QHX_TEST_I8X_BUILDS_H
#define QHX_TEST_I8X_BUILDS_H

typedef struct i8x_build {
    const char *q4_name, *q6_name;
    unsigned needs; /* QHX_CPU_* bits, all of them */
    qhx_matvec_fn q4, q6;
    qhx_matmul_fn q4_mm, q6_mm;
    qhx_matvec_multi_fn q4_multi, q6_multi;
} i8x_build;

static const i8x_build i8x_builds[] = {
    {"q4_i8x_avxvnni", "q6_i8x_avxvnni", QHX_CPU_GROUP_AVX2 | QHX_CPU_AVX_VNNI, qhx_k_matvec_q4_i8x_avxvnni,
     qhx_k_matvec_q6_i8x_avxvnni, qhx_k_matmul_q4_i8x_avxvnni, qhx_k_matmul_q6_i8x_avxvnni,
     qhx_k_matvec_multi_q4_i8x_avxvnni, qhx_k_matvec_multi_q6_i8x_avxvnni},
    {"q4_i8x_evex", "q6_i8x_evex", QHX_CPU_GROUP_AVX512 | QHX_CPU_AVX512_VNNI, qhx_k_matvec_q4_i8x_evex,
     qhx_k_matvec_q6_i8x_evex, qhx_k_matmul_q4_i8x_evex, qhx_k_matmul_q6_i8x_evex, qhx_k_matvec_multi_q4_i8x_evex,
     qhx_k_matvec_multi_q6_i8x_evex},
};

/* Whether this CPU runs build b; says so on stderr when it does not. */
static inline int i8x_build_runs(const i8x_build *b, unsigned features) {
    if ((features & b->needs) == b->needs) return 1;
    fprintf(stderr, "%s: skipped, the CPU or OS lacks its features\n", b->q4_name);
    return 0;
}

#endif
