/* core/ggml_type: the table of ggml tensor types. Sizes follow the block layouts (docs/formats.md,
 * "GGUF"); ids without a name are refused wherever they are read. */
#include "core/ggml_type.h"

#include <stddef.h>

static const struct {
    const char *name;
    int block, bytes;
} TYPES[QHX_GGML_TYPE_LIMIT] = {
    [0] = {"F32", 1, 4},
    [1] = {"F16", 1, 2},
    [2] = {"Q4_0", 32, 2 + 16},
    [3] = {"Q4_1", 32, 2 + 2 + 16},
    [6] = {"Q5_0", 32, 2 + 4 + 16},
    [7] = {"Q5_1", 32, 2 + 2 + 4 + 16},
    [8] = {"Q8_0", 32, 2 + 32},
    [9] = {"Q8_1", 32, 4 + 4 + 32},
    [10] = {"Q2_K", 256, 2 + 2 + 256 / 16 + 256 / 4},
    [11] = {"Q3_K", 256, 2 + 256 / 4 + 256 / 8 + 12},
    [12] = {"Q4_K", 256, 2 + 2 + 256 / 2 + 12},
    [13] = {"Q5_K", 256, 2 + 2 + 256 / 2 + 256 / 8 + 12},
    [14] = {"Q6_K", 256, 2 + 256 / 2 + 256 / 4 + 256 / 16},
    [15] = {"Q8_K", 256, 4 + 256 + 256 / 8},
    [16] = {"IQ2_XXS", 256, 2 + 256 / 4},
    [17] = {"IQ2_XS", 256, 2 + 256 / 4 + 256 / 32},
    [18] = {"IQ3_XXS", 256, 2 + 256 / 4 + 256 / 8},
    [19] = {"IQ1_S", 256, 2 + 256 / 8 + 256 / 16},
    [20] = {"IQ4_NL", 32, 2 + 16},
    [21] = {"IQ3_S", 256, 2 + 256 / 4 + 256 / 8 + 256 / 32 + 4},
    [22] = {"IQ2_S", 256, 2 + 256 / 4 + 256 / 16},
    [23] = {"IQ4_XS", 256, 2 + 2 + 256 / 2 + 256 / 64},
    [24] = {"I8", 1, 1},
    [25] = {"I16", 1, 2},
    [26] = {"I32", 1, 4},
    [27] = {"I64", 1, 8},
    [28] = {"F64", 1, 8},
    [29] = {"IQ1_M", 256, 256 / 8 + 256 / 16 + 256 / 32},
    [30] = {"BF16", 1, 2},
    [34] = {"TQ1_0", 256, 2 + 4 * 13},
    [35] = {"TQ2_0", 256, 2 + 64},
    [39] = {"MXFP4", 32, 1 + 16},
};

const char *qhx_ggml_type_name(uint32_t type) {
    return type < QHX_GGML_TYPE_LIMIT ? TYPES[type].name : NULL;
}

int qhx_ggml_type_block(uint32_t type) {
    return qhx_ggml_type_name(type) ? TYPES[type].block : 0;
}

int qhx_ggml_type_block_bytes(uint32_t type) {
    return qhx_ggml_type_name(type) ? TYPES[type].bytes : 0;
}

int qhx_ggml_row_bytes(uint32_t type, int64_t n, uint64_t *bytes) {
    int block = qhx_ggml_type_block(type);
    if (block == 0 || n < 0 || n % block) return -1;
    uint64_t blocks = (uint64_t)(n / block), per = (uint64_t)TYPES[type].bytes;
    if (blocks > UINT64_MAX / per) return -1;
    *bytes = blocks * per;
    return 0;
}
