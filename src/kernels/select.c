/* kernels/select.c: filling the op table. Every slot first gets its scalar reference; SIMD
 * variants (kernels/x86, kernels/arm) override them here once they exist, each behind a check
 * that both the CPU and the OS support the instructions. */
#include "kernels/attn.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "kernels/ref.h"
#include "kernels/vision.h"
#if defined(QHX_HAVE_X86)
#include "kernels/x86/cvt_x86.h"
#include "kernels/x86/ops_x86.h"
#include "kernels/x86/x86.h"
#endif
#if defined(QHX_HAVE_ARM)
#include "kernels/arm/arm.h"
#include "kernels/arm/cvt_arm.h"
#endif

#include "core/fp16.h"

#include <string.h>

const char *qhx_isa_name(qhx_isa isa) {
    switch (isa) {
    case QHX_ISA_REF: return "ref";
    case QHX_ISA_AVX2: return "avx2";
    case QHX_ISA_AVX512: return "avx512";
    case QHX_ISA_NEON: return "neon";
    case QHX_ISA_BEST: return "best";
    }
    return "unknown";
}

void qhx_kern_select(qhx_isa max_isa, qhx_kernels *k) {
    memset(k, 0, sizeof *k);
    k->isa = QHX_ISA_REF;
    k->matvec[QHX_W_F32] = qhx_k_matvec_f32_ref;
    k->matvec[QHX_W_F16] = qhx_k_matvec_f16_ref;
    k->matvec[QHX_W_BF16] = qhx_k_matvec_bf16_ref;
    k->matmul[QHX_W_F32] = qhx_k_matmul_f32_ref;
    k->matmul[QHX_W_F16] = qhx_k_matmul_f16_ref;
    k->matmul[QHX_W_BF16] = qhx_k_matmul_bf16_ref;
    k->row[QHX_W_F32] = qhx_k_row_f32_ref;
    k->row[QHX_W_F16] = qhx_k_row_f16_ref;
    k->row[QHX_W_BF16] = qhx_k_row_bf16_ref;
    k->attn_block = qhx_k_attn_block_f32_ref;
    k->delta_step = qhx_k_delta_step_f32_ref;
    k->delta_chunked = qhx_k_delta_chunked_f32_ref;
    k->read_fold = qhx_k_read_fold_ref;
    k->silu = qhx_k_silu_f32_ref;
    k->swiglu = qhx_k_swiglu_f32_ref;
    k->gelu_tanh = qhx_k_gelu_tanh_f32_ref;
    k->f16_to_f32 = qhx_f16_to_f32_row;
    k->f32_to_f16 = qhx_f32_to_f16_row;
    qhx_kern_ref_quant(k);
    /* SIMD variants, bounded by max_isa (QHX_ISA_REF keeps the references) */
#if defined(QHX_HAVE_X86)
    qhx_kern_install_x86(k, max_isa, NULL);
    if (k->isa == QHX_ISA_AVX2 || k->isa == QHX_ISA_AVX512) { /* the CPU check passed there */
        k->attn_block = qhx_k_attn_block_f32_avx2;
        k->attn_block_f16 = qhx_k_attn_block_f16_avx2;
        k->delta_step = qhx_k_delta_step_f32_avx2;
        k->delta_chunked = qhx_k_delta_chunked_f32_avx2;
        k->read_fold = qhx_k_read_fold_avx2;
        k->silu = qhx_k_silu_f32_avx2;
        k->swiglu = qhx_k_swiglu_f32_avx2;
        k->gelu_tanh = qhx_k_gelu_tanh_f32_avx2;
        k->f16_to_f32 = qhx_k_f16_to_f32_f16c;
        k->f32_to_f16 = qhx_k_f32_to_f16_f16c;
    }
    if (k->isa == QHX_ISA_AVX512) k->delta_chunked = qhx_k_delta_chunked_f32_avx512; /* same bits, faster */
    if (k->isa == QHX_ISA_AVX2) {
        /* decode of quantized weights: int16 activations */
        k->matvec[QHX_W_Q8] = qhx_k_matvec_q8_x16_avx2;
        k->matvec[QHX_W_Q4] = qhx_k_matvec_q4_x16_avx2;
        /* prefill: packed-panel GEMM (weights widened once per panel, not per token tile) */
        k->matmul[QHX_W_F32] = qhx_k_matmul_f32_gemm_avx2;
        k->matmul[QHX_W_F16] = qhx_k_matmul_f16_gemm_avx2;
        k->matmul[QHX_W_BF16] = qhx_k_matmul_bf16_gemm_avx2;
        k->matmul[QHX_W_Q8] = qhx_k_matmul_q8_gemm_avx2;
        k->matmul[QHX_W_Q4] = qhx_k_matmul_q4_gemm_avx2;
    }
#elif defined(QHX_HAVE_ARM)
    qhx_kern_install_arm(k, max_isa, NULL); /* the hwcap check is inside */
    if (k->isa == QHX_ISA_NEON) {
        k->f16_to_f32 = qhx_k_f16_to_f32_neon;
        k->f32_to_f16 = qhx_k_f32_to_f16_neon;
    }
#else
    (void)max_isa;
#endif
    qhx_kern_pair_multi(k);
}

/* Single-row kernels with a multi-row twin (bitwise the same per row). */
typedef struct multi_pair {
    qhx_matvec_fn one;
    qhx_matvec_multi_fn multi;
} multi_pair;

static const multi_pair multi_pairs[] = {
    {qhx_k_matvec_q4_ref, qhx_k_matvec_multi_q4_ref},
#if defined(QHX_HAVE_X86)
    {qhx_k_matvec_f32_avx2, qhx_k_matvec_multi_f32_avx2},
    {qhx_k_matvec_f16_avx2, qhx_k_matvec_multi_f16_avx2},
    {qhx_k_matvec_bf16_avx2, qhx_k_matvec_multi_bf16_avx2},
    {qhx_k_matvec_q8_avx2, qhx_k_matvec_multi_q8_avx2},
    {qhx_k_matvec_q8_x16_avx2, qhx_k_matvec_multi_q8_x16_avx2},
    {qhx_k_matvec_f32_avx512, qhx_k_matvec_multi_f32_avx512},
    {qhx_k_matvec_f16_avx512, qhx_k_matvec_multi_f16_avx512},
    {qhx_k_matvec_bf16_avx512, qhx_k_matvec_multi_bf16_avx512},
    {qhx_k_matvec_q8_avx512, qhx_k_matvec_multi_q8_avx512},
    {qhx_k_matvec_q4_i8x_avx2, qhx_k_matvec_multi_q4_i8x_avx2},
    {qhx_k_matvec_q4_i8x_avxvnni, qhx_k_matvec_multi_q4_i8x_avxvnni},
    {qhx_k_matvec_q6_i8x_avx2, qhx_k_matvec_multi_q6_i8x_avx2},
    {qhx_k_matvec_q6_i8x_avxvnni, qhx_k_matvec_multi_q6_i8x_avxvnni},
    {qhx_k_matvec_q4a_i8x_avx2, qhx_k_matvec_multi_q4a_i8x_avx2},
    {qhx_k_matvec_q4a_i8x_avxvnni, qhx_k_matvec_multi_q4a_i8x_avxvnni},
    {qhx_k_matvec_q4_i8x_evex, qhx_k_matvec_multi_q4_i8x_evex},
    {qhx_k_matvec_q6_i8x_evex, qhx_k_matvec_multi_q6_i8x_evex},
    {qhx_k_matvec_q4a_i8x_evex, qhx_k_matvec_multi_q4a_i8x_evex},
#endif
};

void qhx_kern_pair_multi(qhx_kernels *k) {
    for (int f = 0; f < QHX_W_COUNT; f++) {
        k->matvec_multi[f] = NULL;
        for (size_t i = 0; i < sizeof multi_pairs / sizeof multi_pairs[0]; i++)
            if (k->matvec[f] && k->matvec[f] == multi_pairs[i].one) k->matvec_multi[f] = multi_pairs[i].multi;
    }
}

void qhx_kern_use_int8(qhx_isa max_isa, unsigned prefill_formats, unsigned decode_formats, qhx_kernels *k) {
#if defined(QHX_HAVE_X86)
    qhx_kern_install_x86_int8(k, prefill_formats, decode_formats, max_isa, NULL);
#elif defined(QHX_HAVE_ARM) && defined(__aarch64__)
    (void)max_isa; /* the table's ISA already says whether NEON was allowed */
    qhx_kern_install_arm_int8(k, prefill_formats, decode_formats);
#else
    (void)max_isa, (void)prefill_formats, (void)decode_formats;
#endif
    qhx_kern_pair_multi(k);
}
