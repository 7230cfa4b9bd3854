// ctest-labels: kernels
/* test_kernels_avx512emu: kernels/x86/linear_avx512.c built with plain-C stand-ins for its
 * intrinsics (x86_emu.h) and run through the same checks as the real variants, so its tiling,
 * masked tails and reductions are tested on every host, AVX-512 or not. Speed is not. */
#define QHX_X86_EMU 1
#include "x86_emu.h"

/* The emulated copies get their own names, apart from the real ones in the library. */
#define qhx_k_matvec_f32_avx512 emu_matvec_f32_avx512
#define qhx_k_matvec_f16_avx512 emu_matvec_f16_avx512
#define qhx_k_matvec_bf16_avx512 emu_matvec_bf16_avx512
#define qhx_k_matvec_q8_avx512 emu_matvec_q8_avx512
#define qhx_k_matmul_f32_avx512 emu_matmul_f32_avx512
#define qhx_k_matmul_f16_avx512 emu_matmul_f16_avx512
#define qhx_k_matmul_bf16_avx512 emu_matmul_bf16_avx512
#define qhx_k_matmul_q8_avx512 emu_matmul_q8_avx512
#define qhx_k_matvec_q4_avx512 emu_matvec_q4_avx512
#define qhx_k_matmul_q4_avx512 emu_matmul_q4_avx512
#include "kernels/x86/linear_avx512.c"

#include "kernels_check.h"

static const int64_t sizes[] = {1, 3, 15, 16, 17, 63, 64, 65, 257, 1000};
static const int64_t q4cols[] = {32, 64, 96, 1024};

#define V(f, F) {#f "_avx512(emulated)", F, emu_matvec_##f##_avx512, emu_matmul_##f##_avx512, 0}

int main(void) {
    const kc_variant vs[] = {V(f32, QHX_W_F32), V(f16, QHX_W_F16), V(bf16, QHX_W_BF16),
                             V(q8, QHX_W_Q8), V(q4, QHX_W_Q4)};
    kc_run_all(vs, 5, sizes, (int)(sizeof sizes / sizeof sizes[0]), q4cols,
               (int)(sizeof q4cols / sizeof q4cols[0]));
    return t_done("test_kernels_avx512emu");
}
