/* io/st_write: streaming safetensors writer (see st_write.h for the contract and layout). */
#include "io/st_write.h"

#include "core/alloc.h"
#include "core/file.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STW_MAX_RANK 8
#define STW_MAX_TENSORS 1000000

typedef struct stw_tensor {
    char *name;
    qhx_dtype dtype;
    int n_dims;
    int64_t shape[STW_MAX_RANK];
    uint64_t size;     /* bytes */
    uint64_t offset;   /* in the data section, after begin */
    int64_t decl;      /* declaration index: keeps the sort stable */
} stw_tensor;

struct qhx_stw {
    char *path;
    qhx_out_file out; /* out.f is f while the file is open */
    stw_tensor *t;
    int64_t n, cap;
    char **meta; /* key, value pairs */
    int n_meta;
    FILE *f;
    int begun, finished;
    int64_t cur;         /* tensor being written */
    uint64_t cur_done;   /* bytes of it written */
    uint64_t file_bytes;
};

qhx_status qhx_stw_create(const char *path, qhx_stw **out, qhx_error *err) {
    *out = NULL;
    qhx_stw *w = qhx_calloc(1, sizeof *w);
    if (!w || !(w->path = qhx_strdup(path))) {
        qhx_free(w);
        return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", path);
    }
    *out = w;
    return QHX_OK;
}

void qhx_stw_free(qhx_stw *w) {
    if (!w) return;
    qhx_out_abort(&w->out);
    for (int64_t i = 0; i < w->n; i++) qhx_free(w->t[i].name);
    for (int i = 0; i < 2 * w->n_meta; i++) qhx_free(w->meta[i]);
    qhx_free(w->meta);
    qhx_free(w->t);
    qhx_free(w->path);
    qhx_free(w);
}

qhx_status qhx_stw_meta(qhx_stw *w, const char *key, const char *value, qhx_error *err) {
    if (w->begun) return qhx_fail(err, QHX_E_ARG, "%s: metadata '%s' added after the header", w->path, key);
    for (int i = 0; i < w->n_meta; i++)
        if (!strcmp(w->meta[2 * i], key))
            return qhx_fail(err, QHX_E_ARG, "%s: metadata key '%s' given twice", w->path, key);
    json_t *jk = json_string(key), *jv = json_string(value);
    int utf8 = jk && jv;
    json_decref(jk);
    json_decref(jv);
    if (!utf8) return qhx_fail(err, QHX_E_ARG, "%s: metadata '%s' is not valid UTF-8", w->path, key);
    if (w->n_meta >= 4096) return qhx_fail(err, QHX_E_LIMIT, "%s: more than 4096 metadata entries", w->path);
    char **m = qhx_realloc(w->meta, (size_t)(w->n_meta + 1) * 2 * sizeof *m);
    if (!m) return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", w->path);
    w->meta = m;
    m[2 * w->n_meta] = qhx_strdup(key);
    m[2 * w->n_meta + 1] = qhx_strdup(value);
    w->n_meta++;
    if (!m[2 * w->n_meta - 2] || !m[2 * w->n_meta - 1])
        return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", w->path);
    return QHX_OK;
}

qhx_status qhx_stw_declare(qhx_stw *w, const char *name, qhx_dtype dtype, int n_dims,
                           const int64_t *shape, qhx_error *err) {
    if (w->begun) return qhx_fail(err, QHX_E_ARG, "%s: tensor '%s' declared after the header", w->path, name);
    if (!name || !*name || !strcmp(name, "__metadata__"))
        return qhx_fail(err, QHX_E_ARG, "%s: invalid tensor name '%s'", w->path, name ? name : "");
    json_t *jn = json_string(name);
    if (!jn) return qhx_fail(err, QHX_E_ARG, "%s: tensor name '%s' is not valid UTF-8", w->path, name);
    json_decref(jn);
    if ((unsigned)dtype >= QHX_DTYPE_COUNT)
        return qhx_fail(err, QHX_E_ARG, "%s: tensor '%s': invalid dtype %d", w->path, name, (int)dtype);
    if (n_dims < 0 || n_dims > STW_MAX_RANK)
        return qhx_fail(err, QHX_E_ARG, "%s: tensor '%s': rank %d outside [0, %d]", w->path, name, n_dims, STW_MAX_RANK);
    if (w->n >= STW_MAX_TENSORS)
        return qhx_fail(err, QHX_E_LIMIT, "%s: more than %d tensors", w->path, STW_MAX_TENSORS);
    for (int64_t i = 0; i < w->n; i++)
        if (!strcmp(w->t[i].name, name))
            return qhx_fail(err, QHX_E_ARG, "%s: tensor '%s' declared twice", w->path, name);
    size_t bytes = qhx_dtype_size(dtype);
    for (int d = 0; d < n_dims; d++) {
        if (shape[d] < 0)
            return qhx_fail(err, QHX_E_ARG, "%s: tensor '%s': dimension %d is negative", w->path, name, d);
        if (!qhx_size_mul(bytes, (size_t)shape[d], &bytes) || bytes > (size_t)INT64_MAX)
            return qhx_fail(err, QHX_E_LIMIT, "%s: tensor '%s': size overflows", w->path, name);
    }
    if (w->n == w->cap) {
        int64_t cap = w->cap ? 2 * w->cap : 64;
        stw_tensor *t = qhx_realloc(w->t, (size_t)cap * sizeof *t);
        if (!t) return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", w->path);
        w->t = t;
        w->cap = cap;
    }
    stw_tensor *t = &w->t[w->n];
    memset(t, 0, sizeof *t);
    if (!(t->name = qhx_strdup(name))) return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", w->path);
    t->dtype = dtype;
    t->n_dims = n_dims;
    for (int d = 0; d < n_dims; d++) t->shape[d] = shape[d];
    t->size = bytes;
    t->decl = w->n;
    w->n++;
    return QHX_OK;
}

/* Larger elements first, then declaration order. */
static int cmp_layout(const void *a, const void *b) {
    const stw_tensor *x = a, *y = b;
    size_t sx = qhx_dtype_size(x->dtype), sy = qhx_dtype_size(y->dtype);
    if (sx != sy) return sx > sy ? -1 : 1;
    return x->decl < y->decl ? -1 : x->decl > y->decl;
}

/* The header JSON (metadata first, then tensors in file order); owned by the caller (free()). */
static char *build_header(qhx_stw *w) {
    json_t *root = json_object();
    int ok = root != NULL;
    if (ok && w->n_meta) {
        json_t *m = json_object();
        ok = m && !json_object_set_new(root, "__metadata__", m);
        for (int i = 0; ok && i < w->n_meta; i++)
            ok = !json_object_set_new(m, w->meta[2 * i], json_string(w->meta[2 * i + 1]));
    }
    for (int64_t i = 0; ok && i < w->n; i++) {
        const stw_tensor *t = &w->t[i];
        json_t *e = json_object(), *sh = json_array(), *off = json_array();
        ok = e && sh && off;
        for (int d = 0; ok && d < t->n_dims; d++) ok = !json_array_append_new(sh, json_integer(t->shape[d]));
        ok = ok && !json_array_append_new(off, json_integer((json_int_t)t->offset)) &&
             !json_array_append_new(off, json_integer((json_int_t)(t->offset + t->size)));
        ok = ok && !json_object_set_new(e, "dtype", json_string(qhx_dtype_name(t->dtype)));
        if (ok) { /* json_object_set_new takes the value, even when it fails */
            ok = !json_object_set_new(e, "shape", sh);
            sh = NULL;
        }
        if (ok) {
            ok = !json_object_set_new(e, "data_offsets", off);
            off = NULL;
        }
        if (ok) {
            ok = !json_object_set_new(root, t->name, e);
            e = NULL;
        }
        json_decref(e);
        json_decref(sh);
        json_decref(off);
    }
    char *s = ok ? json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(root);
    return s;
}

static qhx_status io_fail(qhx_stw *w, qhx_error *err, const char *what) {
    return qhx_fail(err, QHX_E_IO, "%s: %s: %s", w->path, what, strerror(errno));
}

qhx_status qhx_stw_begin(qhx_stw *w, qhx_error *err) {
    if (w->begun) return qhx_fail(err, QHX_E_ARG, "%s: header already written", w->path);
    w->begun = 1;
    if (w->n > 1) qsort(w->t, (size_t)w->n, sizeof *w->t, cmp_layout);
    uint64_t off = 0;
    for (int64_t i = 0; i < w->n; i++) {
        w->t[i].offset = off;
        off += w->t[i].size;
    }
    char *hdr = build_header(w);
    if (!hdr) return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory building the header", w->path);
    size_t hlen = strlen(hdr), padded = (hlen + 7) & ~(size_t)7;
    w->file_bytes = 8 + padded + off;

    qhx_status rc = qhx_out_open(&w->out, w->path, 0666, err);
    if (rc) {
        free(hdr);
        return rc;
    }
    w->f = w->out.f;
    setvbuf(w->f, NULL, _IOFBF, (size_t)1 << 20);
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    int ok = fwrite(len8, 1, 8, w->f) == 8 && fwrite(hdr, 1, hlen, w->f) == hlen;
    for (size_t i = hlen; ok && i < padded; i++) ok = fputc(' ', w->f) != EOF;
    free(hdr);
    if (!ok) return io_fail(w, err, "write failed");
    w->cur = 0;
    w->cur_done = 0;
    while (w->cur < w->n && w->t[w->cur].size == 0) w->cur++;
    return QHX_OK;
}

uint64_t qhx_stw_file_bytes(const qhx_stw *w) { return w->file_bytes; }

const char *qhx_stw_next(const qhx_stw *w) {
    return w->begun && w->cur < w->n ? w->t[w->cur].name : NULL;
}

qhx_status qhx_stw_write(qhx_stw *w, const char *name, const void *data, size_t size,
                         qhx_error *err) {
    if (!w->begun || !w->f) return qhx_fail(err, QHX_E_ARG, "%s: write before the header", w->path);
    const char *next = qhx_stw_next(w);
    if (!next) return qhx_fail(err, QHX_E_ARG, "%s: tensor '%s': every tensor is already complete", w->path, name);
    if (strcmp(next, name))
        return qhx_fail(err, QHX_E_ARG, "%s: tensor '%s' written out of order (expected '%s')", w->path, name, next);
    stw_tensor *t = &w->t[w->cur];
    if (size > t->size - w->cur_done)
        return qhx_fail(err, QHX_E_ARG, "%s: tensor '%s': %llu more bytes would pass its %llu bytes", w->path,
                        name, (unsigned long long)size, (unsigned long long)t->size);
    if (size && fwrite(data, 1, size, w->f) != size) return io_fail(w, err, "write failed");
    w->cur_done += size;
    if (w->cur_done == t->size) {
        w->cur++;
        w->cur_done = 0;
        while (w->cur < w->n && w->t[w->cur].size == 0) w->cur++;
    }
    return QHX_OK;
}

qhx_status qhx_stw_finish(qhx_stw *w, qhx_error *err) {
    if (!w->begun || !w->f) return qhx_fail(err, QHX_E_ARG, "%s: finish before the header", w->path);
    const char *next = qhx_stw_next(w);
    if (next)
        return qhx_fail(err, QHX_E_ARG, "%s: tensor '%s' incomplete: %llu of %llu bytes written", w->path, next,
                        (unsigned long long)w->cur_done, (unsigned long long)w->t[w->cur].size);
    w->f = NULL;
    qhx_status rc = qhx_out_commit(&w->out, err);
    if (rc) return rc;
    w->finished = 1;
    return QHX_OK;
}
