/* kernels/x86/prefetch_x86.h: software prefetch of the weight rows a decode matvec streams.
 *
 * Why: a decode matvec reads each weight once, in order, and does little work per byte, so its
 * speed is how many cache lines are in flight. The hardware prefetchers keep too few for it:
 * with rows read side by side (tiles of R rows) they see R short streams, and they stop at page
 * ends. Measured on the 2B shapes (BENCHMARKS.md, "Decode at the bandwidth limit"), q4 decode
 * went from 66 % to 87 % of the read probe (15.0 to 20.4 tok/s), w8 from 9.0 to 13.0, f16 from
 * 6.5 to 7.4.
 *
 * Where to: a kernel walking tiles of R rows of rb bytes, all rows of the matrix one after the
 * other in memory, prefetches each row's current line plus one tile (R * rb bytes): the same
 * place in the next tile, which it reads one tile's time later. At least 4 KiB (a tile of one
 * short row is read too fast for one row ahead to arrive in time), at most 32 KiB (what lands in
 * L1 must stay there until read). A hint: no bits change, and an address past the end of the
 * matrix is never dereferenced. */
#ifndef QHX_KERNELS_PREFETCH_X86_H
#define QHX_KERNELS_PREFETCH_X86_H

#include <stdint.h>

#ifdef QHX_X86_EMU
#define QHX_PREFETCH(a) ((void)(a)) /* plain-C test builds: nothing to emulate */
#else
#include <immintrin.h>
#define QHX_PREFETCH(a) _mm_prefetch((const char *)(a), _MM_HINT_T0)
#endif

#define QHX_PF_MIN_BYTES 4096
#define QHX_PF_MAX_BYTES 32768

/* The line `at` bytes into each of the R rows p[0..R): one call per 64 bytes a tile reads. */
#define QHX_PREFETCH_ROWS(p, R, at)                                                              \
    do {                                                                                         \
        _Pragma("GCC unroll 16") for (int pf_i_ = 0; pf_i_ < (R); pf_i_++) QHX_PREFETCH((p)[pf_i_] + (at)); \
    } while (0)

/* How far ahead a kernel streaming tiles of tile_bytes prefetches. */
static inline int64_t qhx_pf_ahead(int64_t tile_bytes) {
    return tile_bytes < QHX_PF_MIN_BYTES ? QHX_PF_MIN_BYTES : tile_bytes > QHX_PF_MAX_BYTES ? QHX_PF_MAX_BYTES : tile_bytes;
}

#endif
