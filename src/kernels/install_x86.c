/* kernels/install_x86.c: CPU + OS feature checks and the table install for the x86 variants.
 * Baseline code (no ISA flags): it only reads CPUID/XGETBV and stores function pointers; the
 * variants themselves live in kernels/x86/ and run only after these checks passed. */
#if defined(QHX_HAVE_X86) && (defined(__x86_64__) || defined(__i386__))

#include <cpuid.h>
#include <string.h>

#include "kernels/x86/x86.h"

static uint64_t xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

void qhx_x86_detect(qhx_x86_features *out) {
    memset(out, 0, sizeof *out);
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28), f16c = c & (1u << 29);
    if (!osxsave || !avx) return;
    /* XCR0: bit 1 SSE, bit 2 YMM upper halves; bits 5-7 opmask, ZMM0-15 upper, ZMM16-31. */
    uint64_t xcr0 = xgetbv0();
    bool os_ymm = (xcr0 & 0x6) == 0x6, os_zmm = (xcr0 & 0xe6) == 0xe6;
    if (!os_ymm) return;
    if (__get_cpuid_max(0, NULL) < 7) return;
    __cpuid_count(7, 0, a, b, c, d);
    out->avx2 = b & (1u << 5);
    out->fma = fma;
    out->f16c = f16c;
    if (os_zmm) {
        out->avx512f = b & (1u << 16);
        out->avx512dq = b & (1u << 17);
        out->avx512bw = b & (1u << 30);
        out->avx512vl = b & (1u << 31);
        out->avx512vnni = c & (1u << 11);
        unsigned a1, b1, c1, d1;
        __cpuid_count(7, 1, a1, b1, c1, d1);
        (void)b1, (void)c1, (void)d1;
        out->avx512bf16 = a1 & (1u << 5);
    }
}

bool qhx_x86_has_avx2(const qhx_x86_features *cpu) { return cpu->avx2 && cpu->fma && cpu->f16c; }

/* linear_avx512.c uses F, BW, VL, DQ (and the AVX2/F16C subset they include). */
bool qhx_x86_has_avx512(const qhx_x86_features *cpu) {
    return qhx_x86_has_avx2(cpu) && cpu->avx512f && cpu->avx512bw && cpu->avx512vl && cpu->avx512dq;
}

void qhx_kern_install_x86(qhx_kernels *k, qhx_isa max_isa, const qhx_x86_features *cpu) {
    qhx_x86_features detected;
    if (!cpu) {
        qhx_x86_detect(&detected);
        cpu = &detected;
    }
    if (max_isa == QHX_ISA_REF || max_isa == QHX_ISA_NEON) return;
    bool best = max_isa == QHX_ISA_BEST;
    if ((best || max_isa >= QHX_ISA_AVX2) && qhx_x86_has_avx2(cpu)) {
        k->matvec[QHX_W_F32] = qhx_k_matvec_f32_avx2;
        k->matvec[QHX_W_F16] = qhx_k_matvec_f16_avx2;
        k->matvec[QHX_W_BF16] = qhx_k_matvec_bf16_avx2;
        k->matvec[QHX_W_Q8] = qhx_k_matvec_q8_avx2;
        k->matmul[QHX_W_F32] = qhx_k_matmul_f32_avx2;
        k->matmul[QHX_W_F16] = qhx_k_matmul_f16_avx2;
        k->matmul[QHX_W_BF16] = qhx_k_matmul_bf16_avx2;
        k->matmul[QHX_W_Q8] = qhx_k_matmul_q8_avx2;
        k->isa = QHX_ISA_AVX2;
    }
    if ((best || max_isa == QHX_ISA_AVX512) && qhx_x86_has_avx512(cpu)) {
        k->matvec[QHX_W_F32] = qhx_k_matvec_f32_avx512;
        k->matvec[QHX_W_F16] = qhx_k_matvec_f16_avx512;
        k->matvec[QHX_W_BF16] = qhx_k_matvec_bf16_avx512;
        k->matvec[QHX_W_Q8] = qhx_k_matvec_q8_avx512;
        k->matmul[QHX_W_F32] = qhx_k_matmul_f32_avx512;
        k->matmul[QHX_W_F16] = qhx_k_matmul_f16_avx512;
        k->matmul[QHX_W_BF16] = qhx_k_matmul_bf16_avx512;
        k->matmul[QHX_W_Q8] = qhx_k_matmul_q8_avx512;
        k->isa = QHX_ISA_AVX512;
    }
}

#else
typedef int qhx_install_x86_unused; /* ISO C forbids an empty translation unit */
#endif
