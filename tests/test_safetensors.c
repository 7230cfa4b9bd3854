// ctest-labels: unit
/* safetensors: the fixture checkpoints open and list correctly; every class of bad file is
 * refused with a message naming the problem. */
#include "core/alloc.h"
#include "io/safetensors.h"
#include "t.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Build a file image: u64 header length + header + data. Owned by the caller (free). */
static uint8_t *image(const char *hdr, size_t data_len, uint64_t hlen_override, size_t *len) {
    size_t h = strlen(hdr);
    *len = 8 + h + data_len;
    uint8_t *b = calloc(1, *len);
    uint64_t hl = hlen_override ? hlen_override : h;
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(hl >> (8 * i));
    memcpy(b + 8, hdr, h);
    return b;
}

static void expect_error(const char *hdr, size_t data_len, uint64_t hlen, const char *needle) {
    size_t len;
    uint8_t *b = image(hdr, data_len, hlen, &len);
    qhx_st_set *s = (qhx_st_set *)1;
    qhx_error err = {0};
    qhx_status rc = qhx_st_parse(b, len, "t.safetensors", &s, &err);
    CHECK(rc != QHX_OK);
    CHECK(s == NULL);
    CHECK_CONTAINS(err.msg, needle);
    free(b);
}

static void test_bad_files(void) {
    expect_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8, 0, "data ends at byte");
    expect_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 16, 1000000, "past the end");
    expect_error("{}", 0, (uint64_t)1 << 40, "limit");
    expect_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, 0, "overlap");
    expect_error("{\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2, 0, "unsupported dtype 'F8_E4M3'");
    expect_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, 0, "needs 12 bytes");
    expect_error("{\"a\":{\"dtype\":", 8, 0, "invalid JSON");
    expect_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[1099511627776,1099511627776],\"data_offsets\":[0,8]}}", 8, 0, "overflow");
    expect_error("[1,2]", 0, 0, "not a JSON object");
    size_t len = 3;
    qhx_st_set *s;
    qhx_error err;
    CHECK(qhx_st_parse((const uint8_t *)"abc", len, "short", &s, &err) != QHX_OK);
    CHECK_CONTAINS(err.msg, "too short");
}

static void test_valid_and_lookup(void) {
    const char *hdr = "{\"__metadata__\":{\"format\":\"pt\"},"
                      "\"w\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,12]},"
                      "\"b\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[12,16]}}";
    size_t len;
    uint8_t *b = image(hdr, 16, 0, &len);
    qhx_st_set *s;
    qhx_error err;
    CHECK_EQ(qhx_st_parse(b, len, "v", &s, &err), QHX_OK);
    CHECK_EQ(qhx_st_n_tensors(s), 2);
    CHECK_EQ(qhx_st_n_metadata(s), 1);
    const qhx_st_tensor *t;
    int64_t shape[2] = {2, 3};
    CHECK_EQ(qhx_st_get(s, "w", QHX_DT_FLOATS, 2, shape, &t, &err), QHX_OK);
    CHECK(t && t->size == 12 && t->offset == 8 + strlen(hdr));
    int64_t wrong[2] = {3, 2};
    CHECK(qhx_st_get(s, "w", QHX_DT_FLOATS, 2, wrong, &t, &err) != QHX_OK);
    CHECK_CONTAINS(err.msg, "expected shape [3, 2], got [2, 3]");
    CHECK(qhx_st_get(s, "nope", 0, 0, NULL, &t, &err) != QHX_OK);
    CHECK_CONTAINS(err.msg, "'nope' is missing");
    CHECK(qhx_st_get(s, "w", QHX_DT_BIT(QHX_DTYPE_F32), 2, shape, &t, &err) != QHX_OK);
    CHECK_CONTAINS(err.msg, "dtype BF16");
    CHECK_EQ(qhx_st_find(s, "b")->n_elements, 1);
    qhx_st_free(s);
    free(b);
}

static void test_fixture(const char *dir, int64_t expect_tensors) {
    char path[1024];
    snprintf(path, sizeof path, "%s/fixtures/parity/%s", QHX_DATA_DIR, dir);
    qhx_st_set *s;
    qhx_error err;
    qhx_status rc = qhx_st_open(path, &s, &err);
    CHECK_EQ(rc, QHX_OK);
    if (rc != QHX_OK) { fprintf(stderr, "%s\n", err.msg); return; }
    CHECK_EQ(qhx_st_n_tensors(s), expect_tensors);
    for (int64_t i = 0; i < qhx_st_n_tensors(s); i++) {
        const qhx_st_tensor *t = qhx_st_tensor_at(s, i);
        CHECK(qhx_st_find(s, t->name) == t);
    }
    qhx_st_free(s);
}

static void test_alloc_failures(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/fixtures/parity/qwen35-tiny-f32", QHX_DATA_DIR);
    for (int64_t n = 0;; n++) {
        qhx_alloc_fail_after(n);
        qhx_st_set *s = NULL;
        qhx_error err;
        qhx_status rc = qhx_st_open(path, &s, &err);
        int fired = qhx_alloc_failed();
        qhx_alloc_fail_after(-1);
        if (rc == QHX_OK) { qhx_st_free(s); if (!fired) break; continue; }
        CHECK(s == NULL);
        if (!fired) { CHECK(0); break; }
    }
}

/* ---- leaving tensors out: never read, never resident ---------------------------------------- */

/* Resident set of this process in KiB (/proc/self/status VmRSS), -1 if unknown. */
static long rss_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) v = strtol(line + 6, NULL, 10);
    if (f) fclose(f);
    return v;
}

/* A file with a 4 KiB tensor "keep.w" and a 256 MiB one "skip.big" (a hole, so writing it is
 * free). Opened with "skip." left out, the set lacks skip.big and the process grows by far less
 * than its size, in READ, MAP_POPULATE and AUTO mode; opened whole in READ mode it grows by about the
 * size, so the measurement can fail. Also: the index verify pass ignores left-out names. */
static void test_open_select(void) {
    char dir[] = "/tmp/qhx-test-st-XXXXXX";
    if (!mkdtemp(dir)) { CHECK(0); return; }
    char path[128];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    const uint64_t big = (uint64_t)256 << 20;
    char hdr[512];
    int n = snprintf(hdr, sizeof hdr,
                     "{\"keep.w\":{\"dtype\":\"F32\",\"shape\":[1024],\"data_offsets\":[0,4096]},"
                     "\"skip.big\":{\"dtype\":\"U8\",\"shape\":[%llu],\"data_offsets\":[4096,%llu]}}",
                     (unsigned long long)big, (unsigned long long)(4096 + big));
    while (n % 8) hdr[n++] = ' ';
    uint8_t len8[8];
    for (int b = 0; b < 8; b++) len8[b] = (uint8_t)((uint64_t)n >> (8 * b));
    FILE *f = fopen(path, "wb");
    float keep[1024];
    for (int k = 0; k < 1024; k++) keep[k] = (float)k;
    CHECK(f && fwrite(len8, 1, 8, f) == 8 && fwrite(hdr, 1, (size_t)n, f) == (size_t)n &&
          fwrite(keep, 4, 1024, f) == 1024);
    if (f) fclose(f);
    CHECK_EQ(truncate(path, (off_t)(8 + n + 4096 + big)), 0);

    static const char *const skip[] = {"skip.", NULL};
    const char *paths[1] = {path};
    const qhx_file_mode modes[3] = {QHX_FILE_READ, QHX_FILE_MAP_POPULATE, QHX_FILE_AUTO};
    for (int m = 0; m < 3; m++) {
        qhx_st_set *set = NULL;
        qhx_error err;
        long before = rss_kib();
        CHECK_EQ(qhx_st_open_select(paths, 1, modes[m], skip, NULL, &set, &err), QHX_OK);
        long grew = rss_kib() - before;
        if (!set) continue;
        CHECK_EQ(qhx_st_n_tensors(set), 1);
        CHECK(qhx_st_find(set, "skip.big") == NULL);
        const qhx_st_tensor *t = qhx_st_find(set, "keep.w");
        CHECK(t && !memcmp(t->data, keep, sizeof keep));
        CHECK(before > 0 && grew < 32 * 1024); /* far below the 256 MiB left out */
        if (grew >= 32 * 1024) fprintf(stderr, "mode %d: grew by %ld KiB with skip.big left out\n", (int)modes[m], grew);
        qhx_st_free(set);
    }
    qhx_st_set *whole = NULL;
    qhx_error err;
    long before = rss_kib();
    CHECK_EQ(qhx_st_open_select(paths, 1, QHX_FILE_READ, NULL, NULL, &whole, &err), QHX_OK);
    CHECK(rss_kib() - before > 200 * 1024); /* the measurement sees a whole read */
    CHECK(whole && qhx_st_find(whole, "skip.big") != NULL);
    qhx_st_free(whole);

    /* an index naming a left-out tensor verifies */
    char idx[128];
    snprintf(idx, sizeof idx, "%s/model.safetensors.index.json", dir);
    f = fopen(idx, "w");
    CHECK(f && fputs("{\"weight_map\":{\"keep.w\":\"model.safetensors\",\"skip.big\":\"model.safetensors\"}}", f) >= 0);
    if (f) fclose(f);
    qhx_st_set *viaidx = NULL;
    const char *dirs[1] = {dir};
    CHECK_EQ(qhx_st_open_select(dirs, 1, QHX_FILE_READ, skip, NULL, &viaidx, &err), QHX_OK);
    CHECK(viaidx && qhx_st_n_tensors(viaidx) == 1);
    qhx_st_free(viaidx);
    unlink(idx);
    unlink(path);
    rmdir(dir);
}

int main(void) {
    test_bad_files();
    test_valid_and_lookup();
    test_fixture("qwen35-tiny-f32", 123);
    test_fixture("qwen3vl-tiny-f32", 115);
    test_alloc_failures();
    test_open_select();
    return t_done("test_safetensors");
}
