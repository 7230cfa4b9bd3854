/* test_mrope: ops/mrope.h. Positions of prompts with one and several images against a reference
 * written here from the rules of docs/vision.md ("Positions") in another form than the code
 * under test: the prompt is built from segments, so the reference knows where each image is
 * without scanning ids, and each segment starts at (largest position so far) + 1, the
 * Qwen2-VL formulation of get_rope_index, instead of a running counter. Single-image prompts
 * are also checked against the fixtures' golden mrope_positions_thw (made by llama.cpp's mtmd
 * and checked against HF). Then the error paths and the image-token budget split. */
#include "t.h"

#include "core/alloc.h"
#include "io/json.h"
#include "ops/mrope.h"

#include <stdint.h>
#include <stdlib.h>

#define PAD 972
#define MAXN 4096

/* ---- the reference ------------------------------------------------------------------------- */

typedef struct seg {
    int is_image;
    int64_t text_len;   /* text: that many tokens */
    qhx_mrope_grid g;   /* image: its grid */
} seg;

/* Build ids and the expected positions of segs; returns the token count. */
static int64_t reference(const seg *segs, int n_segs, int64_t merge, int64_t start, int32_t *ids, int64_t *pos,
                         int32_t *img, int64_t *row, int64_t *next) {
    int64_t n = 0, maxp = start - 1; /* nothing yet: the first segment starts at start */
    int k = 0;
    for (int s = 0; s < n_segs; s++) {
        const int64_t st_idx = maxp + 1;
        if (!segs[s].is_image) {
            for (int64_t j = 0; j < segs[s].text_len; j++, n++) {
                ids[n] = (int32_t)(n % 900); /* text ids below the pad id */
                pos[n * 3] = pos[n * 3 + 1] = pos[n * 3 + 2] = st_idx + j;
                img[n] = -1;
                row[n] = -1;
                if (st_idx + j > maxp) maxp = st_idx + j;
            }
            continue;
        }
        const int64_t gh = segs[s].g.h / merge, gw = segs[s].g.w / merge;
        for (int64_t r = 0; r < gh; r++)
            for (int64_t c = 0; c < gw; c++, n++) {
                ids[n] = PAD;
                int64_t p[3] = {st_idx, st_idx + r, st_idx + c};
                for (int a = 0; a < 3; a++) {
                    pos[n * 3 + a] = p[a];
                    if (p[a] > maxp) maxp = p[a];
                }
                img[n] = k;
                row[n] = r * gw + c;
            }
        k++;
    }
    *next = maxp + 1;
    return n;
}

static int n_images_of(const seg *segs, int n_segs, qhx_mrope_grid *grids) {
    int k = 0;
    for (int s = 0; s < n_segs; s++)
        if (segs[s].is_image) grids[k++] = segs[s].g;
    return k;
}

static int32_t ids[MAXN], img_ref[MAXN], img_got[MAXN];
static int64_t pos_ref[MAXN * 3], pos_got[MAXN * 3], row_ref[MAXN], row_got[MAXN];

/* Compare the code with the reference on one composition; returns the mismatch count. */
static int check_case(const seg *segs, int n_segs, int64_t merge, int64_t start) {
    qhx_mrope_grid grids[64];
    int ni = n_images_of(segs, n_segs, grids);
    int64_t next_ref, next_got = -1;
    int64_t n = reference(segs, n_segs, merge, start, ids, pos_ref, img_ref, row_ref, &next_ref);
    qhx_error err = {0};
    qhx_status rc = qhx_mrope_positions(ids, n, PAD, grids, ni, merge, start, pos_got, img_got, row_got, &next_got, &err);
    CHECK_EQ(rc, QHX_OK);
    if (rc) {
        fprintf(stderr, "  %s\n", err.msg);
        return 1;
    }
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        int b = img_ref[i] != img_got[i] || row_ref[i] != row_got[i];
        for (int a = 0; a < 3; a++) b |= pos_ref[i * 3 + a] != pos_got[i * 3 + a];
        if (b && !bad)
            fprintf(stderr, "  first difference at token %lld: (%lld %lld %lld) img %d row %lld vs (%lld %lld %lld) img %d row %lld\n",
                    (long long)i, (long long)pos_got[i * 3], (long long)pos_got[i * 3 + 1], (long long)pos_got[i * 3 + 2],
                    img_got[i], (long long)row_got[i], (long long)pos_ref[i * 3], (long long)pos_ref[i * 3 + 1],
                    (long long)pos_ref[i * 3 + 2], img_ref[i], (long long)row_ref[i]);
        bad += b;
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(next_got, next_ref);
    return bad;
}

/* ---- cases ---------------------------------------------------------------------------------- */

static void test_hand_written(void) {
    /* two images, 2x3 and 2x2 merged tokens (grids 4x6 and 4x4, merge 2), text around them:
     *   text 3: 0 1 2 | image A starts at 3: h 3..4, w 3..5, next 3 + 3 = 6 | text 2: 6 7 |
     *   image B at 8: h 8..9, w 8..9, next 10 | text 1: 10 */
    seg s[] = {{0, 3, {0, 0, 0, 0}}, {1, 0, {1, 4, 6, 0}}, {0, 2, {0, 0, 0, 0}}, {1, 0, {1, 4, 4, 0}}, {0, 1, {0, 0, 0, 0}}};
    qhx_mrope_grid grids[2] = {{1, 4, 6, 0}, {1, 4, 4, 0}};
    int64_t next = 0;
    int64_t n = reference(s, 5, 2, 0, ids, pos_ref, img_ref, row_ref, &next);
    CHECK_EQ(n, 3 + 6 + 2 + 4 + 1);
    CHECK_EQ(qhx_mrope_positions(ids, n, PAD, grids, 2, 2, 0, pos_got, img_got, row_got, &next, NULL), QHX_OK);
    const int64_t want[][3] = {{0, 0, 0}, {1, 1, 1}, {2, 2, 2},                                  /* text */
                               {3, 3, 3}, {3, 3, 4}, {3, 3, 5}, {3, 4, 3}, {3, 4, 4}, {3, 4, 5}, /* A */
                               {6, 6, 6}, {7, 7, 7},                                             /* text */
                               {8, 8, 8}, {8, 8, 9}, {8, 9, 8}, {8, 9, 9},                       /* B */
                               {10, 10, 10}};
    int bad = 0;
    for (int64_t i = 0; i < n; i++)
        for (int a = 0; a < 3; a++) bad += pos_got[i * 3 + a] != want[i][a];
    CHECK_EQ(bad, 0);
    CHECK_EQ(next, 11);
    CHECK_EQ(img_got[3], 0);
    CHECK_EQ(img_got[11], 1);
    CHECK_EQ(row_got[14], 3);
    CHECK_EQ(img_got[15], -1);
    check_case(s, 5, 2, 0);
    check_case(s, 5, 2, 37); /* a later turn: everything shifts by the start */
}

/* Random compositions: 1-5 images of random grids (tall, wide, square), merge 1-3, text of
 * 1-7 tokens before each image and optionally after the last, random starts. */
static void test_random(void) {
    uint64_t x = 0x9e3779b97f4a7c15ull;
    int bad_cases = 0;
    for (int c = 0; c < 400; c++) {
        seg s[16];
        int ns = 0, ni = 1 + (int)((x >> 33) % 5);
        int64_t merge = 1 + (int64_t)((x >> 20) % 3);
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        for (int k = 0; k < ni; k++) {
            /* text before every image (a vision_start at least), so two runs never touch */
            s[ns++] = (seg){0, 1 + (int64_t)((x >> 40) % 7), {0}};
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            int64_t gh = 1 + (int64_t)((x >> 35) % 6), gw = 1 + (int64_t)((x >> 45) % 6);
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            s[ns++] = (seg){1, 0, {1, gh * merge, gw * merge, 0}};
        }
        if (x & 1) s[ns++] = (seg){0, 1 + (int64_t)((x >> 50) % 9), {0}};
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        bad_cases += check_case(s, ns, merge, (int64_t)(x % 3 == 0 ? 0 : (x >> 50) % 500)) != 0;
    }
    CHECK_EQ(bad_cases, 0);
}

/* The fixtures' single-image prompts against their golden positions. */
static void test_golden(const char *case_dir, int32_t pad, const char *const *names, int n_names) {
    char path[1024];
    snprintf(path, sizeof path, "%s/fixtures/parity/%s/prompts.json", QHX_DATA_DIR, case_dir);
    qhx_error err = {0};
    json_t *prompts = qhx_json_load_file(path, &err);
    snprintf(path, sizeof path, "%s/fixtures/parity/%s/golden.json", QHX_DATA_DIR, case_dir);
    json_t *gold = qhx_json_load_file(path, &err);
    CHECK(prompts && gold);
    if (!prompts || !gold) {
        fprintf(stderr, "  %s\n", err.msg);
        goto done;
    }
    for (int q = 0; q < n_names; q++) {
        const json_t *pr = NULL;
        for (size_t i = 0; i < json_array_size(prompts); i++) {
            const json_t *e = json_array_get(prompts, i);
            const char *nm = json_string_value(json_object_get(e, "name"));
            if (nm && !strcmp(nm, names[q])) pr = e;
        }
        const json_t *g = json_object_get(json_object_get(gold, "prompts"), names[q]);
        const json_t *thw = json_object_get(g, "mrope_positions_thw");
        const json_t *hw = json_object_get(pr, "image_hw");
        CHECK(pr && thw && hw);
        if (!pr || !thw || !hw) continue;
        const json_t *ja = json_object_get(pr, "ids");
        int64_t n = (int64_t)json_array_size(ja);
        CHECK(n > 0 && n < MAXN);
        if (n <= 0 || n >= MAXN) continue;
        for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(ja, (size_t)i));
        /* patch grid of an unresized image: (h / 16, w / 16) */
        qhx_mrope_grid grid = {1, json_integer_value(json_array_get(hw, 0)) / 16, json_integer_value(json_array_get(hw, 1)) / 16, 0};
        int64_t next = -1;
        CHECK_EQ(qhx_mrope_positions(ids, n, pad, &grid, 1, 2, 0, pos_got, NULL, NULL, &next, &err), QHX_OK);
        int bad = 0;
        for (int64_t i = 0; i < n; i++)
            for (int a = 0; a < 3; a++)
                bad += pos_got[i * 3 + a] != json_integer_value(json_array_get(json_array_get(thw, (size_t)i), (size_t)a));
        CHECK_EQ(bad, 0);
        /* the first decode row (row n) is the text position after the prompt */
        const json_t *dec = json_array_get(thw, (size_t)n);
        if (dec) CHECK_EQ(next, json_integer_value(json_array_get(dec, 0)));
    }
done:
    json_decref(prompts);
    json_decref(gold);
}

static void test_errors(void) {
    qhx_error err = {0};
    qhx_mrope_grid g2[2] = {{1, 4, 4, 0}, {1, 2, 2, 0}};
    int32_t a[] = {1, PAD, PAD, PAD, PAD, 2};
    int64_t pos[64];
    /* a run of 4 pads with a 2x2-token grid: fine; with a 1-token grid: the counts named */
    CHECK_EQ(qhx_mrope_positions(a, 6, PAD, g2, 1, 2, 0, pos, NULL, NULL, NULL, &err), QHX_OK);
    CHECK_EQ(qhx_mrope_positions(a, 6, PAD, g2 + 1, 1, 2, 0, pos, NULL, NULL, NULL, &err), QHX_E_ARG);
    CHECK_CONTAINS(err.msg, "4 image-pad tokens");
    CHECK_CONTAINS(err.msg, "needs 1");
    /* one run, two grids */
    CHECK_EQ(qhx_mrope_positions(a, 6, PAD, g2, 2, 2, 0, pos, NULL, NULL, NULL, &err), QHX_E_ARG);
    CHECK_CONTAINS(err.msg, "2 images given");
    /* two runs, one grid */
    int32_t b[] = {PAD, 5, PAD};
    qhx_mrope_grid g1[1] = {{1, 2, 2, 0}};
    CHECK_EQ(qhx_mrope_positions(b, 3, PAD, g1, 1, 2, 0, pos, NULL, NULL, NULL, &err), QHX_E_ARG);
    CHECK_CONTAINS(err.msg, "more image-pad runs");
    /* two images' pads side by side form one run (HF groups them too): refused */
    qhx_mrope_grid g11[2] = {{1, 2, 2, 0}, {1, 2, 2, 0}};
    int32_t c[] = {7, PAD, PAD, 8};
    CHECK_EQ(qhx_mrope_positions(c, 4, PAD, g11, 2, 2, 0, pos, NULL, NULL, NULL, &err), QHX_E_ARG);
    /* pads without an image */
    CHECK_EQ(qhx_mrope_positions(a, 6, PAD, NULL, 0, 2, 0, pos, NULL, NULL, NULL, &err), QHX_E_ARG);
    CHECK_CONTAINS(err.msg, "no image");
    /* no pads, no images: plain text from the start */
    int32_t t[] = {1, 2, 3};
    int64_t next = 0;
    CHECK_EQ(qhx_mrope_positions(t, 3, PAD, NULL, 0, 2, 5, pos, NULL, NULL, &next, &err), QHX_OK);
    CHECK_EQ(pos[0], 5);
    CHECK_EQ(pos[8], 7);
    CHECK_EQ(next, 8);
    /* video grids, grids not divisible by the merge, silly sizes */
    qhx_mrope_grid vid = {2, 4, 4, 0}, odd = {1, 3, 4, 0}, zero = {1, 0, 4, 0};
    CHECK_EQ(qhx_mrope_positions(a, 6, PAD, &vid, 1, 2, 0, pos, NULL, NULL, NULL, &err), QHX_E_ARG);
    CHECK_CONTAINS(err.msg, "video");
    CHECK_EQ(qhx_mrope_positions(a, 6, PAD, &odd, 1, 2, 0, pos, NULL, NULL, NULL, &err), QHX_E_ARG);
    CHECK_EQ(qhx_mrope_positions(a, 6, PAD, &zero, 1, 2, 0, pos, NULL, NULL, NULL, &err), QHX_E_ARG);
    CHECK_EQ(qhx_mrope_positions(a, 6, PAD, g2, 1, 0, 0, pos, NULL, NULL, NULL, &err), QHX_E_ARG);
    CHECK_EQ(qhx_mrope_positions(a, 6, PAD, g2, -1, 2, 0, pos, NULL, NULL, NULL, &err), QHX_E_ARG);
    CHECK_EQ(qhx_mrope_positions(a, 6, PAD, g2, 1, 2, -1, pos, NULL, NULL, NULL, &err), QHX_E_LIMIT);
    CHECK_EQ(qhx_mrope_positions(a, 6, PAD, g2, 1, 2, INT64_MAX, pos, NULL, NULL, NULL, &err), QHX_E_LIMIT);
    CHECK_EQ(qhx_mrope_positions(NULL, 6, PAD, g2, 1, 2, 0, pos, NULL, NULL, NULL, &err), QHX_E_ARG);
}

static int64_t sum_of(const int64_t *v, int64_t n) {
    int64_t s = 0;
    for (int64_t k = 0; k < n; k++) s += v[k];
    return s;
}

/* A video as HF's get_rope_index takes it: its grid (2, 4, 4) split into two grids (1, 4, 4),
 * each a run of the video pad after its timestamp text, next to an image's run of the image pad:
 * [t t] [I I I I] [s] [<ts> x3] [s] [V V V V] [e] [<ts>] [s] [V V V V] [e] [e] */
static void test_video_runs(void) {
    const int32_t I = 7, VP = 8;
    int32_t vids[] = {1, 2, I, I, I, I, 3, 4, 4, 4, 3, VP, VP, VP, VP, 5, 4, 3, VP, VP, VP, VP, 5, 5};
    const int64_t n = sizeof vids / sizeof vids[0];
    qhx_mrope_grid g[3] = {{1, 4, 4, 0}, {1, 4, 4, VP}, {1, 4, 4, VP}};
    int64_t pos[sizeof vids / sizeof vids[0] * 3], next = 0, row[sizeof vids / sizeof vids[0]];
    int32_t img[sizeof vids / sizeof vids[0]];
    qhx_error err = {0};
    CHECK_EQ(qhx_mrope_positions(vids, n, I, g, 3, 2, 0, pos, img, row, &next, &err), QHX_OK);
    /* text 0, 1; image at p = 2: (2, 2 + r, 2 + c), then p = 4; text 4 .. 8; group 1 at p = 9 */
    CHECK_EQ(pos[2 * 3 + 0], 2);
    CHECK_EQ(pos[5 * 3 + 1], 3);
    CHECK_EQ(pos[5 * 3 + 2], 3);
    CHECK_EQ(pos[6 * 3], 4);
    CHECK_EQ(pos[11 * 3], 9);
    CHECK_EQ(pos[14 * 3 + 1], 10);
    CHECK_EQ(pos[14 * 3 + 2], 10);
    CHECK_EQ(img[11], 1);
    CHECK_EQ(img[18], 2);
    CHECK_EQ(row[21], 3);
    CHECK_EQ(pos[15 * 3], 11); /* after group 1: 9 + max(2, 2) */
    CHECK_EQ(pos[18 * 3], 14);
    CHECK_EQ(next, 18);
    /* a run of the wrong pad for its grid */
    qhx_mrope_grid swapped[3] = {{1, 4, 4, VP}, {1, 4, 4, 0}, {1, 4, 4, VP}};
    CHECK_EQ(qhx_mrope_positions(vids, n, I, swapped, 3, 2, 0, pos, NULL, NULL, NULL, &err), QHX_E_ARG);
    CHECK(strstr(err.msg, "video pad 8 was expected") != NULL);
    /* video pads without a video grid are text, as in an HF prompt without videos */
    CHECK_EQ(qhx_mrope_positions(vids, n, I, g, 1, 2, 0, pos, NULL, NULL, NULL, &err), QHX_OK);
    CHECK_EQ(pos[(n - 1) * 3], n - 1 - 4 + 2);
}

static void test_budget(void) {
    qhx_error err = {0};
    int64_t cap[8];
    /* everything fits: no caps */
    int64_t need1[] = {256, 64, 100};
    CHECK_EQ(qhx_image_budget_split(need1, 3, 420, 4, cap, &err), QHX_OK);
    CHECK_EQ(cap[0], 0);
    CHECK_EQ(cap[1], 0);
    CHECK_EQ(cap[2], 0);
    /* 300 for 256 + 64 + 100: the 64 and the 100 are below an equal share (100), keep their
     * size; the 256 gets the rest: 300 - 164 = 136 */
    CHECK_EQ(qhx_image_budget_split(need1, 3, 300, 4, cap, &err), QHX_OK);
    CHECK_EQ(cap[0], 136);
    CHECK_EQ(cap[1], 0);
    CHECK_EQ(cap[2], 0);
    /* two big ones share what a small one leaves, the odd token to the first */
    int64_t need2[] = {1000, 10, 1000};
    CHECK_EQ(qhx_image_budget_split(need2, 3, 211, 4, cap, &err), QHX_OK);
    CHECK_EQ(cap[0], 101);
    CHECK_EQ(cap[1], 0);
    CHECK_EQ(cap[2], 100);
    /* equal needs: equal split */
    int64_t need3[] = {500, 500, 500, 500};
    CHECK_EQ(qhx_image_budget_split(need3, 4, 1000, 4, cap, &err), QHX_OK);
    CHECK_EQ(sum_of(cap, 4), 1000);
    CHECK_EQ(cap[3], 250);
    /* a cascade: 40 fits a share of 100 (300 / 3); then 260 / 2 = 130 fits 120; the last takes 140 */
    int64_t need4[] = {40, 120, 900};
    CHECK_EQ(qhx_image_budget_split(need4, 3, 300, 4, cap, &err), QHX_OK);
    CHECK_EQ(cap[0], 0);
    CHECK_EQ(cap[1], 0);
    CHECK_EQ(cap[2], 140);
    /* too little for the smallest images */
    CHECK_EQ(qhx_image_budget_split(need3, 4, 15, 4, cap, &err), QHX_E_LIMIT);
    CHECK_CONTAINS(err.msg, "at least 4 tokens");
    CHECK_EQ(qhx_image_budget_split(need3, 0, 15, 4, cap, &err), QHX_E_ARG);
    int64_t negative[] = {-1};
    CHECK_EQ(qhx_image_budget_split(negative, 1, 15, 4, cap, &err), QHX_E_ARG);
    /* the rule holds for random needs: the capped total never exceeds the budget, uncapped
     * images are those no larger than any cap given */
    uint64_t x = 12345;
    int bad = 0;
    for (int c = 0; c < 2000; c++) {
        int64_t need[8], n = 1 + (int64_t)(x % 8), total;
        for (int64_t k = 0; k < n; k++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            need[k] = 4 + (int64_t)((x >> 33) % 2000);
        }
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        total = 4 * n + (int64_t)((x >> 30) % 6000);
        if (qhx_image_budget_split(need, n, total, 4, cap, &err)) {
            bad++;
            continue;
        }
        int64_t used = 0, min_cap = INT64_MAX, max_free = 0, max_cap = 0;
        for (int64_t k = 0; k < n; k++) {
            used += cap[k] ? cap[k] : need[k];
            if (cap[k] && cap[k] < min_cap) min_cap = cap[k];
            if (cap[k] > max_cap) max_cap = cap[k];
            if (cap[k] && cap[k] > need[k]) bad++; /* a cap is only set where it bites */
            if (!cap[k] && need[k] > max_free) max_free = need[k];
        }
        bad += used > total;
        if (min_cap != INT64_MAX) bad += max_free > min_cap || max_cap - min_cap > 1 || used != total;
    }
    CHECK_EQ(bad, 0);
}

int main(void) {
    test_hand_written();
    test_random();
    static const char *const names[] = {"img64x64", "img64x96"};
    test_golden("qwen35vl-tiny-f32", 972, names, 2);
    test_golden("qwen3vl-tiny-f32", 1002, names, 2);
    test_errors();
    test_video_runs();
    test_budget();
    return t_done("test_mrope");
}
