/* grammar/regex.c: a JSON Schema "pattern" (a regex subset: literals, ., classes, \d \w \s and
 * their negations, groups, |, * + ? {m} {m,} {m,n}, ^ and $ at the ends) -> GBNF matching the
 * JSON text of such strings: '"', '\' and control characters come out escaped, as a JSON
 * string holds them. The whole string matches the pattern (a validator searches, so a whole
 * match is one of the strings it accepts). */
#include "grammar/gm_schema.h"

#include <stdio.h>
#include <string.h>

#define MAX_RANGES 512
#define MAX_DEPTH 64

typedef struct cps {
    uint32_t lo[MAX_RANGES], hi[MAX_RANGES];
    int n;
} cps;

typedef struct rx {
    const char *s;
    sb *out;
    char *why;
    size_t why_size;
    int depth;
    bool failed;
} rx;

static int rfail(rx *r, const char *what) {
    if (!r->failed) snprintf(r->why, r->why_size, "%s", what);
    r->failed = true;
    return -1;
}

static int add(rx *r, cps *c, uint32_t lo, uint32_t hi) {
    if (c->n == MAX_RANGES) return rfail(r, "a character class with too many ranges");
    c->lo[c->n] = lo, c->hi[c->n] = hi, c->n++;
    return 0;
}

/* Sorted, merged. */
static void normalize(cps *c) {
    for (int i = 1; i < c->n; i++) /* insertion sort: classes are small */
        for (int j = i; j > 0 && c->lo[j] < c->lo[j - 1]; j--) {
            uint32_t a = c->lo[j], b = c->hi[j];
            c->lo[j] = c->lo[j - 1], c->hi[j] = c->hi[j - 1];
            c->lo[j - 1] = a, c->hi[j - 1] = b;
        }
    int k = 0;
    for (int i = 0; i < c->n; i++) {
        if (k && c->lo[i] <= c->hi[k - 1] + 1) {
            if (c->hi[i] > c->hi[k - 1]) c->hi[k - 1] = c->hi[i];
        } else {
            c->lo[k] = c->lo[i], c->hi[k] = c->hi[i], k++;
        }
    }
    c->n = k;
}

static int complement(rx *r, cps *c) {
    normalize(c);
    cps o = {.n = 0};
    uint32_t next = 0;
    for (int i = 0; i <= c->n; i++) {
        uint32_t a = i < c->n ? c->lo[i] : 0x110000;
        if (a > next && add(r, &o, next, a - 1)) return -1;
        if (i < c->n) next = c->hi[i] + 1;
    }
    *c = o;
    return 0;
}

static bool has(const cps *c, uint32_t x) {
    for (int i = 0; i < c->n; i++)
        if (x >= c->lo[i] && x <= c->hi[i]) return true;
    return false;
}

static void put_cp(sb *b, uint32_t cp) {
    if ((cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) sb_printf(b, "%c", (char)cp);
    else if (cp < 0x80) sb_printf(b, "\\x%02X", cp);
    else if (cp < 0x10000) sb_printf(b, "\\u%04X", cp);
    else sb_printf(b, "\\U%08X", cp);
}

/* The JSON text of one character of c: the safe ones as a class, '"', '\' and controls escaped. */
static int emit_set(rx *r, cps *c) {
    normalize(c);
    sb *b = r->out;
    cps safe = {.n = 0};
    for (int i = 0; i < c->n; i++) { /* cut 0x00-0x1F, '"' and '\\' out */
        uint32_t lo = c->lo[i] < 0x20 ? 0x20 : c->lo[i], hi = c->hi[i];
        for (uint32_t cut = 0; cut < 2 && lo <= hi; cut++) {
            uint32_t x = cut ? '\\' : '"';
            if (lo <= x && x <= hi) {
                if (lo < x && add(r, &safe, lo, x - 1)) return -1;
                lo = x + 1;
            }
        }
        if (lo <= hi && add(r, &safe, lo, hi)) return -1;
    }
    normalize(&safe);
    int alts = 0;
    sb_put(b, "(", 1);
    if (safe.n) {
        sb_put(b, "[", 1);
        for (int i = 0; i < safe.n; i++) {
            put_cp(b, safe.lo[i]);
            if (safe.hi[i] > safe.lo[i]) sb_put(b, "-", 1), put_cp(b, safe.hi[i]);
        }
        sb_put(b, "]", 1);
        alts++;
    }
    if (has(c, '"')) sb_printf(b, "%s\"\\\\\\\"\"", alts++ ? " | " : "");
    if (has(c, '\\')) sb_printf(b, "%s\"\\\\\\\\\"", alts++ ? " | " : "");
    for (uint32_t x = 0; x < 0x20; x++)
        if (has(c, x)) sb_printf(b, "%s\"\\\\u00%02x\"", alts++ ? " | " : "", x);
    if (!alts) return rfail(r, "a character class that matches nothing");
    sb_put(b, ")", 1);
    return 0;
}

static int class_escape(rx *r, char e, cps *c) {
    cps t = {.n = 0};
    bool neg = e == 'D' || e == 'W' || e == 'S';
    switch (e) {
    case 'd': case 'D': add(r, &t, '0', '9'); break;
    case 'w': case 'W': add(r, &t, '0', '9'), add(r, &t, 'A', 'Z'), add(r, &t, 'a', 'z'), add(r, &t, '_', '_'); break;
    case 's': case 'S': add(r, &t, '\t', '\r'), add(r, &t, ' ', ' '); break;
    default: return 1;
    }
    if (neg && complement(r, &t)) return -1;
    for (int i = 0; i < t.n; i++)
        if (add(r, c, t.lo[i], t.hi[i])) return -1;
    return 0;
}

static int hexn(rx *r, int n, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 0; i < n; i++) {
        char ch = *r->s;
        int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
        if (d < 0) return rfail(r, "a bad hex escape");
        v = v << 4 | (uint32_t)d;
        r->s++;
    }
    *out = v;
    return 0;
}

/* One literal character (after a backslash when esc): its code point. */
static int literal_escape(rx *r, uint32_t *cp) {
    char e = *r->s++;
    switch (e) {
    case 'n': *cp = '\n'; return 0;
    case 't': *cp = '\t'; return 0;
    case 'r': *cp = '\r'; return 0;
    case 'f': *cp = '\f'; return 0;
    case 'v': *cp = '\v'; return 0;
    case 'x': return hexn(r, 2, cp);
    case 'u': return hexn(r, 4, cp);
    case '\0': r->s--; return rfail(r, "a pattern ending in a backslash");
    default:
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9')) {
            return rfail(r, "an escape that is not supported (\\b, back references, \\p, ...)");
        }
        *cp = (uint32_t)(unsigned char)e;
        return 0;
    }
}

/* One UTF-8 character of the pattern. */
static int utf8_char(rx *r, uint32_t *cp) {
    const unsigned char *s = (const unsigned char *)r->s;
    int n = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (!n) return rfail(r, "malformed UTF-8");
    uint32_t v = n == 1 ? s[0] : (uint32_t)(s[0] & (0x7F >> n));
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return rfail(r, "malformed UTF-8");
        v = v << 6 | (s[i] & 63);
    }
    r->s += n;
    *cp = v;
    return 0;
}

static int parse_class(rx *r) {
    r->s++; /* '[' */
    bool neg = *r->s == '^';
    if (neg) r->s++;
    cps c = {.n = 0};
    bool first = true;
    while (*r->s && (*r->s != ']' || first)) {
        first = false;
        uint32_t a, z;
        if (*r->s == '\\') {
            r->s++;
            int k = class_escape(r, *r->s, &c);
            if (k < 0) return -1;
            if (k == 0) {
                r->s++;
                continue;
            }
            if (literal_escape(r, &a)) return -1;
        } else if (*r->s == '[' && (r->s[1] == ':' || r->s[1] == '=' || r->s[1] == '.')) {
            return rfail(r, "POSIX classes ([:alpha:]) are not supported");
        } else if (utf8_char(r, &a)) {
            return -1;
        }
        z = a;
        if (r->s[0] == '-' && r->s[1] && r->s[1] != ']') {
            r->s++;
            if (*r->s == '\\') {
                r->s++;
                if (literal_escape(r, &z)) return -1;
            } else if (utf8_char(r, &z)) {
                return -1;
            }
            if (z < a) return rfail(r, "a reversed class range");
        }
        if (add(r, &c, a, z)) return -1;
    }
    if (*r->s != ']') return rfail(r, "an unterminated character class");
    r->s++;
    if (neg && complement(r, &c)) return -1;
    return emit_set(r, &c);
}

static int parse_alt(rx *r);

static int parse_count(rx *r, long *out) {
    long v = 0;
    if (*r->s < '0' || *r->s > '9') return rfail(r, "a bad {m,n} repetition");
    while (*r->s >= '0' && *r->s <= '9') {
        v = v * 10 + (*r->s++ - '0');
        if (v > QHX_GM_MAX_REPEAT) return rfail(r, "a repetition count above 4096");
    }
    *out = v;
    return 0;
}

static int parse_quant(rx *r) {
    char q = *r->s;
    if (q == '*' || q == '+' || q == '?') {
        r->s++;
        sb_put(r->out, &q, 1);
    } else if (q == '{') {
        r->s++;
        long m, n = -1;
        if (parse_count(r, &m)) return -1;
        if (*r->s == ',') {
            r->s++;
            if (*r->s != '}' && parse_count(r, &n)) return -1;
            if (n >= 0 && n < m) return rfail(r, "a repetition {m,n} with n < m");
            if (n >= 0) sb_printf(r->out, "{%ld,%ld}", m, n);
            else sb_printf(r->out, "{%ld,}", m);
        } else {
            sb_printf(r->out, "{%ld}", m);
        }
        if (*r->s != '}') return rfail(r, "a bad {m,n} repetition");
        r->s++;
    } else {
        return 0;
    }
    if (*r->s == '?') r->s++; /* lazy: the same strings */
    if (*r->s == '+') return rfail(r, "possessive quantifiers are not supported");
    if (*r->s == '*' || *r->s == '+' || *r->s == '?' || *r->s == '{') return rfail(r, "a quantifier after a quantifier");
    return 0;
}

static int parse_atom(rx *r) {
    char c = *r->s;
    if (c == '(') {
        if (++r->depth > MAX_DEPTH) return rfail(r, "groups nest too deep");
        r->s++;
        if (*r->s == '?') {
            if (r->s[1] != ':') return rfail(r, "lookarounds and named groups are not supported");
            r->s += 2;
        }
        sb_put(r->out, "(", 1);
        if (parse_alt(r)) return -1;
        if (*r->s != ')') return rfail(r, "an unclosed group");
        r->s++;
        sb_put(r->out, ")", 1);
        r->depth--;
        return 0;
    }
    if (c == '[') return parse_class(r);
    cps set = {.n = 0};
    if (c == '.') {
        r->s++;
        add(r, &set, '\n', '\n');
        if (complement(r, &set)) return -1;
        return emit_set(r, &set);
    }
    uint32_t cp;
    if (c == '\\') {
        r->s++;
        int k = class_escape(r, *r->s, &set);
        if (k < 0) return -1;
        if (k == 0) {
            r->s++;
            return emit_set(r, &set);
        }
        if (literal_escape(r, &cp)) return -1;
    } else if (c == '^' || c == '$') {
        return rfail(r, "'^' and '$' only at the ends of the pattern");
    } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        return rfail(r, "a quantifier with nothing before it");
    } else if (utf8_char(r, &cp)) {
        return -1;
    }
    add(r, &set, cp, cp);
    return emit_set(r, &set);
}

static int parse_seq(rx *r) {
    int n = 0;
    while (*r->s && *r->s != '|' && *r->s != ')' && !(r->s[0] == '$' && r->s[1] == '\0')) {
        if (n++) sb_put(r->out, " ", 1);
        if (parse_atom(r) || parse_quant(r)) return -1;
    }
    if (!n) sb_put(r->out, "\"\"", 2);
    return 0;
}

static int parse_alt(rx *r) {
    sb_put(r->out, "(", 1);
    if (parse_seq(r)) return -1;
    while (*r->s == '|') {
        r->s++;
        sb_put(r->out, " | ", 3);
        if (parse_seq(r)) return -1;
    }
    sb_put(r->out, ")", 1);
    return 0;
}

int gm_regex_to_gbnf(const char *pattern, sb *out, char *why, size_t why_size) {
    rx r = {.s = pattern, .out = out, .why = why, .why_size = why_size};
    if (strlen(pattern) > 4096) return rfail(&r, "the pattern is longer than 4096 bytes");
    if (*r.s == '^') r.s++;
    if (parse_alt(&r)) return -1;
    if (r.s[0] == '$' && r.s[1] == '\0') r.s++;
    if (*r.s) return rfail(&r, *r.s == ')' ? "an unmatched ')'" : "'$' only at the end of the pattern");
    return out->failed ? rfail(&r, "out of memory") : 0;
}
