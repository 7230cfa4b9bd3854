/* ops/mrope.c: get_rope_index positions over several images and the image-token budget split
 * (contracts in ops/mrope.h). Mirrors transformers Qwen3_5Model.get_rope_index (5.x): the
 * prompt is cut into groups of one modality; a text group of length L takes p .. p + L - 1 on all
 * three axes; an image group takes get_vision_position_ids(p, grid) and then advances p by
 * max(h, w) / merge. */
#include "ops/mrope.h"


/* Positions stay far below this; the cap keeps every sum below in range. */
#define POS_CAP ((int64_t)1 << 50)

static qhx_status check_grid(const qhx_mrope_grid *g, int64_t k, int64_t merge, int64_t *n_tokens, qhx_error *err) {
    if (g->t != 1)
        return qhx_fail(err, QHX_E_ARG, "image %lld: grid t = %lld (one grid per image or per temporal group of a video: t = 1)",
                        (long long)k + 1, (long long)g->t);
    if (g->h < merge || g->w < merge || g->h % merge || g->w % merge || g->h > (1 << 20) || g->w > (1 << 20))
        return qhx_fail(err, QHX_E_ARG, "image %lld: grid %lldx%lld is not a positive multiple of the merge size %lld",
                        (long long)k + 1, (long long)g->h, (long long)g->w, (long long)merge);
    *n_tokens = (g->h / merge) * (g->w / merge);
    return QHX_OK;
}

qhx_status qhx_mrope_positions(const int32_t *ids, int64_t n, int32_t image_token_id, const qhx_mrope_grid *grids,
                               int64_t n_images, int64_t merge, int64_t start, int64_t *pos, int32_t *image_index,
                               int64_t *image_row, int64_t *next_pos, qhx_error *err) {
    if (n < 0 || (n > 0 && (!ids || !pos)))
        return qhx_fail(err, QHX_E_ARG, "positions: %lld tokens without ids or an output", (long long)n);
    if (n_images < 0 || n_images > QHX_MROPE_MAX_IMAGES || (n_images && !grids))
        return qhx_fail(err, QHX_E_ARG, "positions: %lld images (at most %d)", (long long)n_images, QHX_MROPE_MAX_IMAGES);
    if (merge < 1 || merge > 64) return qhx_fail(err, QHX_E_ARG, "positions: merge size %lld", (long long)merge);
    if (start < 0 || start > POS_CAP || n > POS_CAP)
        return qhx_fail(err, QHX_E_LIMIT, "positions: start %lld with %lld tokens is out of range", (long long)start,
                        (long long)n);
    /* the other pad id (a video's), when a grid names one */
    int32_t alt = -1;
    for (int64_t k = 0; k < n_images; k++)
        if (grids[k].pad > 0 && grids[k].pad != image_token_id) alt = grids[k].pad;
    int64_t p = start, k = 0;
    for (int64_t i = 0; i < n;) {
        if (ids[i] != image_token_id && ids[i] != alt) { /* one text token */
            pos[i * 3] = pos[i * 3 + 1] = pos[i * 3 + 2] = p++;
            if (image_index) image_index[i] = -1;
            if (image_row) image_row[i] = -1;
            i++;
            continue;
        }
        const int32_t pad = ids[i];
        int64_t run = 0;
        while (i + run < n && ids[i + run] == pad) run++;
        if (k >= n_images && n_images == 0)
            return qhx_fail(err, QHX_E_ARG, "the ids hold image-pad tokens (id %d, from token %lld) but no image was given",
                            (int)image_token_id, (long long)i);
        if (k >= n_images)
            return qhx_fail(err, QHX_E_ARG, "the ids hold more image-pad runs than the %lld image%s given (run %lld at token %lld; "
                            "the pads of one image must be one contiguous run)",
                            (long long)n_images, n_images == 1 ? "" : "s", (long long)k + 1, (long long)i);
        const int32_t want_pad = grids[k].pad > 0 ? grids[k].pad : image_token_id;
        if (pad != want_pad)
            return qhx_fail(err, QHX_E_ARG, "image %lld: its run at token %lld is of id %d, the %s pad %d was expected",
                            (long long)k + 1, (long long)i, (int)pad, want_pad == image_token_id ? "image" : "video",
                            (int)want_pad);
        int64_t want = 0;
        qhx_status rc = check_grid(&grids[k], k, merge, &want, err);
        if (rc) return rc;
        if (run != want) {
            bool more = false; /* pads further on: one image's pads split in two runs? */
            for (int64_t j = i + run; j < n && !more; j++) more = ids[j] == pad;
            return qhx_fail(err, QHX_E_ARG, "image %lld: the ids hold %lld image-pad tokens (id %d) at token %lld, but the image (%lldx%lld patches) needs %lld%s",
                            (long long)k + 1, (long long)run, (int)pad, (long long)i, (long long)grids[k].h,
                            (long long)grids[k].w, (long long)want,
                            more && run < want ? " (the pads of one image must be one contiguous run)" : "");
        }
        const int64_t gh = grids[k].h / merge, gw = grids[k].w / merge;
        for (int64_t j = 0; j < run; j++, i++) {
            pos[i * 3] = p; /* t index 0 of a single frame, offset by p */
            pos[i * 3 + 1] = p + j / gw;
            pos[i * 3 + 2] = p + j % gw;
            if (image_index) image_index[i] = (int32_t)k;
            if (image_row) image_row[i] = j;
        }
        p += gh > gw ? gh : gw;
        k++;
    }
    if (k != n_images)
        return qhx_fail(err, QHX_E_ARG, "%lld image%s given, but the ids hold %lld image-pad run%s", (long long)n_images,
                        n_images == 1 ? "" : "s", (long long)k, k == 1 ? "" : "s");
    if (next_pos) *next_pos = p;
    return QHX_OK;
}

qhx_status qhx_image_budget_split(const int64_t *need, int64_t n, int64_t total, int64_t min_tokens, int64_t *cap,
                                  qhx_error *err) {
    if (n < 1 || n > QHX_MROPE_MAX_IMAGES || !need || !cap)
        return qhx_fail(err, QHX_E_ARG, "image budget: %lld images (1 to %d)", (long long)n, QHX_MROPE_MAX_IMAGES);
    if (min_tokens < 1) min_tokens = 1;
    int64_t sum = 0;
    for (int64_t k = 0; k < n; k++) {
        if (need[k] < 0 || need[k] > POS_CAP)
            return qhx_fail(err, QHX_E_ARG, "image budget: image %lld needs %lld tokens", (long long)k + 1, (long long)need[k]);
        sum += need[k];
        cap[k] = 0;
    }
    if (sum <= total) return QHX_OK;
    if (total < 0 || total / n < min_tokens)
        return qhx_fail(err, QHX_E_LIMIT, "%lld images take at least %lld tokens each, but only %lld are left for all of them",
                        (long long)n, (long long)min_tokens, (long long)(total < 0 ? 0 : total));
    /* water-filling: cap[k] = -1 marks an image still sharing the rest */
    for (int64_t k = 0; k < n; k++) cap[k] = -1;
    int64_t left = total, active = n;
    for (int changed = 1; changed && active > 0;) {
        changed = 0;
        const int64_t share = left / active;
        for (int64_t k = 0; k < n; k++)
            if (cap[k] < 0 && need[k] <= share) { /* fits in its share: keeps its own size */
                cap[k] = 0;
                left -= need[k];
                active--;
                changed = 1;
            }
    }
    if (active == 0) return QHX_OK; /* cannot happen while sum > total; kept for safety */
    const int64_t share = left / active;
    int64_t extra = left % active;
    if (share < min_tokens)
        return qhx_fail(err, QHX_E_LIMIT, "image budget: %lld tokens left for %lld images of at least %lld tokens",
                        (long long)left, (long long)active, (long long)min_tokens);
    for (int64_t k = 0; k < n; k++)
        if (cap[k] < 0) {
            cap[k] = share + (extra > 0 ? 1 : 0);
            if (extra > 0) extra--;
        }
    return QHX_OK;
}
