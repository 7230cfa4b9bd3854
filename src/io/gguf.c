/* io/gguf: the GGUF reader. One forward pass over the header, the metadata and the tensor
 * descriptions with a bounds-checked cursor, then the layout checks that need all of them (the
 * alignment, the data section, each tensor inside it, no two overlapping, no name twice). */
#include "io/gguf.h"

#include "core/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct qhx_gguf {
    char *label;
    uint32_t version;
    uint64_t alignment, data_offset, file_size;
    int64_t n_kv, n_tensors;
    qhx_gguf_kv *kv;
    qhx_gguf_tensor *tensors;
    int64_t *by_name; /* tensor indices sorted by name */
    qhx_gguf_str *strs; /* every string value, in one block */
    qhx_file_map map; /* what qhx_gguf_open brought in; zeroed after qhx_gguf_parse */
};

/* ---- the cursor ----------------------------------------------------------------------------- */

typedef struct cursor {
    const uint8_t *buf;
    size_t len, pos;
    const char *label;
    qhx_error *err;
} cursor;

static qhx_status truncated(cursor *c, const char *what) {
    return qhx_fail(c->err, QHX_E_FORMAT, "%s: GGUF: the file ends inside %s (byte %zu of %zu)", c->label, what,
                    c->pos, c->len);
}

static qhx_status take(cursor *c, size_t n, const char *what, const uint8_t **p) {
    if (n > c->len - c->pos) return truncated(c, what);
    *p = c->buf + c->pos;
    c->pos += n;
    return QHX_OK;
}

static uint64_t le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static qhx_status read_u32(cursor *c, const char *what, uint32_t *v) {
    const uint8_t *p = NULL;
    qhx_status st = take(c, 4, what, &p);
    if (st == QHX_OK) *v = (uint32_t)le(p, 4);
    return st;
}

static qhx_status read_u64(cursor *c, const char *what, uint64_t *v) {
    const uint8_t *p = NULL;
    qhx_status st = take(c, 8, what, &p);
    if (st == QHX_OK) *v = le(p, 8);
    return st;
}

/* A length-prefixed string of at most `cap` bytes, in place. */
static qhx_status read_str(cursor *c, uint64_t cap, const char *what, qhx_gguf_str *s) {
    uint64_t n;
    qhx_status st = read_u64(c, what, &n);
    if (st) return st;
    if (n > cap)
        return qhx_fail(c->err, QHX_E_LIMIT, "%s: GGUF: %s of %llu bytes at byte %zu (the cap is %llu)", c->label,
                        what, (unsigned long long)n, c->pos - 8, (unsigned long long)cap);
    const uint8_t *p = NULL;
    if ((st = take(c, (size_t)n, what, &p))) return st;
    s->p = (const char *)p;
    s->len = n;
    return QHX_OK;
}

static char *dup_name(const qhx_gguf_str *s) {
    char *d = qhx_malloc(s->len + 1);
    if (d) {
        if (s->len) memcpy(d, s->p, s->len);
        d[s->len] = 0;
    }
    return d;
}

/* ---- metadata ------------------------------------------------------------------------------- */

static const char *const VTYPE_NAMES[QHX_GGUF_VTYPE_COUNT] = {
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array",
    "uint64", "int64", "float64",
};

const char *qhx_gguf_vtype_name(qhx_gguf_vtype t) {
    return (unsigned)t < QHX_GGUF_VTYPE_COUNT ? VTYPE_NAMES[t] : "?";
}

/* Bytes of a number of this type; 0 for strings and arrays. */
static int vtype_size(qhx_gguf_vtype t) {
    static const int SIZES[QHX_GGUF_VTYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return (unsigned)t < QHX_GGUF_VTYPE_COUNT ? SIZES[t] : 0;
}

/* Every string value goes into one growing table; a value records where its strings start and
 * the pointers are set once the table stops moving. Each string consumed at least 8 bytes of the
 * file, so the table never outgrows the file. */
typedef struct strings {
    qhx_gguf_str *all;
    uint64_t used, cap;
    const char *label;
    qhx_error *err;
} strings;

static qhx_status push_str(strings *ss, qhx_gguf_str s) {
    if (ss->used == ss->cap) {
        uint64_t cap = ss->cap ? ss->cap * 2 : 64;
        qhx_gguf_str *all = qhx_realloc(ss->all, (size_t)cap * sizeof *all);
        if (!all) return qhx_fail(ss->err, QHX_E_NOMEM, "%s: GGUF: out of memory for the strings", ss->label);
        ss->all = all;
        ss->cap = cap;
    }
    ss->all[ss->used++] = s;
    return QHX_OK;
}

static qhx_status read_array(cursor *c, qhx_gguf_kv *kv, strings *ss) {
    uint32_t elem;
    qhx_status st;
    if ((st = read_u32(c, "an array's element type", &elem)) || (st = read_u64(c, "an array's length", &kv->n)))
        return st;
    if (elem >= QHX_GGUF_VTYPE_COUNT)
        return qhx_fail(c->err, QHX_E_FORMAT, "%s: GGUF: key '%s': unknown array element type %u", c->label, kv->key,
                        elem);
    if (elem == QHX_GGUF_ARRAY)
        return qhx_fail(c->err, QHX_E_UNSUPPORTED, "%s: GGUF: key '%s': an array of arrays is not supported",
                        c->label, kv->key);
    kv->elem = (qhx_gguf_vtype)elem;
    if (kv->n > QHX_GGUF_MAX_ARRAY)
        return qhx_fail(c->err, QHX_E_LIMIT, "%s: GGUF: key '%s': an array of %llu elements (the cap is %u)", c->label,
                        kv->key, (unsigned long long)kv->n, QHX_GGUF_MAX_ARRAY);
    if (kv->elem != QHX_GGUF_STRING)
        return take(c, (size_t)kv->n * (size_t)vtype_size(kv->elem), "an array", &kv->data);
    /* each string is at least its 8-byte length: a count the file cannot hold stops here */
    if (kv->n > (c->len - c->pos) / 8) return truncated(c, "a string array");
    for (uint64_t i = 0; i < kv->n; i++) {
        qhx_gguf_str s;
        if ((st = read_str(c, QHX_GGUF_MAX_STRING, "a string array", &s)) || (st = push_str(ss, s))) return st;
    }
    return QHX_OK;
}

/* One key and its value; *first is where the value's strings start in the table. */
static qhx_status read_kv(cursor *c, qhx_gguf_kv *kv, strings *ss, uint64_t *first) {
    qhx_gguf_str key;
    uint32_t type;
    qhx_status st = read_str(c, QHX_GGUF_MAX_KEY, "a key", &key);
    if (st) return st;
    if (key.len == 0 || memchr(key.p, 0, key.len))
        return qhx_fail(c->err, QHX_E_FORMAT, "%s: GGUF: an empty key, or one holding a NUL byte, at byte %zu",
                        c->label, c->pos - (size_t)key.len);
    if (!(kv->key = dup_name(&key))) return qhx_fail(c->err, QHX_E_NOMEM, "%s: GGUF: out of memory", c->label);
    if ((st = read_u32(c, "a value type", &type))) return st;
    if (type >= QHX_GGUF_VTYPE_COUNT)
        return qhx_fail(c->err, QHX_E_FORMAT, "%s: GGUF: key '%s': unknown value type %u", c->label, kv->key, type);
    kv->type = kv->elem = (qhx_gguf_vtype)type;
    kv->n = 1;
    *first = ss->used;
    if (kv->type == QHX_GGUF_ARRAY) return read_array(c, kv, ss);
    if (kv->type != QHX_GGUF_STRING) return take(c, (size_t)vtype_size(kv->type), "a value", &kv->data);
    qhx_gguf_str s;
    if ((st = read_str(c, QHX_GGUF_MAX_STRING, "a string value", &s))) return st;
    return push_str(ss, s);
}

/* ---- tensors -------------------------------------------------------------------------------- */

static qhx_status tensor_fail(cursor *c, const qhx_gguf_tensor *t, qhx_status code, const char *why) {
    return qhx_fail(c->err, code, "%s: GGUF: tensor '%s': %s", c->label, t->name, why);
}

static qhx_status read_shape(cursor *c, qhx_gguf_tensor *t) {
    uint32_t n_dims;
    qhx_status st = read_u32(c, "a tensor's rank", &n_dims);
    if (st) return st;
    if (n_dims < 1 || n_dims > QHX_GGUF_MAX_DIMS)
        return qhx_fail(c->err, QHX_E_FORMAT, "%s: GGUF: tensor '%s': %u dimensions (1 to %d)", c->label, t->name,
                        n_dims, QHX_GGUF_MAX_DIMS);
    t->n_dims = (int)n_dims;
    t->n_elements = 1;
    for (int d = 0; d < QHX_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (int d = 0; d < t->n_dims; d++) {
        uint64_t v;
        if ((st = read_u64(c, "a tensor's shape", &v))) return st;
        if (v > (uint64_t)INT64_MAX) return tensor_fail(c, t, QHX_E_FORMAT, "a negative dimension");
        t->ne[d] = (int64_t)v;
        if (v && (uint64_t)t->n_elements > (uint64_t)INT64_MAX / v)
            return tensor_fail(c, t, QHX_E_LIMIT, "its element count overflows 64 bits");
        t->n_elements *= (int64_t)v;
    }
    return QHX_OK;
}

static qhx_status tensor_size(cursor *c, qhx_gguf_tensor *t) {
    const char *tn = qhx_ggml_type_name(t->type);
    if (!tn)
        return qhx_fail(c->err, QHX_E_UNSUPPORTED, "%s: GGUF: tensor '%s': unknown tensor type %u", c->label, t->name,
                        t->type);
    uint64_t row;
    if (qhx_ggml_row_bytes(t->type, t->ne[0], &row))
        return qhx_fail(c->err, QHX_E_FORMAT, "%s: GGUF: tensor '%s': a row of %lld values is not a whole number of %s blocks of %d",
                        c->label, t->name, (long long)t->ne[0], tn, qhx_ggml_type_block(t->type));
    uint64_t rows = t->ne[0] ? (uint64_t)(t->n_elements / t->ne[0]) : 0;
    if (rows && row > UINT64_MAX / rows) return tensor_fail(c, t, QHX_E_LIMIT, "its byte size overflows 64 bits");
    t->size = row * rows;
    return QHX_OK;
}

static qhx_status read_tensor(cursor *c, qhx_gguf_tensor *t) {
    qhx_gguf_str name;
    qhx_status st = read_str(c, QHX_GGUF_MAX_NAME, "a tensor name", &name);
    if (st) return st;
    if (name.len == 0 || memchr(name.p, 0, name.len))
        return qhx_fail(c->err, QHX_E_FORMAT, "%s: GGUF: an empty tensor name, or one holding a NUL byte, at byte %zu",
                        c->label, c->pos - (size_t)name.len);
    if (!(t->name = dup_name(&name))) return qhx_fail(c->err, QHX_E_NOMEM, "%s: GGUF: out of memory", c->label);
    if ((st = read_shape(c, t)) || (st = read_u32(c, "a tensor's type", &t->type)) ||
        (st = read_u64(c, "a tensor's offset", &t->offset)))
        return st;
    return tensor_size(c, t);
}

/* ---- layout checks -------------------------------------------------------------------------- */

static qhx_status read_alignment(cursor *c, qhx_gguf *g) {
    g->alignment = QHX_GGUF_DEFAULT_ALIGNMENT;
    const qhx_gguf_kv *kv = qhx_gguf_find_kv(g, "general.alignment");
    if (!kv) return QHX_OK;
    int64_t a = qhx_gguf_kv_int(kv);
    if (kv->type == QHX_GGUF_ARRAY || kv->type == QHX_GGUF_STRING || kv->type == QHX_GGUF_BOOL ||
        kv->type == QHX_GGUF_FLOAT32 || kv->type == QHX_GGUF_FLOAT64 || a <= 0 || a > QHX_GGUF_MAX_ALIGNMENT ||
        (a & (a - 1)))
        return qhx_fail(c->err, QHX_E_FORMAT, "%s: GGUF: general.alignment must be a power of two integer up to %u",
                        c->label, QHX_GGUF_MAX_ALIGNMENT);
    g->alignment = (uint64_t)a;
    return QHX_OK;
}

static const qhx_gguf_tensor *SORT_BASE;

static int by_name_cmp(const void *a, const void *b) {
    return strcmp(SORT_BASE[*(const int64_t *)a].name, SORT_BASE[*(const int64_t *)b].name);
}

static int by_offset_cmp(const void *a, const void *b) {
    uint64_t x = SORT_BASE[*(const int64_t *)a].offset, y = SORT_BASE[*(const int64_t *)b].offset;
    return x < y ? -1 : x > y;
}

/* Each tensor inside the data section and aligned; no two overlap. `order` is scratch. */
static qhx_status check_extents(cursor *c, qhx_gguf *g, int64_t *order) {
    uint64_t room = c->len - g->data_offset;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        qhx_gguf_tensor *t = &g->tensors[i];
        if (t->offset % g->alignment)
            return qhx_fail(c->err, QHX_E_FORMAT, "%s: GGUF: tensor '%s': offset %llu is not a multiple of the alignment %llu",
                            c->label, t->name, (unsigned long long)t->offset, (unsigned long long)g->alignment);
        if (t->offset > room || t->size > room - t->offset)
            return qhx_fail(c->err, QHX_E_FORMAT,
                            "%s: GGUF: tensor '%s': bytes %llu..%llu of the data section, which holds %llu (a truncated file?)",
                            c->label, t->name, (unsigned long long)t->offset,
                            (unsigned long long)(t->offset + (t->size < room ? t->size : room)), (unsigned long long)room);
        t->data = c->buf + g->data_offset + t->offset;
        order[i] = i;
    }
    SORT_BASE = g->tensors;
    qsort(order, (size_t)g->n_tensors, sizeof *order, by_offset_cmp);
    for (int64_t i = 1; i < g->n_tensors; i++) {
        const qhx_gguf_tensor *a = &g->tensors[order[i - 1]], *b = &g->tensors[order[i]];
        if (a->size && b->size && a->offset + a->size > b->offset)
            return qhx_fail(c->err, QHX_E_FORMAT, "%s: GGUF: tensors '%s' and '%s' overlap", c->label, a->name, b->name);
    }
    return QHX_OK;
}

static qhx_status index_names(cursor *c, qhx_gguf *g) {
    for (int64_t i = 0; i < g->n_tensors; i++) g->by_name[i] = i;
    SORT_BASE = g->tensors;
    qsort(g->by_name, (size_t)g->n_tensors, sizeof *g->by_name, by_name_cmp);
    for (int64_t i = 1; i < g->n_tensors; i++)
        if (!strcmp(g->tensors[g->by_name[i - 1]].name, g->tensors[g->by_name[i]].name))
            return qhx_fail(c->err, QHX_E_FORMAT, "%s: GGUF: tensor '%s' is described twice", c->label,
                            g->tensors[g->by_name[i]].name);
    return QHX_OK;
}

static int key_cmp(const void *a, const void *b) {
    return strcmp(**(const char *const *const *)a, **(const char *const *const *)b);
}

static qhx_status check_keys(cursor *c, const qhx_gguf *g) {
    if (g->n_kv < 2) return QHX_OK;
    const char **keys = qhx_malloc((size_t)g->n_kv * sizeof *keys);
    const char ***ptrs = qhx_malloc((size_t)g->n_kv * sizeof *ptrs);
    qhx_status st = QHX_OK;
    if (!keys || !ptrs) st = qhx_fail(c->err, QHX_E_NOMEM, "%s: GGUF: out of memory", c->label);
    for (int64_t i = 0; !st && i < g->n_kv; i++) {
        keys[i] = g->kv[i].key;
        ptrs[i] = &keys[i];
    }
    if (!st) qsort(ptrs, (size_t)g->n_kv, sizeof *ptrs, key_cmp);
    for (int64_t i = 1; !st && i < g->n_kv; i++)
        if (!strcmp(*ptrs[i - 1], *ptrs[i]))
            st = qhx_fail(c->err, QHX_E_FORMAT, "%s: GGUF: key '%s' appears twice", c->label, *ptrs[i]);
    qhx_free(keys);
    qhx_free(ptrs);
    return st;
}

/* ---- the whole file ------------------------------------------------------------------------- */

int qhx_gguf_is_magic(const uint8_t *p, size_t len) { return len >= 4 && !memcmp(p, "GGUF", 4); }

int qhx_gguf_path_has_magic(const char *path) {
    uint8_t magic[4];
    FILE *f = qhx_path_is_file(path) ? fopen(path, "rb") : NULL;
    size_t got = f ? fread(magic, 1, sizeof magic, f) : 0;
    if (f) fclose(f);
    return qhx_gguf_is_magic(magic, got);
}

static qhx_status read_header(cursor *c, qhx_gguf *g) {
    const uint8_t *magic = NULL;
    uint64_t n_tensors, n_kv;
    qhx_status st = take(c, 4, "the header", &magic);
    if (st) return st;
    if (!qhx_gguf_is_magic(magic, 4)) return qhx_fail(c->err, QHX_E_FORMAT, "%s: not a GGUF file (no GGUF magic)", c->label);
    if ((st = read_u32(c, "the header", &g->version))) return st;
    if (g->version == 1)
        return qhx_fail(c->err, QHX_E_UNSUPPORTED,
                        "%s: GGUF version 1 (32-bit counts) is not supported: convert the model again", c->label);
    if (g->version > 0xffff && (g->version & 0xffff) == 0)
        return qhx_fail(c->err, QHX_E_UNSUPPORTED, "%s: a big-endian GGUF file is not supported", c->label);
    if (g->version != 2 && g->version != 3)
        return qhx_fail(c->err, QHX_E_UNSUPPORTED, "%s: GGUF version %u is not supported (2 and 3 are)", c->label,
                        g->version);
    if ((st = read_u64(c, "the header", &n_tensors)) || (st = read_u64(c, "the header", &n_kv))) return st;
    /* a key/value is at least 8 + 1 + 4 + 1 bytes, a tensor description 8 + 1 + 4 + 8 + 4 + 8 */
    size_t left = c->len - c->pos;
    if (n_kv > QHX_GGUF_MAX_KV)
        return qhx_fail(c->err, QHX_E_LIMIT, "%s: GGUF: %llu metadata keys (the cap is %d)", c->label,
                        (unsigned long long)n_kv, QHX_GGUF_MAX_KV);
    if (n_tensors > QHX_GGUF_MAX_TENSORS)
        return qhx_fail(c->err, QHX_E_LIMIT, "%s: GGUF: %llu tensors (the cap is %d)", c->label,
                        (unsigned long long)n_tensors, QHX_GGUF_MAX_TENSORS);
    if (n_kv > left / 14 || n_tensors > left / 33 || n_kv * 14 + n_tensors * 33 > left)
        return qhx_fail(c->err, QHX_E_FORMAT,
                        "%s: GGUF: %llu metadata keys and %llu tensors cannot fit in the file's %zu bytes (a truncated file?)",
                        c->label, (unsigned long long)n_kv, (unsigned long long)n_tensors, c->len);
    g->n_kv = (int64_t)n_kv;
    g->n_tensors = (int64_t)n_tensors;
    return QHX_OK;
}

static qhx_status read_metadata(cursor *c, qhx_gguf *g) {
    strings ss = {NULL, 0, 0, c->label, c->err};
    uint64_t *first = qhx_calloc((size_t)g->n_kv + 1, sizeof *first);
    qhx_status st = first ? QHX_OK : qhx_fail(c->err, QHX_E_NOMEM, "%s: GGUF: out of memory", c->label);
    for (int64_t i = 0; !st && i < g->n_kv; i++) st = read_kv(c, &g->kv[i], &ss, &first[i]);
    g->strs = ss.all;
    for (int64_t i = 0; !st && i < g->n_kv; i++)
        if (g->kv[i].type == QHX_GGUF_STRING || g->kv[i].elem == QHX_GGUF_STRING)
            g->kv[i].str = ss.all ? &ss.all[first[i]] : NULL;
    qhx_free(first);
    return st;
}

static qhx_status parse(cursor *c, qhx_gguf *g) {
    qhx_status st = read_header(c, g);
    if (st) return st;
    g->kv = qhx_calloc((size_t)g->n_kv + 1, sizeof *g->kv);
    g->tensors = qhx_calloc((size_t)g->n_tensors + 1, sizeof *g->tensors);
    g->by_name = qhx_calloc((size_t)g->n_tensors + 1, sizeof *g->by_name);
    if (!g->kv || !g->tensors || !g->by_name) return qhx_fail(c->err, QHX_E_NOMEM, "%s: GGUF: out of memory", c->label);
    if ((st = read_metadata(c, g)) || (st = check_keys(c, g)) || (st = read_alignment(c, g))) return st;
    for (int64_t i = 0; !st && i < g->n_tensors; i++) st = read_tensor(c, &g->tensors[i]);
    if (st || (st = index_names(c, g))) return st;
    uint64_t pad = (g->alignment - c->pos % g->alignment) % g->alignment;
    g->data_offset = c->pos + pad;
    if (g->data_offset > c->len) {
        if (g->n_tensors) return truncated(c, "the padding before the tensor data");
        g->data_offset = c->len;
    }
    int64_t *order = qhx_malloc(((size_t)g->n_tensors + 1) * sizeof *order);
    if (!order) return qhx_fail(c->err, QHX_E_NOMEM, "%s: GGUF: out of memory", c->label);
    st = check_extents(c, g, order);
    qhx_free(order);
    return st;
}

qhx_status qhx_gguf_parse(const uint8_t *buf, size_t len, const char *label, qhx_gguf **out, qhx_error *err) {
    *out = NULL;
    qhx_gguf *g = qhx_calloc(1, sizeof *g);
    if (!g || !(g->label = qhx_strdup(label ? label : "gguf"))) {
        qhx_free(g);
        return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", label ? label : "gguf");
    }
    cursor c = {buf, buf ? len : 0, 0, g->label, err};
    qhx_status st = parse(&c, g);
    if (st) {
        qhx_gguf_free(g);
        return st;
    }
    g->file_size = len;
    *out = g;
    return QHX_OK;
}

qhx_status qhx_gguf_open(const char *path, qhx_file_mode mode, qhx_gguf **out, qhx_error *err) {
    *out = NULL;
    qhx_file_map map;
    qhx_status st = qhx_file_load(path, mode, &map, err);
    if (st) return st;
    if ((st = qhx_gguf_parse(map.data, map.size, path, out, err))) {
        qhx_file_map_close(&map);
        return st;
    }
    (*out)->map = map;
    return QHX_OK;
}

void qhx_gguf_free(qhx_gguf *g) {
    if (!g) return;
    for (int64_t i = 0; g->kv && i < g->n_kv; i++)
        qhx_free((char *)g->kv[i].key);
    for (int64_t i = 0; g->tensors && i < g->n_tensors; i++) qhx_free((char *)g->tensors[i].name);
    qhx_free(g->kv);
    qhx_free(g->tensors);
    qhx_free(g->by_name);
    qhx_free(g->strs);
    qhx_file_map_close(&g->map);
    qhx_free(g->label);
    qhx_free(g);
}

/* ---- queries -------------------------------------------------------------------------------- */

const char *qhx_gguf_label(const qhx_gguf *g) { return g->label; }
uint32_t qhx_gguf_version(const qhx_gguf *g) { return g->version; }
uint64_t qhx_gguf_alignment(const qhx_gguf *g) { return g->alignment; }
uint64_t qhx_gguf_data_offset(const qhx_gguf *g) { return g->data_offset; }
uint64_t qhx_gguf_file_size(const qhx_gguf *g) { return g->file_size; }
int64_t qhx_gguf_n_kv(const qhx_gguf *g) { return g->n_kv; }
int64_t qhx_gguf_n_tensors(const qhx_gguf *g) { return g->n_tensors; }

const qhx_gguf_kv *qhx_gguf_kv_at(const qhx_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_kv ? &g->kv[i] : NULL;
}

const qhx_gguf_tensor *qhx_gguf_tensor_at(const qhx_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

const qhx_gguf_kv *qhx_gguf_find_kv(const qhx_gguf *g, const char *key) {
    for (int64_t i = 0; i < g->n_kv; i++)
        if (g->kv[i].key && !strcmp(g->kv[i].key, key)) return &g->kv[i];
    return NULL;
}

const qhx_gguf_tensor *qhx_gguf_find_tensor(const qhx_gguf *g, const char *name) {
    int64_t lo = 0, hi = g->n_tensors;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(g->tensors[g->by_name[mid]].name, name);
        if (c == 0) return &g->tensors[g->by_name[mid]];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

static int64_t number_int(qhx_gguf_vtype t, const uint8_t *p) {
    switch (t) {
    case QHX_GGUF_UINT8: case QHX_GGUF_BOOL: return p[0];
    case QHX_GGUF_INT8: return (int8_t)p[0];
    case QHX_GGUF_UINT16: return (int64_t)le(p, 2);
    case QHX_GGUF_INT16: return (int16_t)le(p, 2);
    case QHX_GGUF_UINT32: return (int64_t)le(p, 4);
    case QHX_GGUF_INT32: return (int32_t)le(p, 4);
    case QHX_GGUF_UINT64: case QHX_GGUF_INT64: return (int64_t)le(p, 8);
    default: return 0;
    }
}

static double number_float(qhx_gguf_vtype t, const uint8_t *p) {
    if (t == QHX_GGUF_FLOAT32) {
        uint32_t u = (uint32_t)le(p, 4);
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    if (t == QHX_GGUF_FLOAT64) {
        uint64_t u = le(p, 8);
        double d;
        memcpy(&d, &u, 8);
        return d;
    }
    return t == QHX_GGUF_UINT64 ? (double)le(p, 8) : (double)number_int(t, p);
}

static int is_number(qhx_gguf_vtype t) { return vtype_size(t) > 0; }

int64_t qhx_gguf_kv_int(const qhx_gguf_kv *kv) {
    return kv->type != QHX_GGUF_ARRAY && is_number(kv->type) ? number_int(kv->type, kv->data) : 0;
}

double qhx_gguf_kv_float(const qhx_gguf_kv *kv) {
    return kv->type != QHX_GGUF_ARRAY && is_number(kv->type) ? number_float(kv->type, kv->data) : 0;
}

int64_t qhx_gguf_arr_int(const qhx_gguf_kv *kv, uint64_t i) {
    if (kv->type != QHX_GGUF_ARRAY || !is_number(kv->elem) || i >= kv->n) return 0;
    return number_int(kv->elem, kv->data + i * (uint64_t)vtype_size(kv->elem));
}

double qhx_gguf_arr_float(const qhx_gguf_kv *kv, uint64_t i) {
    if (kv->type != QHX_GGUF_ARRAY || !is_number(kv->elem) || i >= kv->n) return 0;
    return number_float(kv->elem, kv->data + i * (uint64_t)vtype_size(kv->elem));
}

static qhx_status get_kv(const qhx_gguf *g, const char *key, const char *want, int ok_type, const qhx_gguf_kv **kv,
                         qhx_error *err) {
    *kv = qhx_gguf_find_kv(g, key);
    if (!*kv) return qhx_fail(err, QHX_E_FORMAT, "%s: GGUF: the key '%s' is missing", g->label, key);
    if (!ok_type)
        return qhx_fail(err, QHX_E_FORMAT, "%s: GGUF: key '%s' is a %s, not %s", g->label, key,
                        qhx_gguf_vtype_name((*kv)->type), want);
    return QHX_OK;
}

qhx_status qhx_gguf_get_int(const qhx_gguf *g, const char *key, int64_t *out, qhx_error *err) {
    const qhx_gguf_kv *kv = qhx_gguf_find_kv(g, key);
    qhx_gguf_vtype t = kv ? kv->type : QHX_GGUF_STRING;
    int ok = kv && t != QHX_GGUF_ARRAY && t != QHX_GGUF_FLOAT32 && t != QHX_GGUF_FLOAT64 && t != QHX_GGUF_BOOL &&
             is_number(t);
    qhx_status st = get_kv(g, key, "an integer", ok, &kv, err);
    if (st) return st;
    if (t == QHX_GGUF_UINT64 && le(kv->data, 8) > (uint64_t)INT64_MAX)
        return qhx_fail(err, QHX_E_FORMAT, "%s: GGUF: key '%s': the value is too large", g->label, key);
    *out = number_int(t, kv->data);
    return QHX_OK;
}

qhx_status qhx_gguf_get_float(const qhx_gguf *g, const char *key, double *out, qhx_error *err) {
    const qhx_gguf_kv *kv = qhx_gguf_find_kv(g, key);
    int ok = kv && (kv->type == QHX_GGUF_FLOAT32 || kv->type == QHX_GGUF_FLOAT64);
    qhx_status st = get_kv(g, key, "a float", ok, &kv, err);
    if (!st) *out = number_float(kv->type, kv->data);
    return st;
}

qhx_status qhx_gguf_get_bool(const qhx_gguf *g, const char *key, int *out, qhx_error *err) {
    const qhx_gguf_kv *kv = qhx_gguf_find_kv(g, key);
    qhx_status st = get_kv(g, key, "a bool", kv && kv->type == QHX_GGUF_BOOL, &kv, err);
    if (!st) *out = kv->data[0] != 0;
    return st;
}

qhx_status qhx_gguf_get_str(const qhx_gguf *g, const char *key, qhx_gguf_str *out, qhx_error *err) {
    const qhx_gguf_kv *kv = qhx_gguf_find_kv(g, key);
    qhx_status st = get_kv(g, key, "a string", kv && kv->type == QHX_GGUF_STRING, &kv, err);
    if (!st) *out = *kv->str;
    return st;
}
