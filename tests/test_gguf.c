// ctest-labels: unit
/* gguf: files built here byte by byte parse into the metadata and tensors they describe; every
 * class of bad file (truncated anywhere, counts and lengths past the file or a cap, unknown
 * types, bad shapes, misaligned, overlapping or out-of-file tensors, repeated keys and names,
 * other versions) is refused with one message naming the problem; the reference dequantization
 * on hand-computed blocks. The bit-for-bit comparison with ggml's own dequantization over random
 * blocks is tests/cli/gguf.sh. */
#include "core/alloc.h"
#include "core/fp16.h"
#include "io/gguf.h"
#include "kernels/gguf_quant.h"
#include "t.h"

#include <stdint.h>
#include <stdlib.h>

/* ---- a little GGUF writer ------------------------------------------------------------------ */

typedef struct buf {
    uint8_t *p;
    size_t len, cap;
} buf;

static void put(buf *b, const void *src, size_t n) {
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
}

static void u32(buf *b, uint32_t v) {
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(b, x, 4);
}

static void u64(buf *b, uint64_t v) {
    u32(b, (uint32_t)v);
    u32(b, (uint32_t)(v >> 32));
}

static void str(buf *b, const char *s) {
    u64(b, strlen(s));
    put(b, s, strlen(s));
}

static void header(buf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    put(b, "GGUF", 4);
    u32(b, version);
    u64(b, n_tensors);
    u64(b, n_kv);
}

static void kv_u32(buf *b, const char *key, uint32_t v) {
    str(b, key);
    u32(b, QHX_GGUF_UINT32);
    u32(b, v);
}

static void kv_str(buf *b, const char *key, const char *v) {
    str(b, key);
    u32(b, QHX_GGUF_STRING);
    str(b, v);
}

static void tensor_info(buf *b, const char *name, int n_dims, const uint64_t *ne, uint32_t type, uint64_t offset) {
    str(b, name);
    u32(b, (uint32_t)n_dims);
    for (int d = 0; d < n_dims; d++) u64(b, ne[d]);
    u32(b, type);
    u64(b, offset);
}

static void pad_to(buf *b, size_t align) {
    static const uint8_t zero[64] = {0};
    while (b->len % align) put(b, zero, 1);
}

static void zeros(buf *b, size_t n) {
    for (size_t i = 0; i < n; i++) put(b, "\0", 1);
}

/* A valid file: metadata of several kinds, two tensors (F32 [4, 2] and Q8_0 [32]). */
static buf good_file(void) {
    buf b = {0};
    header(&b, 3, 2, 5);
    kv_str(&b, "general.architecture", "qwen35");
    kv_u32(&b, "qwen35.block_count", 24);
    str(&b, "tokenizer.ggml.tokens");
    u32(&b, QHX_GGUF_ARRAY);
    u32(&b, QHX_GGUF_STRING);
    u64(&b, 3);
    str(&b, "a");
    str(&b, "");
    str(&b, "\xc3\xa9");
    str(&b, "test.floats");
    u32(&b, QHX_GGUF_ARRAY);
    u32(&b, QHX_GGUF_FLOAT32);
    u64(&b, 2);
    float f[2] = {0.5f, -2.0f};
    put(&b, f, 8);
    str(&b, "test.flag");
    u32(&b, QHX_GGUF_BOOL);
    put(&b, "\1", 1);
    uint64_t ne_a[2] = {4, 2}, ne_b[1] = {32};
    tensor_info(&b, "a.weight", 2, ne_a, QHX_GGML_F32, 0);
    tensor_info(&b, "b.weight", 1, ne_b, QHX_GGML_Q8_0, 32);
    pad_to(&b, 32);
    for (int i = 0; i < 8; i++) {
        float v = (float)i;
        put(&b, &v, 4);
    }
    uint16_t d = qhx_f32_to_f16(0.5f);
    put(&b, &d, 2);
    for (int i = 0; i < 32; i++) {
        int8_t q = (int8_t)(i - 16);
        put(&b, &q, 1);
    }
    return b;
}

static void test_good_file(void) {
    buf b = good_file();
    qhx_gguf *g = NULL;
    qhx_error err = {0};
    CHECK_EQ(qhx_gguf_parse(b.p, b.len, "t.gguf", &g, &err), QHX_OK);
    if (!g) {
        fprintf(stderr, "%s\n", err.msg);
        free(b.p);
        return;
    }
    CHECK_EQ(qhx_gguf_version(g), 3);
    CHECK_EQ(qhx_gguf_alignment(g), 32);
    CHECK_EQ(qhx_gguf_n_kv(g), 5);
    CHECK_EQ(qhx_gguf_n_tensors(g), 2);
    qhx_gguf_str s;
    CHECK_EQ(qhx_gguf_get_str(g, "general.architecture", &s, &err), QHX_OK);
    CHECK(s.len == 6 && !memcmp(s.p, "qwen35", 6));
    int64_t v = 0;
    CHECK_EQ(qhx_gguf_get_int(g, "qwen35.block_count", &v, &err), QHX_OK);
    CHECK_EQ(v, 24);
    CHECK(qhx_gguf_get_int(g, "general.architecture", &v, &err) != QHX_OK);
    CHECK_CONTAINS(err.msg, "is a string, not an integer");
    CHECK(qhx_gguf_get_int(g, "qwen35.context_length", &v, &err) != QHX_OK);
    CHECK_CONTAINS(err.msg, "'qwen35.context_length' is missing");
    int flag = 0;
    CHECK_EQ(qhx_gguf_get_bool(g, "test.flag", &flag, &err), QHX_OK);
    CHECK_EQ(flag, 1);
    const qhx_gguf_kv *toks = qhx_gguf_find_kv(g, "tokenizer.ggml.tokens");
    CHECK(toks && toks->type == QHX_GGUF_ARRAY && toks->elem == QHX_GGUF_STRING && toks->n == 3);
    if (toks) {
        CHECK(toks->str[0].len == 1 && toks->str[0].p[0] == 'a');
        CHECK_EQ(toks->str[1].len, 0);
        CHECK(toks->str[2].len == 2 && !memcmp(toks->str[2].p, "\xc3\xa9", 2));
    }
    const qhx_gguf_kv *fl = qhx_gguf_find_kv(g, "test.floats");
    CHECK(fl && qhx_gguf_arr_float(fl, 0) == 0.5 && qhx_gguf_arr_float(fl, 1) == -2.0);
    const qhx_gguf_tensor *a = qhx_gguf_find_tensor(g, "a.weight"), *q = qhx_gguf_find_tensor(g, "b.weight");
    CHECK(a && q && !qhx_gguf_find_tensor(g, "c.weight"));
    if (a && q) {
        CHECK(a->n_dims == 2 && a->ne[0] == 4 && a->ne[1] == 2 && a->n_elements == 8 && a->size == 32);
        CHECK_EQ(qhx_gguf_data_offset(g) % 32, 0);
        CHECK(a->data == b.p + qhx_gguf_data_offset(g));
        CHECK(q->size == 34 && q->data == a->data + 32);
        float out[32];
        CHECK_EQ(qhx_gguf_dequant_row(q->type, q->data, 32, out), 0);
        CHECK(out[0] == -8.0f && out[16] == 0.0f && out[31] == 7.5f);
        CHECK_EQ(qhx_gguf_dequant_row(q->type, q->data, 31, out), -1);
    }
    qhx_gguf_free(g);
    free(b.p);
}

/* Every prefix of a valid file is refused, with a message, and leaves nothing behind. */
static void test_every_truncation(void) {
    buf b = good_file();
    int refused = 0;
    for (size_t n = 0; n < b.len; n++) {
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, b.p, n);
        qhx_gguf *g = (qhx_gguf *)1;
        qhx_error err = {0};
        qhx_status st = qhx_gguf_parse(copy, n, "t.gguf", &g, &err);
        refused += st != QHX_OK && g == NULL && err.msg[0] && !strchr(err.msg, '\n');
        free(copy);
    }
    CHECK_EQ(refused, (long long)b.len);
    free(b.p);
}

static void expect_refused(buf *b, const char *needle) {
    qhx_gguf *g = (qhx_gguf *)1;
    qhx_error err = {0};
    CHECK(qhx_gguf_parse(b->p, b->len, "bad.gguf", &g, &err) != QHX_OK);
    CHECK(g == NULL);
    CHECK_CONTAINS(err.msg, needle);
    CHECK_CONTAINS(err.msg, "bad.gguf");
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* A file of one tensor (F32 [8] unless said) with the given info, and its data. */
static buf one_tensor(int n_dims, const uint64_t *ne, uint32_t type, uint64_t offset, size_t data) {
    buf b = {0};
    header(&b, 3, 1, 0);
    tensor_info(&b, "t", n_dims, ne, type, offset);
    pad_to(&b, 32);
    zeros(&b, data);
    return b;
}

static void test_bad_headers(void) {
    buf b = {0};
    put(&b, "GGML", 4);
    u32(&b, 3);
    u64(&b, 0);
    u64(&b, 0);
    expect_refused(&b, "not a GGUF file");
    header(&b, 1, 0, 0);
    expect_refused(&b, "version 1");
    header(&b, 0x03000000u, 0, 0);
    expect_refused(&b, "big-endian");
    header(&b, 4, 0, 0);
    expect_refused(&b, "version 4 is not supported");
    header(&b, 3, 0, (uint64_t)1 << 40);
    expect_refused(&b, "metadata keys");
    header(&b, 3, (uint64_t)1 << 62, 0);
    expect_refused(&b, "tensors (the cap is");
    header(&b, 3, 0, 1000); /* more keys than the file could hold, but under the cap */
    zeros(&b, 100);
    expect_refused(&b, "1000 metadata keys and 0 tensors cannot fit");
}

static void test_bad_metadata(void) {
    buf b = {0};
    header(&b, 3, 0, 1);
    u64(&b, (uint64_t)1 << 20); /* key longer than the format allows */
    zeros(&b, 64);
    expect_refused(&b, "a key of 1048576 bytes");
    header(&b, 3, 0, 1);
    str(&b, "");
    u32(&b, QHX_GGUF_UINT8);
    zeros(&b, 16);
    expect_refused(&b, "an empty key");
    header(&b, 3, 0, 1);
    str(&b, "k");
    u32(&b, 13);
    zeros(&b, 16);
    expect_refused(&b, "unknown value type 13");
    header(&b, 3, 0, 1);
    str(&b, "k");
    u32(&b, QHX_GGUF_STRING);
    u64(&b, (uint64_t)1 << 60);
    zeros(&b, 16);
    expect_refused(&b, "the cap is");
    header(&b, 3, 0, 1);
    str(&b, "k");
    u32(&b, QHX_GGUF_STRING);
    u64(&b, 100);
    zeros(&b, 16);
    expect_refused(&b, "ends inside a string value");
    header(&b, 3, 0, 1);
    str(&b, "k");
    u32(&b, QHX_GGUF_ARRAY);
    u32(&b, QHX_GGUF_ARRAY);
    u64(&b, 1);
    zeros(&b, 16);
    expect_refused(&b, "an array of arrays");
    header(&b, 3, 0, 1);
    str(&b, "k");
    u32(&b, QHX_GGUF_ARRAY);
    u32(&b, QHX_GGUF_UINT32);
    u64(&b, (uint64_t)1 << 62);
    zeros(&b, 16);
    expect_refused(&b, "the cap is");
    header(&b, 3, 0, 1);
    str(&b, "k");
    u32(&b, QHX_GGUF_ARRAY);
    u32(&b, QHX_GGUF_UINT32);
    u64(&b, 1000);
    zeros(&b, 16);
    expect_refused(&b, "ends inside an array");
    header(&b, 3, 0, 1);
    str(&b, "k");
    u32(&b, QHX_GGUF_ARRAY);
    u32(&b, QHX_GGUF_STRING);
    u64(&b, 1000000);
    zeros(&b, 64);
    expect_refused(&b, "ends inside a string array");
    header(&b, 3, 0, 2);
    kv_u32(&b, "a.b", 1);
    kv_u32(&b, "a.b", 2);
    expect_refused(&b, "key 'a.b' appears twice");
    header(&b, 3, 0, 1);
    kv_u32(&b, "general.alignment", 24);
    expect_refused(&b, "general.alignment must be a power of two");
    header(&b, 3, 0, 1);
    kv_u32(&b, "general.alignment", 0);
    expect_refused(&b, "general.alignment");
    header(&b, 3, 0, 1);
    kv_str(&b, "general.alignment", "32");
    expect_refused(&b, "general.alignment");
}

static void test_bad_tensors(void) {
    uint64_t ne8[1] = {8}, ne33[1] = {33}, ne2[2] = {8, 2};
    buf b = one_tensor(0, ne8, QHX_GGML_F32, 0, 32);
    expect_refused(&b, "0 dimensions");
    uint64_t ne5[5] = {1, 1, 1, 1, 1};
    b = one_tensor(5, ne5, QHX_GGML_F32, 0, 32);
    expect_refused(&b, "5 dimensions");
    uint64_t neg[1] = {(uint64_t)-4};
    b = one_tensor(1, neg, QHX_GGML_F32, 0, 32);
    expect_refused(&b, "a negative dimension");
    uint64_t huge[4] = {(uint64_t)1 << 40, (uint64_t)1 << 40, 1, 1};
    b = one_tensor(2, huge, QHX_GGML_F32, 0, 32);
    expect_refused(&b, "overflows");
    b = one_tensor(1, ne8, 4, 0, 32);
    expect_refused(&b, "unknown tensor type 4");
    b = one_tensor(1, ne8, 1000, 0, 32);
    expect_refused(&b, "unknown tensor type 1000");
    b = one_tensor(1, ne33, QHX_GGML_Q8_0, 0, 64);
    expect_refused(&b, "a row of 33 values is not a whole number of Q8_0 blocks of 32");
    b = one_tensor(1, ne8, QHX_GGML_F32, 4, 64);
    expect_refused(&b, "offset 4 is not a multiple of the alignment 32");
    b = one_tensor(1, ne8, QHX_GGML_F32, 0, 31);
    expect_refused(&b, "a truncated file?");
    b = one_tensor(1, ne8, QHX_GGML_F32, (uint64_t)-32, 32);
    expect_refused(&b, "a truncated file?");
    b = one_tensor(2, ne2, QHX_GGML_F32, 0, 32);
    expect_refused(&b, "a truncated file?");
    /* two tensors that overlap; one name twice */
    b = (buf){0};
    header(&b, 3, 2, 0);
    tensor_info(&b, "x", 1, ne2, QHX_GGML_F32, 0);
    tensor_info(&b, "y", 1, ne2, QHX_GGML_F32, 0);
    pad_to(&b, 32);
    zeros(&b, 64);
    expect_refused(&b, "overlap");
    header(&b, 3, 2, 0);
    tensor_info(&b, "x", 1, ne2, QHX_GGML_F32, 0);
    tensor_info(&b, "x", 1, ne2, QHX_GGML_F32, 32);
    pad_to(&b, 32);
    zeros(&b, 64);
    expect_refused(&b, "tensor 'x' is described twice");
    header(&b, 3, 1, 0);
    str(&b, "");
    zeros(&b, 64);
    expect_refused(&b, "an empty tensor name");
}

/* The alignment key moves the data section; a zero-element tensor is described, not read. */
static void test_alignment_and_empty(void) {
    buf b = {0};
    header(&b, 2, 2, 1);
    kv_u32(&b, "general.alignment", 64);
    uint64_t ne[1] = {16}, ne0[2] = {0, 4};
    tensor_info(&b, "w", 1, ne, QHX_GGML_F16, 0);
    tensor_info(&b, "e", 2, ne0, QHX_GGML_Q4_K, 64); /* at the very end: allowed, it holds nothing */
    pad_to(&b, 64);
    size_t data_at = b.len;
    zeros(&b, 64);
    qhx_gguf *g = NULL;
    qhx_error err = {0};
    CHECK_EQ(qhx_gguf_parse(b.p, b.len, "t.gguf", &g, &err), QHX_OK);
    if (!g) fprintf(stderr, "%s\n", err.msg);
    if (g) {
        CHECK_EQ(qhx_gguf_version(g), 2);
        CHECK_EQ(qhx_gguf_alignment(g), 64);
        CHECK_EQ(qhx_gguf_data_offset(g), data_at);
        const qhx_gguf_tensor *e = qhx_gguf_find_tensor(g, "e");
        CHECK(e && e->n_elements == 0 && e->size == 0);
        qhx_gguf_free(g);
    }
    free(b.p);
}

/* Hand-computed blocks: Q4_0 and Q4_K codes with known scales. */
static void test_dequant_by_hand(void) {
    uint8_t q40[18];
    uint16_t d = qhx_f32_to_f16(2.0f);
    memcpy(q40, &d, 2);
    for (int i = 0; i < 16; i++) q40[2 + i] = (uint8_t)(i | (15 - i) << 4);
    float y[256];
    CHECK_EQ(qhx_gguf_dequant_row(QHX_GGML_Q4_0, q40, 32, y), 0);
    CHECK(y[0] == -16.0f && y[15] == 14.0f && y[16] == 14.0f && y[31] == -16.0f);

    uint8_t q4k[144] = {0};
    uint16_t dd = qhx_f32_to_f16(1.0f), dm = qhx_f32_to_f16(0.5f);
    memcpy(q4k, &dd, 2);
    memcpy(q4k + 2, &dm, 2);
    q4k[4] = 3;             /* sub-block 0: scale 3 */
    q4k[8] = 5;             /* sub-block 0: min 5 */
    q4k[12] = 0x72;         /* sub-block 4: scale 2 (low nibble), min 7 (high nibble) */
    q4k[16] = 0x9;          /* value 0: code 9; value 32: code 0 */
    q4k[16 + 64] = 0x40;    /* value 128 (sub-block 4): code 0; value 160: code 4 */
    CHECK_EQ(qhx_gguf_dequant_row(QHX_GGML_Q4_K, q4k, 256, y), 0);
    CHECK(y[0] == 3.0f * 9 - 2.5f);
    CHECK(y[128] == -3.5f);
    CHECK(y[1] == -2.5f);
    CHECK(!qhx_gguf_can_dequant(QHX_GGML_Q8_1) && !qhx_gguf_can_dequant(QHX_GGML_I32));
    CHECK_EQ(qhx_gguf_dequant_row(QHX_GGML_Q8_1, q4k, 32, y), -1);
    uint64_t bytes = 0;
    CHECK(qhx_ggml_row_bytes(QHX_GGML_Q6_K, 512, &bytes) == 0 && bytes == 420);
    CHECK(qhx_ggml_row_bytes(QHX_GGML_Q6_K, 100, &bytes) == -1);
    CHECK(qhx_ggml_type_name(5) == NULL && !strcmp(qhx_ggml_type_name(QHX_GGML_IQ4_XS), "IQ4_XS"));
}

/* Allocation failures anywhere in a parse are one message, with nothing leaked. */
static void test_out_of_memory(void) {
    buf b = good_file();
    int refused = 0, n = 0;
    for (int k = 0; k < 64; k++, n++) {
        qhx_alloc_fail_after(k);
        qhx_gguf *g = NULL;
        qhx_error err = {0};
        qhx_status st = qhx_gguf_parse(b.p, b.len, "t.gguf", &g, &err);
        int failed = qhx_alloc_failed();
        qhx_alloc_fail_after(-1);
        if (!failed) {
            CHECK_EQ(st, QHX_OK);
            qhx_gguf_free(g);
            break;
        }
        refused += st == QHX_E_NOMEM && g == NULL;
    }
    CHECK_EQ(refused, n);
    free(b.p);
}

int main(void) {
    test_good_file();
    test_every_truncation();
    test_bad_headers();
    test_bad_metadata();
    test_bad_tensors();
    test_alignment_and_empty();
    test_dequant_by_hand();
    test_out_of_memory();
    return t_done("test_gguf");
}
