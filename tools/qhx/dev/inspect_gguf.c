/* qhx inspect FILE.gguf: a GGUF file's header, metadata and tensors (io/gguf.h), as text or as
 * one JSON document. Long arrays (the vocabulary, the merges) are shown by their type, length
 * and first elements; every other value in full. A uint64 value above 2^63 - 1 is written as a
 * string of its digits in JSON, which has no exact integers that large here. */
#include "cli_dev.h"

#include "core/alloc.h"
#include "io/gguf.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

/* Arrays longer than this are summarised (type, length, the first ARRAY_HEAD elements). */
#define ARRAY_FULL 64
#define ARRAY_HEAD 8
/* Text mode cuts a string value after this many bytes. */
#define TEXT_STRING_MAX 72

/* Length of the valid UTF-8 sequence at p[0..n) (0 if none starts there). */
static int utf8_len(const unsigned char *p, uint64_t n) {
    int k = p[0] < 0x80 ? 1 : p[0] >= 0xc2 && p[0] < 0xe0 ? 2 : p[0] >= 0xe0 && p[0] < 0xf0 ? 3
          : p[0] >= 0xf0 && p[0] < 0xf5 ? 4 : 0;
    if (!k || (uint64_t)k > n) return 0;
    for (int i = 1; i < k; i++)
        if ((p[i] & 0xc0) != 0x80) return 0;
    if (k == 3 && ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0))) return 0;
    if (k == 4 && ((p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90))) return 0;
    return k;
}

/* A JSON string of the value's bytes; bytes that are not UTF-8 become U+FFFD. */
static json_t *str_json(const qhx_gguf_str *s) {
    char *buf = qhx_malloc((size_t)s->len * 3 + 1);
    if (!buf) return json_null();
    size_t o = 0;
    const unsigned char *p = (const unsigned char *)s->p;
    for (uint64_t i = 0; i < s->len;) {
        int k = utf8_len(p + i, s->len - i);
        if (k) {
            memcpy(buf + o, p + i, (size_t)k);
            o += (size_t)k;
            i += (uint64_t)k;
        } else {
            memcpy(buf + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        }
    }
    json_t *j = json_stringn(buf, o);
    qhx_free(buf);
    return j ? j : json_null();
}

/* Text mode: the string quoted, control bytes and non-UTF-8 escaped, cut after `max` bytes. */
static void print_str(const qhx_gguf_str *s, uint64_t max) {
    const unsigned char *p = (const unsigned char *)s->p;
    uint64_t n = s->len < max ? s->len : max;
    putchar('"');
    for (uint64_t i = 0; i < n;) {
        int k = utf8_len(p + i, s->len - i);
        if (k == 1 && p[i] >= 0x20 && p[i] != 0x7f && p[i] != '"' && p[i] != '\\') putchar(p[i]);
        else if (k > 1) fwrite(p + i, 1, (size_t)k, stdout);
        else if (p[i] == '\n') fputs("\\n", stdout);
        else if (p[i] == '"' || p[i] == '\\') printf("\\%c", p[i]);
        else printf("\\x%02X", p[i]);
        i += k ? (uint64_t)k : 1;
    }
    printf(s->len > max ? "\"... (%llu bytes)" : "\"", (unsigned long long)s->len);
}

static int is_float(qhx_gguf_vtype t) { return t == QHX_GGUF_FLOAT32 || t == QHX_GGUF_FLOAT64; }

/* A uint64 above JSON's exact integers (jansson's are int64): its decimal digits as a string. */
static json_t *u64_json(uint64_t v) {
    char buf[24];
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
    return json_string(buf);
}

static json_t *elem_json(const qhx_gguf_kv *kv, uint64_t i) {
    if (kv->elem == QHX_GGUF_STRING) return str_json(&kv->str[i]);
    if (is_float(kv->elem)) return json_real(qhx_gguf_arr_float(kv, i));
    if (kv->elem == QHX_GGUF_BOOL) return json_boolean(qhx_gguf_arr_int(kv, i));
    if (kv->elem == QHX_GGUF_UINT64 && qhx_gguf_arr_int(kv, i) < 0) return u64_json((uint64_t)qhx_gguf_arr_int(kv, i));
    return json_integer(qhx_gguf_arr_int(kv, i));
}

static json_t *value_json(const qhx_gguf_kv *kv) {
    if (kv->type == QHX_GGUF_STRING) return str_json(kv->str);
    if (kv->type == QHX_GGUF_BOOL) return json_boolean(qhx_gguf_kv_int(kv));
    if (is_float(kv->type)) return json_real(qhx_gguf_kv_float(kv));
    if (kv->type != QHX_GGUF_ARRAY) {
        if (kv->type == QHX_GGUF_UINT64 && qhx_gguf_kv_int(kv) < 0) return u64_json((uint64_t)qhx_gguf_kv_int(kv));
        return json_integer(qhx_gguf_kv_int(kv));
    }
    json_t *arr = json_array();
    uint64_t shown = kv->n <= ARRAY_FULL ? kv->n : ARRAY_HEAD;
    for (uint64_t i = 0; i < shown; i++) json_array_append_new(arr, elem_json(kv, i));
    if (kv->n <= ARRAY_FULL) return arr;
    return json_pack("{s:s, s:I, s:o}", "array_of", qhx_gguf_vtype_name(kv->elem), "length", (json_int_t)kv->n,
                     "head", arr);
}

static void print_number(const qhx_gguf_kv *kv, uint64_t i, int in_array) {
    qhx_gguf_vtype t = in_array ? kv->elem : kv->type;
    double f = in_array ? qhx_gguf_arr_float(kv, i) : qhx_gguf_kv_float(kv);
    int64_t v = in_array ? qhx_gguf_arr_int(kv, i) : qhx_gguf_kv_int(kv);
    if (is_float(t)) printf("%.9g", f);
    else if (t == QHX_GGUF_BOOL) fputs(v ? "true" : "false", stdout);
    else if (t == QHX_GGUF_UINT64) printf("%llu", (unsigned long long)v);
    else printf("%lld", (long long)v);
}

static void print_value(const qhx_gguf_kv *kv) {
    if (kv->type == QHX_GGUF_STRING) {
        print_str(kv->str, TEXT_STRING_MAX);
        return;
    }
    if (kv->type != QHX_GGUF_ARRAY) {
        print_number(kv, 0, 0);
        return;
    }
    uint64_t shown = kv->n <= ARRAY_HEAD ? kv->n : ARRAY_HEAD;
    putchar('[');
    for (uint64_t i = 0; i < shown; i++) {
        if (i) fputs(", ", stdout);
        if (kv->elem == QHX_GGUF_STRING) print_str(&kv->str[i], 24);
        else print_number(kv, i, 1);
    }
    printf(kv->n > shown ? ", ...] (%llu)" : "]", (unsigned long long)kv->n);
}

static void type_text(const qhx_gguf_kv *kv, char *buf, size_t cap) {
    if (kv->type == QHX_GGUF_ARRAY) snprintf(buf, cap, "%s[]", qhx_gguf_vtype_name(kv->elem));
    else snprintf(buf, cap, "%s", qhx_gguf_vtype_name(kv->type));
}

struct type_totals {
    int64_t tensors[QHX_GGML_TYPE_LIMIT];
    uint64_t bytes[QHX_GGML_TYPE_LIMIT];
    int64_t parameters;
    uint64_t all_bytes;
};

static void ne_text(const qhx_gguf_tensor *t, char *buf, size_t cap) {
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < t->n_dims && k < cap; d++)
        k += (size_t)snprintf(buf + k, cap - k, d ? ", %lld" : "%lld", (long long)t->ne[d]);
    if (k < cap) snprintf(buf + k, cap - k, "]");
}

static json_t *tensor_json(const qhx_gguf *g, const qhx_gguf_tensor *t) {
    json_t *ne = json_array();
    for (int d = 0; d < t->n_dims; d++) json_array_append_new(ne, json_integer(t->ne[d]));
    return json_pack("{s:s, s:s, s:o, s:I, s:I, s:I}", "name", t->name, "type", qhx_ggml_type_name(t->type), "ne", ne,
                     "elements", (json_int_t)t->n_elements, "bytes", (json_int_t)t->size, "offset",
                     (json_int_t)(qhx_gguf_data_offset(g) + t->offset));
}

static void count(struct type_totals *tt, const qhx_gguf_tensor *t) {
    tt->tensors[t->type]++;
    tt->bytes[t->type] += t->size;
    tt->parameters += t->n_elements;
    tt->all_bytes += t->size;
}

static json_t *totals_json(const qhx_gguf *g, const struct type_totals *tt) {
    json_t *by = json_object();
    for (int i = 0; i < QHX_GGML_TYPE_LIMIT; i++)
        if (tt->tensors[i])
            json_object_set_new(by, qhx_ggml_type_name((uint32_t)i),
                                json_pack("{s:I, s:I}", "tensors", (json_int_t)tt->tensors[i], "bytes",
                                          (json_int_t)tt->bytes[i]));
    return json_pack("{s:I, s:I, s:I, s:o}", "tensors", (json_int_t)qhx_gguf_n_tensors(g), "parameters",
                     (json_int_t)tt->parameters, "bytes", (json_int_t)tt->all_bytes, "by_type", by);
}

static int inspect_json(const char *path, const qhx_gguf *g) {
    json_t *meta = json_object(), *tensors = json_array();
    struct type_totals tt = {0};
    for (int64_t i = 0; i < qhx_gguf_n_kv(g); i++) {
        const qhx_gguf_kv *kv = qhx_gguf_kv_at(g, i);
        json_object_set_new(meta, kv->key, value_json(kv));
    }
    for (int64_t i = 0; i < qhx_gguf_n_tensors(g); i++) {
        const qhx_gguf_tensor *t = qhx_gguf_tensor_at(g, i);
        count(&tt, t);
        json_array_append_new(tensors, tensor_json(g, t));
    }
    json_t *doc = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:o, s:o, s:o}", "kind", "gguf", "path", path, "version",
                            (json_int_t)qhx_gguf_version(g), "alignment", (json_int_t)qhx_gguf_alignment(g),
                            "data_offset", (json_int_t)qhx_gguf_data_offset(g), "file_bytes",
                            (json_int_t)qhx_gguf_file_size(g), "metadata", meta, "tensors", tensors, "totals",
                            totals_json(g, &tt));
    int rc = json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
    json_decref(doc);
    if (rc != 0) return QHX_EXIT_RUNTIME;
    fputc('\n', stdout);
    return QHX_EXIT_OK;
}

static void inspect_text(const char *path, const qhx_gguf *g) {
    printf("GGUF version %u: %s\n  %llu bytes, alignment %llu, tensor data from byte %llu\n", qhx_gguf_version(g), path,
           (unsigned long long)qhx_gguf_file_size(g), (unsigned long long)qhx_gguf_alignment(g),
           (unsigned long long)qhx_gguf_data_offset(g));
    printf("\nmetadata (%lld keys)\n", (long long)qhx_gguf_n_kv(g));
    for (int64_t i = 0; i < qhx_gguf_n_kv(g); i++) {
        const qhx_gguf_kv *kv = qhx_gguf_kv_at(g, i);
        char type[32];
        type_text(kv, type, sizeof type);
        printf("  %-44s %-10s ", kv->key, type);
        print_value(kv);
        putchar('\n');
    }
    printf("\ntensors (%lld)\n  %-44s %-7s %-26s %12s %12s\n", (long long)qhx_gguf_n_tensors(g), "NAME", "TYPE",
           "NE (row first)", "BYTES", "OFFSET");
    struct type_totals tt = {0};
    for (int64_t i = 0; i < qhx_gguf_n_tensors(g); i++) {
        const qhx_gguf_tensor *t = qhx_gguf_tensor_at(g, i);
        char ne[128];
        ne_text(t, ne, sizeof ne);
        printf("  %-44s %-7s %-26s %12llu %12llu\n", t->name, qhx_ggml_type_name(t->type), ne,
               (unsigned long long)t->size, (unsigned long long)(qhx_gguf_data_offset(g) + t->offset));
        count(&tt, t);
    }
    printf("\ntotal        %lld tensors, %lld parameters, %llu bytes", (long long)qhx_gguf_n_tensors(g),
           (long long)tt.parameters, (unsigned long long)tt.all_bytes);
    const char *sep = " (";
    for (int i = 0; i < QHX_GGML_TYPE_LIMIT; i++) {
        if (!tt.tensors[i]) continue;
        printf("%s%s: %lld tensors, %llu bytes", sep, qhx_ggml_type_name((uint32_t)i), (long long)tt.tensors[i],
               (unsigned long long)tt.bytes[i]);
        sep = "; ";
    }
    printf("%s\n", qhx_gguf_n_tensors(g) ? ")" : "");
}

int qhx_inspect_gguf(const char *path, int as_json) {
    qhx_error err = {0};
    qhx_gguf *g = NULL;
    if (qhx_gguf_open(path, QHX_FILE_MAP, &g, &err)) return qhx_cli_runtime_error("inspect", &err);
    int rc = QHX_EXIT_OK;
    if (as_json) rc = inspect_json(path, g);
    else inspect_text(path, g);
    qhx_gguf_free(g);
    return rc;
}
