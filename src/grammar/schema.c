/* grammar/schema.c: a JSON Schema (the subset of docs/grammar.md) -> GBNF text, then the
 * grammar. Every keyword is either handled, an annotation (title, description, ...), or an
 * error naming it and where it is: nothing is silently dropped.
 *
 * The output is always a subset of what the schema accepts, chosen so that every sentence
 * validates: properties come in a fixed order (required first), extra keys are ASCII without
 * escapes and never equal a declared name, \u escapes leave out surrogates (so lengths count
 * as a validator counts), bounded numbers have no exponent, formats are strict patterns
 * (dates up to the 28th). */
#include "grammar/gm_schema.h"

#include "core/alloc.h"
#include "io/json.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- context ---------------------------------------------------------------------------------- */

typedef struct ref_entry {
    char *ref;
    char name[24];
} ref_entry;

typedef struct sc {
    json_t *root;
    sb out;
    int n_rules;
    int depth;
    ref_entry *refs;
    int n_refs, cap_refs, ref_serial;
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

static void new_rule(sc *c, char name[24]) { snprintf(name, 24, "s%d", ++c->n_rules); }

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

/* A JSON value as a literal (enum, const). */
static int lit_value(sc *c, json_t *v) {
    char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!t) return fail(c, QHX_E_NOMEM, "out of memory");
    sb_lit(&c->out, t, strlen(t));
    qhx_free(t); /* jansson allocates through the funnel */
    return 0;
}

static int comp_enum(sc *c, json_t *s, char name[24]) {
    json_t *e = json_object_get(s, "enum"), *k = json_object_get(s, "const");
    if (e && (!json_is_array(e) || json_array_size(e) == 0))
        return fail(c, QHX_E_FORMAT, "'enum' must be a non-empty array");
    if (e && json_array_size(e) > QHX_GM_MAX_REPEAT)
        return fail(c, QHX_E_LIMIT, "'enum' has %zu values, the limit is %d", json_array_size(e), QHX_GM_MAX_REPEAT);
    new_rule(c, name);
    sb_printf(&c->out, "%s ::= ", name);
    if (k) {
        if (lit_value(c, k)) return -1;
    } else {
        for (size_t i = 0; i < json_array_size(e); i++) {
            if (i) sb_put(&c->out, " | ", 3);
            if (lit_value(c, json_array_get(e, i))) return -1;
        }
    }
    sb_put(&c->out, "\n", 1);
    return 0;
}

/* ---- $ref ------------------------------------------------------------------------------------- */

/* The schema a local reference names ("#", "#/$defs/x", any JSON pointer into the document). */
static json_t *resolve(sc *c, const char *ref) {
    if (ref[0] != '#') return fail(c, QHX_E_UNSUPPORTED, "'$ref' '%s': only local references (#...) are supported", ref), NULL;
    json_t *at = c->root;
    const char *p = ref + 1;
    if (*p && *p != '/') return fail(c, QHX_E_UNSUPPORTED, "'$ref' '%s': anchors are not supported", ref), NULL;
    while (*p == '/') {
        p++;
        char seg[256];
        size_t n = 0;
        while (*p && *p != '/') {
            char ch = *p++;
            if (ch == '~' && (*p == '0' || *p == '1')) ch = *p++ == '0' ? '~' : '/';
            if (n + 1 >= sizeof seg) return fail(c, QHX_E_LIMIT, "'$ref' '%s': a segment is too long", ref), NULL;
            seg[n++] = ch;
        }
        seg[n] = '\0';
        if (json_is_object(at)) at = json_object_get(at, seg);
        else if (json_is_array(at)) {
            char *end;
            long i = strtol(seg, &end, 10);
            at = *end || i < 0 ? NULL : json_array_get(at, (size_t)i);
        } else at = NULL;
        if (!at) return fail(c, QHX_E_FORMAT, "'$ref' '%s' names nothing in the document", ref), NULL;
    }
    return at;
}

static int comp_ref(sc *c, const char *ref, char name[24]) {
    for (int i = 0; i < c->n_refs; i++)
        if (!strcmp(c->refs[i].ref, ref)) {
            memcpy(name, c->refs[i].name, 24);
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
    c->n_refs++;
    char body[24];
    size_t at = strlen(c->path);
    snprintf(c->path, sizeof c->path, "%s", ref);
    if (comp(c, target, body)) return -1;
    c->path[at] = '\0';
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
        return sb_put(&c->out, " \"\\\"\"\n", 5);
    }
    int64_t lo, hi;
    if (get_count(c, s, "minLength", 0, &lo) || get_count(c, s, "maxLength", -1, &hi)) return -1;
    if (hi >= 0 && hi < lo) return fail(c, QHX_E_FORMAT, "'maxLength' %lld is below 'minLength' %lld", (long long)hi, (long long)lo);
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

/* The bounds of s as integers the value may take: [*lo, *hi] (has_lo/has_hi: bounded), and
 * *fhi: the largest integer part a fraction may follow (i + 1 <= the upper bound). */
static int int_bounds(sc *c, json_t *s, bool *has_lo, int64_t *lo, bool *has_hi, int64_t *hi, int64_t *fhi) {
    static const char *const keys[4] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
    *has_lo = *has_hi = false;
    *lo = *hi = *fhi = 0;
    for (int k = 0; k < 4; k++) {
        json_t *v = json_object_get(s, keys[k]);
        if (!v) continue;
        if (!json_is_number(v)) return fail(c, QHX_E_UNSUPPORTED, "'%s' must be a number (draft 4 booleans are not supported)", keys[k]);
        double d = json_number_value(v);
        if (!(fabs(d) <= NUM_LIMIT)) return fail(c, QHX_E_LIMIT, "'%s' %g is beyond +-1e15", keys[k], d);
        if (k < 2) {
            int64_t b = k == 0 ? (int64_t)ceil(d) : (int64_t)floor(d) + 1;
            if (!*has_lo || b > *lo) *lo = b;
            *has_lo = true;
        } else {
            int64_t b = k == 2 ? (int64_t)floor(d) : (int64_t)ceil(d) - 1;
            int64_t f = (int64_t)floor(d) - 1;
            if (!*has_hi || b < *hi) *hi = b, *fhi = f;
            *has_hi = true;
        }
    }
    if (*has_lo && *has_hi && *hi < *lo) return fail(c, QHX_E_FORMAT, "no integer lies between the minimum and the maximum");
    return 0;
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

static int comp_number(sc *c, json_t *s, bool integer, char name[24]) {
    bool has_lo, has_hi;
    int64_t lo, hi, fhi;
    if (int_bounds(c, s, &has_lo, &lo, &has_hi, &hi, &fhi)) return -1;
    if (!has_lo && !has_hi) {
        snprintf(name, 24, integer ? "j-int" : "j-number");
        return 0;
    }
    new_rule(c, name);
    sb_printf(&c->out, "%s ::= ", name);
    int_range(&c->out, has_lo, lo, has_hi, hi);
    int64_t flo = has_lo && lo > 0 ? lo : 0;
    if (!integer && (!has_hi || fhi >= flo)) { /* i.ddd for i + 1 <= the upper bound */
        sb_put(&c->out, " | ", 3);
        nonneg(&c->out, flo, has_hi ? fhi : -1);
        sb_put(&c->out, " \".\" [0-9]{1,6}", 15);
    }
    return sb_put(&c->out, "\n", 1);
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
    if (hi >= 0 && hi < lo) return fail(c, QHX_E_FORMAT, "'maxItems' %lld is below 'minItems' %lld (or the items allowed)", (long long)hi, (long long)lo);
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
        int base = c->n_rules;
        c->n_rules += (int)n_pos + 1;
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
    int base = c->n_rules;
    c->n_rules += (int)n;
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
        if (!o->p[i].schema) snprintf(val[i], 24, "j-value");
        else rc = comp_at(c, o->p[i].schema, seg, val[i]);
    }
    char extra_key[24] = "", extra_val[24] = "j-value";
    bool extra = o->additional && !json_is_false(o->additional);
    if (!rc && extra && json_is_object(o->additional) && comp_at(c, o->additional, "additionalProperties", extra_val)) rc = -1;
    if (!rc && extra) rc = emit_extra_key(c, o, extra_key);
    if (!rc) {
        /* kv rules, then tails: T_i = the optional members from order[i] on, then the extras */
        int kv = c->n_rules, tail = kv + (int)n, top = tail + (int)(n - n_req) + 1;
        c->n_rules = top + 2;
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
        rc = fail(c, QHX_E_UNSUPPORTED, "the schema 'false' accepts no value");
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

static qhx_status compile(json_t *root, sb *out, qhx_error *err) {
    sc c = {.root = root, .err = err};
    char top[24];
    sb_put(&c.out, PRELUDE, sizeof PRELUDE - 1);
    int rc = comp(&c, root, top);
    if (!rc) sb_printf(&c.out, "root ::= %s\n", top); /* nothing after the value: it ends there */
    for (int i = 0; i < c.n_refs; i++) qhx_free(c.refs[i].ref);
    qhx_free(c.refs);
    if (!rc && c.out.failed) {
        qhx_status code = c.out.failed == 2 ? QHX_E_LIMIT : QHX_E_NOMEM;
        rc = -1;
        c.rc = code;
        qhx_fail(err, code, "json schema: %s", code == QHX_E_LIMIT ? "the grammar it makes is too large" : "out of memory");
    }
    if (rc) {
        qhx_free(c.out.p);
        return c.rc ? c.rc : QHX_E_INTERNAL;
    }
    *out = c.out;
    return QHX_OK;
}

qhx_status qhx_gm_schema_to_gbnf(const char *json, size_t len, char **gbnf, size_t *gbnf_len, qhx_error *err) {
    if (!gbnf) return qhx_fail(err, QHX_E_ARG, "json schema: out is NULL");
    *gbnf = NULL;
    if (gbnf_len) *gbnf_len = 0;
    if (!json) return qhx_fail(err, QHX_E_ARG, "json schema: text is NULL");
    if (len > QHX_GM_MAX_TEXT) return qhx_fail(err, QHX_E_LIMIT, "json schema: %zu bytes, the limit is %zu", len, QHX_GM_MAX_TEXT);
    json_t *root = qhx_json_parse(json, len, "json schema", err);
    if (!root) return err ? err->code : QHX_E_FORMAT;
    sb out = {0};
    qhx_status rc = compile(root, &out, err);
    json_decref(root);
    if (rc) return rc;
    *gbnf = out.p;
    if (gbnf_len) *gbnf_len = out.n;
    return QHX_OK;
}

qhx_status qhx_gm_from_schema(const char *json, size_t len, qhx_gm **out, qhx_error *err) {
    if (!out) return qhx_fail(err, QHX_E_ARG, "json schema: out is NULL");
    *out = NULL;
    char *text = NULL;
    size_t n = 0;
    qhx_status rc = qhx_gm_schema_to_gbnf(json, len, &text, &n, err);
    if (rc) return rc;
    rc = qhx_gm_parse(text, n, "root", out, err);
    if (rc == QHX_E_FORMAT && err && strstr(err->msg, "left-recursive"))
        qhx_fail_prefix(err, "json schema: a '$ref' cycle that reaches no value");
    qhx_free(text);
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
    int base = c->n_rules;
    c->n_rules += n + 1;
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
        if (!tool) return qhx_free(fns), qhx_free(names), qhx_free(docs), err ? err->code : QHX_E_FORMAT;
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
    for (int i = 0; i < c.n_refs; i++) qhx_free(c.refs[i].ref);
    qhx_free(c.refs);
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
