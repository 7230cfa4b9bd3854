/* kernels/x86/multi_plan.h: how the multi-row matvecs (kernels.h qhx_matvec_multi_fn) go over
 * their rows, one plan for all of them (plain C, no intrinsics). The nb activation rows are cut
 * into tiles small enough to stay in L1 next to the weights, as even as possible (5 rows as
 * 3 + 2, not 4 + 1); with several tiles the weight rows come in blocks that stay in L2 while each
 * tile goes over them, so the weights come from memory once. The order in which (row, sequence)
 * pairs run changes no bits: each output keeps its single-row kernel's arithmetic. */
#ifndef QHX_KERNELS_X86_MULTI_PLAN_H
#define QHX_KERNELS_X86_MULTI_PLAN_H

#include "kernels/kernels.h"

#include <stdint.h>

#define QHX_MULTI_L1_BYTES (24 * 1024)     /* activation rows of one tile */
#define QHX_MULTI_BLOCK_BYTES (192 * 1024) /* weight rows every tile goes over in turn */

typedef struct qhx_multi_plan {
    int tiles;
    int at[QHX_MATVEC_MULTI_MAX + 1]; /* tile t holds activation rows at[t] .. at[t + 1] - 1 */
    int64_t blk;                      /* weight rows per block */
} qhx_multi_plan;

/* nb (1 .. QHX_MATVEC_MULTI_MAX) activation rows of x_bytes each, at most max_tile per tile,
 * over weight rows [r0, r1) of w_bytes each. */
static inline qhx_multi_plan qhx_multi_plan_make(int nb, int64_t x_bytes, int max_tile, int64_t w_bytes, int64_t r0,
                                                 int64_t r1) {
    qhx_multi_plan p;
    int per_tile = (int)(QHX_MULTI_L1_BYTES / (x_bytes > 0 ? x_bytes : 1));
    per_tile = per_tile < 1 ? 1 : per_tile > max_tile ? max_tile : per_tile;
    p.tiles = (nb + per_tile - 1) / per_tile;
    p.at[0] = 0;
    for (int t = 0; t < p.tiles; t++) p.at[t + 1] = p.at[t] + nb / p.tiles + (t < nb % p.tiles);
    p.blk = p.tiles == 1 ? r1 - r0 : QHX_MULTI_BLOCK_BYTES / (w_bytes > 0 ? w_bytes : 1);
    if (p.blk < 1) p.blk = 1;
    return p;
}

#endif
