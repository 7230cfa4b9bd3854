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
#define qhx_k_matvec_q4_i8x_avx512 emu_matvec_q4_i8x_avx512
#define qhx_k_matmul_q4_i8x_avx512 emu_matmul_q4_i8x_avx512
#define quantize_x quantize_x_512 /* the two files' static helpers share names */
#define hsum16 hsum16_i8x
#define i8x_ok i8x_ok_512
#define rows_q rows_q_512
#define rows_range rows_range_512
#define qx_row qx_row_512
#undef AI
#undef UNROLL
#undef MM_BLOCK_BYTES
#include "kernels/x86/q4i8x_avx512.c"

#include "kernels_check.h"

static const int64_t sizes[] = {1, 3, 15, 16, 17, 63, 64, 65, 257, 1000};
static const int64_t q4cols[] = {32, 64, 96, 1024};

#define V(f, F) {#f "_avx512(emulated)", F, emu_matvec_##f##_avx512, emu_matmul_##f##_avx512, 0}

int main(void) {
    const kc_variant vs[] = {V(f32, QHX_W_F32), V(f16, QHX_W_F16), V(bf16, QHX_W_BF16),
                             V(q8, QHX_W_Q8), V(q4, QHX_W_Q4)};
    kc_run_all(vs, 5, sizes, (int)(sizeof sizes / sizeof sizes[0]), q4cols,
               (int)(sizeof q4cols / sizeof q4cols[0]));
    const kc_variant vi[] = {{"q4_i8x_avx512(emulated)", QHX_W_Q4, emu_matvec_q4_i8x_avx512,
                              emu_matmul_q4_i8x_avx512, 1}};
    kc_run_all(vi, 1, sizes, (int)(sizeof sizes / sizeof sizes[0]), q4cols,
               (int)(sizeof q4cols / sizeof q4cols[0]));
    static const int64_t wide[] = {8192, 8224}; /* the last that quantizes x, the first that does not */
    kc_check_variant(&vi[0], sizes, 4, wide, 2, (const int[]){3}, 1);
    return t_done("test_kernels_avx512emu");
}
