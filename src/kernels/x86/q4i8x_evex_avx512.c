/* kernels/x86/q4i8x_evex_avx512.c: the int8-activation Q4 / Q6 / Q4A decode kernels of
 * q4i8x_avx2.c built for AVX-512 VNNI on 256-bit vectors (vpdpbusd ymm, EVEX encoded): the same
 * file with QHX_I8_EVEX defined, compiled with the AVX-512 flags. For AVX-512 CPUs without
 * AVX-VNNI (Zen 4), which otherwise take the AVX2 build, and for the multi-row kernels of every
 * AVX-512 VNNI CPU, whose tiles use the 32 registers. 256 bits rather than 512: the 512-bit
 * kernel (q4i8x_avx512.c) measured half this speed, its nibble shuffles across lanes costing
 * more than the wider multiply saves. Its results are bitwise those of the AVX2 build. */
#define QHX_I8_EVEX 1
#include "q4i8x_avx2.c"
