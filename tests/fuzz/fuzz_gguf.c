/* Fuzz target: GGUF parsing from a buffer, then every query path: each key's value read as the
 * type it claims (every string and array element touched), each tensor looked up by name, its
 * last byte read and, when it has a reference, its first block dequantized. */
#include "io/gguf.h"
#include "kernels/gguf_quant.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void touch_kv(const qhx_gguf *g, const qhx_gguf_kv *kv) {
    qhx_error err;
    volatile double sink = qhx_gguf_kv_float(kv) + (double)qhx_gguf_kv_int(kv);
    int64_t v;
    double f;
    qhx_gguf_str s;
    qhx_gguf_get_int(g, kv->key, &v, &err);
    qhx_gguf_get_float(g, kv->key, &f, &err);
    qhx_gguf_get_str(g, kv->key, &s, &err);
    if (kv->str) /* a string or a string array: each string's bytes in bounds */
        for (uint64_t i = 0; i < kv->n; i++) sink += kv->str[i].len ? (unsigned char)kv->str[i].p[kv->str[i].len - 1] : 0;
    else if (kv->type == QHX_GGUF_ARRAY && kv->n)
        sink += qhx_gguf_arr_float(kv, kv->n - 1) + (double)qhx_gguf_arr_int(kv, 0);
    (void)sink;
}

static void touch_tensor(const qhx_gguf *g, const qhx_gguf_tensor *t) {
    volatile uint8_t sink = t->size ? t->data[t->size - 1] : 0; /* data must be in bounds */
    (void)sink;
    if (qhx_gguf_find_tensor(g, t->name) != t) __builtin_trap();
    int block = qhx_ggml_type_block(t->type);
    float out[QHX_GGML_QK_K];
    if (qhx_gguf_can_dequant(t->type) && t->n_elements >= block) qhx_gguf_dequant_row(t->type, t->data, block, out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    qhx_gguf *g = NULL;
    qhx_error err;
    if (qhx_gguf_parse(data, size, "fuzz", &g, &err) == QHX_OK) {
        for (int64_t i = 0; i < qhx_gguf_n_kv(g); i++) touch_kv(g, qhx_gguf_kv_at(g, i));
        for (int64_t i = 0; i < qhx_gguf_n_tensors(g); i++) touch_tensor(g, qhx_gguf_tensor_at(g, i));
        qhx_gguf_free(g);
    }
    return 0;
}
