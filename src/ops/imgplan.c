/* ops/imgplan.c: the announced prompt with its images (contracts in ops/imgplan.h). */
#include "ops/imgplan.h"

#include "core/alloc.h"
#include "ops/mrope.h"

#include <string.h>

void qhx_img_plan_clear(qhx_img_plan *p) {
    if (!p) return;
    qhx_free(p->ids);
    qhx_free(p->pos);
    qhx_free(p->rows);
    memset(p, 0, sizeof *p);
}

qhx_status qhx_img_plan_set(qhx_img_plan *p, const qhx_img_view *images, int64_t n_images, const int32_t *ids,
                            int64_t n, int32_t image_token_id, int64_t merge, int64_t row_width, int64_t n_past,
                            int64_t next_pos, qhx_error *err) {
    qhx_img_plan_clear(p);
    if (n < 1 || !ids) return qhx_fail(err, QHX_E_ARG, "attach: no tokens");
    if (n_images < 0 || n_images > QHX_MROPE_MAX_IMAGES || (n_images && !images))
        return qhx_fail(err, QHX_E_ARG, "attach: %lld images (at most %d)", (long long)n_images, QHX_MROPE_MAX_IMAGES);
    for (int64_t k = 0; k < n_images; k++)
        if (!images[k].embd || images[k].row_width != row_width || row_width < 1)
            return qhx_fail(err, QHX_E_ARG, "attach: image %lld was not encoded by this model", (long long)k + 1);
    qhx_mrope_grid *g = n_images ? qhx_malloc((size_t)n_images * sizeof *g) : NULL;
    int32_t *img_of = qhx_malloc((size_t)n * sizeof *img_of);
    int64_t *row_of = qhx_malloc((size_t)n * sizeof *row_of);
    p->ids = qhx_malloc((size_t)n * sizeof *p->ids);
    p->pos = qhx_malloc((size_t)n * 3 * sizeof *p->pos);
    p->rows = qhx_calloc((size_t)n, sizeof *p->rows);
    qhx_status rc = (n_images && !g) || !img_of || !row_of || !p->ids || !p->pos || !p->rows
                        ? qhx_fail(err, QHX_E_NOMEM, "attach: out of memory")
                        : QHX_OK;
    for (int64_t k = 0; !rc && k < n_images; k++) g[k] = (qhx_mrope_grid){1, images[k].grid_h, images[k].grid_w, images[k].pad_id};
    if (!rc) rc = qhx_mrope_positions(ids, n, image_token_id, g, n_images, merge, next_pos, p->pos, img_of, row_of, NULL, err);
    if (!rc) {
        memcpy(p->ids, ids, (size_t)n * sizeof *ids);
        for (int64_t i = 0; i < n; i++)
            if (img_of[i] >= 0) p->rows[i] = images[img_of[i]].embd + row_of[i] * row_width;
        p->start = n_past;
        p->n = n;
        p->row_width = n_images ? row_width : 0;
    }
    qhx_free(g);
    qhx_free(img_of);
    qhx_free(row_of);
    if (rc) qhx_img_plan_clear(p);
    return rc;
}

qhx_status qhx_img_plan_check(const qhx_img_plan *p, const int32_t *ids, int64_t n, int64_t n_past, qhx_error *err) {
    for (int64_t t = 0; p->n && t < n; t++) {
        int64_t i = n_past + t - p->start;
        if (i >= 0 && i < p->n && ids[t] != p->ids[i])
            return qhx_fail(err, QHX_E_ARG, "forward: token %lld is %d, but the prompt announced with the image has %d there",
                            (long long)(n_past + t), ids[t], p->ids[i]);
    }
    return QHX_OK;
}

void qhx_img_plan_batch(const qhx_img_plan *p, int64_t n_past, int64_t n, int64_t *next_pos, int64_t *pos,
                        const float **rows) {
    int64_t next = *next_pos;
    for (int64_t t = 0; t < n; t++) {
        int64_t i = n_past + t - p->start;
        bool in_plan = p->n && i >= 0 && i < p->n;
        for (int a = 0; a < 3; a++) pos[t * 3 + a] = in_plan ? p->pos[i * 3 + a] : next;
        rows[t] = in_plan ? p->rows[i] : NULL;
        for (int a = 0; a < 3; a++)
            if (pos[t * 3 + a] + 1 > next) next = pos[t * 3 + a] + 1;
    }
    *next_pos = next;
}
