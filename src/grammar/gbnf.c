/* grammar/gbnf.c: GBNF text -> the builder (docs/grammar.md). Recursive descent over a
 * length-bounded buffer; parentheses nest at most QHX_GM_MAX_NEST deep. */
#include "grammar/gm_internal.h"

#include "core/alloc.h"

#include <stdbool.h>
#include <string.h>

typedef struct ps {
    const char *s, *end, *base;
    gm_builder *b;
    int depth;
    int32_t scratch; /* a rule the terms build their elements in before they move; -1: none yet */
} ps;

/* A piece: the elements one term makes (a literal of several bytes, one class, one reference). */
typedef struct piece {
    gm_elem *e;
    int32_t n, cap;
} piece;

static int perr(ps *p, const char *what) {
    int line = 1, col = 1;
    for (const char *q = p->base; q < p->s && q < p->end; q++) {
        if (*q == '\n') line++, col = 1;
        else col++;
    }
    return gb_fail(p->b, QHX_E_FORMAT, "grammar:%d:%d: %s", line, col, what);
}

static bool at_end(const ps *p) { return p->s >= p->end; }

/* The scratch rule, emptied. */
static int32_t scratch(ps *p, int32_t base) {
    if (p->scratch < 0) p->scratch = gb_rule_anon(p->b, base);
    gb_rule_clear(p->b, p->scratch);
    return p->scratch;
}

/* Spaces, tabs, comments; newlines too when nested (inside parentheses) or when the next
 * line goes on with '|'. */
static void skip_space(ps *p, bool newlines) {
    for (;;) {
        while (!at_end(p) && (*p->s == ' ' || *p->s == '\t' || *p->s == '\r' || (newlines && *p->s == '\n'))) p->s++;
        if (!at_end(p) && *p->s == '#') {
            while (!at_end(p) && *p->s != '\n') p->s++;
            continue;
        }
        if (!newlines && !at_end(p) && *p->s == '\n') { /* a continuation line starting with '|'? */
            const char *q = p->s;
            while (q < p->end && (*q == ' ' || *q == '\t' || *q == '\r' || *q == '\n')) q++;
            if (q < p->end && *q == '|') {
                p->s = q;
                continue;
            }
        }
        return;
    }
}

static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

static int piece_push(ps *p, piece *pc, int32_t kind, int32_t arg) {
    if (pc->n == pc->cap) {
        int32_t cap = pc->cap ? pc->cap * 2 : 8;
        if (cap > QHX_GM_MAX_ELEMS) return gb_fail(p->b, QHX_E_LIMIT, "grammar: a literal is too long");
        gm_elem *e = qhx_realloc(pc->e, (size_t)cap * sizeof *e);
        if (!e) return gb_fail(p->b, QHX_E_NOMEM, "grammar: out of memory");
        pc->e = e;
        pc->cap = cap;
    }
    pc->e[pc->n++] = (gm_elem){kind, arg};
    return 0;
}

/* One UTF-8 character of the source into *cp; -1 on malformed UTF-8. */
static int decode_utf8(ps *p, uint32_t *cp) {
    const uint8_t *s = (const uint8_t *)p->s;
    size_t left = (size_t)(p->end - p->s);
    uint8_t c = s[0];
    int n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (!n || (size_t)n > left) return perr(p, "malformed UTF-8");
    uint32_t v = n == 1 ? c : (uint32_t)(c & (0x7F >> n));
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return perr(p, "malformed UTF-8");
        v = v << 6 | (s[i] & 63);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < min[n] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return perr(p, "malformed UTF-8");
    p->s += n;
    *cp = v;
    return 0;
}

static int hex_digits(ps *p, int n, uint32_t *cp) {
    uint32_t v = 0;
    for (int i = 0; i < n; i++) {
        if (at_end(p)) return perr(p, "escape ends early");
        char c = *p->s++;
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return perr(p, "bad hex digit in an escape");
        v = v << 4 | (uint32_t)d;
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return perr(p, "escape is not a Unicode scalar value");
    *cp = v;
    return 0;
}

/* A character of a literal or class, escapes decoded. */
static int read_char(ps *p, uint32_t *cp) {
    if (at_end(p)) return perr(p, "unexpected end");
    if (*p->s != '\\') return decode_utf8(p, cp);
    p->s++;
    if (at_end(p)) return perr(p, "escape ends early");
    char c = *p->s++;
    switch (c) {
    case 'n': *cp = '\n'; return 0;
    case 'r': *cp = '\r'; return 0;
    case 't': *cp = '\t'; return 0;
    case '0': *cp = 0; return 0;
    case 'x': return hex_digits(p, 2, cp);
    case 'u': return hex_digits(p, 4, cp);
    case 'U': return hex_digits(p, 8, cp);
    case '\\': case '"': case '\'': case '[': case ']': case '-': case '^': case '/': case '.': case '|':
    case '(': case ')': case '*': case '+': case '?': case '{': case '}':
        *cp = (uint32_t)(unsigned char)c;
        return 0;
    default: p->s--; return perr(p, "unknown escape");
    }
}

static int parse_literal(ps *p, int32_t base, piece *pc) {
    p->s++; /* the opening quote */
    int32_t tmp = scratch(p, base); /* the bytes go through the scratch rule, then move */
    if (tmp < 0) return -1;
    while (!at_end(p) && *p->s != '"') {
        if (*p->s == '\n') return perr(p, "a literal ends at the end of the line");
        uint32_t cp;
        if (read_char(p, &cp)) return -1;
        gb_push_cp(p->b, tmp, cp);
    }
    if (at_end(p)) return perr(p, "unterminated literal");
    p->s++;
    gb_rule *ru = &p->b->rules[tmp];
    for (int32_t i = 0; i < ru->n; i++)
        if (piece_push(p, pc, ru->e[i].kind, ru->e[i].arg)) return -1;
    gb_rule_clear(p->b, tmp);
    return p->b->rc ? -1 : 0;
}

static int parse_class(ps *p, int32_t base, piece *pc) {
    p->s++; /* '[' */
    bool negate = !at_end(p) && *p->s == '^';
    if (negate) p->s++;
    uint32_t *lo = NULL, *hi = NULL;
    int n = 0, cap = 0, rc = 0;
    while (!rc && !at_end(p) && *p->s != ']') {
        uint32_t a, z;
        if ((rc = read_char(p, &a))) break;
        z = a;
        if (p->end - p->s >= 2 && *p->s == '-' && p->s[1] != ']') {
            p->s++;
            if ((rc = read_char(p, &z))) break;
            if (z < a) {
                rc = perr(p, "class range is reversed");
                break;
            }
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            uint32_t *l2 = qhx_realloc(lo, (size_t)cap * sizeof *lo), *h2 = l2 ? qhx_realloc(hi, (size_t)cap * sizeof *hi) : NULL;
            if (l2) lo = l2;
            if (!l2 || !h2) {
                rc = gb_fail(p->b, QHX_E_NOMEM, "grammar: out of memory");
                break;
            }
            hi = h2;
        }
        lo[n] = a, hi[n] = z, n++;
    }
    if (!rc && at_end(p)) rc = perr(p, "unterminated character class");
    if (!rc) {
        p->s++;
        int32_t tmp = scratch(p, base);
        gb_push_cps(p->b, tmp, base, lo, hi, n, negate);
        if (!p->b->rc) rc = piece_push(p, pc, p->b->rules[tmp].e[0].kind, p->b->rules[tmp].e[0].arg);
        gb_rule_clear(p->b, tmp);
        if (p->b->rc) rc = -1;
    }
    qhx_free(lo);
    qhx_free(hi);
    return rc;
}

static int parse_alts(ps *p, int32_t r, bool nested);

/* {m}, {m,}, {m,n}, {,n}: m into *m, n into *n (-1: unbounded). */
static int parse_braces(ps *p, int64_t *m, int64_t *n) {
    p->s++;
    int64_t a = 0, z = -1;
    bool have_a = false;
    while (!at_end(p) && *p->s >= '0' && *p->s <= '9') {
        a = a * 10 + (*p->s++ - '0');
        have_a = true;
        if (a > QHX_GM_MAX_REPEAT) return gb_fail(p->b, QHX_E_LIMIT, "grammar: a repetition count above %d", QHX_GM_MAX_REPEAT);
    }
    skip_space(p, true);
    if (!at_end(p) && *p->s == '}') {
        if (!have_a) return perr(p, "empty repetition");
        p->s++;
        *m = *n = a;
        return 0;
    }
    if (at_end(p) || *p->s != ',') return perr(p, "expected ',' or '}' in a repetition");
    p->s++;
    skip_space(p, true);
    if (!at_end(p) && *p->s >= '0' && *p->s <= '9') {
        z = 0;
        while (!at_end(p) && *p->s >= '0' && *p->s <= '9') {
            z = z * 10 + (*p->s++ - '0');
            if (z > QHX_GM_MAX_REPEAT) return gb_fail(p->b, QHX_E_LIMIT, "grammar: a repetition count above %d", QHX_GM_MAX_REPEAT);
        }
    }
    skip_space(p, true);
    if (at_end(p) || *p->s != '}') return perr(p, "expected '}'");
    p->s++;
    if (z >= 0 && z < a) return perr(p, "repetition {m,n} with n < m");
    *m = a, *n = z;
    return 0;
}

/* Append x (one element) repeated m..n times (n -1: unbounded) to rule r. */
static void push_repeat(gm_builder *b, int32_t r, gm_elem x, int64_t m, int64_t n) {
    for (int64_t k = 0; k < m && !b->rc; k++) gb_push(b, r, x.kind, x.arg);
    if (n < 0) { /* S ::= x S | (empty) */
        int32_t s = gb_rule_anon(b, r);
        gb_push(b, s, x.kind, x.arg);
        gb_push(b, s, GM_REF, s);
        gb_end(b, s);
        gb_end(b, s);
        gb_push(b, r, GM_REF, s);
        return;
    }
    int32_t prev = -1; /* O_j ::= x O_{j-1} | (empty) */
    for (int64_t k = m; k < n && !b->rc; k++) {
        int32_t o = gb_rule_anon(b, r);
        gb_push(b, o, x.kind, x.arg);
        if (prev >= 0) gb_push(b, o, GM_REF, prev);
        gb_end(b, o);
        gb_end(b, o);
        prev = o;
    }
    if (prev >= 0) gb_push(b, r, GM_REF, prev);
}

/* One term with its postfix operators, appended to rule r. Returns 1 when there was none. */
static int parse_term(ps *p, int32_t r) {
    piece pc = {0};
    int rc = 0;
    char c = *p->s;
    if (c == '"') rc = parse_literal(p, r, &pc);
    else if (c == '[') rc = parse_class(p, r, &pc);
    else if (c == '.') {
        p->s++;
        uint32_t none_lo = 1, none_hi = 0;
        int32_t tmp = scratch(p, r);
        gb_push_cps(p->b, tmp, r, &none_lo, &none_hi, 0, true); /* every character */
        if (!p->b->rc) rc = piece_push(p, &pc, p->b->rules[tmp].e[0].kind, p->b->rules[tmp].e[0].arg);
        gb_rule_clear(p->b, tmp);
    } else if (c == '(') {
        if (++p->depth > QHX_GM_MAX_NEST) return gb_fail(p->b, QHX_E_LIMIT, "grammar: parentheses nest deeper than %d", QHX_GM_MAX_NEST);
        p->s++;
        int32_t g = gb_rule_anon(p->b, r);
        if (g < 0 || parse_alts(p, g, true)) rc = -1;
        else if (at_end(p) || *p->s != ')') rc = perr(p, "expected ')'");
        else {
            p->s++;
            rc = piece_push(p, &pc, GM_REF, g);
        }
        p->depth--;
    } else if (name_char(c)) {
        const char *n0 = p->s;
        while (!at_end(p) && name_char(*p->s)) p->s++;
        const char *q = p->s;
        while (q < p->end && (*q == ' ' || *q == '\t')) q++;
        if (p->end - q >= 3 && !memcmp(q, "::=", 3)) { /* the next rule begins: this one ended */
            p->s = n0;
            return 1;
        }
        int32_t ref = gb_rule_named(p->b, n0, (size_t)(p->s - n0));
        rc = ref < 0 ? -1 : piece_push(p, &pc, GM_REF, ref);
    } else if (c == '<') {
        return perr(p, "token references (<...>) are not supported");
    } else {
        return 1;
    }
    while (!rc && !at_end(p) && (*p->s == '*' || *p->s == '+' || *p->s == '?' || *p->s == '{')) {
        int64_t m = 0, n = 0;
        char op = *p->s;
        if (op == '{') rc = parse_braces(p, &m, &n);
        else {
            p->s++;
            m = op == '+' ? 1 : 0;
            n = op == '?' ? 1 : -1;
        }
        if (rc) break;
        gm_elem x;
        if (pc.n == 1) x = pc.e[0];
        else { /* several elements (a literal): wrap them in a rule */
            int32_t w = gb_rule_anon(p->b, r);
            for (int32_t i = 0; i < pc.n; i++) gb_push(p->b, w, pc.e[i].kind, pc.e[i].arg);
            gb_end(p->b, w);
            x = (gm_elem){GM_REF, w};
        }
        int32_t t = gb_rule_anon(p->b, r); /* the repetition as its own rule, so operators chain */
        push_repeat(p->b, t, x, m, n);
        gb_end(p->b, t);
        pc.n = 0;
        if (piece_push(p, &pc, GM_REF, t)) rc = -1;
        if (p->b->rc) rc = -1;
    }
    for (int32_t i = 0; !rc && i < pc.n; i++) gb_push(p->b, r, pc.e[i].kind, pc.e[i].arg);
    qhx_free(pc.e);
    return rc || p->b->rc ? -1 : 0;
}

static int parse_seq(ps *p, int32_t r, bool nested) {
    for (;;) {
        skip_space(p, nested);
        if (at_end(p)) break;
        int t = parse_term(p, r);
        if (t < 0) return -1;
        if (t == 1) break;
    }
    gb_end(p->b, r);
    return p->b->rc ? -1 : 0;
}

static int parse_alts(ps *p, int32_t r, bool nested) {
    if (parse_seq(p, r, nested)) return -1;
    while (!at_end(p) && *p->s == '|') {
        p->s++;
        if (parse_seq(p, r, nested)) return -1;
    }
    return 0;
}

static int parse_rule(ps *p) {
    const char *n0 = p->s;
    while (!at_end(p) && name_char(*p->s)) p->s++;
    if (p->s == n0) return perr(p, "expected a rule name");
    size_t nlen = (size_t)(p->s - n0);
    skip_space(p, false);
    if (p->end - p->s < 3 || memcmp(p->s, "::=", 3)) return perr(p, "expected '::='");
    p->s += 3;
    int32_t r = gb_rule_named(p->b, n0, nlen);
    if (r < 0) return -1;
    if (p->b->rules[r].defined) return perr(p, "rule defined twice");
    p->b->rules[r].defined = true;
    if (parse_alts(p, r, false)) return -1;
    skip_space(p, false);
    if (!at_end(p) && *p->s != '\n' && !name_char(*p->s)) return perr(p, "unexpected character");
    return 0;
}

/* The rule definitions in text, counted before anything is built so that a text over the cap
 * is refused at once: lines that start (after blanks) with a name and '::='. Each such line is
 * a definition (or a syntax error); definitions that share a line are counted by the cap in
 * the builder instead, which parsing meets in linear time too. */
static size_t count_definitions(const char *s, size_t len) {
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r')) i++;
        size_t n0 = i;
        while (i < len && name_char(s[i])) i++;
        bool named = i > n0;
        while (i < len && (s[i] == ' ' || s[i] == '\t')) i++;
        if (named && len - i >= 3 && !memcmp(s + i, "::=", 3)) n++;
        const char *nl = memchr(s + i, '\n', len - i);
        i = nl ? (size_t)(nl - s) + 1 : len;
    }
    return n;
}

qhx_status qhx_gm_parse(const char *text, size_t len, const char *root, qhx_gm **out, qhx_error *err) {
    return gm_parse_labeled(text, len, root, NULL, NULL, out, err);
}

qhx_status gm_parse_labeled(const char *text, size_t len, const char *root, gb_label_fn label, void *ctx, qhx_gm **out,
                            qhx_error *err) {
    if (!out) return qhx_fail(err, QHX_E_ARG, "grammar: out is NULL");
    *out = NULL;
    if (!text && len) return qhx_fail(err, QHX_E_ARG, "grammar: text is NULL");
    if (len > QHX_GM_MAX_TEXT) return qhx_fail(err, QHX_E_LIMIT, "grammar: %zu bytes, the limit is %zu", len, QHX_GM_MAX_TEXT);
    if (!root) root = "root";
    size_t n_defs = count_definitions(text, len);
    if (n_defs > QHX_GM_MAX_RULES)
        return qhx_fail(err, QHX_E_LIMIT, "grammar: %zu rule definitions, the limit is %d", n_defs, QHX_GM_MAX_RULES);
    gm_builder b;
    gb_init(&b, err);
    b.label = label;
    b.label_ctx = ctx;
    ps p = {.s = text, .end = text + len, .base = text, .b = &b, .scratch = -1};
    for (;;) {
        skip_space(&p, true);
        if (at_end(&p) || parse_rule(&p)) break;
    }
    int32_t r = -1;
    if (!b.rc) {
        r = gb_rule_find(&b, root, strlen(root));
        if (r >= 0 && !b.rules[r].defined) r = -1;
        if (r < 0) gb_fail(&b, QHX_E_FORMAT, "grammar: no rule '%s' (the start rule)", root);
    }
    qhx_status rc = b.rc ? b.rc : gb_finish(&b, r, out);
    gb_deinit(&b);
    return rc;
}
