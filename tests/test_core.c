// ctest-labels: unit
/* Core substrate: status strings, allocation funnel, fp16/bf16 conversion. */
#include "core/alloc.h"
#include "core/fp16.h"
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

int main(void) {
    test_status();
    test_alloc_injection();
    test_fp16_all();
    return t_done("test_core");
}
