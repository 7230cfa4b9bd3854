/* grammar/schema.c: a JSON Schema (the subset of docs/grammar.md) -> GBNF text, then the
 * grammar. Every keyword is either handled, an annotation (title, description, ...), or an
 * error naming it and where it is: nothing is silently dropped.
 *
 * The output is always a subset of what the schema accepts, chosen so that every sentence
 * validates: properties come in a fixed order (required first), extra keys are ASCII without
 * escapes and never equal a declared name, \u escapes leave out surrogates (so lengths count
 * as a validator counts), bounded numbers have no exponent, formats are strict patterns
 * (dates up to the 28th). */
#include "grammar/gm_internal.h"
#include "grammar/gm_schema.h"

#include "core/alloc.h"
#include "io/json.h"

#include <math.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- context ---------------------------------------------------------------------------------- */

typedef struct ref_entry {
    char *ref;
    char name[24];
} ref_entry;

/* Where the rules come from, for messages: rules s<first> on were made at path (each range
 * starts where the path changed); why: the rules that stand for a contradiction, by name. */
typedef struct rule_origin {
    int first;
    char *path;
} rule_origin;

typedef struct sc {
    json_t *root;
    sb out;
    int n_rules;
    int depth;
    ref_entry *refs;
    int n_refs, cap_refs, ref_serial;
    json_t *ref_index; /* ref text -> index into refs */
    rule_origin *origin;
    int n_origin, cap_origin;
    json_t *ref_paths; /* "refN" -> the reference it resolves */
    json_t *why;       /* "sN" -> why no value satisfies it */
    char path[512];
    qhx_error *err;
    qhx_status rc;
} sc;

static int fail(sc *c, qhx_status code, const char *fmt, ...) QHX_PRINTF(3, 4);
static int fail(sc *c, qhx_status code, const char *fmt, ...) {
    if (c->rc) return -1;
    c->rc = code;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t pl = strlen(c->path);
    const char *where = pl > 120 ? c->path + pl - 100 : c->path[0] ? c->path : "#";
    qhx_fail(c->err, code, "json schema: %s%s: %s", pl > 120 ? "..." : "", where, msg);
    return -1;
}

/* k new rules s<n_rules + 1> ..; the first one's number. Their origin is the current path. */
static int more_rules(sc *c, int k) {
    int first = c->n_rules + 1;
    c->n_rules += k;
    const char *here = c->path[0] ? c->path : "#";
    if (c->n_origin && !strcmp(c->origin[c->n_origin - 1].path, here)) return first;
    if (c->n_origin == c->cap_origin) {
        int cap = c->cap_origin ? c->cap_origin * 2 : 32;
        rule_origin *o = qhx_realloc(c->origin, (size_t)cap * sizeof *o);
        if (!o) return fail(c, QHX_E_NOMEM, "out of memory"), first;
        c->origin = o;
        c->cap_origin = cap;
    }
    char *p = qhx_strdup(here);
    if (!p) return fail(c, QHX_E_NOMEM, "out of memory"), first;
    c->origin[c->n_origin++] = (rule_origin){first, p};
    return first;
}

static void new_rule(sc *c, char name[24]) { snprintf(name, 24, "s%d", more_rules(c, 1)); }

/* A rule no value satisfies (an empty character class), for a contradiction in the schema: the
 * grammar's emptiness check decides whether the whole schema is empty (a contradiction inside
 * one branch of anyOf, or an optional property, leaves the rest); if it is, why is the
 * message. */
static int never(sc *c, char name[24], const char *fmt, ...) QHX_PRINTF(3, 4);
static int never(sc *c, char name[24], const char *fmt, ...) {
    char msg[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    new_rule(c, name);
    if (!c->why && !(c->why = json_object())) return fail(c, QHX_E_NOMEM, "out of memory");
    json_object_set_new(c->why, name, json_string_nocheck(msg));
    return sb_printf(&c->out, "%s ::= []\n", name);
}

/* Shared rules, written once at the top. */
static const char PRELUDE[] =
    /* one space, or a line break and an indentation: room for pretty printing, none for a
     * model that would pad forever */
    "j-ws ::= (\" \" | \"\\n\" \" \"{0,16})?\n"
    "j-hex ::= [0-9a-fA-F]\n"
    /* \u escapes leave out the surrogates D800-DFFF: a pair would count as one character */
    "j-uesc ::= \"u\" ([0-9a-cA-CefEF] j-hex j-hex j-hex | [dD] [0-7] j-hex j-hex)\n"
    "j-char ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | j-uesc)\n"
    "j-string ::= \"\\\"\" j-char* \"\\\"\"\n"
    "j-int ::= \"-\"? (\"0\" | [1-9] [0-9]{0,15})\n"
    "j-number ::= j-int (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})?\n"
    "j-boolean ::= \"true\" | \"false\"\n"
    "j-null ::= \"null\"\n"
    "j-value ::= j-object | j-array | j-string | j-number | j-boolean | j-null\n"
    "j-member ::= j-string j-ws \":\" j-ws j-value j-ws\n"
    "j-object ::= \"{\" j-ws (j-member (\",\" j-ws j-member)*)? \"}\"\n"
    "j-array ::= \"[\" j-ws (j-value j-ws (\",\" j-ws j-value j-ws)*)? \"]\"\n"
    /* extra keys: printable ASCII without escapes, so a key's text is its value */
    "j-kchar ::= [ !#-\\[\\]-~]\n";

static int comp(sc *c, json_t *s, char name[24]);

/* ---- keywords --------------------------------------------------------------------------------- */

static bool is_annotation(const char *k) {
    static const char *const a[] = {"$schema", "$id", "$comment", "title", "description", "default", "examples",
                                    "deprecated", "readOnly", "writeOnly", "$defs", "definitions", "$anchor",
                                    "contentMediaType", "contentEncoding"};
    for (size_t i = 0; i < sizeof a / sizeof a[0]; i++)
        if (!strcmp(k, a[i])) return true;
    return false;
}

/* Every key of s is an annotation or in allowed (NULL-terminated); else the error names it. */
static int check_keys(sc *c, json_t *s, const char *const *allowed) {
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v) {
        (void)v;
        if (is_annotation(k)) continue;
        bool ok = false;
        for (size_t i = 0; allowed[i] && !ok; i++) ok = !strcmp(k, allowed[i]);
        if (!ok) return fail(c, QHX_E_UNSUPPORTED, "'%s' is not supported here (docs/grammar.md lists the subset)", k);
    }
    return 0;
}

/* Append "/seg" to the path for the duration of a sub-compile. */
static size_t path_push(sc *c, const char *seg) {
    size_t at = strlen(c->path);
    if (!at) snprintf(c->path, sizeof c->path, "#");
    size_t n = strlen(c->path);
    snprintf(c->path + n, sizeof c->path - n, "/%s", seg);
    return at;
}
static void path_pop(sc *c, size_t at) { c->path[at] = '\0'; }

static int comp_at(sc *c, json_t *s, const char *seg, char name[24]) {
    size_t at = path_push(c, seg);
    int rc = comp(c, s, name);
    if (!rc) path_pop(c, at);
    return rc;
}

/* Whether v is of the JSON Schema type named t ("integer": a number with no fraction). */
static bool of_type(json_t *v, const char *t) {
    if (!strcmp(t, "integer")) return json_is_integer(v) || (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)));
    if (!strcmp(t, "number")) return json_is_number(v);
    if (!strcmp(t, "string")) return json_is_string(v);
    if (!strcmp(t, "boolean")) return json_is_boolean(v);
    if (!strcmp(t, "null")) return json_is_null(v);
    if (!strcmp(t, "object")) return json_is_object(v);
    if (!strcmp(t, "array")) return json_is_array(v);
    return false;
}

/* Whether v satisfies "type" (a name or a list of names; absent: anything). */
static int type_allows(sc *c, json_t *type, json_t *v, bool *ok) {
    *ok = true;
    if (!type) return 0;
    if (json_is_string(type)) {
        *ok = of_type(v, json_string_value(type));
        return 0;
    }
    if (!json_is_array(type)) return fail(c, QHX_E_FORMAT, "'type' must be a type name or a list of them");
    *ok = false;
    for (size_t i = 0; i < json_array_size(type); i++) {
        json_t *t = json_array_get(type, i);
        if (!json_is_string(t)) return fail(c, QHX_E_FORMAT, "'type' must hold strings");
        *ok |= of_type(v, json_string_value(t));
    }
    return 0;
}

/* enum / const: the values as literals, those "type" leaves out dropped (a value of another
 * type would not validate). None left: a contradiction (never). */
static int comp_enum(sc *c, json_t *s, char name[24]) {
    json_t *e = json_object_get(s, "enum"), *k = json_object_get(s, "const"), *type = json_object_get(s, "type");
    if (e && (!json_is_array(e) || json_array_size(e) == 0))
        return fail(c, QHX_E_FORMAT, "'enum' must be a non-empty array");
    if (e && json_array_size(e) > QHX_GM_MAX_REPEAT)
        return fail(c, QHX_E_LIMIT, "'enum' has %zu values, the limit is %d", json_array_size(e), QHX_GM_MAX_REPEAT);
    size_t n = k ? 1 : json_array_size(e), kept = 0;
    sb alts = {0};
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        json_t *v = k ? k : json_array_get(e, i);
        bool ok;
        if ((rc = type_allows(c, type, v, &ok)) || !ok) continue;
        char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        if (!t) {
            rc = fail(c, QHX_E_NOMEM, "out of memory");
            break;
        }
        if (kept++) sb_put(&alts, " | ", 3);
        sb_lit(&alts, t, strlen(t));
        qhx_free(t); /* jansson allocates through the funnel */
    }
    if (!rc && alts.failed) rc = fail(c, alts.failed == 2 ? QHX_E_LIMIT : QHX_E_NOMEM, "'enum' is too large");
    if (!rc && !kept) {
        char *ts = json_dumps(type, JSON_COMPACT | JSON_ENCODE_ANY);
        if (k) {
            char *ks = json_dumps(k, JSON_COMPACT | JSON_ENCODE_ANY);
            rc = never(c, name, "'const' %.60s is not of 'type' %.60s: no value satisfies both", ks ? ks : "?", ts ? ts : "?");
            qhx_free(ks);
        } else {
            rc = never(c, name, "no value of 'enum' is of 'type' %.60s: no value satisfies both", ts ? ts : "?");
        }
        qhx_free(ts);
    } else if (!rc) {
        new_rule(c, name);
        sb_printf(&c->out, "%s ::= ", name);
        sb_put(&c->out, alts.p, alts.n);
        sb_put(&c->out, "\n", 1);
    }
    qhx_free(alts.p);
    return rc;
}

/* ---- $ref ------------------------------------------------------------------------------------- */

static int hex_val(char ch) {
    return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
}

/* The schema a local reference names ("#", "#/$defs/x", any JSON pointer into the document).
 * The pointer is a URI fragment: percent escapes (%20, %25) are decoded first, then the JSON
 * pointer's own ~1 ('/') and ~0 ('~'), each segment on its own (so "~01" is "~1"). */
static json_t *resolve(sc *c, const char *ref) {
    if (ref[0] != '#') return fail(c, QHX_E_UNSUPPORTED, "'$ref' '%s': only local references (#...) are supported", ref), NULL;
    json_t *at = c->root;
    const char *p = ref + 1;
    if (*p && *p != '/') return fail(c, QHX_E_UNSUPPORTED, "'$ref' '%s': anchors are not supported", ref), NULL;
    while (*p == '/') {
        p++;
        char raw[256], seg[256];
        size_t n = 0, k = 0;
        for (; *p && *p != '/'; n++) {
            char ch = *p++;
            if (ch == '%') {
                int hi = hex_val(p[0]), lo = hi < 0 ? -1 : hex_val(p[1]);
                if (lo < 0) return fail(c, QHX_E_FORMAT, "'$ref' '%s': '%%' must start a two-digit hex escape", ref), NULL;
                ch = (char)(hi << 4 | lo);
                p += 2;
            }
            if (n + 1 >= sizeof raw) return fail(c, QHX_E_LIMIT, "'$ref' '%s': a segment is longer than %zu bytes", ref, sizeof raw - 1), NULL;
            raw[n] = ch;
        }
        for (size_t i = 0; i < n; i++) {
            char ch = raw[i];
            if (ch == '~') {
                if (i + 1 >= n || (raw[i + 1] != '0' && raw[i + 1] != '1'))
                    return fail(c, QHX_E_FORMAT, "'$ref' '%s': '~' must be followed by 0 or 1 in a JSON pointer", ref), NULL;
                ch = raw[++i] == '0' ? '~' : '/';
            }
            seg[k++] = ch;
        }
        if (json_is_object(at)) at = json_object_getn(at, seg, k);
        else if (json_is_array(at)) {
            seg[k] = '\0';
            char *end;
            long i = strtol(seg, &end, 10);
            at = *end || !k || i < 0 || (seg[0] == '0' && k > 1) ? NULL : json_array_get(at, (size_t)i);
        } else at = NULL;
        if (!at) return fail(c, QHX_E_FORMAT, "'$ref' '%s' names nothing in the document", ref), NULL;
    }
    return at;
}

static int comp_ref(sc *c, const char *ref, char name[24]) {
    if (!c->ref_index && !(c->ref_index = json_object())) return fail(c, QHX_E_NOMEM, "out of memory");
    json_t *known = json_object_get(c->ref_index, ref);
    if (known) {
        memcpy(name, c->refs[json_integer_value(known)].name, 24);
        return 0;
    }
    json_t *target = resolve(c, ref);
    if (!target) return -1;
    if (c->n_refs == c->cap_refs) {
        int cap = c->cap_refs ? c->cap_refs * 2 : 8;
        ref_entry *r = qhx_realloc(c->refs, (size_t)cap * sizeof *r);
        if (!r) return fail(c, QHX_E_NOMEM, "out of memory");
        c->refs = r;
        c->cap_refs = cap;
    }
    ref_entry *e = &c->refs[c->n_refs];
    if (!(e->ref = qhx_strdup(ref))) return fail(c, QHX_E_NOMEM, "out of memory");
    /* the rule's name is known before its body is compiled, so a recursive schema refers to it */
    snprintf(e->name, sizeof e->name, "ref%d", ++c->ref_serial);
    memcpy(name, e->name, 24);
    if (json_object_set_new(c->ref_index, ref, json_integer(c->n_refs)) ||
        (!c->ref_paths && !(c->ref_paths = json_object())) || json_object_set_new(c->ref_paths, e->name, json_string(ref)))
        return qhx_free(e->ref), fail(c, QHX_E_NOMEM, "out of memory");
    c->n_refs++;
    char body[24];
    char saved[sizeof c->path];
    memcpy(saved, c->path, sizeof saved);
    snprintf(c->path, sizeof c->path, "%s", ref);
    if (comp(c, target, body)) return -1;
    memcpy(c->path, saved, sizeof saved);
    return sb_printf(&c->out, "%s ::= %s\n", name, body);
}

/* ---- strings ---------------------------------------------------------------------------------- */

static int get_count(sc *c, json_t *s, const char *key, int64_t dflt, int64_t *out) {
    json_t *v = json_object_get(s, key);
    *out = dflt;
    if (!v) return 0;
    if (!json_is_integer(v) && !(json_is_real(v) && json_real_value(v) == floor(json_real_value(v))))
        return fail(c, QHX_E_FORMAT, "'%s' must be a non-negative integer", key);
    double d = json_number_value(v);
    if (d < 0) return fail(c, QHX_E_FORMAT, "'%s' must be a non-negative integer", key);
    if (d > QHX_GM_MAX_REPEAT) return fail(c, QHX_E_LIMIT, "'%s' %g is above the limit %d", key, d, QHX_GM_MAX_REPEAT);
    *out = (int64_t)d;
    return 0;
}

static const char *format_rule(const char *f) {
    static const char *const fm[][2] = {
        {"date", "[1-9] [0-9]{3} \"-\" (\"0\" [1-9] | \"1\" [0-2]) \"-\" (\"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8])"},
        {"time", "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,6})? (\"Z\" | [+-] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])"},
        {"uuid", "j-hex{8} \"-\" j-hex{4} \"-\" j-hex{4} \"-\" j-hex{4} \"-\" j-hex{12}"},
        {"email", "[a-zA-Z0-9_+-]{1,32} (\".\" [a-zA-Z0-9_+-]{1,32}){0,2} \"@\" [a-zA-Z0-9] [a-zA-Z0-9-]{0,30} (\".\" [a-zA-Z]{2,8}){1,2}"},
    };
    for (size_t i = 0; i < sizeof fm / sizeof fm[0]; i++)
        if (!strcmp(f, fm[i][0])) return fm[i][1];
    return NULL;
}

static int comp_string(sc *c, json_t *s, char name[24]) {
    json_t *fmt = json_object_get(s, "format"), *pat = json_object_get(s, "pattern");
    bool lens = json_object_get(s, "minLength") || json_object_get(s, "maxLength");
    if ((fmt || pat) && lens) return fail(c, QHX_E_UNSUPPORTED, "'minLength'/'maxLength' together with '%s'", fmt ? "format" : "pattern");
    if (fmt && pat) return fail(c, QHX_E_UNSUPPORTED, "'format' together with 'pattern'");
    if (fmt) {
        if (!json_is_string(fmt)) return fail(c, QHX_E_FORMAT, "'format' must be a string");
        const char *f = json_string_value(fmt);
        const char *body = format_rule(f);
        char dt[600];
        if (!strcmp(f, "date-time")) {
            snprintf(dt, sizeof dt, "%s \"T\" %s", format_rule("date"), format_rule("time"));
            body = dt;
        }
        if (!body) return fail(c, QHX_E_UNSUPPORTED, "'format' '%s' is not supported (date, time, date-time, uuid, email)", f);
        new_rule(c, name);
        return sb_printf(&c->out, "%s ::= \"\\\"\" %s \"\\\"\"\n", name, body);
    }
    if (pat) {
        if (!json_is_string(pat)) return fail(c, QHX_E_FORMAT, "'pattern' must be a string");
        new_rule(c, name);
        sb_printf(&c->out, "%s ::= \"\\\"\" ", name);
        char why[200];
        if (gm_regex_to_gbnf(json_string_value(pat), &c->out, why, sizeof why))
            return fail(c, QHX_E_UNSUPPORTED, "'pattern': %s", why);
        return sb_printf(&c->out, " \"\\\"\"\n");
    }
    int64_t lo, hi;
    if (get_count(c, s, "minLength", 0, &lo) || get_count(c, s, "maxLength", -1, &hi)) return -1;
    if (hi >= 0 && hi < lo)
        return never(c, name, "'maxLength' %lld is below 'minLength' %lld: no string satisfies both", (long long)hi, (long long)lo);
    if (!lens) {
        snprintf(name, 24, "j-string");
        return 0;
    }
    new_rule(c, name);
    if (hi < 0) return sb_printf(&c->out, "%s ::= \"\\\"\" j-char{%lld,} \"\\\"\"\n", name, (long long)lo);
    return sb_printf(&c->out, "%s ::= \"\\\"\" j-char{%lld,%lld} \"\\\"\"\n", name, (long long)lo, (long long)hi);
}

/* ---- numbers ---------------------------------------------------------------------------------- */

#define NUM_LIMIT 1e15

/* A bound of a number: minimum / exclusiveMinimum, maximum / exclusiveMaximum, the tighter one
 * when both are there. key: the keyword it came from (for messages). */
typedef struct nbound {
    bool set, excl;
    double v;
    const char *key;
} nbound;

static int read_bounds(sc *c, json_t *s, nbound *lo, nbound *hi) {
    static const char *const keys[4] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
    *lo = *hi = (nbound){0};
    for (int k = 0; k < 4; k++) {
        json_t *v = json_object_get(s, keys[k]);
        if (!v) continue;
        if (!json_is_number(v)) return fail(c, QHX_E_UNSUPPORTED, "'%s' must be a number (draft 4 booleans are not supported)", keys[k]);
        double d = json_number_value(v);
        if (!(fabs(d) <= NUM_LIMIT)) return fail(c, QHX_E_LIMIT, "'%s' %g is beyond +-1e15", keys[k], d);
        nbound *b = k < 2 ? lo : hi;
        bool excl = k & 1, tighter = !b->set || (k < 2 ? d > b->v : d < b->v) || (d == b->v && excl);
        if (tighter) *b = (nbound){true, excl, d, keys[k]};
    }
    return 0;
}

/* The integers the bounds allow: [*ilo, *ihi] on the sides that are set. */
static void int_bounds(const nbound *lo, const nbound *hi, int64_t *ilo, int64_t *ihi) {
    *ilo = *ihi = 0;
    if (lo->set) *ilo = lo->excl ? (int64_t)floor(lo->v) + 1 : (int64_t)ceil(lo->v);
    if (hi->set) *ihi = hi->excl ? (int64_t)ceil(hi->v) - 1 : (int64_t)floor(hi->v);
}

/* Digits of x (x >= 0). */
static int n_digits(int64_t x) {
    int n = 1;
    while (x >= 10) x /= 10, n++;
    return n;
}

/* Numbers of equal length from a to z (decimal strings of n digits, a <= z) as GBNF. */
static void same_len(sb *b, const char *a, const char *z, int n) {
    if (n == 0) return;
    if (!memcmp(a, z, (size_t)n)) {
        sb_lit(b, a, (size_t)n);
        return;
    }
    if (a[0] == z[0]) {
        sb_printf(b, "\"%c\" ", a[0]);
        same_len(b, a + 1, z + 1, n - 1);
        return;
    }
    bool a_zeros = true, z_nines = true;
    for (int i = 1; i < n; i++) a_zeros &= a[i] == '0', z_nines &= z[i] == '9';
    if (a_zeros && z_nines) {
        sb_printf(b, "[%c-%c]", a[0], z[0]);
        if (n > 1) sb_printf(b, " [0-9]{%d}", n - 1);
        return;
    }
    char nines[20], zeros[20];
    memset(nines, '9', sizeof nines);
    memset(zeros, '0', sizeof zeros);
    sb_put(b, "(", 1);
    sb_printf(b, "\"%c\" ", a[0]);
    same_len(b, a + 1, nines, n - 1);
    if (a[0] + 1 <= z[0] - 1) {
        sb_printf(b, " | [%c-%c]", a[0] + 1, z[0] - 1);
        if (n > 1) sb_printf(b, " [0-9]{%d}", n - 1);
    }
    sb_printf(b, " | \"%c\" ", z[0]);
    same_len(b, zeros, z + 1, n - 1);
    sb_put(b, ")", 1);
}

/* Non-negative integers a..z (z < 0: unbounded, up to 16 digits) as GBNF alternatives. */
static void nonneg(sb *b, int64_t a, int64_t z) {
    int da = n_digits(a), dz = z < 0 ? 16 : n_digits(z);
    sb_put(b, "(", 1);
    for (int d = da; d <= dz; d++) {
        int64_t lo = d == da ? a : 1, hi;
        for (int i = 1; d != da && i < d; i++) lo *= 10;
        int64_t top = 9;
        for (int i = 1; i < d; i++) top = top * 10 + 9;
        hi = z >= 0 && d == dz ? z : top;
        if (d != da) sb_put(b, " | ", 3);
        if (z < 0 && d > da) { /* every longer number */
            sb_printf(b, "[1-9] [0-9]{%d,15}", d - 1);
            break;
        }
        char sa[24], sz[24];
        snprintf(sa, sizeof sa, "%lld", (long long)lo);
        snprintf(sz, sizeof sz, "%lld", (long long)hi);
        same_len(b, sa, sz, d);
    }
    sb_put(b, ")", 1);
}

/* Integers in [lo, hi] (unbounded sides as flagged) as one GBNF group. */
static void int_range(sb *b, bool has_lo, int64_t lo, bool has_hi, int64_t hi) {
    bool any = false;
    sb_put(b, "(", 1);
    if (!has_lo || lo < 0) { /* negatives: -(magnitudes) */
        int64_t mlo = has_hi && hi < 0 ? -hi : 1, mhi = has_lo ? -lo : -1;
        sb_put(b, "\"-\" ", 4);
        nonneg(b, mlo, mhi);
        any = true;
    }
    if (!has_hi || hi >= 0) {
        if (any) sb_put(b, " | ", 3);
        nonneg(b, has_lo && lo > 0 ? lo : 0, has_hi ? hi : -1);
    }
    sb_put(b, ")", 1);
}

/* A non-negative decimal bound as written with at most 6 fraction digits: ip, then f (the
 * 6 digits); strict: the bound itself is excluded. A bound with more digits is rounded
 * inwards (up for a lower bound, down for an upper one) and then included: every number of
 * 6 digits past that is strictly inside. */
typedef struct dec {
    bool set, strict;
    int64_t ip;
    char f[7];
} dec;

static dec to_dec(double m, bool lower, bool excl) {
    dec d = {.set = true};
    double ip = floor(m), x = (m - ip) * 1e6, r = nearbyint(x);
    bool exact = fabs(x - r) < 1e-4; /* 0.1 is 0.1000000000000000055: the text meant 0.1 */
    double f = exact ? r : lower ? ceil(x) : floor(x);
    if (f >= 1e6) f -= 1e6, ip += 1;
    d.ip = (int64_t)ip;
    d.strict = excl && exact;
    snprintf(d.f, sizeof d.f, "%06d", (int)f);
    return d;
}

static bool zeros(const char *s) {
    for (; *s; s++)
        if (*s != '0') return false;
    return true;
}

/* Digit strings D of 1..k digits (0..k when may_stop) whose value as a fraction (D padded
 * with zeros to k digits) is >= a (> when as) and <= z (< when zs); a or z NULL: that side
 * unbounded. As a GBNF group; "[]" when none. */
static void frac_range(sb *b, const char *a, bool as, const char *z, bool zs, bool may_stop) {
    int k = (int)strlen(a ? a : z ? z : "000000");
    if (a && zeros(a) && !as) a = NULL; /* >= 0: no bound at all */
    bool stop = may_stop && (!a || (zeros(a) && !as)) && (!z || !(zeros(z) && zs));
    bool any = false;
    sb_put(b, "(", 1);
    if (stop) sb_put(b, "\"\"", 2), any = true;
    if (k > 0) {
        int lo = a ? a[0] - '0' : 0, hi = z ? z[0] - '0' : 9;
        for (int d = lo; d <= hi; d++) {
            bool on_a = a && d == lo, on_z = z && d == hi;
            if (on_a || on_z) {
                if (any) sb_put(b, " | ", 3);
                sb_printf(b, "\"%d\" ", d);
                frac_range(b, on_a ? a + 1 : NULL, as, on_z ? z + 1 : NULL, zs, true);
                any = true;
                continue;
            }
            int d2 = d; /* a run of free digits */
            while (d2 + 1 <= hi && !(z && d2 + 1 == hi)) d2++;
            if (any) sb_put(b, " | ", 3);
            sb_printf(b, "[%d-%d]", d, d2);
            if (k > 1) sb_printf(b, " [0-9]{0,%d}", k - 1);
            any = true;
            d = d2;
        }
    }
    if (!any) sb_put(b, "[]", 2);
    sb_put(b, ")", 1);
}

/* Whether [a, z] holds no number of at most 6 fraction digits. */
static bool dec_empty(const dec *a, const dec *z) {
    if (!z->set) return false;
    int c = a->ip != z->ip ? (a->ip < z->ip ? -1 : 1) : strcmp(a->f, z->f);
    return c > 0 || (c == 0 && (a->strict || z->strict));
}

/* Non-negative decimals in [a, z] (z unset: unbounded), at most 6 fraction digits, no
 * exponent, as GBNF alternatives (appended after " | " when *any). */
static void magnitudes(sb *b, const dec *a, const dec *z, bool *any) {
    if (dec_empty(a, z)) return;
    /* whole numbers */
    int64_t ilo = a->ip + (!zeros(a->f) || a->strict), ihi = z->set ? z->ip - (zeros(z->f) && z->strict) : -1;
    if (!z->set || ilo <= ihi) {
        sb_put(b, *any ? " | " : "", *any ? 3 : 0), *any = true;
        nonneg(b, ilo, z->set ? ihi : -1);
    }
    /* fractions: any after integer parts strictly between the bounds' own */
    if (!z->set || a->ip + 1 <= z->ip - 1) {
        sb_put(b, *any ? " | " : "", *any ? 3 : 0), *any = true;
        nonneg(b, a->ip + 1, z->set ? z->ip - 1 : -1);
        sb_put(b, " \".\" [0-9]{1,6}", 15);
    }
    char ip[24];
    snprintf(ip, sizeof ip, "\"%lld.\" ", (long long)a->ip);
    sb_put(b, *any ? " | " : "", *any ? 3 : 0), *any = true;
    sb_put(b, ip, strlen(ip));
    if (z->set && z->ip == a->ip) { /* one integer part: the fraction between both */
        frac_range(b, a->f, a->strict, z->f, z->strict, false);
        return;
    }
    frac_range(b, a->f, a->strict, NULL, false, false);
    if (z->set) {
        snprintf(ip, sizeof ip, "\"%lld.\" ", (long long)z->ip);
        sb_put(b, " | ", 3);
        sb_put(b, ip, strlen(ip));
        frac_range(b, NULL, false, z->f, z->strict, false);
    }
}

static int comp_number(sc *c, json_t *s, bool integer, char name[24]) {
    nbound lo, hi;
    if (read_bounds(c, s, &lo, &hi)) return -1;
    if (!lo.set && !hi.set) {
        snprintf(name, 24, integer ? "j-int" : "j-number");
        return 0;
    }
    if (integer) {
        int64_t ilo, ihi;
        int_bounds(&lo, &hi, &ilo, &ihi);
        if (lo.set && hi.set && ihi < ilo)
            return never(c, name, "no integer lies between '%s' %.15g and '%s' %.15g", lo.key, lo.v, hi.key, hi.v);
        new_rule(c, name);
        sb_printf(&c->out, "%s ::= ", name);
        int_range(&c->out, lo.set, ilo, hi.set, ihi);
        return sb_put(&c->out, "\n", 1);
    }
    if (lo.set && hi.set && (lo.v > hi.v || (lo.v == hi.v && (lo.excl || hi.excl))))
        return never(c, name, "no number lies between '%s' %.15g and '%s' %.15g", lo.key, lo.v, hi.key, hi.v);
    /* x >= 0 as its magnitude in [max(lo, 0), hi]; x < 0 as "-" and a magnitude in
     * [max(-hi, 0), -lo] */
    bool any = false;
    sb body = {0};
    if (!hi.set || hi.v >= 0) {
        dec a = lo.set && lo.v >= 0 ? to_dec(lo.v, true, lo.excl) : to_dec(0, true, false);
        dec z = hi.set ? to_dec(hi.v, false, hi.excl) : (dec){0};
        magnitudes(&body, &a, &z, &any);
    }
    if (!lo.set || lo.v < 0) {
        dec a = hi.set && hi.v <= 0 ? to_dec(-hi.v, true, hi.excl) : to_dec(0, true, true);
        dec z = lo.set ? to_dec(-lo.v, false, lo.excl) : (dec){0};
        bool neg = false;
        sb part = {0};
        magnitudes(&part, &a, &z, &neg);
        if (neg) {
            const char *neg_open = any ? " | \"-\" (" : "\"-\" (";
            sb_put(&body, neg_open, strlen(neg_open));
            sb_put(&body, part.p, part.n);
            sb_put(&body, ")", 1);
            any = true;
        }
        qhx_free(part.p);
    }
    int rc = 0;
    if (body.failed) rc = fail(c, QHX_E_NOMEM, "out of memory");
    else if (!any)
        rc = never(c, name, "no number with at most 6 decimals lies between '%s' %.15g and '%s' %.15g", lo.key, lo.v, hi.key, hi.v);
    else {
        new_rule(c, name);
        sb_printf(&c->out, "%s ::= ", name);
        sb_put(&c->out, body.p, body.n);
        rc = sb_put(&c->out, "\n", 1);
    }
    qhx_free(body.p);
    return rc;
}

/* ---- arrays ----------------------------------------------------------------------------------- */

static int comp_array(sc *c, json_t *s, char name[24]) {
    json_t *items = json_object_get(s, "items"), *prefix = json_object_get(s, "prefixItems");
    if (prefix && !json_is_array(prefix)) return fail(c, QHX_E_FORMAT, "'prefixItems' must be an array");
    if (json_is_array(items)) return fail(c, QHX_E_UNSUPPORTED, "'items' as an array (draft 4 tuples): use 'prefixItems'");
    int64_t lo, hi;
    if (get_count(c, s, "minItems", 0, &lo) || get_count(c, s, "maxItems", -1, &hi)) return -1;
    int64_t k = prefix ? (int64_t)json_array_size(prefix) : 0;
    if (k > QHX_GM_MAX_REPEAT) return fail(c, QHX_E_LIMIT, "'prefixItems' has more than %d schemas", QHX_GM_MAX_REPEAT);
    bool more = !(json_is_false(items));
    if (!more && (hi < 0 || hi > k)) hi = k;
    if (hi >= 0 && hi < lo) {
        if (!more && (long long)k < lo)
            return never(c, name, "'minItems' %lld but 'items' is false after %lld 'prefixItems': no array satisfies both", (long long)lo, (long long)k);
        return never(c, name, "'maxItems' %lld is below 'minItems' %lld: no array satisfies both", (long long)hi, (long long)lo);
    }
    char item[24] = "j-value";
    if (items && !json_is_true(items) && more && comp_at(c, items, "items", item)) return -1;
    /* positions with a rule of their own; past them (no maxItems) a repetition of items */
    int64_t n_pos = hi >= 0 ? hi : (lo > k ? lo : k) + 1;
    char (*el)[24] = qhx_malloc((size_t)(n_pos ? n_pos : 1) * sizeof *el);
    if (!el) return fail(c, QHX_E_NOMEM, "out of memory");
    int rc = 0;
    for (int64_t j = 0; j < n_pos && !rc; j++) {
        if (j < k) {
            char seg[40];
            snprintf(seg, sizeof seg, "prefixItems/%lld", (long long)j);
            rc = comp_at(c, json_array_get(prefix, (size_t)j), seg, el[j]);
        } else {
            memcpy(el[j], item, 24);
        }
    }
    if (!rc) {
        /* L_j (rule s<base + j>): what follows element j - 1: element j (optional from
         * minItems on) and L_{j+1}; L_{n_pos}: more items, or nothing */
        char first[24];
        new_rule(c, name);
        new_rule(c, first);
        int base = more_rules(c, (int)n_pos + 1) - 1;
        sb_printf(&c->out, "%s ::= \"[\" j-ws %s \"]\"\n", name, first);
        if (n_pos == 0) sb_printf(&c->out, "%s ::= \"\"\n", first);
        else if (lo == 0) sb_printf(&c->out, "%s ::= (%s j-ws s%d)?\n", first, el[0], base + 1);
        else sb_printf(&c->out, "%s ::= %s j-ws s%d\n", first, el[0], base + 1);
        for (int64_t j = 1; j < n_pos; j++) {
            if (j < lo) sb_printf(&c->out, "s%d ::= \",\" j-ws %s j-ws s%d\n", base + (int)j, el[j], base + 1 + (int)j);
            else sb_printf(&c->out, "s%d ::= (\",\" j-ws %s j-ws s%d)?\n", base + (int)j, el[j], base + 1 + (int)j);
        }
        if (hi < 0) sb_printf(&c->out, "s%d ::= (\",\" j-ws %s j-ws)*\n", base + (int)n_pos, item);
        else if (n_pos > 0) sb_printf(&c->out, "s%d ::= \"\"\n", base + (int)n_pos);
    }
    qhx_free(el);
    return rc;
}

/* ---- objects ---------------------------------------------------------------------------------- */

typedef struct prop {
    const char *key;
    json_t *schema;
    bool required;
} prop;

typedef struct obj_spec {
    prop *p;
    size_t n, cap;
    json_t *additional; /* NULL: none (also for absent: a subset of what the schema allows) */
} obj_spec;

static int add_prop(sc *c, obj_spec *o, const char *key, json_t *schema) {
    for (size_t i = 0; i < o->n; i++)
        if (!strcmp(o->p[i].key, key)) {
            if (schema && o->p[i].schema && !json_equal(schema, o->p[i].schema))
                return fail(c, QHX_E_UNSUPPORTED, "'allOf': property '%s' has two different schemas", key);
            if (schema) o->p[i].schema = schema;
            return 0;
        }
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 8;
        if (cap > QHX_GM_MAX_REPEAT * 2) return fail(c, QHX_E_LIMIT, "more than %d properties", QHX_GM_MAX_REPEAT);
        prop *p = qhx_realloc(o->p, cap * sizeof *p);
        if (!p) return fail(c, QHX_E_NOMEM, "out of memory");
        o->p = p;
        o->cap = cap;
    }
    o->p[o->n++] = (prop){key, schema, false};
    return 0;
}

static json_t *deref(sc *c, json_t *s) {
    for (int hops = 0; json_is_object(s) && json_object_get(s, "$ref"); hops++) {
        if (hops > 64) return fail(c, QHX_E_FORMAT, "'$ref' chain longer than 64 (a cycle?)"), NULL;
        json_t *r = json_object_get(s, "$ref");
        if (!json_is_string(r)) return fail(c, QHX_E_FORMAT, "'$ref' must be a string"), NULL;
        if (!(s = resolve(c, json_string_value(r)))) return NULL;
    }
    return s;
}

/* Gather an object schema (or, for allOf, each branch) into o. */
static int gather_object(sc *c, json_t *s, obj_spec *o, int depth) {
    static const char *const keys[] = {"type", "properties", "required", "additionalProperties", "allOf", "$ref", NULL};
    if (depth > 16) return fail(c, QHX_E_LIMIT, "'allOf' nests deeper than 16");
    if (!(s = deref(c, s))) return -1;
    if (!json_is_object(s)) return fail(c, QHX_E_UNSUPPORTED, "'allOf' of something other than objects");
    if (check_keys(c, s, keys)) return -1;
    json_t *t = json_object_get(s, "type");
    if (t && !(json_is_string(t) && !strcmp(json_string_value(t), "object")))
        return fail(c, QHX_E_UNSUPPORTED, "'allOf' of something other than objects");
    json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
    json_t *add = json_object_get(s, "additionalProperties"), *all = json_object_get(s, "allOf");
    if (props && !json_is_object(props)) return fail(c, QHX_E_FORMAT, "'properties' must be an object");
    if (req && !json_is_array(req)) return fail(c, QHX_E_FORMAT, "'required' must be an array");
    const char *k;
    json_t *v;
    json_object_foreach(props, k, v) if (add_prop(c, o, k, v)) return -1;
    for (size_t i = 0; i < json_array_size(req); i++) {
        json_t *r = json_array_get(req, i);
        if (!json_is_string(r)) return fail(c, QHX_E_FORMAT, "'required' must hold strings");
        if (add_prop(c, o, json_string_value(r), NULL)) return -1;
        for (size_t j = 0; j < o->n; j++)
            if (!strcmp(o->p[j].key, json_string_value(r))) o->p[j].required = true;
    }
    /* a validator applies additionalProperties per schema object, to that object's own
     * properties only: merged with allOf, it would refuse the other branches' properties */
    if (add && !json_is_true(add) && (depth > 0 || all))
        return fail(c, QHX_E_UNSUPPORTED, "'additionalProperties' beside or inside 'allOf' (a validator applies it to one branch's properties)");
    if (add) {
        if (!json_is_boolean(add) && !json_is_object(add)) return fail(c, QHX_E_FORMAT, "'additionalProperties' must be a boolean or a schema");
        if (json_is_false(add) || (o->additional && json_is_false(o->additional))) o->additional = json_false();
        else if (!o->additional) o->additional = add;
        else if (!json_equal(o->additional, add)) return fail(c, QHX_E_UNSUPPORTED, "'allOf' with two different 'additionalProperties'");
    }
    for (size_t i = 0; i < json_array_size(all); i++)
        if (gather_object(c, json_array_get(all, i), o, depth + 1)) return -1;
    return 0;
}

/* Extra keys: a JSON string of printable ASCII (no escapes) that is none of the declared names.
 * A trie over the names: at each node the next byte either follows a name or leaves them all. */
static int emit_extra_key(sc *c, const obj_spec *o, char name[24]) {
    typedef struct tnode {
        int child[95];
        bool term;
    } tnode;
    size_t cap = 1;
    for (size_t i = 0; i < o->n; i++) cap += strlen(o->p[i].key);
    if (cap > 65536) return fail(c, QHX_E_LIMIT, "the property names are too long together");
    tnode *t = qhx_calloc(cap, sizeof *t);
    if (!t) return fail(c, QHX_E_NOMEM, "out of memory");
    size_t n = 1;
    for (size_t i = 0; i < o->n; i++) {
        const unsigned char *k = (const unsigned char *)o->p[i].key;
        bool ascii = true;
        for (const unsigned char *q = k; *q; q++) ascii &= *q >= 0x20 && *q < 0x7F && *q != '"' && *q != '\\';
        if (!ascii) continue; /* an ASCII-only key can never equal it */
        size_t at = 0;
        for (; *k; k++) {
            int ci = *k - 0x20;
            if (!t[at].child[ci]) t[at].child[ci] = (int)n++;
            at = (size_t)t[at].child[ci];
        }
        t[at].term = true;
    }
    int base = more_rules(c, (int)n) - 1;
    snprintf(name, 24, "s%d", base + 1);
    for (size_t i = 0; i < n; i++) {
        sb_printf(&c->out, "s%d ::= ", base + 1 + (int)i);
        bool alt = false;
        if (!t[i].term) sb_put(&c->out, "\"\\\"\"", 4), alt = true;
        char others[400];
        size_t no = 0;
        for (int ci = 0; ci < 95; ci++) {
            char ch = (char)(ci + 0x20);
            if (ch == '"' || ch == '\\') continue;
            if (t[i].child[ci]) {
                if (alt) sb_put(&c->out, " | ", 3);
                sb_lit(&c->out, &ch, 1);
                sb_printf(&c->out, " s%d", base + 1 + t[i].child[ci]);
                alt = true;
            } else {
                if (ch == ']' || ch == '[' || ch == '^' || ch == '-') others[no++] = '\\';
                others[no++] = ch;
            }
        }
        if (no) {
            if (alt) sb_put(&c->out, " | ", 3);
            sb_printf(&c->out, "[%.*s] j-kchar* \"\\\"\"", (int)no, others);
        }
        sb_put(&c->out, "\n", 1);
    }
    qhx_free(t);
    return 0;
}

static int emit_object(sc *c, obj_spec *o, char name[24]) {
    size_t n = o->n;
    char (*val)[24] = qhx_malloc((n ? n : 1) * sizeof *val);
    size_t *order = qhx_malloc((n ? n : 1) * sizeof *order);
    if (!val || !order) {
        qhx_free(val);
        qhx_free(order);
        return fail(c, QHX_E_NOMEM, "out of memory");
    }
    int rc = 0;
    size_t n_req = 0, m = 0;
    for (size_t i = 0; i < n; i++)
        if (o->p[i].required) order[m++] = i;
    n_req = m;
    for (size_t i = 0; i < n; i++)
        if (!o->p[i].required) order[m++] = i;
    for (size_t i = 0; i < n && !rc; i++) {
        char seg[300];
        snprintf(seg, sizeof seg, "properties/%.250s", o->p[i].key);
        if (o->p[i].schema) rc = comp_at(c, o->p[i].schema, seg, val[i]);
        else if (!o->additional || json_is_true(o->additional)) snprintf(val[i], 24, "j-value");
        else if (json_is_false(o->additional)) /* required, not declared, and no other key allowed */
            rc = never(c, val[i], "'required' names '%.100s', which is not in 'properties' and 'additionalProperties' "
                                  "is false: no object satisfies both", o->p[i].key);
        else rc = comp_at(c, o->additional, "additionalProperties", val[i]); /* a required key past 'properties' */
    }
    char extra_key[24] = "", extra_val[24] = "j-value";
    bool extra = o->additional && !json_is_false(o->additional);
    if (!rc && extra && json_is_object(o->additional) && comp_at(c, o->additional, "additionalProperties", extra_val)) rc = -1;
    if (!rc && extra) rc = emit_extra_key(c, o, extra_key);
    if (!rc) {
        /* kv rules, then tails: T_i = the optional members from order[i] on, then the extras */
        int kv = more_rules(c, 2 * (int)n - (int)n_req + 3) - 1, tail = kv + (int)n, top = tail + (int)(n - n_req) + 1;
        for (size_t i = 0; i < n; i++) {
            json_t *ks = json_string(o->p[i].key);
            char *key = ks ? json_dumps(ks, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
            json_decref(ks);
            if (!key) {
                rc = fail(c, QHX_E_NOMEM, "out of memory");
                break;
            }
            sb_printf(&c->out, "s%d ::= ", kv + 1 + (int)i);
            sb_lit(&c->out, key, strlen(key));
            sb_printf(&c->out, " j-ws \":\" j-ws %s j-ws\n", val[i]);
            qhx_free(key);
        }
        char extra_kv[48] = "";
        if (extra) snprintf(extra_kv, sizeof extra_kv, "s%d", top + 2);
        if (extra) sb_printf(&c->out, "%s ::= \"\\\"\" %s j-ws \":\" j-ws %s j-ws\n", extra_kv, extra_key, extra_val);
        size_t n_opt = n - n_req;
        for (size_t j = 0; j < n_opt; j++)
            sb_printf(&c->out, "s%d ::= (\",\" j-ws s%d)? s%d\n", tail + 1 + (int)j, kv + 1 + (int)order[n_req + j], tail + 2 + (int)j);
        if (extra) sb_printf(&c->out, "s%d ::= (\",\" j-ws %s)*\n", tail + 1 + (int)n_opt, extra_kv);
        else sb_printf(&c->out, "s%d ::= \"\"\n", tail + 1 + (int)n_opt);
        new_rule(c, name);
        sb_printf(&c->out, "%s ::= \"{\" j-ws ", name);
        if (n_req) {
            for (size_t j = 0; j < n_req; j++) sb_printf(&c->out, "%ss%d", j ? "\",\" j-ws " : "", kv + 1 + (int)order[j]), sb_put(&c->out, " ", 1);
            sb_printf(&c->out, "s%d", tail + 1);
        } else if (n_opt || extra) { /* the first member is any optional one (or an extra) */
            sb_put(&c->out, "(", 1);
            for (size_t j = 0; j < n_opt; j++)
                sb_printf(&c->out, "%ss%d s%d", j ? " | " : "", kv + 1 + (int)order[j], tail + 2 + (int)j);
            if (extra) sb_printf(&c->out, "%s%s s%d", n_opt ? " | " : "", extra_kv, tail + 1 + (int)n_opt);
            sb_put(&c->out, ")?", 2);
        }
        sb_put(&c->out, " \"}\"\n", 5);
    }
    qhx_free(val);
    qhx_free(order);
    return rc;
}

static int comp_object(sc *c, json_t *s, char name[24]) {
    obj_spec o = {0};
    int rc = gather_object(c, s, &o, 0);
    if (!rc) rc = emit_object(c, &o, name);
    qhx_free(o.p);
    return rc;
}

/* ---- dispatch --------------------------------------------------------------------------------- */

static int comp_typed(sc *c, json_t *s, const char *type, char name[24]) {
    if (!strcmp(type, "object")) return comp_object(c, s, name);
    if (!strcmp(type, "array")) return comp_array(c, s, name);
    if (!strcmp(type, "string")) return comp_string(c, s, name);
    if (!strcmp(type, "integer")) return comp_number(c, s, true, name);
    if (!strcmp(type, "number")) return comp_number(c, s, false, name);
    if (!strcmp(type, "boolean")) return snprintf(name, 24, "j-boolean"), 0;
    if (!strcmp(type, "null")) return snprintf(name, 24, "j-null"), 0;
    return fail(c, QHX_E_UNSUPPORTED, "'type' '%s' is not a JSON Schema type", type);
}

/* The type a schema without "type" means by its keywords, or NULL for any value. */
static const char *implied_type(json_t *s) {
    static const char *const by[][2] = {
        {"properties", "object"}, {"required", "object"}, {"additionalProperties", "object"},
        {"items", "array"}, {"prefixItems", "array"}, {"minItems", "array"}, {"maxItems", "array"},
        {"minLength", "string"}, {"maxLength", "string"}, {"pattern", "string"}, {"format", "string"},
        {"minimum", "number"}, {"maximum", "number"}, {"exclusiveMinimum", "number"}, {"exclusiveMaximum", "number"},
    };
    for (size_t i = 0; i < sizeof by / sizeof by[0]; i++)
        if (json_object_get(s, by[i][0])) return by[i][1];
    return NULL;
}

static int comp_alts(sc *c, json_t *s, const char *key, char name[24]) {
    static const char *const keys[] = {"anyOf", "oneOf", NULL};
    json_t *a = json_object_get(s, key);
    if (check_keys(c, s, keys)) return -1;
    if (json_object_get(s, "anyOf") && json_object_get(s, "oneOf")) return fail(c, QHX_E_UNSUPPORTED, "'anyOf' together with 'oneOf'");
    if (!json_is_array(a) || json_array_size(a) == 0) return fail(c, QHX_E_FORMAT, "'%s' must be a non-empty array", key);
    if (json_array_size(a) > QHX_GM_MAX_REPEAT) return fail(c, QHX_E_LIMIT, "'%s' has more than %d schemas", key, QHX_GM_MAX_REPEAT);
    size_t n = json_array_size(a);
    char (*alt)[24] = qhx_malloc(n * sizeof *alt);
    if (!alt) return fail(c, QHX_E_NOMEM, "out of memory");
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        char seg[40];
        snprintf(seg, sizeof seg, "%s/%zu", key, i);
        rc = comp_at(c, json_array_get(a, i), seg, alt[i]);
    }
    if (!rc) {
        new_rule(c, name);
        sb_printf(&c->out, "%s ::= ", name);
        for (size_t i = 0; i < n; i++) sb_printf(&c->out, "%s%s", i ? " | " : "", alt[i]);
        sb_put(&c->out, "\n", 1);
    }
    qhx_free(alt);
    return rc;
}

static int comp(sc *c, json_t *s, char name[24]) {
    if (c->rc) return -1;
    if (++c->depth > QHX_GM_MAX_NEST) return fail(c, QHX_E_LIMIT, "the schema nests deeper than %d", QHX_GM_MAX_NEST);
    int rc = 0;
    if (json_is_true(s)) {
        snprintf(name, 24, "j-value");
    } else if (json_is_false(s)) {
        rc = never(c, name, "the schema is false: no value satisfies it");
    } else if (!json_is_object(s)) {
        rc = fail(c, QHX_E_FORMAT, "a schema must be an object or a boolean");
    } else if (json_object_get(s, "$ref")) {
        static const char *const keys[] = {"$ref", NULL};
        json_t *r = json_object_get(s, "$ref");
        if (!(rc = check_keys(c, s, keys))) {
            if (!json_is_string(r)) rc = fail(c, QHX_E_FORMAT, "'$ref' must be a string");
            else rc = comp_ref(c, json_string_value(r), name);
        }
    } else if (json_object_get(s, "enum") || json_object_get(s, "const")) {
        static const char *const keys[] = {"enum", "const", "type", NULL};
        if (json_object_get(s, "enum") && json_object_get(s, "const")) rc = fail(c, QHX_E_UNSUPPORTED, "'enum' together with 'const'");
        else if (!(rc = check_keys(c, s, keys))) rc = comp_enum(c, s, name); /* the values say their type */
    } else if (json_object_get(s, "anyOf") || json_object_get(s, "oneOf")) {
        /* oneOf compiles as anyOf: a value matching two branches would be refused by a validator,
         * so oneOf's branches must not overlap (docs/grammar.md) */
        rc = comp_alts(c, s, json_object_get(s, "anyOf") ? "anyOf" : "oneOf", name);
    } else if (json_object_get(s, "allOf")) {
        rc = comp_object(c, s, name);
    } else {
        static const char *const keys[] = {"type", "properties", "required", "additionalProperties", "items",
                                           "prefixItems", "minItems", "maxItems", "minLength", "maxLength",
                                           "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
                                           "exclusiveMaximum", NULL};
        json_t *t = json_object_get(s, "type");
        if ((rc = check_keys(c, s, keys))) {
        } else if (!t) {
            const char *it = implied_type(s);
            if (it) rc = comp_typed(c, s, it, name);
            else snprintf(name, 24, "j-value");
        } else if (json_is_string(t)) {
            rc = comp_typed(c, s, json_string_value(t), name);
        } else if (json_is_array(t) && json_array_size(t) > 0 && json_array_size(t) <= 7) {
            char alt[7][24];
            size_t n = json_array_size(t);
            for (size_t i = 0; i < n && !rc; i++) {
                if (!json_is_string(json_array_get(t, i))) rc = fail(c, QHX_E_FORMAT, "'type' must hold strings");
                else rc = comp_typed(c, s, json_string_value(json_array_get(t, i)), alt[i]);
            }
            if (!rc) {
                new_rule(c, name);
                sb_printf(&c->out, "%s ::= ", name);
                for (size_t i = 0; i < n; i++) sb_printf(&c->out, "%s%s", i ? " | " : "", alt[i]);
                sb_put(&c->out, "\n", 1);
            }
        } else {
            rc = fail(c, QHX_E_FORMAT, "'type' must be a type name or a list of 1 to 7 of them");
        }
    }
    c->depth--;
    return rc;
}

/* ---- entry points ----------------------------------------------------------------------------- */

static void sc_free(sc *c) {
    for (int i = 0; i < c->n_refs; i++) qhx_free(c->refs[i].ref);
    qhx_free(c->refs);
    for (int i = 0; i < c->n_origin; i++) qhx_free(c->origin[i].path);
    qhx_free(c->origin);
    json_decref(c->ref_index);
    json_decref(c->ref_paths);
    json_decref(c->why);
    c->refs = NULL, c->origin = NULL, c->ref_index = c->ref_paths = c->why = NULL;
    c->n_refs = c->n_origin = 0;
}

/* The schema's GBNF into *out; c keeps where each rule came from (for the grammar's messages). */
static qhx_status compile(sc *c, json_t *root, sb *out) {
    char top[24];
    c->root = root;
    sb_put(&c->out, PRELUDE, sizeof PRELUDE - 1);
    int rc = comp(c, root, top);
    if (!rc) sb_printf(&c->out, "root ::= %s\n", top); /* nothing after the value: it ends there */
    if (!rc && c->out.failed) {
        qhx_status code = c->out.failed == 2 ? QHX_E_LIMIT : QHX_E_NOMEM;
        rc = -1;
        c->rc = code;
        qhx_fail(c->err, code, "json schema: %s", code == QHX_E_LIMIT ? "the grammar it makes is too large" : "out of memory");
    }
    if (rc) {
        qhx_free(c->out.p);
        c->out = (sb){0};
        return c->rc ? c->rc : QHX_E_INTERNAL;
    }
    *out = c->out;
    return QHX_OK;
}

/* The grammar's messages in the schema's terms (gm_internal.h, gb_label_fn): a rule "sN" is
 * the JSON pointer it was made at, "refN" the reference; where the language empties, the
 * contradiction never() recorded, or what else made it empty. */
static int schema_label(void *ctx, const char *rule, int why, char *buf, size_t size) {
    const sc *c = ctx;
    const char *where = NULL, *reason = NULL;
    if (rule[0] == 's' && rule[1] >= '0' && rule[1] <= '9') {
        int n = atoi(rule + 1), lo = 0, hi = c->n_origin - 1;
        while (lo < hi) { /* the last range starting at or before n */
            int mid = (lo + hi + 1) / 2;
            if (c->origin[mid].first <= n) lo = mid;
            else hi = mid - 1;
        }
        if (c->n_origin && c->origin[lo].first <= n) where = c->origin[lo].path;
        reason = json_string_value(json_object_get(c->why, rule));
    } else if (!strncmp(rule, "ref", 3)) {
        where = json_string_value(json_object_get(c->ref_paths, rule));
    } else if (!strcmp(rule, "root")) {
        where = "#";
    }
    if (!where) return 0;
    if (why == GB_WHY_WHERE) snprintf(buf, size, "%s", where);
    else if (reason) snprintf(buf, size, "json schema: %s: %s", where, reason);
    else if (why == GB_WHY_CYCLE)
        snprintf(buf, size, "json schema: %s: no finite value satisfies it (its '$ref's lead back into themselves "
                            "with no way out)", where);
    else snprintf(buf, size, "json schema: %s: no value satisfies it", where);
    return 1;
}

/* The schema text parsed and compiled; c keeps the labels (sc_free). */
static qhx_status schema_gbnf(sc *c, const char *json, size_t len, sb *out) {
    if (!json) return qhx_fail(c->err, QHX_E_ARG, "json schema: text is NULL");
    if (len > QHX_GM_MAX_TEXT) return qhx_fail(c->err, QHX_E_LIMIT, "json schema: %zu bytes, the limit is %zu", len, QHX_GM_MAX_TEXT);
    json_t *root = qhx_json_parse_any(json, len, "json schema", c->err);
    if (!root) return c->err ? c->err->code : QHX_E_FORMAT;
    qhx_status rc = compile(c, root, out);
    json_decref(root);
    return rc;
}

qhx_status qhx_gm_schema_to_gbnf(const char *json, size_t len, char **gbnf, size_t *gbnf_len, qhx_error *err) {
    if (!gbnf) return qhx_fail(err, QHX_E_ARG, "json schema: out is NULL");
    *gbnf = NULL;
    if (gbnf_len) *gbnf_len = 0;
    sc c = {.err = err};
    sb out = {0};
    qhx_status rc = schema_gbnf(&c, json, len, &out);
    sc_free(&c);
    if (rc) return rc;
    *gbnf = out.p;
    if (gbnf_len) *gbnf_len = out.n;
    return QHX_OK;
}

qhx_status qhx_gm_from_schema(const char *json, size_t len, qhx_gm **out, qhx_error *err) {
    if (!out) return qhx_fail(err, QHX_E_ARG, "json schema: out is NULL");
    *out = NULL;
    sc c = {.err = err};
    sb text = {0};
    qhx_status rc = schema_gbnf(&c, json, len, &text);
    if (!rc) {
        rc = gm_parse_labeled(text.p, text.n, "root", schema_label, &c, out, err);
        if (rc && err && !strncmp(err->msg, "grammar: ", 9)) { /* the schema's words, not the grammar's */
            char msg[QHX_ERROR_MSG_SIZE];
            snprintf(msg, sizeof msg, "json schema: %s", err->msg + 9);
            memcpy(err->msg, msg, sizeof msg);
        }
    }
    qhx_free(text.p);
    sc_free(&c);
    return rc;
}

qhx_status qhx_gm_json_object(qhx_gm **out, qhx_error *err) {
    static const char schema[] = "{\"type\": \"object\", \"additionalProperties\": true}";
    return qhx_gm_from_schema(schema, sizeof schema - 1, out, err);
}

/* ---- tool calls --------------------------------------------------------------------------------
 * The rest of a forced call in the block form (grammar.h, qhx_gm_call_syntax): each parameter as
 * param_open P param_open_end VALUE '\n' param_close '\n' (required ones first, then optional
 * ones, in the schema's order; no others), then call_end. VALUE is what the chat template prints
 * and the server's parser reads back (tools/qhx/serve/output.c): JSON for every type but strings,
 * which are the text itself. So a string must not read as JSON: it is empty or starts with a
 * letter or '_', holds no '<' (param_close starts with one) and no line break, and is none of
 * true, false, null, True, False, None. */

static const char *const JSONISH[] = {"true", "false", "null", "True", "False", "None"};

/* A string value enum/const may hold as raw text; 0 when it would read back as something else. */
static bool raw_safe(const char *v) {
    if (!*v) return true;
    if (!((*v >= 'a' && *v <= 'z') || (*v >= 'A' && *v <= 'Z') || *v == '_')) return false;
    for (const char *q = v; *q; q++)
        if (*q == '<' || *q == '\n') return false;
    for (int i = 0; i < 6; i++)
        if (!strcmp(v, JSONISH[i])) return false;
    return true;
}

/* The raw-text string rule: a trie over JSONISH so that none of them is a whole value. */
static void emit_raw_string(sc *c, char name[24]) {
    /* nodes: 0 the root, then the prefixes of the six words */
    typedef struct node { char prefix[8]; bool word; } node;
    node nd[40];
    int n = 1;
    nd[0] = (node){"", false};
    for (int w = 0; w < 6; w++)
        for (size_t l = 1; l <= strlen(JSONISH[w]); l++) {
            char pre[8];
            memcpy(pre, JSONISH[w], l);
            pre[l] = '\0';
            int k = 0;
            while (k < n && strcmp(nd[k].prefix, pre)) k++;
            if (k == n) nd[n++] = (node){"", false}, memcpy(nd[k].prefix, pre, l + 1);
            if (l == strlen(JSONISH[w])) nd[k].word = true;
        }
    int base = more_rules(c, n + 1) - 1;
    snprintf(name, 24, "s%d", base + 1);
    int free_rule = base + 1 + n;
    sb_printf(&c->out, "s%d ::= [^<\\n]*\n", free_rule);
    for (int k = 0; k < n; k++) {
        size_t pl = strlen(nd[k].prefix);
        sb_printf(&c->out, "s%d ::= ", base + 1 + k);
        bool alt = false;
        if (!nd[k].word) sb_put(&c->out, "\"\"", 2), alt = true; /* the value may end here */
        char others[200];
        size_t no = 0;
        /* the next character: a child prefix, or any other (letters and '_' first, then any) */
        for (int ch = 0x20; ch < 0x7F; ch++) {
            if (ch == '<') continue;
            if (pl == 0 && !((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_')) continue;
            char pre[8];
            memcpy(pre, nd[k].prefix, pl);
            pre[pl] = (char)ch, pre[pl + 1] = '\0';
            int child = -1;
            for (int j = 0; j < n && pl < 7; j++)
                if (!strcmp(nd[j].prefix, pre)) child = j;
            if (child >= 0) {
                if (alt) sb_put(&c->out, " | ", 3);
                char cc = (char)ch;
                sb_lit(&c->out, &cc, 1);
                sb_printf(&c->out, " s%d", base + 1 + child);
                alt = true;
            } else {
                if (ch == ']' || ch == '[' || ch == '^' || ch == '-' || ch == '\\') others[no++] = '\\';
                others[no++] = (char)ch;
            }
        }
        if (alt) sb_put(&c->out, " | ", 3);
        if (pl == 0) sb_printf(&c->out, "[%.*s] s%d\n", (int)no, others, free_rule);
        else sb_printf(&c->out, "([%.*s] | [^\\x00-\\x7F]) s%d\n", (int)no, others, free_rule);
    }
}

/* The schema of one parameter as a value rule: raw text for strings, JSON otherwise. */
static int tool_value(sc *c, json_t *s, char raw[24], char name[24]) {
    json_t *t = json_is_object(s) ? json_object_get(s, "type") : NULL;
    json_t *e = json_is_object(s) ? json_object_get(s, "enum") : NULL, *k = json_is_object(s) ? json_object_get(s, "const") : NULL;
    bool is_string = json_is_string(t) && !strcmp(json_string_value(t), "string");
    if (e || k) { /* all strings: raw literals; otherwise JSON */
        bool strings = true;
        for (size_t i = 0; e && i < json_array_size(e); i++) strings &= json_is_string(json_array_get(e, i));
        if (k) strings = json_is_string(k);
        if (!strings) return comp(c, s, name);
        new_rule(c, name);
        sb_printf(&c->out, "%s ::= ", name);
        for (size_t i = 0; i < (k ? 1 : json_array_size(e)); i++) {
            const char *v = json_string_value(k ? k : json_array_get(e, i));
            if (!raw_safe(v)) return fail(c, QHX_E_UNSUPPORTED, "the string '%.40s' cannot be written as a tool argument (it would read back as another value)", v);
            if (i) sb_put(&c->out, " | ", 3);
            sb_lit(&c->out, v, strlen(v));
        }
        return sb_put(&c->out, "\n", 1);
    }
    if (!is_string) return comp(c, s, name);
    static const char *const keys[] = {"type", NULL};
    if (check_keys(c, s, keys)) return -1;
    if (!raw[0]) emit_raw_string(c, raw);
    memcpy(name, raw, 24);
    return 0;
}

static int tool_function(sc *c, const qhx_gm_call_syntax *syn, json_t *fn, char name[24]) {
    json_t *params = json_object_get(fn, "parameters");
    if (!params) params = json_object();
    else json_incref(params);
    c->root = params; /* $refs point into this function's schema */
    c->n_refs = 0;
    json_object_clear(c->ref_index);
    json_t *props = json_object_get(params, "properties"), *req = json_object_get(params, "required");
    if (!json_is_object(params) || (props && !json_is_object(props)) || (req && !json_is_array(req))) {
        json_decref(params);
        return fail(c, QHX_E_FORMAT, "'parameters' must be an object schema");
    }
    char raw[24] = "";
    int rc = 0;
    size_t n = json_object_size(props), m = 0;
    char (*kv)[24] = qhx_calloc(n ? n : 1, sizeof *kv);
    bool *required = qhx_calloc(n ? n : 1, sizeof *required);
    if (!kv || !required) rc = fail(c, QHX_E_NOMEM, "out of memory");
    const char *key;
    json_t *v;
    json_object_foreach(props, key, v) {
        if (rc) break;
        for (size_t i = 0; i < json_array_size(req); i++)
            if (json_is_string(json_array_get(req, i)) && !strcmp(json_string_value(json_array_get(req, i)), key)) required[m] = true;
        char val[24], seg[300];
        snprintf(seg, sizeof seg, "properties/%.250s", key);
        size_t at = path_push(c, seg);
        rc = tool_value(c, v, raw, val);
        if (rc) break;
        path_pop(c, at);
        for (const char *q = key; *q; q++)
            if (*q == '>' || *q == '<' || *q == '\n') rc = fail(c, QHX_E_UNSUPPORTED, "the parameter name '%s' cannot be written in a tool call", key);
        if (rc) break;
        new_rule(c, kv[m]);
        char open[600];
        if ((size_t)snprintf(open, sizeof open, "%s%s%s", syn->param_open, key, syn->param_open_end) >= sizeof open) {
            rc = fail(c, QHX_E_UNSUPPORTED, "the parameter name '%.40s...' is too long for a tool call", key);
            break;
        }
        sb_printf(&c->out, "%s ::= ", kv[m]);
        sb_lit(&c->out, open, strlen(open));
        sb_printf(&c->out, " %s ", val);
        char close[300];
        snprintf(close, sizeof close, "\n%s\n", syn->param_close);
        sb_lit(&c->out, close, strlen(close));
        sb_put(&c->out, "\n", 1);
        m++;
    }
    if (!rc) {
        new_rule(c, name);
        sb_printf(&c->out, "%s ::=", name);
        for (size_t i = 0; i < m; i++)
            if (required[i]) sb_printf(&c->out, " %s", kv[i]);
        for (size_t i = 0; i < m; i++)
            if (!required[i]) sb_printf(&c->out, " %s?", kv[i]);
        sb_put(&c->out, " ", 1);
        sb_lit(&c->out, syn->call_end, strlen(syn->call_end));
        sb_put(&c->out, "\n", 1);
    }
    for (int i = 0; i < c->n_refs; i++) qhx_free(c->refs[i].ref);
    c->n_refs = 0;
    json_object_clear(c->ref_index);
    qhx_free(kv);
    qhx_free(required);
    json_decref(params);
    return rc;
}

/* The JSON-object call form: {"name": "NAME", "arguments": ARGS} then call_end, the arguments
 * one JSON value under the function's "parameters" schema; name[] gets the rule for ARGS and the
 * end. */
static int tool_function_json(sc *c, const qhx_gm_call_syntax *syn, json_t *fn, char name[24]) {
    json_t *params = json_object_get(fn, "parameters");
    json_t *own = params ? json_incref(params) : json_pack("{s:s}", "type", "object");
    if (!own || !json_is_object(own)) {
        json_decref(own);
        return fail(c, QHX_E_FORMAT, "'parameters' must be an object schema");
    }
    c->root = own; /* $refs point into this function's schema */
    c->n_refs = 0;
    json_object_clear(c->ref_index);
    char args[24];
    int rc = comp(c, own, args);
    if (!rc) {
        new_rule(c, name);
        sb_printf(&c->out, "%s ::= %s ", name, args);
        sb_lit(&c->out, syn->call_end, strlen(syn->call_end));
        sb_put(&c->out, "\n", 1);
    }
    for (int i = 0; i < c->n_refs; i++) qhx_free(c->refs[i].ref);
    c->n_refs = 0;
    json_object_clear(c->ref_index);
    json_decref(own);
    return rc;
}

static bool syntax_ok(const qhx_gm_call_syntax *s) {
    if (!s || !s->named || !s->call_end) return false;
    return s->json || (s->param_open && s->param_open_end && s->param_close && s->param_close[0] == '<');
}

qhx_status qhx_gm_tool_call_gbnf(const char *const *tools, size_t n_tools, const char *name,
                                 const qhx_gm_call_syntax *syntax, char **gbnf, qhx_error *err) {
    *gbnf = NULL;
    if (!syntax_ok(syntax)) return qhx_fail(err, QHX_E_ARG, "tool call grammar: the call syntax is incomplete");
    const bool json_form = syntax->json;
    sc c = {.err = err};
    sb_put(&c.out, PRELUDE, sizeof PRELUDE - 1);
    char (*fns)[24] = qhx_calloc(n_tools ? n_tools : 1, sizeof *fns);
    const char **names = qhx_calloc(n_tools ? n_tools : 1, sizeof *names);
    json_t **docs = qhx_calloc(n_tools ? n_tools : 1, sizeof *docs);
    int rc = fns && names && docs ? 0 : fail(&c, QHX_E_NOMEM, "out of memory");
    size_t used = 0;
    for (size_t i = 0; i < n_tools && !rc; i++) {
        json_t *tool = docs[i] = qhx_json_parse(tools[i], strlen(tools[i]), "tool", err);
        if (!tool) {
            c.rc = err && err->code ? err->code : QHX_E_FORMAT;
            rc = -1;
            break;
        }
        json_t *fn = json_object_get(tool, "function");
        const char *fname = json_string_value(json_object_get(fn, "name"));
        if (!fname) {
            rc = fail(&c, QHX_E_FORMAT, "tool %zu has no function name", i);
            break;
        }
        if (name && strcmp(name, fname)) continue;
        snprintf(c.path, sizeof c.path, "tools/%.200s/parameters", fname);
        if (json_form)
            for (const char *q = fname; *q && !rc; q++)
                if (*q == '"' || *q == '\\' || (unsigned char)*q < 0x20)
                    rc = fail(&c, QHX_E_UNSUPPORTED, "the function name '%s' cannot be written in a JSON tool call", fname);
        if (!rc) rc = json_form ? tool_function_json(&c, syntax, fn, fns[used]) : tool_function(&c, syntax, fn, fns[used]);
        names[used++] = fname;
    }
    if (!rc && !used) rc = fail(&c, QHX_E_ARG, "no tool named '%s'", name ? name : "");
    if (!rc) {
        sb_put(&c.out, "root ::= ", 9);
        for (size_t i = 0; i < used; i++) {
            if (i) sb_put(&c.out, " | ", 3);
            if (!name) { /* after the opening up to the name: the name, then the rest */
                char open[600];
                snprintf(open, sizeof open, "%.250s%s", names[i], syntax->named);
                sb_lit(&c.out, open, strlen(open));
                sb_put(&c.out, " ", 1);
            }
            sb_printf(&c.out, "%s", fns[i]);
        }
        sb_put(&c.out, "\n", 1);
    }
    for (size_t i = 0; docs && i < n_tools; i++) json_decref(docs[i]);
    sc_free(&c);
    qhx_free(fns);
    qhx_free(names);
    qhx_free(docs);
    if (!rc && c.out.failed) rc = fail(&c, c.out.failed == 2 ? QHX_E_LIMIT : QHX_E_NOMEM, "the grammar is too large");
    if (rc) {
        qhx_free(c.out.p);
        return c.rc ? c.rc : QHX_E_INTERNAL;
    }
    *gbnf = c.out.p;
    return QHX_OK;
}
