/* kernels/x86/delta_avx512.c: the chunked delta rule of delta_avx2.c built with the AVX-512 flags
 * (QHX_DELTA_AVX512): rows of 128 floats kept in zmm registers, bitwise the AVX2 build's results
 * (delta_avx2.c says why). */
#define QHX_DELTA_AVX512 1
#include "delta_avx2.c"
