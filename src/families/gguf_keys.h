/* families/gguf_keys.h: reading a GGUF file's <arch>.* keys into a family's config (the
 * families' gguf.c files; defined in families/gguf.c). */
#ifndef QHX_FAMILIES_GGUF_KEYS_H
#define QHX_FAMILIES_GGUF_KEYS_H

#include "core/status.h"
#include "io/gguf.h"
#include "io/json.h"

#include <stdbool.h>
#include <stdint.h>

/* "<arch>.<key>" as an integer / a number; absent and not required: *out left alone. */
qhx_status qhx_gguf_arch_int(const qhx_gguf *g, const char *arch, const char *key, bool required, int64_t *out,
                             qhx_error *err);
qhx_status qhx_gguf_arch_float(const qhx_gguf *g, const char *arch, const char *key, bool required, double *out,
                               qhx_error *err);
/* "<arch>.rope.dimension_sections" as a JSON array of its first three values (a fourth must be
 * 0), or *out NULL when absent. */
qhx_status qhx_gguf_arch_sections(const qhx_gguf *g, const char *arch, json_t **out, qhx_error *err);
/* An integer key <arch>.<gguf> copied into the text config as hf (absent and not required:
 * left out). */
typedef struct qhx_gguf_int_key {
    const char *gguf, *hf;
    bool required;
} qhx_gguf_int_key;
/* Copy keys (ended by gguf NULL) into tc; values (NULL, or one per key) get each value or -1. */
qhx_status qhx_gguf_copy_ints(const qhx_gguf *g, const char *arch, const qhx_gguf_int_key *keys, json_t *tc,
                              int64_t *values, qhx_error *err);
/* token_embd.weight's rows (the vocabulary) and columns (the hidden size). */
qhx_status qhx_gguf_embedding_shape(const qhx_gguf *g, int64_t *rows, int64_t *cols, qhx_error *err);

#endif
