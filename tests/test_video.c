/* test_video: video decoding and preprocessing (src/video) against the goldens of Hugging Face's
 * Qwen3VLVideoProcessor (tests/data/video/golden, made by tests/hf/video_golden.py with
 * torchcodec as the reader): grid, sampled indices, metadata frame rate, timestamps, the prompt
 * placeholder, the SHA-256 of every sampled RGB frame and of pixel_values_videos (54 cases). Then the pure
 * functions on hand-computed cases and the bad inputs. Without FFmpeg in the build, only the
 * pure parts and the "no FFmpeg" message are checked. */
#include "t.h"

#include "core/sha256.h"
#include "video/video.h"

#include <dirent.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static const char *vid(const char *name) {
    static char buf[1024];
    snprintf(buf, sizeof buf, "%s/video/%s", QHX_TEST_DATA, name);
    return buf;
}

/* The SHA-256 of each frame the reader hands over, in order. */
typedef struct frame_hashes {
    char hex[1024][65];
    int64_t n, width, height;
} frame_hashes;

static qhx_status hash_frame(void *ctx, int64_t slot, const qhx_image *rgb, qhx_error *err) {
    (void)err;
    frame_hashes *h = ctx;
    qhx_sha256 s;
    uint8_t d[32];
    qhx_sha256_init(&s);
    qhx_sha256_update(&s, rgb->rgb, (size_t)(rgb->width * rgb->height * 3));
    qhx_sha256_final(&s, d);
    if (slot < 1024) qhx_sha256_hex(d, h->hex[slot]);
    h->n = slot + 1;
    h->width = rgb->width;
    h->height = rgb->height;
    return QHX_OK;
}

/* The placeholder as the processor writes it, pads counted ("<|video_pad|>*N"). */
static void placeholder(const qhx_video_patches *p, int64_t merge, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = 0;
    for (int64_t g = 0; g < p->grid_t && n < cap; g++) {
        char ts[64];
        qhx_video_timestamp_text(p->timestamps[g], ts, sizeof ts);
        n += (size_t)snprintf(buf + n, cap - n, "%s<|vision_start|><|video_pad|>*%lld<|vision_end|>", ts,
                              (long long)(p->grid_h * p->grid_w / (merge * merge)));
    }
}

static void golden_case(const char *path) {
    json_error_t je;
    json_t *g = json_load_file(path, 0, &je);
    CHECK(g != NULL);
    if (!g) return;
    const char *clip = json_string_value(json_object_get(g, "clip"));
    qhx_video_prep prep = qhx_video_prep_default();
    json_t *opts = json_object_get(g, "qhx_pixels_options");
    qhx_error err = {0};
    for (size_t i = 0; i + 1 < json_array_size(opts); i += 2) {
        const char *o = json_string_value(json_array_get(opts, i)), *v = json_string_value(json_array_get(opts, i + 1));
        if (!strcmp(o, "--fps")) prep.fps = atof(v);
        else if (!strcmp(o, "--max-frames")) prep.max_frames = atoll(v);
        else if (!strcmp(o, "--config")) {
            char cfg[1024];
            snprintf(cfg, sizeof cfg, "%s/fixtures/parity/qwen3vl-tiny-f32/preprocessor_config.json", QHX_DATA_DIR);
            CHECK_EQ(qhx_video_prep_load(cfg, &prep, &err), QHX_OK);
        }
    }
    qhx_video_patches p;
    qhx_status rc = qhx_video_preprocess_file(vid(clip), &prep, NULL, &p, &err);
    if (rc) fprintf(stderr, "%s: %s\n", path, err.msg);
    CHECK_EQ(rc, QHX_OK);
    if (rc) { json_decref(g); return; }
    json_t *grid = json_object_get(g, "grid_thw");
    CHECK_EQ(p.grid_t, json_integer_value(json_array_get(grid, 0)));
    CHECK_EQ(p.grid_h, json_integer_value(json_array_get(grid, 1)));
    CHECK_EQ(p.grid_w, json_integer_value(json_array_get(grid, 2)));
    CHECK_EQ(p.meta.n_frames, json_integer_value(json_object_get(g, "n_frames")));
    CHECK(p.meta.fps == json_real_value(json_object_get(g, "fps")) ||
          p.meta.fps == (double)json_integer_value(json_object_get(g, "fps")));
    json_t *idx = json_object_get(g, "indices");
    CHECK_EQ(p.n_sampled, (long long)json_array_size(idx));
    for (int64_t i = 0; i < p.n_sampled && i < (int64_t)json_array_size(idx); i++)
        CHECK_EQ(p.indices[i], json_integer_value(json_array_get(idx, (size_t)i)));
    json_t *ts = json_object_get(g, "timestamps");
    for (int64_t i = 0; i < p.grid_t && i < (int64_t)json_array_size(ts); i++) {
        json_t *t = json_array_get(ts, (size_t)i);
        double want = json_is_integer(t) ? (double)json_integer_value(t) : json_real_value(t);
        CHECK(p.timestamps[i] == want);
    }
    char text[8192];
    placeholder(&p, prep.img.merge_size, text, sizeof text);
    CHECK_STR(text, json_string_value(json_object_get(g, "placeholder")));
    /* the plan from the metadata alone (what a prompt's tokens are counted from before any frame
     * is decoded) is the processor's too; the pass's time is split between its two parts */
    qhx_video_meta meta;
    qhx_video_patches plan;
    CHECK_EQ(qhx_video_probe(vid(clip), NULL, &meta, &err), QHX_OK);
    CHECK_EQ(qhx_video_plan(&meta, &prep, NULL, clip, &plan, &err), QHX_OK);
    CHECK(plan.data == NULL);
    CHECK_EQ(plan.grid_t, p.grid_t);
    CHECK_EQ(plan.grid_h, p.grid_h);
    CHECK_EQ(plan.grid_w, p.grid_w);
    CHECK_EQ(plan.n_sampled, p.n_sampled);
    for (int64_t i = 0; i < plan.n_sampled && i < p.n_sampled; i++) CHECK_EQ(plan.indices[i], p.indices[i]);
    for (int64_t i = 0; i < plan.grid_t && i < p.grid_t; i++) CHECK(plan.timestamps[i] == p.timestamps[i]);
    char plan_text[8192];
    placeholder(&plan, prep.img.merge_size, plan_text, sizeof plan_text);
    CHECK_STR(plan_text, text);
    qhx_video_patches_deinit(&plan);
    CHECK(p.decode_ms > 0 && p.preprocess_ms > 0);
    /* pixel_values, bit for bit */
    qhx_sha256 s;
    uint8_t d[32];
    char hex[65];
    qhx_sha256_init(&s);
    qhx_sha256_update(&s, p.data, (size_t)(p.n_patches * p.patch_dim) * sizeof(float));
    qhx_sha256_final(&s, d);
    qhx_sha256_hex(d, hex);
    CHECK_STR(hex, json_string_value(json_object_get(g, "pixel_values_sha256")));
    /* the reader's frames, bit for bit */
    frame_hashes *fh = calloc(1, sizeof *fh);
    CHECK_EQ(qhx_video_decode_frames(vid(clip), NULL, p.indices, p.n_sampled, hash_frame, fh, &err), QHX_OK);
    json_t *fs = json_object_get(g, "frames_sha256");
    CHECK_EQ(fh->n, (long long)json_array_size(fs));
    for (int64_t i = 0; i < fh->n && i < (int64_t)json_array_size(fs); i++)
        CHECK_STR(fh->hex[i], json_string_value(json_array_get(fs, (size_t)i)));
    json_t *size = json_object_get(g, "frame_size");
    CHECK_EQ(fh->width, json_integer_value(json_array_get(size, 0)));
    CHECK_EQ(fh->height, json_integer_value(json_array_get(size, 1)));
    free(fh);
    qhx_video_patches_deinit(&p);
    json_decref(g);
}

static int goldens(void) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/video/golden", QHX_TEST_DATA);
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".json")) continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        int before = t_failures;
        golden_case(path);
        if (t_failures != before) fprintf(stderr, "  in %s\n", e->d_name);
        n++;
    }
    closedir(d);
    return n;
}

/* np.linspace(...).round() and the frame-count rule, computed by hand with numpy. */
static void sampling(void) {
    qhx_video_prep p = qhx_video_prep_default();
    int64_t idx[800], k = 0;
    qhx_error err = {0};
    /* 100 frames at 25 fps, 2 fps: int(100 / 25 * 2) = 8 */
    CHECK_EQ(qhx_video_sample(100, 25, &p, 768, idx, &k, &err), QHX_OK);
    CHECK_EQ(k, 8);
    int64_t want8[] = {0, 14, 28, 42, 57, 71, 85, 99};
    for (int i = 0; i < 8; i++) CHECK_EQ(idx[i], want8[i]);
    /* round half to even: linspace(0, 9, 7) = 0, 1.5, 3, 4.5, 6, 7.5, 9 -> 0 2 3 4 6 8 9 */
    p.num_frames = 7; /* rounded to the temporal patch: 7 / 2 = 3.5 -> 4 -> 8 frames */
    CHECK_EQ(qhx_video_sample(10, 5, &p, 768, idx, &k, &err), QHX_OK);
    CHECK_EQ(k, 8);
    p.num_frames = 0;
    p.max_frames = 7;
    CHECK_EQ(qhx_video_sample(10, 1, &p, 768, idx, &k, &err), QHX_OK); /* int(10 * 2) = 20 -> 7 */
    int64_t want7[] = {0, 2, 3, 4, 6, 8, 9};
    CHECK_EQ(k, 7);
    for (int i = 0; i < 7; i++) CHECK_EQ(idx[i], want7[i]);
    /* fewer frames than min_frames: all of them */
    p = qhx_video_prep_default();
    CHECK_EQ(qhx_video_sample(3, 30, &p, 768, idx, &k, &err), QHX_OK);
    CHECK_EQ(k, 3);
    /* a short clip at a high rate: int(0.1 s * 2) = 0 -> min_frames 4 */
    CHECK_EQ(qhx_video_sample(6, 60, &p, 768, idx, &k, &err), QHX_OK);
    CHECK_EQ(k, 4);
    /* no metadata rate: 24 fps as HF assumes */
    CHECK_EQ(qhx_video_sample(240, 0, &p, 768, idx, &k, &err), QHX_OK);
    CHECK_EQ(k, 20);
    CHECK_EQ(qhx_video_sample(0, 24, &p, 768, idx, &k, &err), QHX_E_ARG);
    /* the cap */
    CHECK_EQ(qhx_video_sample(100000, 1, &p, 768, idx, &k, &err), QHX_OK);
    CHECK_EQ(k, 768);
    CHECK_EQ(qhx_video_sample(100000, 1, &p, 100, idx, &k, &err), QHX_E_LIMIT);
    CHECK(strstr(err.msg, "768 frames") != NULL);
}

/* smart_resize of video_processing_qwen3_vl, values from Python. */
static void smart_resize(void) {
    qhx_error err = {0};
    int64_t h, w;
    /* 4 frames of 64x96, min 131072: t_bar*h*w = 4*64*96 = 24576 < min: beta = sqrt(131072 / 24576)
     * h = ceil(64 * 2.309 / 32) * 32 = 160, w = ceil(96 * 2.309 / 32) * 32 = 224 */
    CHECK_EQ(qhx_video_smart_resize(4, 64, 96, 2, 32, 131072, 786432, &h, &w, &err), QHX_OK);
    CHECK_EQ(h, 160);
    CHECK_EQ(w, 224);
    /* 5 frames: t_bar = round(2.5) * 2 = 4 (half to even), the area uses 5 */
    CHECK_EQ(qhx_video_smart_resize(5, 32, 64, 2, 32, 131072, 786432, &h, &w, &err), QHX_OK);
    CHECK_EQ(h, 128);
    CHECK_EQ(w, 256);
    /* a side below the factor is scaled up first (truncated): 31x45 -> 32x46 */
    CHECK_EQ(qhx_video_smart_resize(4, 31, 45, 2, 32, 1024, 1048576, &h, &w, &err), QHX_OK);
    CHECK_EQ(h, 32);
    CHECK_EQ(w, 32);
    /* too large: 768 frames of 1080p down to the area */
    CHECK_EQ(qhx_video_smart_resize(768, 1080, 1920, 2, 32, 131072, 786432, &h, &w, &err), QHX_OK);
    CHECK(h * w * 768 <= 786432 * 2 && h >= 32 && w >= 32);
    CHECK_EQ(qhx_video_smart_resize(1, 64, 64, 2, 32, 131072, 786432, &h, &w, &err), QHX_E_ARG);
    CHECK_EQ(qhx_video_smart_resize(4, 1, 400, 2, 32, 131072, 786432, &h, &w, &err), QHX_E_ARG);
    /* timestamps: (idx[a] + idx[b]) / 2 / fps, the last padded; Python formats .1f half-even on
     * the exact double: 0.25 -> "0.2", 0.35 (0.34999...) -> "0.3" */
    int64_t idx[] = {0, 1, 3};
    double ts[2];
    qhx_video_timestamps(idx, 3, 2.0, 2, ts);
    CHECK(ts[0] == 0.25 && ts[1] == 1.5);
    char buf[64];
    qhx_video_timestamp_text(0.25, buf, sizeof buf);
    CHECK_STR(buf, "<0.2 seconds>");
    qhx_video_timestamp_text(0.35, buf, sizeof buf);
    CHECK_STR(buf, "<0.3 seconds>");
}

/* Every bad input fails with one line naming the file, no crash, nothing leaked. */
static void bad_inputs(void) {
    static const struct {
        const char *file;
        qhx_status code;
        const char *says;
    } cases[] = {
        {"one.mp4", QHX_E_ARG, "fewer than the temporal patch"},
        {"audio.wav", QHX_E_FORMAT, "no video stream"},
        {"empty.avi", QHX_E_FORMAT, "holds no frames"},
        {"truncated.mp4", QHX_E_FORMAT, "not a video file"},
        {"garbage.mp4", QHX_E_FORMAT, "not a video file"},
        {"missing.mp4", QHX_E_IO, "cannot open"},
        {"README.md", QHX_E_FORMAT, "not a video file"},
    };
    qhx_video_prep prep = qhx_video_prep_default();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        qhx_video_patches p;
        qhx_error err = {0};
        qhx_status rc = qhx_video_preprocess_file(vid(cases[i].file), &prep, NULL, &p, &err);
        CHECK_EQ(rc, cases[i].code);
        CHECK(strstr(err.msg, cases[i].says) != NULL);
        CHECK(strstr(err.msg, cases[i].file) != NULL);
        CHECK(strchr(err.msg, '\n') == NULL);
        CHECK(p.data == NULL && p.indices == NULL);
        if (rc != cases[i].code) fprintf(stderr, "  %s: %s\n", cases[i].file, err.msg);
    }
    /* limits: frame side, frame count, sampled frames, patch bytes */
    qhx_video_limits lim = qhx_video_default_limits();
    qhx_video_patches p;
    qhx_error err = {0};
    lim.max_side = 63;
    CHECK_EQ(qhx_video_preprocess_file(vid("h264.mp4"), &prep, &lim, &p, &err), QHX_E_LIMIT);
    CHECK(strstr(err.msg, "96x64") != NULL);
    lim = qhx_video_default_limits();
    lim.max_packets = 50;
    CHECK_EQ(qhx_video_preprocess_file(vid("long.mp4"), &prep, &lim, &p, &err), QHX_E_LIMIT);
    lim = qhx_video_default_limits();
    lim.max_frames = 4;
    CHECK_EQ(qhx_video_preprocess_file(vid("long.mp4"), &prep, &lim, &p, &err), QHX_E_LIMIT);
    lim = qhx_video_default_limits();
    lim.max_bytes = 1000;
    CHECK_EQ(qhx_video_preprocess_file(vid("h264.mp4"), &prep, &lim, &p, &err), QHX_E_LIMIT);
    CHECK(strstr(err.msg, "cap") != NULL);
    /* indices that do not ascend, and one past the end */
    int64_t down[] = {3, 1};
    CHECK_EQ(qhx_video_decode_frames(vid("h264.mp4"), NULL, down, 2, hash_frame, NULL, &err), QHX_E_ARG);
    frame_hashes *fh = calloc(1, sizeof *fh);
    int64_t past[] = {0, 10};
    CHECK_EQ(qhx_video_decode_frames(vid("h264.mp4"), NULL, past, 2, hash_frame, fh, &err), QHX_E_FORMAT);
    CHECK(strstr(err.msg, "frame 10 could not be decoded") != NULL);
    free(fh);
}

/* The same clip from bytes in memory (the server's path): the same pixels, and the errors name
 * the label. */
static void from_memory(void) {
    FILE *f = fopen(vid("vfr.mkv"), "rb");
    CHECK(f != NULL);
    if (!f) return;
    static uint8_t buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    qhx_video_prep prep = qhx_video_prep_default();
    qhx_video_patches a, b;
    qhx_error err = {0};
    qhx_video_src src = {.buf = buf, .len = n, .label = "upload"};
    CHECK_EQ(qhx_video_preprocess_file(vid("vfr.mkv"), &prep, NULL, &a, &err), QHX_OK);
    CHECK_EQ(qhx_video_preprocess(&src, &prep, NULL, &b, &err), QHX_OK);
    CHECK(a.data && b.data && a.n_patches == b.n_patches &&
          !memcmp(a.data, b.data, (size_t)(a.n_patches * a.patch_dim) * sizeof(float)));
    CHECK(a.meta.fps == b.meta.fps && a.grid_t == b.grid_t);
    qhx_video_patches_deinit(&a);
    qhx_video_patches_deinit(&b);
    /* cut bytes, no bytes, random bytes */
    size_t cuts[] = {0, 1, 100, n / 2, n - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        src.len = cuts[i];
        qhx_status rc = qhx_video_preprocess(&src, &prep, NULL, &b, &err);
        CHECK(rc == QHX_E_FORMAT || (cuts[i] == n - 1 && rc == QHX_OK));
        if (rc) CHECK(strstr(err.msg, "upload") == err.msg);
        qhx_video_patches_deinit(&b);
    }
}

int main(void) {
    sampling();
    smart_resize();
    if (!qhx_video_available()) {
        qhx_video_patches p;
        qhx_error err = {0};
        qhx_video_prep prep = qhx_video_prep_default();
        CHECK_EQ(qhx_video_preprocess_file(vid("h264.mp4"), &prep, NULL, &p, &err), QHX_E_UNSUPPORTED);
        CHECK_STR(err.msg, "video: this build has no FFmpeg");
        printf("test_video: no FFmpeg in this build: the decoding goldens were skipped\n");
        return t_done("test_video");
    }
    int n = goldens();
    CHECK(n >= 54);
    bad_inputs();
    from_memory();
    printf("test_video: %d golden cases\n", n);
    return t_done("test_video");
}
