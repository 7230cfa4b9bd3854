/* text/tok_regex: compiling tokenizer.json's Split patterns with PCRE2.
 *
 * The patterns are written for Oniguruma (the library's regex engine, Ruby syntax). Where
 * PCRE2 reads the same text differently, the pattern is rewritten before compiling:
 *   - \s / \S: Oniguruma's \s is Unicode White_Space; PCRE2's also matches U+180E, so \s
 *     becomes the explicit White_Space list;
 *   - \uHHHH (Oniguruma) becomes \x{HHHH};
 *   - ^ and $ match at line breaks in Ruby syntax: compiled with PCRE2_MULTILINE;
 *   - (?m) in Ruby syntax is PCRE2's (?s);
 *   - \p{L}, \p{N}, \p{M}: the reference knows Unicode 16.0 categories, PCRE2 10.42 only 14.0,
 *     so the letters, numbers and marks assigned since are added to the class (generated
 *     ranges in tok_unicode_data.c).
 * Constructs whose meaning differs and that the supported tokenizers do not use (\w, \b,
 * \h, nested classes, class intersection) are refused by name rather than guessed. */
#include "text/tok_internal.h"

#include "core/alloc.h"

#include <stdio.h>
#include <string.h>

/* Unicode White_Space, as Oniguruma's \s and Rust's char::is_whitespace. */
#define WS_LIST "\\t\\n\\x0B\\f\\r\\x20\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"

static qhx_status unsupported(qhx_error *err, const char *where, size_t at, const char *what) {
    return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: regex: %s at byte %zu is not supported", where,
                    what, at);
}

static qhx_status translate(const char *p, size_t n, tok_buf *o, int with_extra, const char *where,
                            qhx_error *err) {
#define PUT(str) ok &= qhx_tok_buf_put(o, str, strlen(str))
#define PUTN(ptr, len) ok &= qhx_tok_buf_put(o, ptr, len)
    bool ok = true;
    int in_class = 0;
    size_t i = 0;
    while (i < n) {
        char c = p[i];
        if (c == '\\') {
            if (i + 1 >= n) return qhx_fail(err, QHX_E_FORMAT, "%s: regex ends with '\\'", where);
            char e = p[i + 1];
            switch (e) {
            case 's':
                if (in_class) PUT(WS_LIST);
                else PUT("[" WS_LIST "]");
                i += 2;
                continue;
            case 'S':
                if (in_class) return unsupported(err, where, i, "\\S inside a character class");
                PUT("[^" WS_LIST "]");
                i += 2;
                continue;
            case 'p':
            case 'P': {
                /* \pX, \p{X}, \p{^X}, \PX ... */
                size_t q = i + 2, name = q, name_len;
                if (q < n && p[q] == '{') {
                    const char *close = memchr(p + q, '}', n - q);
                    if (!close) return qhx_fail(err, QHX_E_FORMAT, "%s: regex: unterminated \\p{", where);
                    name = q + 1;
                    name_len = (size_t)(close - (p + name));
                    q = (size_t)(close - p) + 1;
                } else {
                    if (q >= n) return qhx_fail(err, QHX_E_FORMAT, "%s: regex: bad \\p", where);
                    name_len = 1;
                    q++;
                }
                int neg = e == 'P';
                if (name_len && p[name] == '^') {
                    neg = !neg;
                    name++;
                    name_len--;
                }
                const char *extra = NULL, *cls = NULL;
#define IS(s) (name_len == strlen(s) && !memcmp(p + name, s, name_len))
                if (IS("L") || IS("Letter")) extra = qhx_tok_extra_L, cls = "L";
                else if (IS("N") || IS("Number")) extra = qhx_tok_extra_N, cls = "N";
                else if (IS("M") || IS("Mark") || IS("Combining_Mark")) extra = qhx_tok_extra_M, cls = "M";
#undef IS
                if (extra && !with_extra) extra = "";
                if (!extra) { /* other properties: as written */
                    PUTN(p + i, q - i);
                } else if (in_class) {
                    if (neg) return unsupported(err, where, i, "a negated \\p{L}/{N}/{M} inside a character class");
                    PUT("\\p{");
                    PUT(cls);
                    PUT("}");
                    PUT(extra);
                } else {
                    PUT(neg ? "[^\\p{" : "[\\p{");
                    PUT(cls);
                    PUT("}");
                    PUT(extra);
                    PUT("]");
                }
                i = q;
                continue;
            }
            case 'u': {
                if (n - i < 6) return qhx_fail(err, QHX_E_FORMAT, "%s: regex: bad \\u escape", where);
                for (int k = 2; k < 6; k++) {
                    char h = p[i + (size_t)k];
                    if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F')))
                        return qhx_fail(err, QHX_E_FORMAT, "%s: regex: bad \\u escape", where);
                }
                PUT("\\x{");
                PUTN(p + i + 2, 4);
                PUT("}");
                i += 6;
                continue;
            }
            case 'w': case 'W': case 'b': case 'B': case 'h': case 'H': case 'C':
            case 'K': case 'G': case 'g': case 'k': case 'y': case 'Y': case 'O': {
                char what[40];
                snprintf(what, sizeof what, "'\\%c'", e);
                return unsupported(err, where, i, what);
            }
            default: {
                /* copy the escape with its whole (possibly multi-byte) character */
                uint32_t cp;
                int k = qhx_tok_utf8_next((const uint8_t *)p + i + 1, n - i - 1, &cp);
                if (!k) return qhx_fail(err, QHX_E_FORMAT, "%s: regex is not UTF-8", where);
                PUTN(p + i, 1 + (size_t)k);
                i += 1 + (size_t)k;
                continue;
            }
            }
        }
        if (in_class) {
            if (c == '[') {
                if (i + 1 < n && p[i + 1] == ':') { /* POSIX class [:name:] */
                    const char *end = NULL;
                    for (size_t q = i + 2; q + 1 < n; q++)
                        if (p[q] == ':' && p[q + 1] == ']') {
                            end = p + q + 2;
                            break;
                        }
                    if (!end) return qhx_fail(err, QHX_E_FORMAT, "%s: regex: unterminated [:class:]", where);
                    PUTN(p + i, (size_t)(end - (p + i)));
                    i = (size_t)(end - p);
                    continue;
                }
                return unsupported(err, where, i, "a nested character class");
            }
            if (c == '&' && i + 1 < n && p[i + 1] == '&')
                return unsupported(err, where, i, "character class intersection '&&'");
            if (c == ']') in_class = 0;
            PUTN(&c, 1);
            i++;
            continue;
        }
        if (c == '[') {
            in_class = 1;
            PUTN(&c, 1);
            i++;
            if (i < n && p[i] == '^') PUTN(p + i++, 1);
            if (i < n && p[i] == ']') PUTN(p + i++, 1); /* a leading ']' is literal */
            continue;
        }
        if (c == '(' && i + 2 < n && p[i + 1] == '?') {
            /* inline options (?imx-imx) or (?imx-imx:...): Ruby's m is dot-all */
            size_t q = i + 2;
            while (q < n && (p[q] == 'i' || p[q] == 'm' || p[q] == 'x' || p[q] == '-')) q++;
            if (q > i + 2 && q < n && (p[q] == ':' || p[q] == ')')) {
                PUT("(?");
                for (size_t r = i + 2; r < q; r++) PUTN(p[r] == 'm' ? "s" : p + r, 1);
                i = q;
                continue;
            }
        }
        PUTN(&c, 1);
        i++;
    }
    if (!ok) return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", where);
    return QHX_OK;
#undef PUT
#undef PUTN
}

static qhx_status compile_one(qhx_tok *tok, const tok_buf *t, uint32_t opts, const char *where,
                              pcre2_code **re, int *jit, qhx_error *err) {
    pcre2_compile_context *cc = pcre2_compile_context_create(tok->gctx);
    if (!cc) return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", where);
    pcre2_set_parens_nest_limit(cc, 64);
    pcre2_set_newline(cc, PCRE2_NEWLINE_LF);
    int ecode;
    PCRE2_SIZE eoff;
    *re = pcre2_compile((PCRE2_SPTR)t->p, t->n, opts, &ecode, &eoff, cc);
    pcre2_compile_context_free(cc);
    if (!*re) {
        PCRE2_UCHAR msg[160];
        if (pcre2_get_error_message(ecode, msg, sizeof msg) < 0) strcpy((char *)msg, "error");
        return qhx_fail(err, ecode == PCRE2_ERROR_HEAP_FAILED ? QHX_E_NOMEM : QHX_E_FORMAT,
                        "%s: regex does not compile: %s", where, (const char *)msg);
    }
    /* JIT where the platform has it; the interpreter gives the same matches otherwise */
    *jit = 0;
    if (pcre2_jit_compile(*re, PCRE2_JIT_COMPLETE) == 0) {
        size_t jit_size = 0;
        *jit = pcre2_pattern_info(*re, PCRE2_INFO_JITSIZE, &jit_size) == 0 && jit_size > 0;
    }
    return QHX_OK;
}

qhx_status qhx_tok_compile_split(qhx_tok *tok, const char *pat, size_t len, int literal,
                                 const char *where, tok_split *out, qhx_error *err) {
    memset(out, 0, sizeof *out);
    if (len == 0) return qhx_fail(err, QHX_E_FORMAT, "%s: empty pattern", where);
    if (len > QHX_TOK_MAX_PATTERN_BYTES)
        return qhx_fail(err, QHX_E_LIMIT, "%s: pattern has %zu bytes, the limit is %d", where, len,
                        QHX_TOK_MAX_PATTERN_BYTES);
    if (qhx_tok_utf8_check((const uint8_t *)pat, len) != len)
        return qhx_fail(err, QHX_E_FORMAT, "%s: pattern is not UTF-8", where);
    tok_buf t = {0}, plain = {0};
    qhx_status rc = QHX_OK;
    uint32_t opts = PCRE2_UTF | PCRE2_NO_UTF_CHECK;
    if (literal) {
        opts |= PCRE2_LITERAL;
        if (!qhx_tok_buf_put(&t, pat, len)) rc = qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", where);
    } else {
        opts |= PCRE2_UCP | PCRE2_MULTILINE | PCRE2_NEVER_BACKSLASH_C;
        /* with the ranges PCRE2 lacks, and without them for text that has none of those
         * characters: the ranges make matching several times slower */
        rc = translate(pat, len, &t, 1, where, err);
        if (!rc) rc = translate(pat, len, &plain, 0, where, err);
    }
    if (!rc) rc = compile_one(tok, &t, opts, where, &out->re, &out->jit, err);
    if (!rc && plain.n && (plain.n != t.n || memcmp(plain.p, t.p, t.n)))
        rc = compile_one(tok, &plain, opts, where, &out->re_plain, &out->jit_plain, err);
    if (!rc) {
        out->pattern = qhx_malloc(len);
        if (!out->pattern) rc = qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", where);
        else memcpy(out->pattern, pat, len);
    }
    qhx_free(t.p);
    qhx_free(plain.p);
    if (rc) {
        pcre2_code_free(out->re);
        pcre2_code_free(out->re_plain);
        memset(out, 0, sizeof *out);
        return rc;
    }
    out->pattern_len = (uint32_t)len;
    out->literal = literal;
    return QHX_OK;
}
