/* ops/mrope.h: 3-D M-RoPE positions of a prompt with images (the per-slot axis table is
 * ops/rope.h), as Hugging Face get_rope_index
 * computes them (transformers models/qwen3_vl and models/qwen3_5, Qwen3VLModel.get_rope_index /
 * Qwen3_5Model.get_rope_index and get_vision_position_ids; both families share the rule), plus
 * the split of an image-token budget over several images. Pure functions: no model, no state,
 * no allocation. The rules, written out, are in docs/vision.md ("Positions"). */
#ifndef QHX_OPS_MROPE_H
#define QHX_OPS_MROPE_H

#include "core/status.h"

#include <stdbool.h>
#include <stdint.h>

/* An image's patch grid as the preprocessor gives it (image_grid_thw): t temporal patches
 * (1 for an image), h x w spatial patches before the merge. */
typedef struct qhx_mrope_grid {
    int64_t t, h, w;
    int32_t pad; /* 0: its run is of image_token_id; else of this id (a video's frame group,
                    video_token_id: Qwen3-VL splits a video's grid (T, h, w) into T grids (1, h, w),
                    each its own run after its timestamp text, as get_rope_index does) */
} qhx_mrope_grid;

/* Most images one prompt may carry (a cap against hostile inputs, not a model limit). */
#define QHX_MROPE_MAX_IMAGES 4096

/* Positions of the n tokens ids (n,), the first one at text position start (the position after
 * everything the sequence already holds: 0 for a fresh one).
 *
 * Every maximal run of image_token_id is one image, taken in order from grids (n_images,);
 * the k-th run must hold exactly t * (h / merge) * (w / merge) tokens of grids[k], and the number
 * of runs must be n_images. Text token: (p, p, p), then p += 1. Image token number i of its run
 * (row r = i / (w / merge), column c = i % (w / merge)): (p, p + r, p + c); after the run
 * p += max(h, w) / merge. Only t == 1 is accepted: a video comes as one grid per temporal group,
 * its run of grids[k].pad (the video pad id).
 *
 * pos: OUT (n, 3), per token (t, h, w). image_index: OUT (n,) or NULL: which image a token
 * belongs to (0-based), -1 for text. image_row: OUT (n,) or NULL: the token's row within its
 * image's embeddings (i above), -1 for text. *next_pos (OUT, may be NULL): the text position after
 * the last token, which is also the largest position + 1.
 * Errors (QHX_E_ARG, outputs undefined): a run whose length differs from its grid (both counts
 * named), more or fewer runs than grids, a grid not divisible by merge, t != 1, sizes out of
 * range (QHX_E_LIMIT for positions that would overflow). */
qhx_status qhx_mrope_positions(const int32_t *ids, int64_t n, int32_t image_token_id, const qhx_mrope_grid *grids,
                               int64_t n_images, int64_t merge, int64_t start, int64_t *pos /* OUT (n, 3) */,
                               int32_t *image_index /* OUT (n,) or NULL */,
                               int64_t *image_row /* OUT (n,) or NULL */, int64_t *next_pos /* OUT or NULL */,
                               qhx_error *err);

/* Split an image-token budget over n images whose natural token counts (what each takes
 * uncapped) are need (n,). cap (n,) OUT: the most tokens image k may take; 0 means "no cap"
 * (it fits as it is). When the needs sum to at most total, every cap is 0. Otherwise the budget
 * is shared by water-filling: images needing less than an equal share of what is left keep
 * their own count, the others share the rest equally (the remainder of the division goes to
 * the earlier ones, one token each). An image never gets fewer than min_tokens (the smallest
 * count its preprocessor can produce, >= 1): QHX_E_LIMIT when total < n * min_tokens (the
 * message names both). QHX_E_ARG for a negative need or n outside [1, QHX_MROPE_MAX_IMAGES].
 * The capped counts are ceilings: smart_resize may land below them, never above. */
qhx_status qhx_image_budget_split(const int64_t *need, int64_t n, int64_t total, int64_t min_tokens,
                                  int64_t *cap /* OUT (n,) */, qhx_error *err);

#endif
