/* core/dtype: the dtype table. */
#include "core/dtype.h"

#include <string.h>

static const struct {
    const char *name;
    size_t size;
} DTYPES[QHX_DTYPE_COUNT] = {
    [QHX_DTYPE_F32] = {"F32", 4}, [QHX_DTYPE_F16] = {"F16", 2}, [QHX_DTYPE_BF16] = {"BF16", 2},
    [QHX_DTYPE_F64] = {"F64", 8}, [QHX_DTYPE_I8] = {"I8", 1},   [QHX_DTYPE_U8] = {"U8", 1},
    [QHX_DTYPE_I16] = {"I16", 2}, [QHX_DTYPE_I32] = {"I32", 4}, [QHX_DTYPE_I64] = {"I64", 8},
    [QHX_DTYPE_BOOL] = {"BOOL", 1}, [QHX_DTYPE_GGML] = {"GGML", 1},
};

size_t qhx_dtype_size(qhx_dtype t) { return (unsigned)t < QHX_DTYPE_COUNT ? DTYPES[t].size : 0; }

const char *qhx_dtype_name(qhx_dtype t) {
    return (unsigned)t < QHX_DTYPE_COUNT ? DTYPES[t].name : "?";
}

int qhx_dtype_from_name(const char *name, qhx_dtype *out) {
    for (int i = 0; i < QHX_DTYPE_COUNT; i++)
        if (i != QHX_DTYPE_GGML && !strcmp(name, DTYPES[i].name)) {
            *out = (qhx_dtype)i;
            return 0;
        }
    return -1;
}
