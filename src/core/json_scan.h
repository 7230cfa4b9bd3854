/* core/json_scan: a strict JSON scanner over bytes in memory (RFC 8259: UTF-8 throughout,
 * escapes and surrogate pairs checked, numbers by the grammar, a nesting cap), for documents
 * too large to build a tree of: the caller walks the document with these calls, reading the
 * values it wants in place and skipping the rest. Every error is QHX_E_FORMAT (QHX_E_LIMIT for
 * an integer past its cap, QHX_E_NOMEM) with the document's name and the byte offset:
 * "tokenizer.json: invalid JSON at byte 12: bad number". Also here: the growable byte buffer
 * strings are decoded into, and the UTF-8 step both use. */
#ifndef QHX_CORE_JSON_SCAN_H
#define QHX_CORE_JSON_SCAN_H

#include "core/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define QHX_JSON_MAX_DEPTH 128 /* nesting of objects and arrays */

/* ---- bytes and UTF-8 ---- */

typedef struct qhx_bytes { /* growable bytes (qhx_malloc'd; zero-initialise, free p) */
    char *p;
    size_t n, cap;
} qhx_bytes;

bool qhx_bytes_reserve(qhx_bytes *b, size_t extra); /* room for extra more; false: no memory */
bool qhx_bytes_put(qhx_bytes *b, const void *data, size_t n);

/* Decode one UTF-8 scalar at s[0..n) (n >= 1). Returns its length (1-4) and sets *cp, or 0
 * if the bytes are not a well-formed sequence (RFC 3629: no overlongs, surrogates or code
 * points past U+10FFFF). */
int qhx_utf8_next(const uint8_t *s, size_t n, uint32_t *cp);
/* Write cp (a scalar value) as UTF-8 into dst (room for 4); returns the length. */
size_t qhx_utf8_put(char *dst, uint32_t cp);

/* ---- the scanner ---- */

typedef struct qhx_jscan {
    const uint8_t *s; /* the document, n bytes */
    size_t n, i;      /* i: where the scan is */
    const char *name; /* for messages */
    qhx_error *err;
} qhx_jscan;

typedef struct qhx_jspan {
    size_t a, b; /* value bytes [a, b); b == 0: member absent */
} qhx_jspan;

/* QHX_E_FORMAT "NAME: invalid JSON at byte I: what". */
qhx_status qhx_jscan_fail(qhx_jscan *j, const char *what);
/* Skip white space. */
void qhx_jscan_ws(qhx_jscan *j);
/* The string at j->i (which must be '"'); with out, its decoded bytes are appended (escapes
 * resolved, \u0000 allowed). Lone surrogates, control characters and invalid UTF-8 are
 * errors. */
qhx_status qhx_jscan_string(qhx_jscan *j, qhx_bytes *out /* may be NULL */);
/* A number at j->i, checked by the grammar and skipped. */
qhx_status qhx_jscan_number(qhx_jscan *j);
/* A non-negative integer without fraction or exponent, at most max (QHX_E_LIMIT past it);
 * what names it in messages. */
qhx_status qhx_jscan_uint(qhx_jscan *j, uint64_t max, const char *what, uint64_t *out);
/* White space, then the byte c (else the error what). */
qhx_status qhx_jscan_expect(qhx_jscan *j, uint8_t c, const char *what);
/* Validate and skip one value; depth: the nesting it sits at. */
qhx_status qhx_jscan_skip(qhx_jscan *j, int depth);
/* Skip an object or array by its structure only (strings and nesting delimited, nothing
 * validated): for a value a later full scan validates, which must end where this one did. */
qhx_status qhx_jscan_fast_skip(qhx_jscan *j);
/* The members of the object at j->i: fn(key, keylen) with j->i at the value, which fn must
 * consume; fn NULL skips every value. depth: the nesting of the object. */
typedef qhx_status (*qhx_jscan_member_fn)(qhx_jscan *j, void *ctx, const char *key, size_t keylen);
qhx_status qhx_jscan_object(qhx_jscan *j, int depth, qhx_jscan_member_fn fn, void *ctx);

#endif
