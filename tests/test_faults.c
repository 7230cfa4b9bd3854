// ctest-labels: slow
/* Faults on the public paths: allocation failures (fail the Nth allocation for N = 0, 1, ...
 * until the whole path succeeds) over model open (a checkpoint folder and a forged bundle's
 * manifest), session create / feed / generate / save / restore, a Qwen3-VL chat turn with an
 * image (decode, preprocess, vision tower), image decode + preprocess of PNG and JPEG, and
 * forge (convert and random). At every failure point the call must fail with a message, leave
 * nothing behind (no leak under LeakSanitizer, no output or staging folder), and never crash.
 * Then failing writes (a file-size limit) and damaged session files (truncated at many
 * offsets, one byte flipped): refused, with the session left as it was. */
#include "qhx.h"

#include "core/alloc.h"
#include "core/file.h"
#include "forge/forge.h"
#include "image/image.h"
#include "t.h"

/* the former chat calls (deprecated wrappers over the prompt object) are what this test exercises */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static char fx[512], fx_vl[512], base[256];

static const qhx_token PROMPT[] = {961, 82, 198, 40, 179, 264};
#define N_PROMPT ((size_t)(sizeof PROMPT / sizeof PROMPT[0]))

static void rm_flat(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    if (d) closedir(d);
    rmdir(dir);
}

static int n_entries(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    if (d) closedir(d);
    return n;
}

/* One sweep step: arm the failure after n allocations, run, disarm. Returns whether it fired. */
#define SWEEP_BEGIN(n) qhx_alloc_fail_after(n)
#define SWEEP_END() (qhx_alloc_failed() ? (qhx_alloc_fail_after(-1), 1) : (qhx_alloc_fail_after(-1), 0))

/* ---- model + session through the public API ------------------------------------------------- */

/* open path, create a session, feed the prompt and a text, generate, save, restore. */
static qhx_status session_path(const char *path, const char *state, qhx_error *err) {
    qhx_model *m = NULL;
    qhx_session *s = NULL;
    qhx_model_params mp = qhx_model_default_params();
    mp.n_threads = 2;
    qhx_status rc = qhx_model_open(path, &mp, &m, err);
    if (!rc) {
        qhx_session_params sp = qhx_session_default_params(m);
        sp.n_ctx = 32;
        sp.sampling = (qhx_sample_params){.temperature = 0.7f, .top_k = 8, .top_p = 0.9f, .seed = 1};
        rc = qhx_session_create(m, &sp, &s, err);
    }
    if (!rc) rc = qhx_session_feed(s, PROMPT, N_PROMPT, err);
    if (!rc) rc = qhx_session_feed_text(s, " Hello world", 12, err);
    qhx_generate_params gp = {.max_tokens = 3, .ignore_stop = 1};
    if (!rc) rc = qhx_session_generate(s, &gp, NULL, err);
    if (!rc) rc = qhx_session_save(s, state, err);
    if (!rc) rc = qhx_session_restore(s, state, err);
    if (!rc) rc = qhx_session_generate(s, &gp, NULL, err);
    qhx_session_free(s);
    qhx_model_free(m);
    return rc;
}

static void sweep_session(const char *path) {
    char state[300];
    snprintf(state, sizeof state, "%s/state", base);
    int64_t n = 0;
    int done = 0;
    for (; n < 100000 && !done; n++) {
        qhx_error err = {0};
        SWEEP_BEGIN(n);
        qhx_status rc = session_path(path, state, &err);
        int fired = SWEEP_END();
        if (fired) {
            CHECK(rc != QHX_OK);
            CHECK(err.msg[0] != '\0');
            if (rc == QHX_OK || !err.msg[0]) fprintf(stderr, "failure point %lld: rc %d\n", (long long)n, rc);
        } else {
            CHECK_EQ(rc, QHX_OK);
            if (rc) fprintf(stderr, "%s\n", err.msg);
            done = 1;
        }
        unlink(state);
        CHECK_EQ(n_entries(base), 1); /* only the bundle: no temporary state file */
    }
    CHECK(done);
    printf("session sweep: %lld failure points (%s)\n", (long long)n, path);
}

/* A Qwen3-VL chat turn with an image through the public API. */
static void sweep_vl_chat(void) {
    char png[600];
    snprintf(png, sizeof png, "%s/image-64x96.png", fx_vl);
    int64_t n = 0;
    int done = 0;
    for (; n < 100000 && !done; n++) {
        qhx_error err = {0};
        qhx_model *m = NULL;
        qhx_session *s = NULL;
        qhx_model_params mp = qhx_model_default_params();
        mp.n_threads = 1;
        SWEEP_BEGIN(n);
        qhx_status rc = qhx_model_open(fx_vl, &mp, &m, &err);
        if (!rc) {
            qhx_session_params sp = qhx_session_default_params(m);
            sp.n_ctx = 64;
            rc = qhx_session_create(m, &sp, &s, &err);
        }
        qhx_chat_msg msgs[] = {{"user", "What is this?"}};
        if (!rc) rc = qhx_session_feed_chat(s, msgs, 1, png, 0, &err);
        qhx_generate_params gp = {.max_tokens = 2, .ignore_stop = 1};
        if (!rc) rc = qhx_session_generate(s, &gp, NULL, &err);
        int fired = SWEEP_END();
        if (fired) {
            CHECK(rc != QHX_OK);
            CHECK(err.msg[0] != '\0');
            if (rc == QHX_OK) fprintf(stderr, "VL chat: failure point %lld was not reported\n", (long long)n);
        } else {
            CHECK_EQ(rc, QHX_OK);
            if (rc) fprintf(stderr, "%s\n", err.msg);
            done = 1;
        }
        qhx_session_free(s);
        qhx_model_free(m);
    }
    CHECK(done);
    printf("VL chat sweep: %lld failure points\n", (long long)n);
}

/* ---- images --------------------------------------------------------------------------------- */

static void sweep_image(const char *path) {
    qhx_image_limits lim = {4096, 4096, (size_t)1 << 26};
    qhx_image_prep prep = qhx_image_prep_default();
    prep.min_pixels = 32 * 32;
    prep.max_pixels = 96 * 96;
    int64_t n = 0;
    int done = 0;
    for (; n < 100000 && !done; n++) {
        qhx_error err = {0};
        qhx_image img = {0};
        qhx_image_patches p = {0};
        SWEEP_BEGIN(n);
        qhx_status rc = qhx_image_load(path, &lim, &img, &err);
        if (!rc) rc = qhx_image_preprocess(&img, &prep, &p, &err);
        int fired = SWEEP_END();
        if (fired) {
            CHECK(rc != QHX_OK);
            CHECK(err.msg[0] != '\0');
        } else {
            CHECK_EQ(rc, QHX_OK);
            if (rc) fprintf(stderr, "%s\n", err.msg);
            done = 1;
        }
        qhx_image_patches_deinit(&p);
        qhx_image_deinit(&img);
    }
    CHECK(done);
    printf("image sweep: %lld failure points (%s)\n", (long long)n, path);
}

/* ---- forge ---------------------------------------------------------------------------------- */

/* Every failure point up to `dense`, then every `stride`-th (forge allocates per tensor). */
static void sweep_forge(int random, int64_t dense, int64_t stride) {
    char out[300];
    snprintf(out, sizeof out, "%s/forged", base);
    int64_t n = 0, points = 0;
    int done = 0;
    for (; n < 1000000 && !done; n = n < dense ? n + 1 : n + stride, points++) {
        qhx_error err = {0};
        qhx_forge_params p = {.precision = "q4", .lmhead = "w8", .preset = "tiny", .seed = 3};
        SWEEP_BEGIN(n);
        qhx_status rc = random ? qhx_forge_random("qwen3_vl", out, &p, &err) : qhx_forge_convert(fx, out, &p, &err);
        int fired = SWEEP_END();
        if (fired) {
            CHECK(rc != QHX_OK);
            CHECK(err.msg[0] != '\0');
            CHECK(!qhx_path_is_dir(out));
            CHECK_EQ(n_entries(base), 1); /* the bundle alone: no staging folder */
        } else {
            CHECK_EQ(rc, QHX_OK);
            if (rc) fprintf(stderr, "%s\n", err.msg);
            done = 1;
        }
        rm_flat(out);
    }
    CHECK(done);
    printf("forge %s sweep: %lld failure points tried, up to allocation %lld\n", random ? "random" : "convert",
           (long long)points, (long long)n);
}

/* ---- failing writes ------------------------------------------------------------------------- */

/* With a 4 KiB file-size limit (SIGXFSZ ignored: writes fail with EFBIG), saving a session
 * fails with QHX_E_IO and leaves neither the file nor a temporary one; an existing file keeps
 * its content. */
static void test_write_failures(void) {
    qhx_model *m = NULL;
    qhx_session *s = NULL;
    qhx_error err;
    CHECK_EQ(qhx_model_open(fx, NULL, &m, &err), QHX_OK);
    if (!m) return;
    qhx_session_params sp = qhx_session_default_params(m);
    sp.n_ctx = 16;
    CHECK_EQ(qhx_session_create(m, &sp, &s, &err), QHX_OK);
    CHECK_EQ(qhx_session_feed(s, PROMPT, N_PROMPT, &err), QHX_OK);
    char dir[300], path[400];
    snprintf(dir, sizeof dir, "%s/w", base);
    snprintf(path, sizeof path, "%s/state", dir);
    CHECK_EQ(mkdir(dir, 0755), 0);
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 4096;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    CHECK_EQ(setrlimit(RLIMIT_FSIZE, &lim), 0);
    CHECK_EQ(qhx_session_save(s, path, &err), QHX_E_IO);
    CHECK_EQ(n_entries(dir), 0);
    FILE *f = fopen(path, "wb"); /* an older file survives a failed save */
    fputs("older", f);
    fclose(f);
    CHECK_EQ(qhx_session_save(s, path, &err), QHX_E_IO);
    CHECK_CONTAINS(err.msg, "write failed");
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, prev);
    CHECK_EQ(n_entries(dir), 1);
    char buf[16] = {0};
    f = fopen(path, "rb");
    CHECK(f && fread(buf, 1, sizeof buf - 1, f) == 5);
    if (f) fclose(f);
    CHECK_STR(buf, "older");
    /* and with the limit gone, the save works and replaces it, readable by its owner only */
    CHECK_EQ(qhx_session_save(s, path, &err), QHX_OK);
    CHECK_EQ(n_entries(dir), 1);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
    rm_flat(dir);
    qhx_session_free(s);
    qhx_model_free(m);
}

/* ---- damaged session files ------------------------------------------------------------------ */

static void test_damaged_state(void) {
    qhx_model *m = NULL;
    qhx_session *s = NULL, *r = NULL;
    qhx_error err;
    CHECK_EQ(qhx_model_open(fx, NULL, &m, &err), QHX_OK);
    if (!m) return;
    qhx_session_params sp = qhx_session_default_params(m);
    sp.n_ctx = 16;
    CHECK_EQ(qhx_session_create(m, &sp, &s, &err), QHX_OK);
    CHECK_EQ(qhx_session_create(m, &sp, &r, &err), QHX_OK);
    CHECK_EQ(qhx_session_feed(s, PROMPT, N_PROMPT, &err), QHX_OK);
    qhx_generate_params gp = {.max_tokens = 2, .ignore_stop = 1};
    CHECK_EQ(qhx_session_generate(s, &gp, NULL, &err), QHX_OK);
    char path[300], bad[300];
    snprintf(path, sizeof path, "%s/good", base);
    snprintf(bad, sizeof bad, "%s/bad", base);
    CHECK_EQ(qhx_session_save(s, path, &err), QHX_OK);
    char *file = NULL;
    size_t size = 0;
    CHECK_EQ(qhx_file_read_all(path, (size_t)1 << 24, &file, &size, &err), QHX_OK);
    if (!file) return;
    /* r holds a state of its own, which every refusal must leave as it is */
    CHECK_EQ(qhx_session_feed(r, PROMPT, 3, &err), QHX_OK);
    int64_t V = qhx_model_n_vocab(m);
    float *logits = malloc((size_t)V * sizeof *logits);
    memcpy(logits, qhx_session_logits(r), (size_t)V * sizeof *logits);
    /* offsets: the header fields, the first region, the middle, the sampler, the checksum */
    size_t cuts[] = {0, 1, 7, 8, 12, 16, 24, 32, 40, 48, 56, 60, 63, 64, 65, 71, 72, 100, 1000,
                     size / 3, size / 2, size - 4096 - 100, size - 4096 - 32, size - 40, size - 33,
                     size - 32, size - 31, size - 1};
    int refused = 0;
    for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
        size_t at = cuts[k];
        if (at >= size) continue;
        for (int flip = 0; flip < 2; flip++) {
            FILE *f = fopen(bad, "wb");
            if (flip) {
                file[at] ^= 0x20;
                fwrite(file, 1, size, f);
                file[at] ^= 0x20;
            } else {
                fwrite(file, 1, at, f); /* truncated at `at` */
            }
            fclose(f);
            qhx_status rc = qhx_session_restore(r, bad, &err);
            CHECK(rc == QHX_E_FORMAT);
            if (rc != QHX_E_FORMAT) fprintf(stderr, "%s at %zu: %d %s\n", flip ? "flip" : "cut", at, rc, err.msg);
            CHECK_EQ(qhx_session_n_past(r), 3);
            CHECK(memcmp(logits, qhx_session_logits(r), (size_t)V * sizeof *logits) == 0);
            refused += rc == QHX_E_FORMAT;
        }
    }
    printf("damaged state files refused: %d\n", refused);
    /* r still works, and the good file still restores */
    CHECK_EQ(qhx_session_generate(r, &gp, NULL, &err), QHX_OK);
    CHECK_EQ(qhx_session_restore(r, path, &err), QHX_OK);
    CHECK_EQ(qhx_session_n_past(r), qhx_session_n_past(s));
    unlink(bad);
    unlink(path);
    free(logits);
    qhx_free(file);
    qhx_session_free(r);
    qhx_session_free(s);
    qhx_model_free(m);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    snprintf(fx, sizeof fx, "%s/fixtures/parity/qwen35-tiny-f32", QHX_DATA_DIR);
    snprintf(fx_vl, sizeof fx_vl, "%s/fixtures/parity/qwen3vl-tiny-f32", QHX_DATA_DIR);
    if (!qhx_path_is_dir(fx) || !qhx_path_is_dir(fx_vl)) {
        fprintf(stderr, "FAIL: fixtures missing under %s\n", QHX_DATA_DIR);
        return 1;
    }
    snprintf(base, sizeof base, "/tmp/qhx-test-faults-XXXXXX");
    if (!mkdtemp(base)) {
        perror("mkdtemp");
        return 1;
    }
    /* a forged bundle, opened through its manifest */
    char bundle[300], manifest[400] = "";
    snprintf(bundle, sizeof bundle, "%s/bundle", base);
    qhx_error err;
    qhx_forge_params fp = {.precision = "w8", .max_context = 64, .name = "t"};
    CHECK_EQ(qhx_forge_convert(fx, bundle, &fp, &err), QHX_OK);
    snprintf(manifest, sizeof manifest, "%s/t-64.json", bundle);
    CHECK(qhx_path_is_file(manifest));

    test_damaged_state();
    test_write_failures();
    sweep_session(fx);
    sweep_session(manifest);
    sweep_vl_chat();
    char img[600];
    snprintf(img, sizeof img, "%s/image-64x64.png", fx_vl);
    sweep_image(img);
    sweep_image(QHX_TEST_DATA "/image/exif6.jpg");
    sweep_forge(0, 400, 37);
    sweep_forge(1, 200, 53);

    rm_flat(bundle);
    rmdir(base);
    return t_done("test_faults");
}
