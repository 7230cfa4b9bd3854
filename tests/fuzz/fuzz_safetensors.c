/* Fuzz target: safetensors parsing from a buffer, then every lookup path. */
#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    qhx_st_set *s = NULL;
    qhx_error err;
    if (qhx_st_parse(data, size, "fuzz", &s, &err) == QHX_OK) {
        for (int64_t i = 0; i < qhx_st_n_tensors(s); i++) {
            const qhx_st_tensor *t = qhx_st_tensor_at(s, i);
            volatile uint8_t sink = t->size ? t->data[t->size - 1] : 0; /* data must be in bounds */
            (void)sink;
            const qhx_st_tensor *u;
            int64_t shape[QHX_ST_MAX_RANK];
            for (int d = 0; d < t->n_dims; d++) shape[d] = t->shape[d];
            qhx_st_get(s, t->name, QHX_DT_FLOATS, t->n_dims, shape, &u, &err);
        }
        qhx_st_free(s);
    }
    return 0;
}
