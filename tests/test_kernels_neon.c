// ctest-labels: kernels
/* test_kernels_neon: the aarch64 NEON matvec/matmul variants against the _ref kernels and against
 * themselves under row splits, threads and token batching (kernels_check.h, the checks the x86
 * variants go through), then the table selection: on aarch64 qhx_kern_select must install NEON
 * (Advanced SIMD is part of every aarch64 CPU, so its absence is a failure, not a skip: a run
 * under an emulator must not quietly test only the references), and QHX_ISA_REF must keep the
 * references. Exits 77 (skipped) on other architectures. */
#if defined(QHX_HAVE_ARM) && defined(__aarch64__)
#include "core/cpu.h"
#include "kernels_check.h"
#include "kernels/arm/arm.h"

static const int64_t sizes[] = {1, 3, 15, 16, 17, 63, 64, 65, 257, 1000, 2048};
static const int64_t q4cols[] = {32, 64, 96, 1024, 2048};

#define V(f, F) {#f "_neon", F, qhx_k_matvec_##f##_neon, qhx_k_matmul_##f##_neon, 0}

/* Every linear slot of k holds the NEON variant. */
static int all_neon(const qhx_kernels *k) {
    return k->matvec[QHX_W_F32] == qhx_k_matvec_f32_neon && k->matmul[QHX_W_F32] == qhx_k_matmul_f32_neon &&
           k->matvec[QHX_W_F16] == qhx_k_matvec_f16_neon && k->matmul[QHX_W_F16] == qhx_k_matmul_f16_neon &&
           k->matvec[QHX_W_BF16] == qhx_k_matvec_bf16_neon && k->matmul[QHX_W_BF16] == qhx_k_matmul_bf16_neon &&
           k->matvec[QHX_W_Q8] == qhx_k_matvec_q8_neon && k->matmul[QHX_W_Q8] == qhx_k_matmul_q8_neon &&
           k->matvec[QHX_W_Q4] == qhx_k_matvec_q4_neon && k->matmul[QHX_W_Q4] == qhx_k_matmul_q4_neon;
}

static void test_select(const qhx_cpu_info *cpu) {
    qhx_kernels k;
    qhx_kern_select(QHX_ISA_BEST, &k);
    fprintf(stderr, "qhx_kern_select(best): %s\n", qhx_isa_name(k.isa));
    CHECK_EQ(k.isa, QHX_ISA_NEON);
    CHECK(all_neon(&k));
    qhx_kern_select(QHX_ISA_NEON, &k);
    CHECK_EQ(k.isa, QHX_ISA_NEON);
    CHECK(all_neon(&k));
    /* --isa ref, and an x86 ISA on this CPU: the references, every slot */
    const qhx_isa others[] = {QHX_ISA_REF, QHX_ISA_AVX2, QHX_ISA_AVX512};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        qhx_kern_select(others[i], &k);
        CHECK_EQ(k.isa, QHX_ISA_REF);
        CHECK(k.matvec[QHX_W_F32] == qhx_k_matvec_f32_ref && k.matmul[QHX_W_BF16] == qhx_k_matmul_bf16_ref);
        CHECK(k.matvec[QHX_W_Q4] == qhx_k_matvec_q4_ref && k.matmul[QHX_W_Q8] == qhx_k_matmul_q8_ref);
    }
    /* a CPU that reports no Advanced SIMD gets nothing */
    qhx_cpu_info none = *cpu;
    none.features = 0;
    memset(&k, 0, sizeof k);
    qhx_kern_install_arm(&k, QHX_ISA_BEST, &none);
    CHECK(k.matvec[QHX_W_F32] == NULL && k.isa == QHX_ISA_REF);
    qhx_kern_install_arm(&k, QHX_ISA_REF, cpu);
    CHECK(k.matvec[QHX_W_F32] == NULL && k.isa == QHX_ISA_REF);
}

int main(void) {
    qhx_cpu_info cpu;
    qhx_cpu_detect(&cpu);
    CHECK_STR(cpu.arch, "aarch64");
    CHECK(cpu.features & QHX_CPU_NEON);
    const kc_variant vs[] = {V(f32, QHX_W_F32), V(f16, QHX_W_F16), V(bf16, QHX_W_BF16), V(q8, QHX_W_Q8),
                             V(q4, QHX_W_Q4)};
    kc_run_all(vs, 5, sizes, (int)(sizeof sizes / sizeof sizes[0]), q4cols,
               (int)(sizeof q4cols / sizeof q4cols[0]));
    kc_check_activations(qhx_k_silu_f32_neon, qhx_k_swiglu_f32_neon, qhx_k_gelu_tanh_f32_neon);
    test_select(&cpu);
    return t_done("test_kernels_neon");
}
#else
#include <stdio.h>

int main(void) {
    fprintf(stderr, "test_kernels_neon: no NEON variants on this architecture\n");
    return 77;
}
#endif
