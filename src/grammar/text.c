/* grammar/text.c: the growing GBNF text the schema and regex compilers write (gm_schema.h sb):
 * capped at QHX_GM_MAX_TEXT * 4 bytes, failures sticky. */
#include "grammar/gm_schema.h"

#include "core/alloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int sb_put(sb *b, const char *s, size_t n) {
    if (b->failed) return -1;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n + 1) cap *= 2;
        if (cap > QHX_GM_MAX_TEXT * 4) {
            b->failed = 2;
            return -1;
        }
        char *p = qhx_realloc(b->p, cap);
        if (!p) {
            b->failed = 1;
            return -1;
        }
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, s, n); /* s may be NULL when n is 0 */
    b->n += n;
    b->p[b->n] = '\0';
    return 0;
}

int sb_printf(sb *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp) {
        b->failed = 1;
        return -1;
    }
    return sb_put(b, tmp, (size_t)n);
}

/* bytes as a GBNF literal "..." */
void sb_lit(sb *b, const char *s, size_t n) {
    sb_put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            sb_put(b, e, 2);
        } else if (c < 0x20 || c == 0x7F) {
            sb_printf(b, "\\x%02X", c);
        } else {
            sb_put(b, (const char *)&s[i], 1);
        }
    }
    sb_put(b, "\"", 1);
}
