/* tojson.c: JSON text as the chat templates' tojson writes it (transformers' filter: Python's
 * json.dumps with ensure_ascii=False, ", " and ": " separators, keys in the given order). Two
 * details differ from jansson's own writer: a float is written as Python's repr() writes it
 * (the shortest digits that read back; jansson writes 17: 0.1 -> 0.10000000000000001), and a
 * control character as a lowercase \u00xx. */
#include "serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Python's repr of a finite double: the shortest round-tripping digits, positional when the
 * decimal exponent is in [-4, 16), else d.ddde+XX. */
void srv_py_float(double d, char *out, size_t cap) {
    char e[40];
    for (int p = 1; p <= 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, d);
        if (strtod(e, NULL) == d) break;
    }
    const char *s = e, *x = strchr(e, 'e');
    int exp = x ? atoi(x + 1) : 0;
    char dig[24];
    size_t nd = 0;
    int neg = *s == '-';
    if (neg) s++;
    for (; *s && *s != 'e' && nd < sizeof dig - 1; s++)
        if (*s != '.') dig[nd++] = *s;
    dig[nd] = '\0';
    while (nd > 1 && dig[nd - 1] == '0') dig[--nd] = '\0'; /* %.*e may pad: 1.0e+00 at p = 2 */
    size_t o = 0;
#define PUT(c) (o + 1 < cap ? (void)(out[o++] = (c)) : (void)0)
    if (neg) PUT('-');
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            PUT('0'), PUT('.');
            for (int k = 0; k < -exp - 1; k++) PUT('0');
            for (size_t k = 0; k < nd; k++) PUT(dig[k]);
        } else {
            for (int k = 0; k <= exp; k++) PUT((size_t)k < nd ? dig[k] : '0');
            PUT('.');
            if ((size_t)exp + 1 < nd)
                for (size_t k = (size_t)exp + 1; k < nd; k++) PUT(dig[k]);
            else
                PUT('0');
        }
    } else {
        PUT(dig[0]);
        if (nd > 1) {
            PUT('.');
            for (size_t k = 1; k < nd; k++) PUT(dig[k]);
        }
        char t[16];
        snprintf(t, sizeof t, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
        for (const char *q = t; *q; q++) PUT(*q);
    }
#undef PUT
    out[o < cap ? o : cap - 1] = '\0';
}

static int put_string(srv_buf *b, const char *s, size_t n) {
    int rc = srv_buf_put(b, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        rc |= srv_buf_put(b, s + run, i - run);
        char e[8];
        const char *named = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\r' ? "\\r"
                          : c == '\t' ? "\\t" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
        if (!named) snprintf(e, sizeof e, "\\u%04x", c);
        rc |= srv_buf_puts(b, named ? named : e);
        run = i + 1;
    }
    if (!rc) rc = srv_buf_put(b, s + run, n - run);
    return rc ? rc : srv_buf_put(b, "\"", 1);
}

static int put_value(srv_buf *b, json_t *v) {
    char num[48];
    int rc = 0;
    size_t k;
    const char *key;
    json_t *item;
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        rc = srv_buf_put(b, "{", 1);
        k = 0;
        json_object_foreach(v, key, item) { /* insertion order */
            if (k++) rc |= srv_buf_put(b, ", ", 2);
            rc |= put_string(b, key, strlen(key));
            rc |= srv_buf_put(b, ": ", 2);
            if (!rc) rc = put_value(b, item);
        }
        return rc ? rc : srv_buf_put(b, "}", 1);
    case JSON_ARRAY:
        rc = srv_buf_put(b, "[", 1);
        json_array_foreach(v, k, item) {
            if (k) rc |= srv_buf_put(b, ", ", 2);
            if (!rc) rc = put_value(b, item);
        }
        return rc ? rc : srv_buf_put(b, "]", 1);
    case JSON_STRING: return put_string(b, json_string_value(v), json_string_length(v));
    case JSON_INTEGER:
        snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v));
        return srv_buf_puts(b, num);
    case JSON_REAL:
        srv_py_float(json_real_value(v), num, sizeof num);
        return srv_buf_puts(b, num);
    case JSON_TRUE: return srv_buf_puts(b, "true");
    case JSON_FALSE: return srv_buf_puts(b, "false");
    default: return srv_buf_puts(b, "null");
    }
}

char *srv_tojson(json_t *v) {
    srv_buf b = {0};
    if (!v || put_value(&b, v) || srv_buf_put(&b, "", 0)) {
        srv_buf_free(&b);
        return NULL;
    }
    if (!b.p) return strdup(""); /* nothing written: cannot happen for a value */
    return b.p;
}
