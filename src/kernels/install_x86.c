/* kernels/install_x86.c: puts the x86 variants into the op table after checking the CPU.
 * Baseline code (no ISA flags): it only reads qhx_cpu_info and stores function pointers; the
 * variants themselves live in kernels/x86/ and run only after these checks passed. */
#if defined(QHX_HAVE_X86) && (defined(__x86_64__) || defined(__i386__))

#include "kernels/x86/x86.h"

#define SET(k, isa)                                    \
    do {                                               \
        (k)->matvec[QHX_W_F32] = qhx_k_matvec_f32_##isa;  \
        (k)->matvec[QHX_W_F16] = qhx_k_matvec_f16_##isa;  \
        (k)->matvec[QHX_W_BF16] = qhx_k_matvec_bf16_##isa; \
        (k)->matvec[QHX_W_Q8] = qhx_k_matvec_q8_##isa;    \
        (k)->matvec[QHX_W_Q4] = qhx_k_matvec_q4_##isa;    \
        (k)->matmul[QHX_W_F32] = qhx_k_matmul_f32_##isa;  \
        (k)->matmul[QHX_W_F16] = qhx_k_matmul_f16_##isa;  \
        (k)->matmul[QHX_W_BF16] = qhx_k_matmul_bf16_##isa; \
        (k)->matmul[QHX_W_Q8] = qhx_k_matmul_q8_##isa;    \
        (k)->matmul[QHX_W_Q4] = qhx_k_matmul_q4_##isa;    \
    } while (0)

void qhx_kern_install_x86(qhx_kernels *k, qhx_isa max_isa, const qhx_cpu_info *cpu) {
    qhx_cpu_info detected;
    if (!cpu) {
        qhx_cpu_detect(&detected);
        cpu = &detected;
    }
    if (max_isa != QHX_ISA_AVX2 && max_isa != QHX_ISA_AVX512 && max_isa != QHX_ISA_BEST) return;
    unsigned f = cpu->features;
    if (max_isa != QHX_ISA_AVX2 && (f & QHX_CPU_GROUP_AVX512) == QHX_CPU_GROUP_AVX512) {
        SET(k, avx512);
        k->isa = QHX_ISA_AVX512;
    } else if ((f & QHX_CPU_GROUP_AVX2) == QHX_CPU_GROUP_AVX2) {
        SET(k, avx2);
        k->isa = QHX_ISA_AVX2;
    }
    /* GGUF blocks: the AVX2 kernels on AVX-512 CPUs too (bit for bit the reference either way).
     * The types with an integer form (Q8_0, Q5_0, Q4_K, Q5_K, Q6_K: llama.cpp's arithmetic)
     * always take it, for decode and prefill alike, whatever qhx_kern_use_int8 is asked; the
     * integer kernels run the f32 ones for the other types. */
    if ((f & QHX_CPU_GROUP_AVX2) == QHX_CPU_GROUP_AVX2) {
        k->matvec[QHX_W_GGML] = qhx_k_matvec_ggml_i8_avx2;
        k->matmul[QHX_W_GGML] = qhx_k_matmul_ggml_i8_avx2;
        k->row[QHX_W_GGML] = qhx_k_row_ggml_avx2;
    }
}

void qhx_kern_install_x86_i8x(qhx_kernels *k, qhx_isa max_isa, const qhx_cpu_info *cpu) {
    qhx_cpu_info detected;
    if (!cpu) {
        qhx_cpu_detect(&detected);
        cpu = &detected;
    }
    if (max_isa != QHX_ISA_AVX2 && max_isa != QHX_ISA_AVX512 && max_isa != QHX_ISA_BEST) return;
    unsigned f = cpu->features, vnni = QHX_CPU_GROUP_AVX512 | QHX_CPU_AVX512_VNNI;
    if (max_isa != QHX_ISA_AVX2 && (f & vnni) == vnni) {
        k->matvec[QHX_W_Q4] = qhx_k_matvec_q4_i8x_avx512;
        k->matmul[QHX_W_Q4] = qhx_k_matmul_q4_i8x_avx512;
    } else if ((f & QHX_CPU_GROUP_AVX2) == QHX_CPU_GROUP_AVX2) {
        k->matvec[QHX_W_Q4] = qhx_k_matvec_q4_i8x_avx2;
        k->matmul[QHX_W_Q4] = qhx_k_matmul_q4_i8x_avx2;
    }
}

/* Which build of the int8 kernels, by measured speed (BENCHMARKS.md, "AVX-512 and VNNI: the
 * kernel per slot"; AMD EPYC Zen 5, 1 thread, cpu figures):
 *   prefill GEMM: AVX-512 VNNI where the table is AVX-512 (190-380 GFLOP/s at the 2B shapes),
 *     else AVX-VNNI (145-205), else AVX2 (112-185);
 *   Q4 / Q6 / Q4A decode matvec: 256-bit vpdpbusd, from the EVEX build where the table is
 *     AVX-512 with VNNI, else AVX-VNNI, else AVX2 (57 G weights/s in L2 against AVX-VNNI's 64).
 *     The EVEX and AVX-VNNI builds run the same instructions one row at a time; the EVEX build's
 *     multi-row twin has 32 registers for its tiles (2 weight rows x 4 sequences), which is why
 *     it wins where both exist (BENCHMARKS.md, "Decode at the bandwidth limit"), and it gives
 *     AVX-512 CPUs without AVX-VNNI (Zen 4) the VNNI kernel. The 512-bit q4i8x_avx512.c
 *     measured 33 and is not installed.
 * All builds of one kernel return the same bits, so the choice changes speed only. The rule is
 * by feature, the same on every x86 vendor. */
typedef struct int8_set {
    qhx_matmul_fn prefill_q8, prefill_q4, prefill_q6, prefill_q4a;
    qhx_matvec_fn decode_q4, decode_q6, decode_q4a;
} int8_set;

/* The builds, one row each: the GEMMs of gemm_i8_*.c, the per-token kernels of q4i8x_*.c (Q6,
 * the tied head of q4 bundles, has only the Q4 decode kernel's 6-bit twin, for prefill too). */
static const int8_set builds[] = {
#define I8_AVX2 0
    {qhx_k_matmul_q8_i8gemm_avx2, qhx_k_matmul_q4_i8gemm_avx2, qhx_k_matmul_q6_i8x_avx2, qhx_k_matmul_q4a_i8gemm_avx2,
     qhx_k_matvec_q4_i8x_avx2, qhx_k_matvec_q6_i8x_avx2, qhx_k_matvec_q4a_i8x_avx2},
#define I8_AVXVNNI 1
    {qhx_k_matmul_q8_i8gemm_avxvnni, qhx_k_matmul_q4_i8gemm_avxvnni, qhx_k_matmul_q6_i8x_avxvnni,
     qhx_k_matmul_q4a_i8gemm_avxvnni, qhx_k_matvec_q4_i8x_avxvnni, qhx_k_matvec_q6_i8x_avxvnni,
     qhx_k_matvec_q4a_i8x_avxvnni},
#define I8_AVX512 2 /* the 512-bit GEMMs and the EVEX per-token kernels */
    {qhx_k_matmul_q8_i8gemm_avx512, qhx_k_matmul_q4_i8gemm_avx512, qhx_k_matmul_q6_i8x_evex,
     qhx_k_matmul_q4a_i8gemm_avx512, qhx_k_matvec_q4_i8x_evex, qhx_k_matvec_q6_i8x_evex, qhx_k_matvec_q4a_i8x_evex},
};

/* Every slot by the same rule: AVX-512 VNNI where the table is AVX-512, else AVX-VNNI, else AVX2. */
static int8_set int8_kernels(const qhx_kernels *k, unsigned f) {
    if (k->isa == QHX_ISA_AVX512 && (f & QHX_CPU_AVX512_VNNI)) return builds[I8_AVX512];
    return builds[f & QHX_CPU_AVX_VNNI ? I8_AVXVNNI : I8_AVX2];
}

void qhx_kern_install_x86_int8(qhx_kernels *k, unsigned prefill_formats, unsigned decode_formats, qhx_isa max_isa,
                                const qhx_cpu_info *cpu) {
    qhx_cpu_info detected;
    if (!(prefill_formats | decode_formats) || (k->isa != QHX_ISA_AVX2 && k->isa != QHX_ISA_AVX512)) return;
    if (!cpu) {
        qhx_cpu_detect(&detected);
        cpu = &detected;
    }
    if (max_isa != QHX_ISA_AVX2 && max_isa != QHX_ISA_AVX512 && max_isa != QHX_ISA_BEST) return;
    if ((cpu->features & QHX_CPU_GROUP_AVX2) != QHX_CPU_GROUP_AVX2) return;
    int8_set s = int8_kernels(k, cpu->features);
    if (prefill_formats & (1u << QHX_W_Q8)) k->matmul[QHX_W_Q8] = s.prefill_q8;
    if (prefill_formats & (1u << QHX_W_Q4)) k->matmul[QHX_W_Q4] = s.prefill_q4;
    /* Q4A follows Q4's switches: the int8 kernels are its fast path, as for Q4 */
    if (prefill_formats & (1u << QHX_W_Q4)) k->matmul[QHX_W_Q4A] = s.prefill_q4a;
    if (decode_formats & (1u << QHX_W_Q4)) k->matvec[QHX_W_Q4A] = s.decode_q4a;
    if (prefill_formats & (1u << QHX_W_Q6)) k->matmul[QHX_W_Q6] = s.prefill_q6;
    if (decode_formats & (1u << QHX_W_Q4)) k->matvec[QHX_W_Q4] = s.decode_q4;
    if (decode_formats & (1u << QHX_W_Q6)) k->matvec[QHX_W_Q6] = s.decode_q6;
}

#else
typedef int qhx_install_x86_unused; /* ISO C forbids an empty translation unit */
#endif
