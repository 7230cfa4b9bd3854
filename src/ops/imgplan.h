/* ops/imgplan.h: the announced prompt of a sequence with images, shared by the image families:
 * which of the next n tokens are image tokens (and which image row each takes), their 3-D M-RoPE
 * positions (ops/mrope.h, HF get_rope_index over several images), and the ids that must be fed
 * there. A family keeps one qhx_img_plan in each state; its forward asks it, batch by batch,
 * for positions and image rows. Pure host bookkeeping: no model, no kernels. */
#ifndef QHX_OPS_IMGPLAN_H
#define QHX_OPS_IMGPLAN_H

#include "core/status.h"

#include <stdbool.h>
#include <stdint.h>

/* One encoded image as the plan sees it (a view of families/family.h qhx_image_embed). */
typedef struct qhx_img_view {
    int64_t grid_h, grid_w; /* patches per axis, before the merge */
    int64_t n_tokens;       /* (grid_h / merge) * (grid_w / merge) */
    int64_t row_width;      /* floats per token row */
    const float *embd;      /* (n_tokens, row_width), borrowed */
    int32_t pad_id;         /* 0: the image pad; else its run's pad id (a video frame group) */
} qhx_img_view;

typedef struct qhx_img_plan {
    int64_t start, n;       /* sequence rows start .. start + n - 1; n 0: nothing announced */
    int32_t *ids;           /* (n) the announced ids (owned) */
    int64_t *pos;           /* (n, 3) t, h, w (owned) */
    const float **rows;     /* (n) a token's image row, NULL for text (owned array, borrowed rows) */
    int64_t row_width;      /* of the announced images' rows; 0 without images */
} qhx_img_plan;

/* Announce ids (n,) at sequence row n_past, whose first text position is next_pos, with the
 * images (n_images,) in the order of their pad runs (qhx_mrope_positions: one maximal run of
 * image_token_id per image, exactly n_tokens long; errors name the image and both counts).
 * row_width: what every image's rows must have (the model's). The images' rows must outlive the
 * plan. Replaces what p held; p is empty on failure. QHX_E_ARG / QHX_E_NOMEM. */
qhx_status qhx_img_plan_set(qhx_img_plan *p, const qhx_img_view *images, int64_t n_images, const int32_t *ids,
                            int64_t n, int32_t image_token_id, int64_t merge, int64_t row_width, int64_t n_past,
                            int64_t next_pos, qhx_error *err);
void qhx_img_plan_clear(qhx_img_plan *p); /* back to empty; NULL allowed */

/* Inside the announced rows the ids must be the announced ones: QHX_E_ARG naming the first that
 * is not. Rows outside it are text (the image-pad id too, as in HF decoding). */
qhx_status qhx_img_plan_check(const qhx_img_plan *p, const int32_t *ids, int64_t n, int64_t n_past, qhx_error *err);

/* For the batch of n tokens at rows n_past ..: positions pos (n, 3) and image rows rows (n)
 * (NULL for text): from the plan inside it, (p, p, p) with p counting from *next_pos outside.
 * *next_pos (IN/OUT) becomes the largest position + 1; a caller commits it once the batch ran. */
void qhx_img_plan_batch(const qhx_img_plan *p, int64_t n_past, int64_t n, int64_t *next_pos, int64_t *pos,
                        const float **rows);

#endif
