/* kernels/install_arm.c: puts the aarch64 NEON variants into the op table after checking the
 * hwcaps. Advanced SIMD is part of every ARMv8-A CPU the kernel reports as aarch64, so the check
 * never fails on real hardware; it is kept so that selection reads like the x86 one and a
 * test can see what the CPU reported. */
#if defined(QHX_HAVE_ARM) && defined(__aarch64__)

#include "kernels/arm/arm.h"

void qhx_kern_install_arm(qhx_kernels *k, qhx_isa max_isa, const qhx_cpu_info *cpu) {
    qhx_cpu_info detected;
    if (!cpu) {
        qhx_cpu_detect(&detected);
        cpu = &detected;
    }
    if (max_isa != QHX_ISA_NEON && max_isa != QHX_ISA_BEST) return;
    if (!(cpu->features & QHX_CPU_NEON)) return;
    k->matvec[QHX_W_F32] = qhx_k_matvec_f32_neon;
    k->matvec[QHX_W_F16] = qhx_k_matvec_f16_neon;
    k->matvec[QHX_W_BF16] = qhx_k_matvec_bf16_neon;
    k->matvec[QHX_W_Q8] = qhx_k_matvec_q8_neon;
    k->matvec[QHX_W_Q4] = qhx_k_matvec_q4_neon;
    k->matmul[QHX_W_F32] = qhx_k_matmul_f32_neon;
    k->matmul[QHX_W_F16] = qhx_k_matmul_f16_neon;
    k->matmul[QHX_W_BF16] = qhx_k_matmul_bf16_neon;
    k->matmul[QHX_W_Q8] = qhx_k_matmul_q8_neon;
    k->matmul[QHX_W_Q4] = qhx_k_matmul_q4_neon;
    k->attn_block = qhx_k_attn_block_f32_neon;
    k->delta_step = qhx_k_delta_step_f32_neon;
    k->delta_chunked = qhx_k_delta_chunked_f32_neon;
    k->silu = qhx_k_silu_f32_neon;
    k->swiglu = qhx_k_swiglu_f32_neon;
    k->gelu_tanh = qhx_k_gelu_tanh_f32_neon;
    k->isa = QHX_ISA_NEON;
}

void qhx_kern_install_arm_int8(qhx_kernels *k, unsigned prefill_formats, unsigned decode_formats) {
    if (k->isa != QHX_ISA_NEON) return;
    if (decode_formats & (1u << QHX_W_Q4)) k->matvec[QHX_W_Q4A] = qhx_k_matvec_q4a_i8x_neon;
    /* prefill in the x86 int8 GEMM's order, so prompts give the same bits on both */
    if (prefill_formats & (1u << QHX_W_Q4)) k->matmul[QHX_W_Q4A] = qhx_k_matmul_q4a_i8gemm_neon;
}

#else
typedef int qhx_install_arm_unused; /* ISO C forbids an empty translation unit */
#endif
