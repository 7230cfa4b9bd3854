/* io/st_write: a streaming safetensors writer. Declare every tensor (name, dtype, shape) first;
 * begin() fixes the layout and writes the header; then the data is appended tensor by tensor,
 * in the writer's order, in as many pieces as the caller likes, so a checkpoint of any size
 * passes through a small buffer. The file is written under a temporary name in the same folder
 * and renamed into place by finish(); a writer freed before finish() leaves nothing behind.
 *
 * Layout (readable by any safetensors reader: no holes between tensors): the header is padded
 * with spaces so the data section starts at a multiple of 8, and tensors are stored in
 * declaration order, stably sorted by element size, largest first, so every tensor starts at a
 * multiple of its element size (f32 at 4, f16/bf16 at 2). Not thread-safe: one writer, one
 * thread. */
#ifndef QHX_IO_ST_WRITE_H
#define QHX_IO_ST_WRITE_H

#include "core/dtype.h"
#include "core/status.h"

#include <stddef.h>
#include <stdint.h>

typedef struct qhx_stw qhx_stw;

/* A writer that will produce `path`. Nothing touches the disk before qhx_stw_begin. */
qhx_status qhx_stw_create(const char *path, qhx_stw **out /* OUT */, qhx_error *err);

/* Free; NULL allowed. If qhx_stw_finish did not succeed, the temporary file is removed. */
void qhx_stw_free(qhx_stw *w);

/* Add a __metadata__ string entry (before begin). A repeated key is refused. */
qhx_status qhx_stw_meta(qhx_stw *w, const char *key, const char *value, qhx_error *err);

/* Declare a tensor (before begin). n_dims in [0, 8]; dims >= 0; names unique, non-empty,
 * not "__metadata__". Sizes are overflow-checked. */
qhx_status qhx_stw_declare(qhx_stw *w, const char *name, qhx_dtype dtype, int n_dims,
                           const int64_t *shape, qhx_error *err);

/* Fix the layout, create the temporary file and write the header. */
qhx_status qhx_stw_begin(qhx_stw *w, qhx_error *err);

/* Bytes the finished file will have (valid after begin): header + all tensor data. */
uint64_t qhx_stw_file_bytes(const qhx_stw *w);

/* The tensor whose bytes are expected next (after begin), or NULL when every tensor is
 * complete. Borrowed; valid while w lives. Tensors are written in this order. */
const char *qhx_stw_next(const qhx_stw *w);

/* Append size bytes to tensor `name`, which must be the one qhx_stw_next names. A tensor is
 * complete when its declared size is reached; writing past it is refused (QHX_E_ARG), as is a
 * name out of order. Zero-sized tensors complete without a call. */
qhx_status qhx_stw_write(qhx_stw *w, const char *name, const void *data, size_t size,
                         qhx_error *err);

/* Check every tensor is complete, flush, fsync, close and rename onto the final path. After a
 * failure the temporary file is removed (by this call or by qhx_stw_free). */
qhx_status qhx_stw_finish(qhx_stw *w, qhx_error *err);

#endif
