/* kernels/x86/gemm_i8_avxvnni.c: the int8 prefill GEMM of gemm_i8_avx2.c built for AVX-VNNI
 * (the VEX-encoded 256-bit vpdpbusd of Alder Lake and later Intel cores, and of Zen 5): the
 * same file with QHX_I8_AVXVNNI defined, compiled with -mavx2 -mfma -mf16c -mavxvnni. Its
 * results are bitwise those of the AVX2 build (gemm_i8_avx2.c says why). */
#define QHX_I8_AVXVNNI 1
#include "gemm_i8_avx2.c"
