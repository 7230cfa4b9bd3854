// ctest-labels: unit
/* Core substrate: status strings, allocation funnel, fp16/bf16 conversion, the JSON scanner. */
#include "core/alloc.h"
#include "core/fp16.h"
#include "core/json_scan.h"
#include "core/status.h"
#include "t.h"

static void test_status(void) {
    qhx_error err;
    CHECK_EQ(qhx_fail(&err, QHX_E_FORMAT, "x: field '%s' at byte %d", "dtype", 12), QHX_E_FORMAT);
    CHECK_STR(err.msg, "x: field 'dtype' at byte 12");
    CHECK_STR(qhx_status_str(QHX_OK), "ok");
    CHECK_EQ(qhx_fail(NULL, QHX_E_IO, "ignored"), QHX_E_IO);
}

static void test_alloc_injection(void) {
    qhx_alloc_fail_after(1);
    void *a = qhx_malloc(8);
    void *b = qhx_malloc(8);
    CHECK(a != NULL);
    CHECK(b == NULL);
    CHECK(qhx_alloc_failed());
    qhx_alloc_fail_after(-1);
    qhx_free(a);
    size_t out = 0;
    CHECK(!qhx_size_mul(SIZE_MAX / 2, 3, &out));
    CHECK(qhx_size_mul(1000, 1000, &out) && out == 1000000);
}

static void test_fp16_all(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = qhx_f16_to_f32((uint16_t)h);
        uint16_t back = qhx_f32_to_f16(f);
        int is_nan = ((h & 0x7c00u) == 0x7c00u) && (h & 0x3ffu);
        if (is_nan ? !(f != f) || (back & 0x7c00u) != 0x7c00u || !(back & 0x3ffu) : back != h) bad++;
        float b = qhx_bf16_to_f32((uint16_t)h);
        uint16_t bb = qhx_f32_to_bf16(b);
        int b_nan = ((h & 0x7f80u) == 0x7f80u) && (h & 0x7fu);
        if (b_nan ? !(b != b) : bb != h) bad++;
    }
    CHECK_EQ(bad, 0);
    /* round to nearest even at the halfway points */
    CHECK_EQ(qhx_f32_to_f16(1.0f + 1.0f / 2048), 0x3c00);          /* tie -> even (down) */
    CHECK_EQ(qhx_f32_to_f16(1.0f + 3.0f / 2048), 0x3c02);          /* tie -> even (up) */
    CHECK_EQ(qhx_f32_to_f16(65520.0f), 0x7c00);                    /* overflow -> Inf */
    CHECK_EQ(qhx_f32_to_f16(65519.0f), 0x7bff);
    CHECK_EQ(qhx_f32_to_f16(2.98023224e-08f), 0x0000);             /* 2^-25: tie -> 0 */
    CHECK_EQ(qhx_f32_to_f16(2.98023224e-08f * 1.5f), 0x0001);
    CHECK_EQ(qhx_f32_to_bf16(qhx_bits_f32(0x3f808000u)), 0x3f80);  /* tie -> even */
    CHECK_EQ(qhx_f32_to_bf16(qhx_bits_f32(0x3f818000u)), 0x3f82);
}

/* The strict JSON scanner: a document is valid or refused at the byte at fault; strings
 * decode their escapes and surrogate pairs; object members reach the callback with their keys. */
static qhx_status scan_doc(const char *doc, qhx_error *err) {
    qhx_jscan j = {.s = (const uint8_t *)doc, .n = strlen(doc), .name = "doc", .err = err};
    qhx_status rc = qhx_jscan_skip(&j, 0);
    if (rc) return rc;
    qhx_jscan_ws(&j);
    return j.i == j.n ? QHX_OK : qhx_jscan_fail(&j, "trailing characters");
}

static qhx_status count_member(qhx_jscan *j, void *ctx, const char *key, size_t keylen) {
    if (keylen == 1 && key[0] == 'n') {
        uint64_t v = 0;
        qhx_status rc = qhx_jscan_uint(j, 100, "n", &v);
        *(uint64_t *)ctx += v;
        return rc;
    }
    return qhx_jscan_skip(j, 1);
}

static void test_json_scan(void) {
    qhx_error err = {0};
    const char *ok[] = {"{}", "[]", " {\"a\": [1, -2.5e+3, true, false, null, \"x\\u00e9\"]} ", "\"\\ud83d\\ude00\"", "0"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) CHECK_EQ(scan_doc(ok[i], &err), QHX_OK);
    const struct { const char *doc, *msg; } bad[] = {
        {"{\"a\" 1}", "byte 5: expected ':'"},       {"[1,]", "byte 3: unexpected character"},
        {"01", "byte 1: trailing characters"},       {"\"\\ud800\"", "lone high surrogate"},
        {"\"\\udc00\"", "lone low surrogate"},       {"\"a\nb\"", "control character in string"},
        {"\"\xc0\xaf\"", "invalid UTF-8"},           {"-", "bad number"},
        {"[1 2]", "expected ',' or ']'"},            {"{\"a\": 1", "unexpected end of input"},
        {"tru", "unexpected character"},             {"\"\\x\"", "unknown escape"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_EQ(scan_doc(bad[i].doc, &err), QHX_E_FORMAT);
        CHECK_CONTAINS(err.msg, bad[i].msg);
    }
    char deep[2 * QHX_JSON_MAX_DEPTH + 8];
    for (int levels = QHX_JSON_MAX_DEPTH; levels <= QHX_JSON_MAX_DEPTH + 1; levels++) { /* the cap, one past */
        size_t d = 0;
        for (int k = 0; k < levels; k++) deep[d++] = '[';
        for (int k = 0; k < levels; k++) deep[d++] = ']';
        deep[d] = '\0';
        CHECK_EQ(scan_doc(deep, &err), levels <= QHX_JSON_MAX_DEPTH ? QHX_OK : QHX_E_FORMAT);
    }
    CHECK_CONTAINS(err.msg, "nesting too deep");

    const char *str = "\"a\\n\\u00e9\\ud83d\\ude00\\u0000z\"";
    qhx_jscan j = {.s = (const uint8_t *)str, .n = strlen(str), .name = "doc", .err = &err};
    qhx_bytes b = {0};
    CHECK_EQ(qhx_jscan_string(&j, &b), QHX_OK);
    CHECK_EQ(b.n, 10);
    CHECK(b.p && !memcmp(b.p, "a\n\xc3\xa9\xf0\x9f\x98\x80\0z", 10));
    CHECK_EQ(j.i, j.n);
    qhx_free(b.p);

    const char *obj = "{\"n\": 3, \"m\": {\"n\": 50}, \"n\": 4}";
    j = (qhx_jscan){.s = (const uint8_t *)obj, .n = strlen(obj), .name = "doc", .err = &err};
    uint64_t sum = 0;
    CHECK_EQ(qhx_jscan_object(&j, 0, count_member, &sum), QHX_OK);
    CHECK_EQ(sum, 7); /* the nested "n" is skipped by the callback */
    const char *big = "{\"n\": 101}";
    j = (qhx_jscan){.s = (const uint8_t *)big, .n = strlen(big), .name = "doc", .err = &err};
    CHECK_EQ(qhx_jscan_object(&j, 0, count_member, &sum), QHX_E_LIMIT);
    CHECK_CONTAINS(err.msg, "n at byte 6 exceeds the limit 100");

    uint32_t cp = 0;
    CHECK_EQ(qhx_utf8_next((const uint8_t *)"\xed\xa0\x80", 3, &cp), 0); /* a surrogate */
    CHECK_EQ(qhx_utf8_next((const uint8_t *)"\xf4\x8f\xbf\xbf", 4, &cp), 4);
    CHECK_EQ(cp, 0x10FFFF);
    char out[4];
    CHECK_EQ(qhx_utf8_put(out, 0x20AC), 3);
    CHECK(!memcmp(out, "\xe2\x82\xac", 3));
}

int main(void) {
    test_json_scan();
    test_status();
    test_alloc_injection();
    test_fp16_all();
    return t_done("test_core");
}
