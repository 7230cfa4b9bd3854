/* core/ggml_type: the tensor types of ggml's file formats (GGUF), by their numeric ids as the
 * files store them: each known id's name, block size (values per block) and block bytes.
 * The ids and sizes are part of the GGUF format (docs/formats.md, "GGUF"); an id this table does
 * not know is refused by the reader with its number. Which types have a kernel is a separate
 * question (kernels/gguf_quant.h). */
#ifndef QHX_CORE_GGML_TYPE_H
#define QHX_CORE_GGML_TYPE_H

#include <stdint.h>

typedef enum qhx_ggml_type {
    QHX_GGML_F32 = 0,
    QHX_GGML_F16 = 1,
    QHX_GGML_Q4_0 = 2,
    QHX_GGML_Q4_1 = 3,
    QHX_GGML_Q5_0 = 6,
    QHX_GGML_Q5_1 = 7,
    QHX_GGML_Q8_0 = 8,
    QHX_GGML_Q8_1 = 9,
    QHX_GGML_Q2_K = 10,
    QHX_GGML_Q3_K = 11,
    QHX_GGML_Q4_K = 12,
    QHX_GGML_Q5_K = 13,
    QHX_GGML_Q6_K = 14,
    QHX_GGML_Q8_K = 15,
    QHX_GGML_IQ4_NL = 20,
    QHX_GGML_IQ4_XS = 23,
    QHX_GGML_I8 = 24,
    QHX_GGML_I16 = 25,
    QHX_GGML_I32 = 26,
    QHX_GGML_I64 = 27,
    QHX_GGML_F64 = 28,
    QHX_GGML_BF16 = 30,
    QHX_GGML_TYPE_LIMIT = 64 /* ids at or above this are not ggml types */
} qhx_ggml_type;

/* The values of one super-block of the K-quants and IQ4_XS. */
#define QHX_GGML_QK_K 256

/* The type's name as ggml spells it ("Q4_K"), or NULL for an id no version of the format
 * defines (ids that were removed, such as 4 and 5, included). */
const char *qhx_ggml_type_name(uint32_t type);

/* Values per block and bytes per block; 0 for an unknown id. */
int qhx_ggml_type_block(uint32_t type);
int qhx_ggml_type_block_bytes(uint32_t type);

/* Bytes of a row of n values: 0 and *bytes set when n is a whole number of blocks, -1 when it
 * is not (or the id is unknown, or the size overflows). */
int qhx_ggml_row_bytes(uint32_t type, int64_t n, uint64_t *bytes /* OUT */);

#endif
