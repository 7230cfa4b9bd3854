// ctest-labels: kernels
/* test_kernels_simd: every x86 matvec/matmul variant the host CPU can run, against a scalar
 * reference and against itself under row splits, threads and token batching (kernels_check.h).
 * Exits 77 (skipped) when the CPU has none of the ISAs. */
#include "kernels_check.h"

#if defined(QHX_HAVE_X86)
#include "kernels/x86/x86.h"

static const int64_t sizes[] = {1, 3, 15, 16, 17, 63, 64, 65, 257, 1000, 2048};
static const int ns[] = {13};
static const int64_t small[] = {1, 7, 33};
static const int ns_all[] = {1, 2, 3, 4, 5, 6, 7, 8, 11, 12};

#define V(isa, f, F) {#f "_" #isa, F, qhx_k_matvec_##f##_##isa, qhx_k_matmul_##f##_##isa}

static void run(const kc_variant *vs, int nv) {
    for (int i = 0; i < nv; i++) {
        kc_check_variant(&vs[i], sizes, (int)(sizeof sizes / sizeof sizes[0]), ns, 1);
        kc_check_variant(&vs[i], small, 3, ns_all, (int)(sizeof ns_all / sizeof ns_all[0]));
    }
}

int main(void) {
    qhx_x86_features cpu;
    qhx_x86_detect(&cpu);
    int ran = 0;
    if (qhx_x86_has_avx2(&cpu)) {
        const kc_variant vs[] = {V(avx2, f32, QHX_W_F32), V(avx2, f16, QHX_W_F16),
                                 V(avx2, bf16, QHX_W_BF16), V(avx2, q8, QHX_W_Q8)};
        run(vs, 4);
        ran++;
    } else {
        fprintf(stderr, "avx2: skipped, the CPU or OS lacks AVX2/FMA/F16C\n");
    }
    if (qhx_x86_has_avx512(&cpu)) {
        const kc_variant vs[] = {V(avx512, f32, QHX_W_F32), V(avx512, f16, QHX_W_F16),
                                 V(avx512, bf16, QHX_W_BF16), V(avx512, q8, QHX_W_Q8)};
        run(vs, 4);
        ran++;
    } else {
        fprintf(stderr, "avx512: skipped, the CPU or OS lacks AVX-512 F/BW/VL/DQ\n");
    }

    /* install: REF leaves the table alone; the best ISA fills every float/Q8 slot */
    qhx_kernels k;
    memset(&k, 0, sizeof k);
    qhx_kern_install_x86(&k, QHX_ISA_REF, &cpu);
    CHECK(k.matvec[QHX_W_BF16] == NULL && k.isa == QHX_ISA_REF);
    qhx_kern_install_x86(&k, QHX_ISA_BEST, NULL);
    if (ran) {
        CHECK(k.isa == (qhx_x86_has_avx512(&cpu) ? QHX_ISA_AVX512 : QHX_ISA_AVX2));
        for (int f = QHX_W_F32; f <= QHX_W_Q8; f++) CHECK(k.matvec[f] && k.matmul[f]);
    }
    memset(&k, 0, sizeof k);
    qhx_kern_install_x86(&k, QHX_ISA_AVX2, &cpu);
    if (qhx_x86_has_avx2(&cpu)) CHECK(k.isa == QHX_ISA_AVX2 && k.matvec[QHX_W_F16] == qhx_k_matvec_f16_avx2);

    int rc = t_done("test_kernels_simd");
    return rc ? rc : ran ? 0 : 77;
}
#else
int main(void) {
    fprintf(stderr, "test_kernels_simd: no x86 variants on this architecture\n");
    return 77;
}
#endif
