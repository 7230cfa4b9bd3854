/* kernels/x86/q4i8x_avxvnni.c: the Q4 decode matvec on int8 activations of q4i8x_avx2.c built for
 * AVX-VNNI (256-bit vpdpbusd): the same file with QHX_I8_AVXVNNI defined, compiled with
 * -mavx2 -mfma -mf16c -mavxvnni. Its results are bitwise those of the AVX2 build. */
#define QHX_I8_AVXVNNI 1
#include "q4i8x_avx2.c"
