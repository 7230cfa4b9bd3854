/* core/json_scan: the strict JSON scanner (json_scan.h). */
#include "core/json_scan.h"

#include "core/alloc.h"

#include <string.h>

/* ---- bytes and UTF-8 ------------------------------------------------------------------ */

bool qhx_bytes_reserve(qhx_bytes *b, size_t extra) {
    size_t need;
    if (!qhx_size_add(b->n, extra, &need)) return false;
    if (need <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) {
        if (cap > SIZE_MAX / 2) return false;
        cap *= 2;
    }
    char *p = qhx_realloc(b->p, cap);
    if (!p) return false;
    b->p = p;
    b->cap = cap;
    return true;
}

bool qhx_bytes_put(qhx_bytes *b, const void *data, size_t n) {
    if (!qhx_bytes_reserve(b, n)) return false;
    if (n) memcpy(b->p + b->n, data, n);
    b->n += n;
    return true;
}

int qhx_utf8_next(const uint8_t *s, size_t n, uint32_t *cp) {
    uint8_t c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c < 0xC2) return 0;
    if (c < 0xE0) {
        if (n < 2 || (s[1] & 0xC0) != 0x80) return 0;
        *cp = ((uint32_t)(c & 0x1F) << 6) | (s[1] & 0x3F);
        return 2;
    }
    if (c < 0xF0) {
        if (n < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) return 0;
        if (c == 0xE0 && s[1] < 0xA0) return 0; /* overlong */
        if (c == 0xED && s[1] > 0x9F) return 0; /* surrogate */
        *cp = ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
        return 3;
    }
    if (c < 0xF5) {
        if (n < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80)
            return 0;
        if (c == 0xF0 && s[1] < 0x90) return 0; /* overlong */
        if (c == 0xF4 && s[1] > 0x8F) return 0; /* above U+10FFFF */
        *cp = ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
              ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
        return 4;
    }
    return 0;
}

size_t qhx_utf8_put(char *dst, uint32_t cp) {
    uint8_t *d = (uint8_t *)dst;
    if (cp < 0x80) {
        d[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        d[0] = (uint8_t)(0xC0 | (cp >> 6));
        d[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        d[0] = (uint8_t)(0xE0 | (cp >> 12));
        d[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        d[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    d[0] = (uint8_t)(0xF0 | (cp >> 18));
    d[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    d[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    d[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---- the scanner ---------------------------------------------------------------------- */

qhx_status qhx_jscan_fail(qhx_jscan *j, const char *what) {
    return qhx_fail(j->err, QHX_E_FORMAT, "%s: invalid JSON at byte %zu: %s", j->name, j->i, what);
}

void qhx_jscan_ws(qhx_jscan *j) {
    while (j->i < j->n) {
        uint8_t c = j->s[j->i];
        if (c != ' ' && c != '\n' && c != '\r' && c != '\t') break;
        j->i++;
    }
}

static int hexval(uint8_t c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static qhx_status read_hex4(qhx_jscan *j, uint32_t *v) {
    if (j->n - j->i < 4) return qhx_jscan_fail(j, "truncated \\u escape");
    uint32_t x = 0;
    for (int k = 0; k < 4; k++) {
        int h = hexval(j->s[j->i + (size_t)k]);
        if (h < 0) return qhx_jscan_fail(j, "bad \\u escape");
        x = x << 4 | (uint32_t)h;
    }
    j->i += 4;
    *v = x;
    return QHX_OK;
}

/* Scan a string at j->i (which must be '"'). If out is not NULL, append its decoded bytes
 * (escapes resolved; \u0000 allowed). Lone surrogates and invalid UTF-8 are errors. */
qhx_status qhx_jscan_string(qhx_jscan *j, qhx_bytes *out) {
    if (j->i >= j->n || j->s[j->i] != '"') return qhx_jscan_fail(j, "expected a string");
    j->i++;
    size_t run = j->i;
    for (;;) {
        while (j->n - j->i >= 8) { /* 8 plain ASCII bytes at a time */
            uint64_t w;
            memcpy(&w, j->s + j->i, 8);
#define ZB(v) (((v) - 0x0101010101010101ull) & ~(v) & 0x8080808080808080ull)
            uint64_t stop = (w & 0x8080808080808080ull) | ZB(w ^ 0x2222222222222222ull) |
                            ZB(w ^ 0x5c5c5c5c5c5c5c5cull) |
                            ((w - 0x2020202020202020ull) & ~w & 0x8080808080808080ull);
#undef ZB
            if (stop) break;
            j->i += 8;
        }
        if (j->i >= j->n) return qhx_jscan_fail(j, "unterminated string");
        uint8_t c = j->s[j->i];
        if (c == '"') break;
        if (c < 0x20) return qhx_jscan_fail(j, "control character in string");
        if (c < 0x80 && c != '\\') {
            j->i++;
            continue;
        }
        if (c >= 0x80) {
            uint32_t cp;
            int k = qhx_utf8_next(j->s + j->i, j->n - j->i, &cp);
            if (!k) return qhx_jscan_fail(j, "invalid UTF-8");
            j->i += (size_t)k;
            continue;
        }
        /* escape */
        if (out && !qhx_bytes_put(out, j->s + run, j->i - run)) goto nomem;
        j->i++;
        if (j->i >= j->n) return qhx_jscan_fail(j, "unterminated escape");
        uint8_t e = j->s[j->i++];
        char ch;
        switch (e) {
        case '"': ch = '"'; break;
        case '\\': ch = '\\'; break;
        case '/': ch = '/'; break;
        case 'b': ch = '\b'; break;
        case 'f': ch = '\f'; break;
        case 'n': ch = '\n'; break;
        case 'r': ch = '\r'; break;
        case 't': ch = '\t'; break;
        case 'u': {
            uint32_t cp;
            qhx_status rc = read_hex4(j, &cp);
            if (rc) return rc;
            if (cp >= 0xDC00 && cp <= 0xDFFF) return qhx_jscan_fail(j, "lone low surrogate in \\u escape");
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                uint32_t lo;
                if (j->n - j->i < 2 || j->s[j->i] != '\\' || j->s[j->i + 1] != 'u')
                    return qhx_jscan_fail(j, "lone high surrogate in \\u escape");
                j->i += 2;
                rc = read_hex4(j, &lo);
                if (rc) return rc;
                if (lo < 0xDC00 || lo > 0xDFFF) return qhx_jscan_fail(j, "bad surrogate pair");
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            if (out) {
                if (!qhx_bytes_reserve(out, 4)) goto nomem;
                out->n += qhx_utf8_put(out->p + out->n, cp);
            }
            run = j->i;
            continue;
        }
        default: return qhx_jscan_fail(j, "unknown escape");
        }
        if (out && !qhx_bytes_put(out, &ch, 1)) goto nomem;
        run = j->i;
    }
    if (out && !qhx_bytes_put(out, j->s + run, j->i - run)) goto nomem;
    j->i++; /* closing quote */
    return QHX_OK;
nomem:
    return qhx_fail(j->err, QHX_E_NOMEM, "%s: out of memory reading a string", j->name);
}

qhx_status qhx_jscan_number(qhx_jscan *j) {
    size_t i = j->i;
    if (i < j->n && j->s[i] == '-') i++;
    if (i >= j->n) goto bad;
    if (j->s[i] == '0') i++;
    else if (j->s[i] >= '1' && j->s[i] <= '9')
        while (i < j->n && j->s[i] >= '0' && j->s[i] <= '9') i++;
    else goto bad;
    if (i < j->n && j->s[i] == '.') {
        i++;
        if (i >= j->n || j->s[i] < '0' || j->s[i] > '9') goto bad;
        while (i < j->n && j->s[i] >= '0' && j->s[i] <= '9') i++;
    }
    if (i < j->n && (j->s[i] == 'e' || j->s[i] == 'E')) {
        i++;
        if (i < j->n && (j->s[i] == '+' || j->s[i] == '-')) i++;
        if (i >= j->n || j->s[i] < '0' || j->s[i] > '9') goto bad;
        while (i < j->n && j->s[i] >= '0' && j->s[i] <= '9') i++;
    }
    j->i = i;
    return QHX_OK;
bad:
    j->i = i;
    return qhx_jscan_fail(j, "bad number");
}

/* A non-negative integer without fraction or exponent, at most max. */
qhx_status qhx_jscan_uint(qhx_jscan *j, uint64_t max, const char *what, uint64_t *out) {
    size_t start = j->i;
    uint64_t v = 0;
    if (j->i >= j->n || j->s[j->i] < '0' || j->s[j->i] > '9') goto bad;
    if (j->s[j->i] == '0' && j->i + 1 < j->n && j->s[j->i + 1] >= '0' && j->s[j->i + 1] <= '9')
        goto bad;
    while (j->i < j->n && j->s[j->i] >= '0' && j->s[j->i] <= '9') {
        v = v * 10 + (uint64_t)(j->s[j->i] - '0');
        if (v > max) {
            j->i = start;
            return qhx_fail(j->err, QHX_E_LIMIT, "%s: %s at byte %zu exceeds the limit %llu",
                            j->name, what, start, (unsigned long long)max);
        }
        j->i++;
    }
    if (j->i < j->n && (j->s[j->i] == '.' || j->s[j->i] == 'e' || j->s[j->i] == 'E')) goto bad;
    *out = v;
    return QHX_OK;
bad:
    j->i = start;
    return qhx_fail(j->err, QHX_E_FORMAT, "%s: %s at byte %zu: expected a non-negative integer",
                    j->name, what, start);
}

qhx_status qhx_jscan_expect(qhx_jscan *j, uint8_t c, const char *what) {
    qhx_jscan_ws(j);
    if (j->i >= j->n || j->s[j->i] != c) return qhx_jscan_fail(j, what);
    j->i++;
    return QHX_OK;
}

qhx_status qhx_jscan_skip(qhx_jscan *j, int depth) {
    qhx_status rc;
    qhx_jscan_ws(j);
    if (j->i >= j->n) return qhx_jscan_fail(j, "unexpected end of input");
    uint8_t c = j->s[j->i];
    if (c == '"') return qhx_jscan_string(j, NULL);
    if (c == '{' || c == '[') {
        if (depth >= QHX_JSON_MAX_DEPTH) return qhx_jscan_fail(j, "nesting too deep");
        uint8_t close = c == '{' ? '}' : ']';
        j->i++;
        qhx_jscan_ws(j);
        if (j->i < j->n && j->s[j->i] == close) {
            j->i++;
            return QHX_OK;
        }
        for (;;) {
            if (c == '{') {
                qhx_jscan_ws(j);
                if ((rc = qhx_jscan_string(j, NULL))) return rc;
                if ((rc = qhx_jscan_expect(j, ':', "expected ':'"))) return rc;
            }
            if ((rc = qhx_jscan_skip(j, depth + 1))) return rc;
            qhx_jscan_ws(j);
            if (j->i >= j->n) return qhx_jscan_fail(j, "unexpected end of input");
            if (j->s[j->i] == ',') {
                j->i++;
                continue;
            }
            if (j->s[j->i] == close) {
                j->i++;
                return QHX_OK;
            }
            return qhx_jscan_fail(j, c == '{' ? "expected ',' or '}'" : "expected ',' or ']'");
        }
    }
    if (c == '-' || (c >= '0' && c <= '9')) return qhx_jscan_number(j);
    static const char *const words[] = {"true", "false", "null"};
    for (int k = 0; k < 3; k++) {
        size_t len = strlen(words[k]);
        if (j->n - j->i >= len && !memcmp(j->s + j->i, words[k], len)) {
            j->i += len;
            return QHX_OK;
        }
    }
    return qhx_jscan_fail(j, "unexpected character");
}

/* Structural skip of a value: strings, nesting and scalars are delimited but not validated.
 * Used for model.vocab and model.merges in the first pass; their full parse validates them
 * and must end where this skip ended. */
qhx_status qhx_jscan_fast_skip(qhx_jscan *j) {
    const uint8_t *s = j->s;
    size_t i = j->i, n = j->n;
    int depth = 0, in_str = 0;
    qhx_jscan_ws(j);
    i = j->i;
    if (i >= n || (s[i] != '{' && s[i] != '[')) return qhx_jscan_skip(j, 0);
    for (; i < n; i++) {
        uint8_t c = s[i];
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') in_str = 0;
        } else if (c == '"') in_str = 1;
        else if (c == '{' || c == '[') {
            if (++depth > QHX_JSON_MAX_DEPTH) {
                j->i = i;
                return qhx_jscan_fail(j, "nesting too deep");
            }
        } else if ((c == '}' || c == ']') && --depth == 0) {
            j->i = i + 1;
            return QHX_OK;
        }
    }
    j->i = n;
    return qhx_jscan_fail(j, "unexpected end of input");
}

qhx_status qhx_jscan_object(qhx_jscan *j, int depth, qhx_jscan_member_fn fn, void *ctx) {
    qhx_status rc;
    qhx_bytes key = {0};
    if ((rc = qhx_jscan_expect(j, '{', "expected an object"))) return rc;
    qhx_jscan_ws(j);
    if (j->i < j->n && j->s[j->i] == '}') {
        j->i++;
        return QHX_OK;
    }
    for (;;) {
        qhx_jscan_ws(j);
        key.n = 0;
        if ((rc = qhx_jscan_string(j, &key))) goto out;
        if (!qhx_bytes_put(&key, "", 1)) {
            rc = qhx_fail(j->err, QHX_E_NOMEM, "%s: out of memory", j->name);
            goto out;
        }
        if ((rc = qhx_jscan_expect(j, ':', "expected ':'"))) goto out;
        qhx_jscan_ws(j);
        if ((rc = fn ? fn(j, ctx, key.p, key.n - 1) : qhx_jscan_skip(j, depth + 1))) goto out;
        qhx_jscan_ws(j);
        if (j->i >= j->n) {
            rc = qhx_jscan_fail(j, "unexpected end of input");
            goto out;
        }
        if (j->s[j->i] == ',') {
            j->i++;
            continue;
        }
        if (j->s[j->i] == '}') {
            j->i++;
            break;
        }
        rc = qhx_jscan_fail(j, "expected ',' or '}'");
        goto out;
    }
out:
    qhx_free(key.p);
    return rc;
}
