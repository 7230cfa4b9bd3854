/* io/gguf: strict reader of GGUF files (versions 2 and 3), the single-file format of ggml and
 * llama.cpp: a header, typed key/value metadata, tensor descriptions, then the tensors' blocks
 * at an aligned offset. Every count, string length, array length, dimension, tensor offset and
 * the alignment are checked against the file and a cap before use (docs/formats.md, "GGUF";
 * docs/robustness.md lists the caps). Parsing works on a (buffer, length) pair so it can be
 * fuzzed; opening brings the file into memory as `mode` says and keeps it for the reader's
 * lifetime. Tensors are described in place: their bytes are never converted here. */
#ifndef QHX_IO_GGUF_H
#define QHX_IO_GGUF_H

#include "core/file.h"
#include "core/ggml_type.h"
#include "core/status.h"

#include <stdint.h>

#define QHX_GGUF_MAX_TENSORS 1000000
#define QHX_GGUF_MAX_KV 100000
#define QHX_GGUF_MAX_KEY 65535           /* bytes of a key (the format's own bound) */
#define QHX_GGUF_MAX_NAME 256            /* bytes of a tensor name */
#define QHX_GGUF_MAX_STRING (64u << 20)  /* bytes of one string value */
#define QHX_GGUF_MAX_ARRAY (1u << 24)    /* elements of one array */
#define QHX_GGUF_MAX_DIMS 4
#define QHX_GGUF_MAX_ALIGNMENT (1u << 16)
#define QHX_GGUF_DEFAULT_ALIGNMENT 32

/* Value types of the metadata, as the file stores them. */
typedef enum qhx_gguf_vtype {
    QHX_GGUF_UINT8 = 0,
    QHX_GGUF_INT8 = 1,
    QHX_GGUF_UINT16 = 2,
    QHX_GGUF_INT16 = 3,
    QHX_GGUF_UINT32 = 4,
    QHX_GGUF_INT32 = 5,
    QHX_GGUF_FLOAT32 = 6,
    QHX_GGUF_BOOL = 7,
    QHX_GGUF_STRING = 8,
    QHX_GGUF_ARRAY = 9,
    QHX_GGUF_UINT64 = 10,
    QHX_GGUF_INT64 = 11,
    QHX_GGUF_FLOAT64 = 12,
    QHX_GGUF_VTYPE_COUNT
} qhx_gguf_vtype;

/* A string of the file: its bytes in place (not NUL-terminated; may hold a NUL). */
typedef struct qhx_gguf_str {
    const char *p;
    uint64_t len;
} qhx_gguf_str;

typedef struct qhx_gguf_kv {
    const char *key;         /* owned, NUL-terminated */
    qhx_gguf_vtype type;     /* QHX_GGUF_ARRAY for an array */
    qhx_gguf_vtype elem;     /* the elements' type of an array, else == type */
    uint64_t n;              /* elements of an array, else 1 */
    const uint8_t *data;     /* a number's or a numeric array's little-endian bytes, in place */
    const qhx_gguf_str *str; /* a string (n == 1) or a string array's n strings; else NULL */
} qhx_gguf_kv;

typedef struct qhx_gguf_tensor {
    const char *name;  /* owned, NUL-terminated */
    uint32_t type;     /* a qhx_ggml_type id the table knows */
    int n_dims;        /* 1..QHX_GGUF_MAX_DIMS */
    int64_t ne[QHX_GGUF_MAX_DIMS]; /* ggml's order: ne[0] is the row (contiguous), unused = 1 */
    int64_t n_elements;
    uint64_t offset;   /* from the start of the data section; a multiple of the alignment */
    uint64_t size;     /* bytes: rows x the type's row bytes */
    const uint8_t *data; /* into the buffer; aligned as the file is */
} qhx_gguf_tensor;

typedef struct qhx_gguf qhx_gguf;

/* Parse one GGUF image buf[0..len); tensors and values point into buf, which must outlive the
 * reader. `label` names the file in messages. */
qhx_status qhx_gguf_parse(const uint8_t *buf, size_t len, const char *label, qhx_gguf **out /* OUT */,
                          qhx_error *err);

/* Open a .gguf file, brought into memory as `mode` says (core/file.h). */
qhx_status qhx_gguf_open(const char *path, qhx_file_mode mode, qhx_gguf **out /* OUT */, qhx_error *err);

void qhx_gguf_free(qhx_gguf *g); /* NULL allowed; unmaps what qhx_gguf_open mapped */

/* Whether the first bytes of a file are GGUF's magic (any version). */
int qhx_gguf_is_magic(const uint8_t *p, size_t len);
/* Whether path is a regular file that starts with GGUF's magic, whatever its name. */
int qhx_gguf_path_has_magic(const char *path);

const char *qhx_gguf_label(const qhx_gguf *g);
uint32_t qhx_gguf_version(const qhx_gguf *g);
uint64_t qhx_gguf_alignment(const qhx_gguf *g);
uint64_t qhx_gguf_data_offset(const qhx_gguf *g); /* file offset of the data section */
uint64_t qhx_gguf_file_size(const qhx_gguf *g);

int64_t qhx_gguf_n_kv(const qhx_gguf *g);
const qhx_gguf_kv *qhx_gguf_kv_at(const qhx_gguf *g, int64_t i); /* file order */
const qhx_gguf_kv *qhx_gguf_find_kv(const qhx_gguf *g, const char *key); /* NULL if absent */

int64_t qhx_gguf_n_tensors(const qhx_gguf *g);
const qhx_gguf_tensor *qhx_gguf_tensor_at(const qhx_gguf *g, int64_t i); /* file order */
const qhx_gguf_tensor *qhx_gguf_find_tensor(const qhx_gguf *g, const char *name); /* O(log n) */

/* The name of a value type ("uint32", "string", "array"); "?" when out of range. */
const char *qhx_gguf_vtype_name(qhx_gguf_vtype t);

/* Typed reads of a scalar value. Integers of any width convert when the value fits (a negative
 * value into an unsigned result does not); a float reads float32 or float64. A missing key,
 * another type or an out-of-range value fails with a line naming the file and the key. */
qhx_status qhx_gguf_get_int(const qhx_gguf *g, const char *key, int64_t *out /* OUT */, qhx_error *err);
qhx_status qhx_gguf_get_float(const qhx_gguf *g, const char *key, double *out /* OUT */, qhx_error *err);
qhx_status qhx_gguf_get_bool(const qhx_gguf *g, const char *key, int *out /* OUT */, qhx_error *err);
qhx_status qhx_gguf_get_str(const qhx_gguf *g, const char *key, qhx_gguf_str *out /* OUT */, qhx_error *err);

/* Element i of a numeric array value as int64 or double (the caller checked i < kv->n and the
 * element type); 0 when the value is not such an array. */
int64_t qhx_gguf_arr_int(const qhx_gguf_kv *kv, uint64_t i);
double qhx_gguf_arr_float(const qhx_gguf_kv *kv, uint64_t i);
/* A scalar number as int64 / double (booleans as 0/1); 0 for strings and arrays. */
int64_t qhx_gguf_kv_int(const qhx_gguf_kv *kv);
double qhx_gguf_kv_float(const qhx_gguf_kv *kv);

#endif
