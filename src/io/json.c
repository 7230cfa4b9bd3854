/* io/json: jansson wrapper. jansson allocates through our funnel, so allocation-failure
 * tests reach JSON parsing too. */
#include "io/json.h"

#include "core/alloc.h"
#include "core/file.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

static pthread_once_t alloc_once = PTHREAD_ONCE_INIT;
static void set_alloc(void) { json_set_alloc_funcs(qhx_malloc, qhx_free); }

static json_t *parse(const char *buf, size_t len, size_t flags, const char *label, qhx_error *err) {
    pthread_once(&alloc_once, set_alloc);
    json_error_t je;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL | flags, &je);
    if (!root && json_error_code(&je) == json_error_out_of_memory)
        qhx_fail(err, QHX_E_NOMEM, "%s: out of memory while parsing JSON", label);
    else if (!root) {
        /* jansson adds "near '<bytes>'": dropped, so an error never repeats the file's content
         * (the position says where to look) */
        char *near = strstr(je.text, " near '");
        if (near) *near = '\0';
        qhx_fail(err, QHX_E_FORMAT, "%s: invalid JSON at line %d, column %d (byte %d): %s", label,
                 je.line, je.column, je.position, je.text);
    }
    return root;
}

json_t *qhx_json_parse(const char *buf, size_t len, const char *label, qhx_error *err) {
    return parse(buf, len, 0, label, err);
}

json_t *qhx_json_parse_any(const char *buf, size_t len, const char *label, qhx_error *err) {
    return parse(buf, len, JSON_DECODE_ANY, label, err);
}

json_t *qhx_json_load_file(const char *path, qhx_error *err) {
    char *buf;
    size_t len;
    if (qhx_file_read_all(path, QHX_JSON_MAX_BYTES, &buf, &len, err) != QHX_OK) return NULL;
    json_t *root = qhx_json_parse(buf, len, path, err);
    qhx_free(buf);
    return root;
}

static const char *sep(const char *path) { return path && path[0] ? "." : ""; }

static qhx_status missing(const char *key, const char *label, const char *path, bool required,
                          qhx_error *err) {
    if (!required) return QHX_OK;
    return qhx_fail(err, QHX_E_FORMAT, "%s: %s%s%s: missing", label, path, sep(path), key);
}

static qhx_status mistyped(const char *key, const char *label, const char *path, const char *want,
                           qhx_error *err) {
    return qhx_fail(err, QHX_E_FORMAT, "%s: %s%s%s: expected %s", label, path, sep(path), key, want);
}

qhx_status qhx_json_get_int(const json_t *obj, const char *key, const char *label,
                            const char *path, bool required, int64_t lo, int64_t hi,
                            int64_t *out, qhx_error *err) {
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return missing(key, label, path, required, err);
    if (!json_is_integer(v)) return mistyped(key, label, path, "an integer", err);
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return qhx_fail(err, QHX_E_FORMAT, "%s: %s%s%s: %lld is out of range [%lld, %lld]", label,
                        path, sep(path), key, (long long)x, (long long)lo, (long long)hi);
    *out = x;
    return QHX_OK;
}

qhx_status qhx_json_get_num(const json_t *obj, const char *key, const char *label,
                            const char *path, bool required, double *out, qhx_error *err) {
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return missing(key, label, path, required, err);
    if (!json_is_number(v)) return mistyped(key, label, path, "a number", err);
    double x = json_number_value(v);
    if (!isfinite(x)) return mistyped(key, label, path, "a finite number", err);
    *out = x;
    return QHX_OK;
}

qhx_status qhx_json_get_bool(const json_t *obj, const char *key, const char *label,
                             const char *path, bool required, bool *out, qhx_error *err) {
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return missing(key, label, path, required, err);
    if (!json_is_boolean(v)) return mistyped(key, label, path, "true or false", err);
    *out = json_is_true(v);
    return QHX_OK;
}

qhx_status qhx_json_get_str(const json_t *obj, const char *key, const char *label,
                            const char *path, bool required, const char **out, qhx_error *err) {
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return missing(key, label, path, required, err);
    if (!json_is_string(v)) return mistyped(key, label, path, "a string", err);
    *out = json_string_value(v);
    return QHX_OK;
}
