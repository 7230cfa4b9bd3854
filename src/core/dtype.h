/* core/dtype: element types of stored tensors (safetensors names) and their sizes. */
#ifndef QHX_CORE_DTYPE_H
#define QHX_CORE_DTYPE_H

#include <stddef.h>

typedef enum qhx_dtype {
    QHX_DTYPE_F32 = 0,
    QHX_DTYPE_F16,
    QHX_DTYPE_BF16,
    QHX_DTYPE_F64,
    QHX_DTYPE_I8,
    QHX_DTYPE_U8,
    QHX_DTYPE_I16,
    QHX_DTYPE_I32,
    QHX_DTYPE_I64,
    QHX_DTYPE_BOOL,
    QHX_DTYPE_GGML, /* ggml blocks (a GGUF tensor): qhx_st_tensor.ggml_type says which; sizes in bytes */
    QHX_DTYPE_COUNT
} qhx_dtype;

/* Bytes per element. */
size_t qhx_dtype_size(qhx_dtype t);
/* The safetensors spelling ("F32", "BF16", ...). */
const char *qhx_dtype_name(qhx_dtype t);
/* Parse a safetensors dtype name; returns 0 and sets *out, or -1 if unknown (GGML is never a
 * safetensors dtype). */
int qhx_dtype_from_name(const char *name, qhx_dtype *out);

#endif
