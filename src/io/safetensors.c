/* io/safetensors: header validation and shard handling.
 *
 * Layout: u64 little-endian header length N, N bytes of JSON, then the data section. Every
 * tensor entry is {"dtype", "shape", "data_offsets": [begin, end]} relative to the data section.
 * We check: N against a cap and the file, JSON validity, dtype names, rank cap, overflow-safe
 * shape products, end - begin == elements x dtype size, ranges inside the data section, and no
 * two ranges overlapping. */
#include "io/safetensors.h"

#include "core/alloc.h"
#include "io/json.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct qhx_st_set {
    qhx_st_tensor *tensors;  /* all files, header order within a file */
    int64_t n_tensors, cap_tensors;
    int64_t *by_name;        /* indices sorted by name */
    char **paths;            /* per file */
    qhx_file_map *maps;      /* per file (zeroed when parsed from a caller buffer) */
    int n_files;
    qhx_file_mode mode;      /* how files are brought into memory */
    const char *const *skip; /* name prefixes left out of the set (NULL-terminated), or NULL */
    qhx_load_progress *progress; /* NULL or where loading reports (borrowed for the open) */
    char **meta;             /* key, value pairs of the first file's __metadata__ */
    size_t *meta_len;        /* each value's bytes (a value may hold a NUL: \u0000) */
    int n_meta;
    void *owner;             /* an external set's reader (qhx_st_external_new), or NULL */
    void (*owner_free)(void *owner);
};

/* ---- parsing one header ---------------------------------------------------- */

static qhx_status push_tensor(qhx_st_set *s, qhx_st_tensor *t, qhx_error *err) {
    if (s->n_tensors >= QHX_ST_MAX_TENSORS)
        return qhx_fail(err, QHX_E_LIMIT, "more than %d tensors", QHX_ST_MAX_TENSORS);
    if (s->n_tensors == s->cap_tensors) {
        int64_t cap = s->cap_tensors ? s->cap_tensors * 2 : 64;
        qhx_st_tensor *n = qhx_realloc(s->tensors, (size_t)cap * sizeof *n);
        if (!n) return qhx_fail(err, QHX_E_NOMEM, "out of memory for the tensor table");
        s->tensors = n;
        s->cap_tensors = cap;
    }
    s->tensors[s->n_tensors++] = *t;
    return QHX_OK;
}

static qhx_status parse_metadata(qhx_st_set *s, json_t *meta, const char *label, qhx_error *err) {
    if (!json_is_object(meta))
        return qhx_fail(err, QHX_E_FORMAT, "%s: __metadata__: expected an object", label);
    if (s->n_files > 1) return QHX_OK; /* only the first file's metadata is kept */
    size_t n = json_object_size(meta);
    if (n > 4096) return qhx_fail(err, QHX_E_LIMIT, "%s: __metadata__: %zu entries, limit 4096", label, n);
    s->meta = qhx_calloc(n ? 2 * n : 1, sizeof *s->meta);
    s->meta_len = qhx_calloc(n ? n : 1, sizeof *s->meta_len);
    if (!s->meta || !s->meta_len) return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", label);
    const char *k;
    json_t *v;
    json_object_foreach(meta, k, v) {
        if (!json_is_string(v))
            return qhx_fail(err, QHX_E_FORMAT, "%s: __metadata__.%s: expected a string", label, k);
        s->meta[2 * s->n_meta] = qhx_strdup(k);
        size_t vl = json_string_length(v);
        char *val = qhx_malloc(vl + 1);
        if (val) {
            memcpy(val, json_string_value(v), vl);
            val[vl] = 0;
        }
        s->meta[2 * s->n_meta + 1] = val;
        s->meta_len[s->n_meta] = vl;
        s->n_meta++;
        if (!s->meta[2 * s->n_meta - 2] || !s->meta[2 * s->n_meta - 1])
            return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", label);
    }
    return QHX_OK;
}

static qhx_status parse_entry(const char *name, json_t *e, const uint8_t *data, uint64_t data_len,
                              uint64_t data_pos, int file_index, const char *label,
                              qhx_st_tensor *t, qhx_error *err) {
    memset(t, 0, sizeof *t);
    if (strlen(name) > QHX_ST_MAX_NAME)
        return qhx_fail(err, QHX_E_LIMIT, "%s: a tensor name is longer than %d bytes", label, QHX_ST_MAX_NAME);
    if (!json_is_object(e))
        return qhx_fail(err, QHX_E_FORMAT, "%s: tensor '%s': expected an object", label, name);
    json_t *jd = json_object_get(e, "dtype"), *js = json_object_get(e, "shape"),
           *jo = json_object_get(e, "data_offsets");
    if (!json_is_string(jd))
        return qhx_fail(err, QHX_E_FORMAT, "%s: tensor '%s': dtype: missing or not a string", label, name);
    if (qhx_dtype_from_name(json_string_value(jd), &t->dtype) != 0)
        return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: tensor '%s': unsupported dtype '%s'", label,
                        name, json_string_value(jd));
    if (!json_is_array(js))
        return qhx_fail(err, QHX_E_FORMAT, "%s: tensor '%s': shape: missing or not an array", label, name);
    size_t rank = json_array_size(js);
    if (rank > QHX_ST_MAX_RANK)
        return qhx_fail(err, QHX_E_LIMIT, "%s: tensor '%s': rank %zu exceeds %d", label, name, rank,
                        QHX_ST_MAX_RANK);
    t->n_dims = (int)rank;
    size_t n_el = 1;
    for (size_t d = 0; d < rank; d++) {
        json_t *x = json_array_get(js, d);
        if (!json_is_integer(x) || json_integer_value(x) < 0)
            return qhx_fail(err, QHX_E_FORMAT, "%s: tensor '%s': shape[%zu]: expected a non-negative integer",
                            label, name, d);
        t->shape[d] = json_integer_value(x);
        if (!qhx_size_mul(n_el, (size_t)t->shape[d], &n_el) || n_el > (size_t)INT64_MAX)
            return qhx_fail(err, QHX_E_FORMAT, "%s: tensor '%s': shape product overflows", label, name);
    }
    t->n_elements = (int64_t)n_el;
    size_t bytes;
    if (!qhx_size_mul(n_el, qhx_dtype_size(t->dtype), &bytes))
        return qhx_fail(err, QHX_E_FORMAT, "%s: tensor '%s': byte size overflows", label, name);
    if (!json_is_array(jo) || json_array_size(jo) != 2 || !json_is_integer(json_array_get(jo, 0)) ||
        !json_is_integer(json_array_get(jo, 1)))
        return qhx_fail(err, QHX_E_FORMAT, "%s: tensor '%s': data_offsets: expected [begin, end]", label, name);
    json_int_t b = json_integer_value(json_array_get(jo, 0)), en = json_integer_value(json_array_get(jo, 1));
    if (b < 0 || en < b)
        return qhx_fail(err, QHX_E_FORMAT, "%s: tensor '%s': data_offsets [%lld, %lld] are not ordered",
                        label, name, (long long)b, (long long)en);
    if ((uint64_t)en > data_len)
        return qhx_fail(err, QHX_E_FORMAT,
                        "%s: tensor '%s': data ends at byte %llu, file has %llu bytes", label, name,
                        (unsigned long long)(data_pos + (uint64_t)en),
                        (unsigned long long)(data_pos + data_len));
    if ((uint64_t)(en - b) != bytes)
        return qhx_fail(err, QHX_E_FORMAT,
                        "%s: tensor '%s': %s shape needs %zu bytes, data_offsets give %lld", label,
                        name, qhx_dtype_name(t->dtype), bytes, (long long)(en - b));
    t->data = data + b;
    t->size = bytes;
    t->offset = data_pos + (uint64_t)b;
    t->file_index = file_index;
    t->name = qhx_strdup(name);
    if (!t->name) return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", label);
    return QHX_OK;
}

static int cmp_offset(const void *a, const void *b) {
    const qhx_st_tensor *x = *(const qhx_st_tensor *const *)a, *y = *(const qhx_st_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset ? 1 : (x->size > y->size) - (x->size < y->size);
}

static qhx_status check_overlaps(qhx_st_set *s, int64_t first, const char *label, qhx_error *err) {
    int64_t n = s->n_tensors - first;
    if (n < 2) return QHX_OK;
    qhx_st_tensor **v = qhx_malloc((size_t)n * sizeof *v);
    if (!v) return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", label);
    for (int64_t i = 0; i < n; i++) v[i] = &s->tensors[first + i];
    qsort(v, (size_t)n, sizeof *v, cmp_offset);
    qhx_status rc = QHX_OK;
    for (int64_t i = 1; i < n; i++) {
        if (v[i]->size && v[i - 1]->offset + v[i - 1]->size > v[i]->offset) {
            rc = qhx_fail(err, QHX_E_FORMAT, "%s: tensors '%s' and '%s' overlap at byte %llu", label,
                          v[i - 1]->name, v[i]->name, (unsigned long long)v[i]->offset);
            break;
        }
    }
    qhx_free(v);
    return rc;
}

static qhx_status parse_file(qhx_st_set *s, const uint8_t *buf, size_t len, const char *label,
                             int file_index, qhx_error *err) {
    if (len < 8)
        return qhx_fail(err, QHX_E_FORMAT, "%s: file has %zu bytes, too short for a safetensors header", label, len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | buf[i];
    if (hlen > QHX_ST_MAX_HEADER)
        return qhx_fail(err, QHX_E_LIMIT, "%s: header length %llu exceeds the %llu-byte limit", label,
                        (unsigned long long)hlen, (unsigned long long)QHX_ST_MAX_HEADER);
    if (hlen > len - 8)
        return qhx_fail(err, QHX_E_FORMAT, "%s: header length %llu goes past the end of the file (%zu bytes)",
                        label, (unsigned long long)hlen, len);
    json_t *root = qhx_json_parse((const char *)buf + 8, (size_t)hlen, label, err);
    if (!root) return err ? err->code : QHX_E_FORMAT;
    qhx_status rc = QHX_OK;
    int64_t first = s->n_tensors;
    if (!json_is_object(root)) {
        rc = qhx_fail(err, QHX_E_FORMAT, "%s: header is not a JSON object", label);
        goto done;
    }
    const uint8_t *data = buf + 8 + hlen;
    uint64_t data_len = len - 8 - hlen, data_pos = 8 + hlen;
    const char *name;
    json_t *e;
    json_object_foreach(root, name, e) {
        if (!strcmp(name, "__metadata__")) {
            if ((rc = parse_metadata(s, e, label, err)) != QHX_OK) goto done;
            continue;
        }
        qhx_st_tensor t;
        if ((rc = parse_entry(name, e, data, data_len, data_pos, file_index, label, &t, err)) != QHX_OK) goto done;
        if ((rc = push_tensor(s, &t, err)) != QHX_OK) {
            qhx_free((void *)t.name);
            goto done;
        }
    }
    rc = check_overlaps(s, first, label, err);
done:
    json_decref(root);
    return rc;
}

/* ---- the set ---------------------------------------------------------------- */

static qhx_st_set *set_new(void) { return qhx_calloc(1, sizeof(qhx_st_set)); }

void qhx_st_free(qhx_st_set *s) {
    if (!s) return;
    for (int64_t i = 0; i < s->n_tensors; i++) qhx_free((void *)s->tensors[i].name);
    qhx_free(s->tensors);
    qhx_free(s->by_name);
    for (int i = 0; i < s->n_files; i++) {
        if (s->maps) qhx_file_map_close(&s->maps[i]);
        if (s->paths) qhx_free(s->paths[i]);
    }
    qhx_free(s->maps);
    qhx_free(s->paths);
    for (int i = 0; i < 2 * s->n_meta; i++) qhx_free(s->meta[i]);
    qhx_free(s->meta);
    qhx_free(s->meta_len);
    if (s->owner_free) s->owner_free(s->owner);
    qhx_free(s);
}

static qhx_status build_index(qhx_st_set *s, qhx_error *err) {
    s->by_name = qhx_malloc((size_t)(s->n_tensors ? s->n_tensors : 1) * sizeof *s->by_name);
    if (!s->by_name) return qhx_fail(err, QHX_E_NOMEM, "out of memory for the tensor index");
    for (int64_t i = 0; i < s->n_tensors; i++) s->by_name[i] = i;
    /* bottom-up merge sort by name (qsort has no context argument, and we keep no globals) */
    int64_t n = s->n_tensors;
    int64_t *tmp = qhx_malloc((size_t)(n ? n : 1) * sizeof *tmp);
    if (!tmp) return qhx_fail(err, QHX_E_NOMEM, "out of memory for the tensor index");
    for (int64_t width = 1; width < n; width *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * width) {
            int64_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                tmp[k++] = strcmp(s->tensors[s->by_name[i]].name, s->tensors[s->by_name[j]].name) <= 0
                               ? s->by_name[i++] : s->by_name[j++];
            while (i < mid) tmp[k++] = s->by_name[i++];
            while (j < hi) tmp[k++] = s->by_name[j++];
        }
        memcpy(s->by_name, tmp, (size_t)n * sizeof *tmp);
    }
    qhx_free(tmp);
    for (int64_t i = 1; i < n; i++) {
        const qhx_st_tensor *a = &s->tensors[s->by_name[i - 1]], *b = &s->tensors[s->by_name[i]];
        if (!strcmp(a->name, b->name))
            return qhx_fail(err, QHX_E_FORMAT, "tensor '%s' appears twice (%s and %s)", a->name,
                            s->paths ? s->paths[a->file_index] : "buffer",
                            s->paths ? s->paths[b->file_index] : "buffer");
    }
    return QHX_OK;
}

qhx_status qhx_st_parse(const uint8_t *buf, size_t len, const char *label, qhx_st_set **out,
                        qhx_error *err) {
    *out = NULL;
    qhx_st_set *s = set_new();
    if (!s) return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", label);
    s->n_files = 1;
    qhx_status rc = parse_file(s, buf, len, label, 0, err);
    if (rc == QHX_OK) rc = build_index(s, err);
    if (rc != QHX_OK) {
        s->n_files = 0;
        qhx_st_free(s);
        return rc;
    }
    s->n_files = 0; /* no owned paths or maps */
    *out = s;
    return QHX_OK;
}

/* ---- sets over another reader's tensors -------------------------------------- */

qhx_st_set *qhx_st_external_new(const char *path, void *owner, void (*owner_free)(void *owner)) {
    qhx_st_set *s = set_new();
    if (s) {
        s->paths = qhx_calloc(1, sizeof *s->paths);
        if (s->paths) s->paths[0] = qhx_strdup(path ? path : "?");
        if (s->paths && s->paths[0]) s->n_files = 1;
    }
    if (!s || s->n_files != 1) {
        if (s) qhx_free(s->paths);
        qhx_free(s);
        if (owner_free) owner_free(owner);
        return NULL;
    }
    s->owner = owner;
    s->owner_free = owner_free;
    return s;
}

qhx_status qhx_st_external_add(qhx_st_set *s, const qhx_st_tensor *t, qhx_error *err) {
    qhx_st_tensor c = *t;
    c.file_index = 0;
    c.name = qhx_strdup(t->name);
    if (!c.name) return qhx_fail(err, QHX_E_NOMEM, "out of memory for the tensor table");
    qhx_status rc = push_tensor(s, &c, err);
    if (rc) qhx_free((void *)c.name);
    return rc;
}

qhx_status qhx_st_external_finish(qhx_st_set *s, qhx_error *err) { return build_index(s, err); }

/* ---- loading only the tensors a run plan reads ------------------------------------- */

static bool skipped(const qhx_st_set *s, const char *name) {
    for (const char *const *p = s->skip; p && *p; p++)
        if (!strncmp(name, *p, strlen(*p))) return true;
    return false;
}

/* Remove the skipped tensors among [first, n_tensors) from the table (their names freed). */
static void drop_skipped(qhx_st_set *s, int64_t first) {
    int64_t k = first;
    for (int64_t i = first; i < s->n_tensors; i++) {
        if (skipped(s, s->tensors[i].name)) qhx_free((void *)s->tensors[i].name);
        else s->tensors[k++] = s->tensors[i];
    }
    s->n_tensors = k;
}

static qhx_status pread_all(int fd, const char *path, uint8_t *dst, size_t n, uint64_t off, qhx_error *err) {
    while (n) {
        ssize_t got = pread(fd, dst, n, (off_t)off);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return qhx_fail(err, QHX_E_IO, "%s: read failed at byte %llu: %s", path, (unsigned long long)off, strerror(errno));
        if (got == 0) return qhx_fail(err, QHX_E_IO, "%s: the file ended at byte %llu while loading", path, (unsigned long long)off);
        dst += got, off += (uint64_t)got, n -= (size_t)got;
    }
    return QHX_OK;
}

/* Tensors [first, n_tensors) point into the lazy mapping `lazy`: read their bytes (and the header)
 * at the same offsets into an anonymous buffer of the file's size, whose untouched pages never
 * become resident, then make it read-only and point the tensors there. */
static qhx_status read_selected(qhx_st_set *s, const char *path, int64_t first, qhx_file_map *lazy,
                                qhx_file_map *out, qhx_error *err) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return qhx_fail(err, QHX_E_IO, "%s: cannot open: %s", path, strerror(errno));
    qhx_file_map buf;
    qhx_status rc = qhx_file_anon(lazy->size, &buf, err);
    uint64_t hlen = 0;
    for (int i = 7; rc == QHX_OK && i >= 0; i--) hlen = (hlen << 8) | lazy->data[i];
    if (rc == QHX_OK) rc = pread_all(fd, path, (uint8_t *)buf.data, (size_t)(8 + hlen), 0, err);
    for (int64_t i = first; rc == QHX_OK && i < s->n_tensors; i++) {
        qhx_st_tensor *t = &s->tensors[i];
        rc = pread_all(fd, path, (uint8_t *)buf.data + t->offset, t->size, t->offset, err);
        t->data = buf.data + t->offset;
        qhx_load_progress_add(s->progress, t->size);
    }
    close(fd);
    if (rc == QHX_OK && mprotect((void *)buf.data, buf.span, PROT_READ) != 0)
        rc = qhx_fail(err, QHX_E_IO, "%s: cannot make the buffer read-only: %s", path, strerror(errno));
    if (rc != QHX_OK) {
        qhx_file_map_close(&buf);
        return rc;
    }
    *out = buf;
    return QHX_OK;
}

/* add_file when some tensors are left out: parse the header from a lazy mapping, drop the
 * skipped tensors, then bring in only the others as the set's mode says. Skipped bytes are
 * never read or paged in. */
static qhx_status add_file_selected(qhx_st_set *s, const char *path, int idx, qhx_error *err) {
    const qhx_file_mode mode = qhx_file_resolve_mode(path, s->mode);
    qhx_file_map lazy;
    qhx_status rc = qhx_file_load(path, QHX_FILE_MAP, &lazy, err);
    if (rc != QHX_OK) return rc;
    int64_t first = s->n_tensors;
    rc = parse_file(s, lazy.data, lazy.size, path, idx, err);
    if (rc != QHX_OK) {
        s->maps[idx] = lazy;
        return rc;
    }
    drop_skipped(s, first);
    if (mode == QHX_FILE_READ && lazy.size) {
        rc = read_selected(s, path, first, &lazy, &s->maps[idx], err);
        qhx_file_map_close(&lazy);
        return rc;
    }
    if (mode == QHX_FILE_MAP_POPULATE) /* the kept tensors only, as MAP_POPULATE would the whole file */
        for (int64_t i = first; i < s->n_tensors; i++) qhx_file_populate(s->tensors[i].data, s->tensors[i].size, s->progress);
    s->maps[idx] = lazy;
    return QHX_OK;
}

/* Add one mapped file to the set. */
static qhx_status add_file(qhx_st_set *s, const char *path, qhx_error *err) {
    for (int i = 0; i < s->n_files; i++) /* already part of the set (shared by two artifacts) */
        if (!strcmp(s->paths[i], path)) return QHX_OK;
    if (s->n_files >= QHX_ST_MAX_SHARDS)
        return qhx_fail(err, QHX_E_LIMIT, "%s: more than %d shard files", path, QHX_ST_MAX_SHARDS);
    char **paths = qhx_realloc(s->paths, (size_t)(s->n_files + 1) * sizeof *paths);
    if (!paths) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    s->paths = paths;
    qhx_file_map *maps = qhx_realloc(s->maps, (size_t)(s->n_files + 1) * sizeof *maps);
    if (!maps) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    s->maps = maps;
    int idx = s->n_files;
    memset(&s->maps[idx], 0, sizeof s->maps[idx]);
    s->paths[idx] = qhx_strdup(path);
    s->n_files++;
    if (!s->paths[idx]) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    if (s->skip) return add_file_selected(s, path, idx, err);
    qhx_status rc = qhx_file_load_progress(path, s->mode, s->progress, &s->maps[idx], err);
    if (rc != QHX_OK) return rc;
    return parse_file(s, s->maps[idx].data, s->maps[idx].size, path, idx, err);
}

static int has_suffix(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Every *.safetensors in dir, in name order. */
static qhx_status open_dir_all(qhx_st_set *s, const char *dir, qhx_error *err) {
    DIR *d = opendir(dir);
    if (!d) return qhx_fail(err, QHX_E_IO, "%s: cannot open folder", dir);
    char **names = NULL;
    int n = 0, cap = 0;
    qhx_status rc = QHX_OK;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!has_suffix(de->d_name, ".safetensors")) continue;
        if (n >= QHX_ST_MAX_SHARDS) {
            rc = qhx_fail(err, QHX_E_LIMIT, "%s: more than %d .safetensors files", dir, QHX_ST_MAX_SHARDS);
            break;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            char **nn = qhx_realloc(names, (size_t)cap * sizeof *nn);
            if (!nn) { rc = qhx_fail(err, QHX_E_NOMEM, "out of memory"); break; }
            names = nn;
        }
        if (!(names[n] = qhx_strdup(de->d_name))) { rc = qhx_fail(err, QHX_E_NOMEM, "out of memory"); break; }
        n++;
    }
    closedir(d);
    if (rc == QHX_OK && n == 0) rc = qhx_fail(err, QHX_E_IO, "%s: no .safetensors files in this folder", dir);
    if (rc == QHX_OK) qsort(names, (size_t)n, sizeof *names, cmp_str);
    for (int i = 0; i < n; i++) {
        if (rc == QHX_OK) {
            char *p = qhx_path_join(dir, names[i]);
            rc = p ? add_file(s, p, err) : qhx_fail(err, QHX_E_NOMEM, "out of memory");
            qhx_free(p);
        }
        qhx_free(names[i]);
    }
    qhx_free(names);
    return rc;
}

/* model.safetensors.index.json: {"weight_map": {tensor: file}}; files relative to its folder.
 * With verify false, open every file it names; with verify true (after the set's name index is
 * built), check that every mapped tensor is in the file the map names. */
static qhx_status index_pass(qhx_st_set *s, const char *index_path, bool verify, qhx_error *err) {
    json_t *root = qhx_json_load_file(index_path, err);
    if (!root) return err ? err->code : QHX_E_FORMAT;
    qhx_status rc = QHX_OK;
    json_t *wm = json_is_object(root) ? json_object_get(root, "weight_map") : NULL;
    char *dir = qhx_strdup(index_path);
    if (!dir) { json_decref(root); return qhx_fail(err, QHX_E_NOMEM, "out of memory"); }
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0'; else strcpy(dir, ".");
    if (!json_is_object(wm)) {
        rc = qhx_fail(err, QHX_E_FORMAT, "%s: weight_map: missing or not an object", index_path);
        goto done;
    }
    const char *tname;
    json_t *fv;
    json_object_foreach(wm, tname, fv) {
        const char *f = json_is_string(fv) ? json_string_value(fv) : NULL;
        if (!f || !*f || strchr(f, '/') || !strcmp(f, "..")) {
            rc = qhx_fail(err, QHX_E_FORMAT, "%s: weight_map.%s: expected a file name in this folder", index_path, tname);
            goto done;
        }
        char *p = qhx_path_join(dir, f);
        if (!p) { rc = qhx_fail(err, QHX_E_NOMEM, "out of memory"); goto done; }
        if (!verify) {
            rc = add_file(s, p, err);
        } else if (!skipped(s, tname)) {
            const qhx_st_tensor *t = qhx_st_find(s, tname);
            if (!t || strcmp(s->paths[t->file_index], p))
                rc = qhx_fail(err, QHX_E_FORMAT, "%s: tensor '%s' is not in %s", index_path, tname, f);
        }
        qhx_free(p);
        if (rc != QHX_OK) goto done;
    }
done:
    qhx_free(dir);
    json_decref(root);
    return rc;
}

/* Add one path (file, index, or folder) to s; *index_out gets a new string naming an index to
 * verify later, or NULL. */
static qhx_status open_into(qhx_st_set *s, const char *path, char **index_out, qhx_error *err) {
    *index_out = NULL;
    qhx_status rc;
    if (qhx_path_is_dir(path)) {
        char *idx = qhx_path_join(path, "model.safetensors.index.json");
        char *one = qhx_path_join(path, "model.safetensors");
        if (!idx || !one) rc = qhx_fail(err, QHX_E_NOMEM, "out of memory");
        else if (qhx_path_is_file(idx)) { rc = index_pass(s, idx, false, err); *index_out = idx; idx = NULL; }
        else if (qhx_path_is_file(one)) rc = add_file(s, one, err);
        else rc = open_dir_all(s, path, err);
        qhx_free(idx);
        qhx_free(one);
    } else if (has_suffix(path, ".json")) {
        rc = index_pass(s, path, false, err);
        if (!(*index_out = qhx_strdup(path)) && rc == QHX_OK) rc = qhx_fail(err, QHX_E_NOMEM, "out of memory");
    } else {
        rc = add_file(s, path, err);
    }
    return rc;
}

qhx_status qhx_st_open_many(const char *const *paths, int n_paths, qhx_st_set **out, qhx_error *err) {
    return qhx_st_open_many_mode(paths, n_paths, QHX_FILE_MAP, out, err);
}

qhx_status qhx_st_open_many_mode(const char *const *paths, int n_paths, qhx_file_mode mode, qhx_st_set **out,
                                 qhx_error *err) {
    return qhx_st_open_select(paths, n_paths, mode, NULL, NULL, out, err);
}

qhx_status qhx_st_open_many_progress(const char *const *paths, int n_paths, qhx_file_mode mode,
                                     qhx_load_progress *progress, qhx_st_set **out, qhx_error *err) {
    return qhx_st_open_select(paths, n_paths, mode, NULL, progress, out, err);
}

qhx_status qhx_st_open_select(const char *const *paths, int n_paths, qhx_file_mode mode, const char *const *skip,
                              qhx_load_progress *progress, qhx_st_set **out, qhx_error *err) {
    *out = NULL;
    if (n_paths < 1 || n_paths > QHX_ST_MAX_SHARDS) return qhx_fail(err, QHX_E_ARG, "safetensors: %d paths", n_paths);
    qhx_st_set *s = set_new();
    if (s) s->mode = mode, s->skip = skip && *skip ? skip : NULL, s->progress = progress;
    char **indexes = qhx_calloc((size_t)n_paths, sizeof *indexes);
    qhx_status rc = (!s || !indexes) ? qhx_fail(err, QHX_E_NOMEM, "out of memory") : QHX_OK;
    for (int i = 0; rc == QHX_OK && i < n_paths; i++) rc = open_into(s, paths[i], &indexes[i], err);
    if (rc == QHX_OK) rc = build_index(s, err);
    for (int i = 0; rc == QHX_OK && i < n_paths; i++)
        if (indexes[i]) rc = index_pass(s, indexes[i], true, err);
    for (int i = 0; indexes && i < n_paths; i++) qhx_free(indexes[i]);
    qhx_free(indexes);
    if (s) s->skip = NULL, s->progress = NULL; /* the caller's list and progress are not kept */
    if (rc != QHX_OK) {
        qhx_st_free(s);
        return rc;
    }
    *out = s;
    return QHX_OK;
}

qhx_status qhx_st_open(const char *path, qhx_st_set **out, qhx_error *err) {
    return qhx_st_open_many(&path, 1, out, err);
}

/* ---- queries ------------------------------------------------------------------ */

int64_t qhx_st_n_tensors(const qhx_st_set *s) { return s->n_tensors; }
const qhx_st_tensor *qhx_st_tensor_at(const qhx_st_set *s, int64_t i) {
    return i >= 0 && i < s->n_tensors ? &s->tensors[i] : NULL;
}
int qhx_st_n_files(const qhx_st_set *s) { return s->n_files; }
const char *qhx_st_file_path(const qhx_st_set *s, int i) {
    return s->paths && i >= 0 && i < s->n_files ? s->paths[i] : "buffer";
}
int qhx_st_n_metadata(const qhx_st_set *s) { return s->n_meta; }
void qhx_st_metadata_at(const qhx_st_set *s, int i, const char **key, const char **value) {
    *key = *value = NULL;
    if (i < 0 || i >= s->n_meta) return;
    *key = s->meta[2 * i];
    *value = s->meta[2 * i + 1];
}
size_t qhx_st_metadata_len(const qhx_st_set *s, int i) { return i >= 0 && i < s->n_meta ? s->meta_len[i] : 0; }

const qhx_st_tensor *qhx_st_find(const qhx_st_set *s, const char *name) {
    int64_t lo = 0, hi = s->n_tensors - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        const qhx_st_tensor *t = &s->tensors[s->by_name[mid]];
        int c = strcmp(name, t->name);
        if (!c) return t;
        if (c < 0) hi = mid - 1; else lo = mid + 1;
    }
    return NULL;
}

static void format_shape(char *buf, size_t cap, int n_dims, const int64_t *shape) {
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < n_dims && k < cap; d++)
        k += (size_t)snprintf(buf + k, cap - k, d ? ", %lld" : "%lld", (long long)shape[d]);
    if (k < cap) snprintf(buf + k, cap - k, "]");
}

qhx_status qhx_st_get(const qhx_st_set *s, const char *name, unsigned dtype_mask, int n_dims,
                      const int64_t *shape, const qhx_st_tensor **out, qhx_error *err) {
    *out = NULL;
    const qhx_st_tensor *t = qhx_st_find(s, name);
    const char *file = s->n_files ? s->paths[0] : "checkpoint";
    if (!t) return qhx_fail(err, QHX_E_FORMAT, "%s: tensor '%s' is missing", file, name);
    file = qhx_st_file_path(s, t->file_index);
    if (dtype_mask && !(dtype_mask & QHX_DT_BIT(t->dtype)))
        return qhx_fail(err, QHX_E_FORMAT, "%s: tensor '%s': dtype %s is not accepted here", file,
                        name, qhx_dtype_name(t->dtype));
    int ok = t->n_dims == n_dims;
    for (int d = 0; ok && d < n_dims; d++) ok = shape[d] < 0 || shape[d] == t->shape[d];
    if (!ok) {
        char want[128], got[128];
        format_shape(want, sizeof want, n_dims, shape);
        format_shape(got, sizeof got, t->n_dims, t->shape);
        return qhx_fail(err, QHX_E_FORMAT, "%s: tensor '%s': expected shape %s, got %s", file, name, want, got);
    }
    *out = t;
    return QHX_OK;
}
