/* io/safetensors: strict reader of the safetensors format, single files and sharded
 * checkpoints (model.safetensors.index.json). Parsing works on a (buffer, length) pair so it can
 * be fuzzed; opening maps files read-only and keeps them mapped for the set's lifetime. */
#ifndef QHX_IO_SAFETENSORS_H
#define QHX_IO_SAFETENSORS_H

#include "core/dtype.h"
#include "core/file.h"
#include "core/status.h"

#include <stdint.h>

#define QHX_ST_MAX_HEADER ((uint64_t)100 << 20) /* JSON header bytes */
#define QHX_ST_MAX_TENSORS 1000000
#define QHX_ST_MAX_RANK 8
#define QHX_ST_MAX_NAME 1024
#define QHX_ST_MAX_SHARDS 4096

typedef struct qhx_st_tensor {
    const char *name;                 /* owned by the set */
    qhx_dtype dtype;
    int n_dims;
    int64_t shape[QHX_ST_MAX_RANK];   /* row-major, outermost first */
    int64_t n_elements;
    const uint8_t *data;              /* into the mapping; NOT necessarily aligned */
    size_t size;                      /* bytes == n_elements * dtype size */
    uint64_t offset;                  /* byte offset of data in its file */
    int file_index;                   /* which file of the set */
    uint32_t ggml_type;               /* dtype GGML: the block type (core/ggml_type.h); else 0 */
} qhx_st_tensor;

typedef struct qhx_st_set qhx_st_set;

/* Parse one safetensors image buf[0..len). Tensors point into buf, which must outlive the set.
 * `label` names the file in messages. */
qhx_status qhx_st_parse(const uint8_t *buf, size_t len, const char *label,
                        qhx_st_set **out /* OUT */, qhx_error *err);

/* Open a .safetensors file, a model.safetensors.index.json, or a folder holding either
 * (index first, then model.safetensors, then every *.safetensors in name order). */
qhx_status qhx_st_open(const char *path, qhx_st_set **out /* OUT */, qhx_error *err);

/* Open several paths (each as qhx_st_open takes them) as one set; a file named twice is opened
 * once, a tensor name found in two files is refused. */
qhx_status qhx_st_open_many(const char *const *paths, int n_paths, qhx_st_set **out /* OUT */,
                            qhx_error *err);

/* The same, each file brought into memory as `mode` says (core/file.h): mapped (the default of
 * the calls above), mapped and populated, or read into anonymous huge-page memory. Tensor data
 * points into whichever buffer, with the same offsets (so the same alignment) either way. */
qhx_status qhx_st_open_many_mode(const char *const *paths, int n_paths, qhx_file_mode mode,
                                 qhx_st_set **out /* OUT */, qhx_error *err);

/* The same, reporting the bytes brought into memory to progress (NULL: none; borrowed for the
 * call only; core/file.h). */
qhx_status qhx_st_open_many_progress(const char *const *paths, int n_paths, qhx_file_mode mode,
                                     qhx_load_progress *progress, qhx_st_set **out /* OUT */, qhx_error *err);

/* The same, leaving out every tensor whose name starts with one of the `skip` prefixes
 * (NULL-terminated list; NULL or empty = none): the set does not list them, and their bytes are
 * never read (QHX_FILE_READ reads only the kept tensors' ranges into a buffer whose other pages
 * stay untouched) or paged in (QHX_FILE_MAP_POPULATE populates only the kept ranges). The list
 * must outlive the call only; progress as qhx_st_open_many_progress. */
qhx_status qhx_st_open_select(const char *const *paths, int n_paths, qhx_file_mode mode,
                              const char *const *skip, qhx_load_progress *progress,
                              qhx_st_set **out /* OUT */, qhx_error *err);

void qhx_st_free(qhx_st_set *set); /* NULL allowed; unmaps */

/* A set over tensors another reader holds (a GGUF file's, under the names model code binds):
 * `path` names the file in messages; `owner` (freed by owner_free with the set, also when a
 * later call fails) keeps the tensors' bytes alive. Add each tensor (its name is copied; data
 * points into the owner's memory), then finish (the name index; a name added twice is
 * refused). */
qhx_st_set *qhx_st_external_new(const char *path, void *owner, void (*owner_free)(void *owner));
qhx_status qhx_st_external_add(qhx_st_set *set, const qhx_st_tensor *t, qhx_error *err);
qhx_status qhx_st_external_finish(qhx_st_set *set, qhx_error *err);

int64_t qhx_st_n_tensors(const qhx_st_set *set);
const qhx_st_tensor *qhx_st_tensor_at(const qhx_st_set *set, int64_t i); /* header order per file */
const char *qhx_st_file_path(const qhx_st_set *set, int file_index);
int qhx_st_n_files(const qhx_st_set *set);
/* __metadata__ entries of the first file: count, and key/value by index (borrowed). */
int qhx_st_n_metadata(const qhx_st_set *set);
void qhx_st_metadata_at(const qhx_st_set *set, int i, const char **key, const char **value);
/* The bytes of value i (NUL-terminated too, but it may hold a NUL of its own). */
size_t qhx_st_metadata_len(const qhx_st_set *set, int i);

/* Look up by exact name; NULL if absent. O(log n). */
const qhx_st_tensor *qhx_st_find(const qhx_st_set *set, const char *name);

/* Look up with expectations: the tensor must exist, have dtype `dtype` (or, when
 * dtype_mask != 0, any dtype whose bit (1u << dtype) is set), rank n_dims and the given shape
 * (-1 in shape = any). Messages name the tensor, the file, and expected vs got. */
qhx_status qhx_st_get(const qhx_st_set *set, const char *name, unsigned dtype_mask, int n_dims,
                      const int64_t *shape, const qhx_st_tensor **out /* OUT */, qhx_error *err);

#define QHX_DT_BIT(t) (1u << (t))
#define QHX_DT_FLOATS (QHX_DT_BIT(QHX_DTYPE_F32) | QHX_DT_BIT(QHX_DTYPE_F16) | QHX_DT_BIT(QHX_DTYPE_BF16))

#endif
