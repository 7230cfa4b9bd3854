// ctest-labels: unit
/* safetensors: the fixture checkpoints open and list correctly; every class of bad file is
 * refused with a message naming the problem. */
#include "core/alloc.h"
#include "io/safetensors.h"
#include "t.h"

#include <stdint.h>
#include <stdlib.h>

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

int main(void) {
    test_bad_files();
    test_valid_and_lookup();
    test_fixture("qwen35-tiny-f32", 123);
    test_fixture("qwen3vl-tiny-f32", 115);
    test_alloc_failures();
    return t_done("test_safetensors");
}
