/* io/json: a thin layer over jansson: parsing with located errors, and typed getters whose
 * failures name the JSON path ("text_config.hidden_size: expected an integer"). */
#ifndef QHX_IO_JSON_H
#define QHX_IO_JSON_H

#include "core/status.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define QHX_JSON_MAX_BYTES ((size_t)256 << 20) /* any JSON document we read */

/* Parse buf[0..len) (need not be NUL-terminated). Duplicate keys are refused; \u0000 is
 * allowed inside strings. On error: message "<label>: invalid JSON at line L, column C
 * (byte B): <reason>". Returns a new reference (json_decref) or NULL. */
json_t *qhx_json_parse(const char *buf, size_t len, const char *label, qhx_error *err);
/* The same for any JSON value at the top (true, 5, "x"), not only an object or an array. */
json_t *qhx_json_parse_any(const char *buf, size_t len, const char *label, qhx_error *err);

/* Read and parse a whole file (capped at QHX_JSON_MAX_BYTES). */
json_t *qhx_json_load_file(const char *path, qhx_error *err);

/* Typed getters. `obj` must be an object; `path` is the JSON path of obj used in messages
 * ("" for the root). `required` false: a missing key leaves *out untouched and returns OK. */
qhx_status qhx_json_get_int(const json_t *obj, const char *key, const char *label,
                            const char *path, bool required, int64_t lo, int64_t hi,
                            int64_t *out, qhx_error *err);
qhx_status qhx_json_get_num(const json_t *obj, const char *key, const char *label,
                            const char *path, bool required, double *out, qhx_error *err);
qhx_status qhx_json_get_bool(const json_t *obj, const char *key, const char *label,
                             const char *path, bool required, bool *out, qhx_error *err);
/* *out is borrowed from obj (valid while obj lives). */
qhx_status qhx_json_get_str(const json_t *obj, const char *key, const char *label,
                            const char *path, bool required, const char **out, qhx_error *err);

#endif
