/* grammar/build.c: the builder the parsers fill, UTF-8 classes, the checks (undefined rules,
 * left recursion) and the compiled form. */
#include "grammar/gm_internal.h"

#include "core/alloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gb_init(gm_builder *b, qhx_error *err) {
    memset(b, 0, sizeof *b);
    b->err = err;
}

void gb_deinit(gm_builder *b) {
    for (int32_t r = 0; r < b->n_rules; r++) {
        qhx_free(b->rules[r].name);
        qhx_free(b->rules[r].e);
    }
    qhx_free(b->rules);
    qhx_free(b->cls);
    qhx_free(b->names);
    qhx_free(b->cls_ht);
    memset(b, 0, sizeof *b);
}

int gb_fail(gm_builder *b, qhx_status code, const char *fmt, ...) {
    if (b->rc) return -1;
    b->rc = code;
    if (b->err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(b->err->msg, sizeof b->err->msg, fmt, ap);
        va_end(ap);
        b->err->code = code;
    }
    return -1;
}

static uint64_t hash_bytes(const void *p, size_t n) {
    const unsigned char *s = p;
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ull;
    return h ^ (h >> 31);
}

/* Open-addressing tables of ids (-1 empty), kept at most half full: grown to twice `need`
 * slots. key(ctx, id) hashes an entry again when the table grows. */
static int table_fit(gm_builder *b, int32_t **tab, size_t *mask, int32_t need, uint64_t (*key)(const gm_builder *, int32_t)) {
    size_t want = 64;
    while (want < (size_t)need * 2) want *= 2;
    if (*tab && want <= *mask + 1) return 0;
    int32_t *t = qhx_malloc(want * sizeof *t);
    if (!t) return gb_fail(b, QHX_E_NOMEM, "grammar: out of memory");
    memset(t, 0xFF, want * sizeof *t);
    if (*tab)
        for (size_t i = 0; i <= *mask; i++) {
            int32_t id = (*tab)[i];
            if (id < 0) continue;
            size_t h = (size_t)key(b, id) & (want - 1);
            while (t[h] >= 0) h = (h + 1) & (want - 1);
            t[h] = id;
        }
    qhx_free(*tab);
    *tab = t;
    *mask = want - 1;
    return 0;
}

static uint64_t name_key(const gm_builder *b, int32_t r) { return hash_bytes(b->rules[r].name, strlen(b->rules[r].name)); }
static uint64_t cls_key(const gm_builder *b, int32_t k) { return hash_bytes(&b->cls[k], sizeof b->cls[k]); }

static int32_t new_rule(gm_builder *b, char *name) {
    if (!name) return gb_fail(b, QHX_E_NOMEM, "grammar: out of memory");
    if (b->n_rules >= QHX_GM_MAX_RULES) {
        qhx_free(name);
        return gb_fail(b, QHX_E_LIMIT, "grammar: more than %d rules (those the text names and those its groups, "
                                       "repetitions and classes make)", QHX_GM_MAX_RULES);
    }
    if (b->n_rules == b->cap_rules) {
        int32_t cap = b->cap_rules ? b->cap_rules * 2 : 32;
        gb_rule *p = qhx_realloc(b->rules, (size_t)cap * sizeof *p);
        if (!p) {
            qhx_free(name);
            return gb_fail(b, QHX_E_NOMEM, "grammar: out of memory");
        }
        b->rules = p;
        b->cap_rules = cap;
    }
    b->rules[b->n_rules] = (gb_rule){.name = name, .owner = b->n_rules};
    return b->n_rules++;
}

int32_t gb_rule_find(const gm_builder *b, const char *name, size_t n) {
    if (!b->names) return -1;
    for (size_t h = (size_t)hash_bytes(name, n) & b->names_mask;; h = (h + 1) & b->names_mask) {
        int32_t r = b->names[h];
        if (r < 0) return -1;
        if (strlen(b->rules[r].name) == n && (n == 0 || !memcmp(b->rules[r].name, name, n))) return r;
    }
}

int32_t gb_rule_named(gm_builder *b, const char *name, size_t n) {
    if (b->rc) return -1;
    int32_t r = gb_rule_find(b, name, n);
    if (r >= 0) return r;
    char *s = qhx_malloc(n + 1);
    if (s) {
        if (n) memcpy(s, name, n);
        s[n] = '\0';
    }
    r = new_rule(b, s);
    if (r < 0 || table_fit(b, &b->names, &b->names_mask, b->n_rules, name_key)) return -1;
    size_t h = (size_t)hash_bytes(name, n) & b->names_mask;
    while (b->names[h] >= 0) h = (h + 1) & b->names_mask;
    b->names[h] = r;
    return r;
}

int32_t gb_rule_anon(gm_builder *b, int32_t base) {
    if (b->rc) return -1;
    const char *bn = base >= 0 && base < b->n_rules ? b->rules[base].name : "rule";
    size_t n = strlen(bn) + 16;
    char *s = qhx_malloc(n);
    if (s) snprintf(s, n, "%s-%d", bn, (int)b->n_rules);
    int32_t r = new_rule(b, s);
    if (r >= 0) {
        b->rules[r].defined = true;
        if (base >= 0 && base < r) b->rules[r].owner = b->rules[base].owner;
    }
    return r;
}

void gb_rule_clear(gm_builder *b, int32_t r) {
    if (r < 0 || r >= b->n_rules) return;
    b->n_elems -= b->rules[r].n;
    b->rules[r].n = 0;
}

void gb_push(gm_builder *b, int32_t r, int32_t kind, int32_t arg) {
    if (b->rc || r < 0) return;
    if (b->n_elems >= QHX_GM_MAX_ELEMS) {
        gb_fail(b, QHX_E_LIMIT, "grammar: more than %d elements (after repetitions expand)", QHX_GM_MAX_ELEMS);
        return;
    }
    gb_rule *ru = &b->rules[r];
    if (ru->n == ru->cap) {
        int32_t cap = ru->cap ? ru->cap * 2 : 8;
        gm_elem *p = qhx_realloc(ru->e, (size_t)cap * sizeof *p);
        if (!p) {
            gb_fail(b, QHX_E_NOMEM, "grammar: out of memory");
            return;
        }
        ru->e = p;
        ru->cap = cap;
    }
    ru->e[ru->n++] = (gm_elem){kind, arg};
    b->n_elems++;
}

void gb_end(gm_builder *b, int32_t r) { gb_push(b, r, GM_END, 0); }

int32_t gb_class(gm_builder *b, const gm_cls *c) {
    if (b->rc) return -1;
    if (b->cls_ht)
        for (size_t h = (size_t)hash_bytes(c, sizeof *c) & b->cls_mask; b->cls_ht[h] >= 0; h = (h + 1) & b->cls_mask)
            if (!memcmp(&b->cls[b->cls_ht[h]], c, sizeof *c)) return b->cls_ht[h];
    if (b->n_cls == b->cap_cls) {
        int32_t cap = b->cap_cls ? b->cap_cls * 2 : 16;
        if (cap > QHX_GM_MAX_ELEMS) return gb_fail(b, QHX_E_LIMIT, "grammar: more than %d character classes", QHX_GM_MAX_ELEMS / 2);
        gm_cls *p = qhx_realloc(b->cls, (size_t)cap * sizeof *p);
        if (!p) return gb_fail(b, QHX_E_NOMEM, "grammar: out of memory");
        b->cls = p;
        b->cap_cls = cap;
    }
    b->cls[b->n_cls] = *c;
    int32_t k = b->n_cls++;
    if (table_fit(b, &b->cls_ht, &b->cls_mask, b->n_cls, cls_key)) return -1;
    size_t h = (size_t)hash_bytes(c, sizeof *c) & b->cls_mask;
    while (b->cls_ht[h] >= 0) h = (h + 1) & b->cls_mask;
    b->cls_ht[h] = k;
    return k;
}

static void cls_range(gm_cls *c, unsigned lo, unsigned hi) {
    for (unsigned x = lo; x <= hi; x++) c->w[x >> 6] |= (uint64_t)1 << (x & 63);
}

static void push_byte(gm_builder *b, int32_t r, uint8_t x) {
    gm_cls c = {{0}};
    cls_range(&c, x, x);
    gb_push(b, r, GM_CLASS, gb_class(b, &c));
}

void gb_push_cp(gm_builder *b, int32_t r, uint32_t cp) {
    if (cp < 0x80) {
        push_byte(b, r, (uint8_t)cp);
    } else if (cp < 0x800) {
        push_byte(b, r, (uint8_t)(0xC0 | cp >> 6));
        push_byte(b, r, (uint8_t)(0x80 | (cp & 63)));
    } else if (cp < 0x10000) {
        push_byte(b, r, (uint8_t)(0xE0 | cp >> 12));
        push_byte(b, r, (uint8_t)(0x80 | ((cp >> 6) & 63)));
        push_byte(b, r, (uint8_t)(0x80 | (cp & 63)));
    } else {
        push_byte(b, r, (uint8_t)(0xF0 | cp >> 18));
        push_byte(b, r, (uint8_t)(0x80 | ((cp >> 12) & 63)));
        push_byte(b, r, (uint8_t)(0x80 | ((cp >> 6) & 63)));
        push_byte(b, r, (uint8_t)(0x80 | (cp & 63)));
    }
}

/* ---- code point ranges as UTF-8 byte sequences --------------------------------------------- */

static int utf8_len(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

static void utf8_bytes(uint32_t cp, uint8_t out[4]) {
    int n = utf8_len(cp);
    static const uint8_t lead[5] = {0, 0, 0xC0, 0xE0, 0xF0};
    for (int i = n - 1; i > 0; i--, cp >>= 6) out[i] = (uint8_t)(0x80 | (cp & 63));
    out[0] = (uint8_t)(lead[n] | cp);
}

/* One alternative of rule r: the sequence of byte ranges for [lo, hi], where lo and hi have
 * the same length and differ only in ways a per-byte range can express (split_cps ensures). */
static void emit_seq(gm_builder *b, int32_t r, uint32_t lo, uint32_t hi) {
    uint8_t a[4], z[4];
    utf8_bytes(lo, a);
    utf8_bytes(hi, z);
    for (int i = 0; i < utf8_len(lo); i++) {
        gm_cls c = {{0}};
        cls_range(&c, a[i], z[i]);
        gb_push(b, r, GM_CLASS, gb_class(b, &c));
    }
    gb_end(b, r);
}

/* Split [lo, hi] (non-ASCII, no surrogates) into ranges whose UTF-8 forms are per-byte
 * rectangles: equal lengths, and below the first differing byte every trailing byte spans
 * 0x80..0xBF. Iterative over a small explicit stack (the depth is bounded by 3 splits per
 * byte position). */
static void split_cps(gm_builder *b, int32_t r, uint32_t lo0, uint32_t hi0) {
    uint32_t st[64][2];
    int n = 0;
    st[n][0] = lo0, st[n][1] = hi0, n++;
    while (n > 0 && !b->rc) {
        n--;
        uint32_t lo = st[n][0], hi = st[n][1];
        static const uint32_t bound[3] = {0x7FF, 0xFFFF, 0x10FFFF};
        int split = 0;
        for (int k = 0; k < 3 && !split; k++)
            if (lo <= bound[k] && hi > bound[k]) {
                st[n][0] = bound[k] + 1, st[n][1] = hi, n++;
                st[n][0] = lo, st[n][1] = bound[k], n++;
                split = 1;
            }
        for (int i = 1; i < utf8_len(lo) && !split; i++) {
            uint32_t m = ((uint32_t)1 << (6 * i)) - 1;
            if ((lo & ~m) == (hi & ~m)) continue;
            if (lo & m) {
                st[n][0] = (lo | m) + 1, st[n][1] = hi, n++;
                st[n][0] = lo, st[n][1] = lo | m, n++;
                split = 1;
            } else if ((hi & m) != m) {
                st[n][0] = hi & ~m, st[n][1] = hi, n++;
                st[n][0] = lo, st[n][1] = (hi & ~m) - 1, n++;
                split = 1;
            }
        }
        if (!split) emit_seq(b, r, lo, hi);
        if (n > 60) {
            gb_fail(b, QHX_E_INTERNAL, "grammar: UTF-8 range split too deep");
            return;
        }
    }
}

static int cmp_range(const void *a, const void *b) {
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

void gb_push_cps(gm_builder *b, int32_t r, int32_t base, const uint32_t *lo, const uint32_t *hi, int n, bool negate) {
    if (b->rc) return;
    /* sorted, merged, surrogates cut out, then complemented if asked */
    uint32_t(*rg)[2] = qhx_malloc(((size_t)n * 2 + 4) * sizeof *rg);
    uint32_t(*out)[2] = qhx_malloc(((size_t)n * 2 + 4) * sizeof *out);
    if (!rg || !out) {
        qhx_free(rg);
        qhx_free(out);
        gb_fail(b, QHX_E_NOMEM, "grammar: out of memory");
        return;
    }
    int m = 0;
    for (int i = 0; i < n; i++) {
        uint32_t a = lo[i], z = hi[i] > 0x10FFFF ? 0x10FFFF : hi[i];
        if (a > z) continue;
        if (a < 0xD800 && z >= 0xD800) { /* cut the surrogates out */
            rg[m][0] = a, rg[m][1] = 0xD7FF, m++;
            if (z > 0xDFFF) rg[m][0] = 0xE000, rg[m][1] = z, m++;
        } else if (a >= 0xD800 && a <= 0xDFFF) {
            if (z > 0xDFFF) rg[m][0] = 0xE000, rg[m][1] = z, m++;
        } else {
            rg[m][0] = a, rg[m][1] = z, m++;
        }
    }
    qsort(rg, (size_t)m, sizeof *rg, cmp_range);
    int k = 0;
    for (int i = 0; i < m; i++) {
        if (k && rg[i][0] <= rg[k - 1][1] + 1) {
            if (rg[i][1] > rg[k - 1][1]) rg[k - 1][1] = rg[i][1];
        } else {
            rg[k][0] = rg[i][0], rg[k][1] = rg[i][1], k++;
        }
    }
    int no = 0;
    if (negate) {
        uint32_t next = 0;
        for (int i = 0; i <= k; i++) {
            uint32_t a = i < k ? rg[i][0] : 0x110000;
            if (a > next) {
                uint32_t z = a - 1;
                if (next < 0xD800 && z >= 0xD800) {
                    out[no][0] = next, out[no][1] = 0xD7FF, no++;
                    if (z > 0xDFFF) out[no][0] = 0xE000, out[no][1] = z, no++;
                } else if (next >= 0xD800 && next <= 0xDFFF) {
                    if (z > 0xDFFF) out[no][0] = 0xE000, out[no][1] = z, no++;
                } else {
                    out[no][0] = next, out[no][1] = z, no++;
                }
            }
            if (i < k) next = rg[i][1] + 1;
        }
    } else {
        memcpy(out, rg, (size_t)k * sizeof *rg);
        no = k;
    }
    qhx_free(rg);
    gm_cls ascii = {{0}};
    bool any_ascii = false, any_wide = false;
    for (int i = 0; i < no; i++) {
        if (out[i][0] < 0x80) {
            cls_range(&ascii, out[i][0], out[i][1] < 0x7F ? out[i][1] : 0x7F);
            any_ascii = true;
        }
        if (out[i][1] >= 0x80) any_wide = true;
    }
    if (!any_wide) { /* one byte class (possibly empty: matches nothing) */
        gb_push(b, r, GM_CLASS, gb_class(b, &ascii));
        qhx_free(out);
        return;
    }
    int32_t alt = gb_rule_anon(b, base);
    if (any_ascii) {
        gb_push(b, alt, GM_CLASS, gb_class(b, &ascii));
        gb_end(b, alt);
    }
    for (int i = 0; i < no && !b->rc; i++) {
        uint32_t a = out[i][0] < 0x80 ? 0x80 : out[i][0];
        if (out[i][1] >= a) split_cps(b, alt, a, out[i][1]);
    }
    qhx_free(out);
    gb_push(b, r, GM_REF, alt);
}

/* ---- checks and the compiled form -----------------------------------------------------------
 * Every check is linear in the grammar's size: the alternatives are indexed once (alts), and
 * the fixed points run over work lists, each element visited a bounded number of times. */

typedef struct gb_index {
    int32_t n_alts;
    int32_t *alt_rule;  /* [n_alts]: the rule each alternative belongs to */
    int32_t *alt_start; /* [n_alts]: its first element (an index into the rule's e) */
    int32_t *use_off;   /* [n_rules + 1]: rule r is referenced by alternatives use[use_off[r] ..) */
    int32_t *use;
} gb_index;

static void index_free(gb_index *x) {
    qhx_free(x->alt_rule);
    qhx_free(x->alt_start);
    qhx_free(x->use_off);
    qhx_free(x->use);
}

static int index_build(gm_builder *b, gb_index *x) {
    memset(x, 0, sizeof *x);
    int64_t n_alts = 0, n_refs = 0;
    for (int32_t r = 0; r < b->n_rules; r++)
        for (int32_t i = 0; i < b->rules[r].n; i++) {
            n_alts += b->rules[r].e[i].kind == GM_END;
            n_refs += b->rules[r].e[i].kind == GM_REF;
        }
    x->alt_rule = qhx_malloc(((size_t)n_alts + 1) * sizeof *x->alt_rule);
    x->alt_start = qhx_malloc(((size_t)n_alts + 1) * sizeof *x->alt_start);
    x->use_off = qhx_calloc((size_t)b->n_rules + 2, sizeof *x->use_off);
    x->use = qhx_malloc(((size_t)n_refs + 1) * sizeof *x->use);
    if (!x->alt_rule || !x->alt_start || !x->use_off || !x->use) return gb_fail(b, QHX_E_NOMEM, "grammar: out of memory");
    int32_t a = 0;
    for (int32_t r = 0; r < b->n_rules; r++) {
        const gb_rule *ru = &b->rules[r];
        for (int32_t i = 0, start = 0; i < ru->n; i++) {
            if (ru->e[i].kind == GM_REF) x->use_off[ru->e[i].arg + 1]++;
            if (ru->e[i].kind == GM_END) x->alt_rule[a] = r, x->alt_start[a++] = start, start = i + 1;
        }
    }
    x->n_alts = a;
    for (int32_t r = 0; r < b->n_rules; r++) x->use_off[r + 1] += x->use_off[r];
    int32_t *fill = qhx_malloc(((size_t)b->n_rules + 1) * sizeof *fill);
    if (!fill) return gb_fail(b, QHX_E_NOMEM, "grammar: out of memory");
    memcpy(fill, x->use_off, ((size_t)b->n_rules + 1) * sizeof *fill);
    for (a = 0; a < x->n_alts; a++) {
        const gb_rule *ru = &b->rules[x->alt_rule[a]];
        for (int32_t i = x->alt_start[a]; ru->e[i].kind != GM_END; i++)
            if (ru->e[i].kind == GM_REF) x->use[fill[ru->e[i].arg]++] = a;
    }
    qhx_free(fill);
    return 0;
}

static bool cls_empty(const gm_cls *c) { return !(c->w[0] | c->w[1] | c->w[2] | c->w[3]); }

/* The least fixed point "rule r holds when one of its alternatives has every element holding":
 * a class element holds when classes_hold and it is not empty (productive: the rule derives
 * some finite text) or never (nullable: the rule derives the empty text). Work list over the
 * references: each alternative's count of elements not known to hold goes down once per
 * element. */
static int fixpoint(gm_builder *b, const gb_index *x, bool classes_hold, bool *holds) {
    int32_t *need = qhx_malloc(((size_t)x->n_alts + 1) * sizeof *need);
    int32_t *work = qhx_malloc(((size_t)b->n_rules + 1) * sizeof *work);
    if (!need || !work) {
        qhx_free(need);
        qhx_free(work);
        return gb_fail(b, QHX_E_NOMEM, "grammar: out of memory");
    }
    int32_t n_work = 0;
    memset(holds, 0, (size_t)b->n_rules * sizeof *holds);
    for (int32_t a = 0; a < x->n_alts; a++) {
        const gb_rule *ru = &b->rules[x->alt_rule[a]];
        int32_t n = 0;
        for (int32_t i = x->alt_start[a]; ru->e[i].kind != GM_END; i++) {
            const gm_elem *e = &ru->e[i];
            if (e->kind == GM_REF || !classes_hold || cls_empty(&b->cls[e->arg])) n++;
        }
        need[a] = n;
        if (!n && !holds[x->alt_rule[a]]) holds[x->alt_rule[a]] = true, work[n_work++] = x->alt_rule[a];
    }
    while (n_work) {
        int32_t r = work[--n_work];
        for (int32_t u = x->use_off[r]; u < x->use_off[r + 1]; u++) {
            int32_t a = x->use[u], owner = x->alt_rule[a];
            if (--need[a] == 0 && !holds[owner]) holds[owner] = true, work[n_work++] = owner;
        }
    }
    qhx_free(need);
    qhx_free(work);
    return 0;
}

/* How messages name rule r: the front end's label, else the rule the user wrote it in. */
static const char *describe(const gm_builder *b, int32_t r, int why, char *buf, size_t size) {
    const char *name = b->rules[b->rules[r].owner].name;
    if (b->label && b->label(b->label_ctx, name, why, buf, size)) return buf;
    snprintf(buf, size, "rule '%s'", name);
    return buf;
}

/* ---- left recursion ---------------------------------------------------------------------------
 * An edge r -> s when s can come first in r (after a prefix that can be empty). The matcher
 * expands such references eagerly; one that ends its alternative is a tail call (no return
 * node: the stack does not grow), so a cycle of tail calls (S ::= x S | "" with x able to be
 * empty: a repetition of something optional, or A ::= B, B ::= A | "x") revisits the same
 * stacks and ends. A cycle through a reference with something after it (A ::= A "x") grows the
 * stack forever: refused, naming the rule. So: the strongly connected components of the edges,
 * and a non-tail edge inside one is the error. Tarjan's algorithm, iterative. */

typedef struct lr_graph {
    int32_t *off, *to; /* edges of r: to[off[r] .. off[r + 1]), tail-ness in tail[] */
    bool *tail;
} lr_graph;

static int lr_edges(gm_builder *b, const bool *nullable, lr_graph *gr) {
    int32_t n = b->n_rules;
    int64_t m = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            for (int32_t r = 0; r < n; r++) gr->off[r + 1] += gr->off[r];
            gr->to = qhx_malloc(((size_t)m + 1) * sizeof *gr->to);
            gr->tail = qhx_malloc(((size_t)m + 1) * sizeof *gr->tail);
            if (!gr->to || !gr->tail) return gb_fail(b, QHX_E_NOMEM, "grammar: out of memory");
        }
        for (int32_t r = 0; r < n; r++) {
            const gb_rule *ru = &b->rules[r];
            int32_t k = pass ? gr->off[r] : 0;
            bool at_start = true;
            for (int32_t i = 0; i < ru->n; i++) {
                const gm_elem *e = &ru->e[i];
                if (e->kind == GM_END) {
                    at_start = true;
                } else if (at_start && e->kind == GM_CLASS) {
                    at_start = false;
                } else if (at_start) {
                    if (pass) gr->to[k] = e->arg, gr->tail[k] = ru->e[i + 1].kind == GM_END, k++;
                    else gr->off[r + 1]++, m++;
                    at_start = nullable[e->arg];
                }
            }
        }
    }
    return 0;
}

static qhx_status check_left_recursion(gm_builder *b, const bool *nullable) {
    int32_t n = b->n_rules;
    lr_graph gr = {0};
    gr.off = qhx_calloc((size_t)n + 2, sizeof *gr.off);
    int32_t *idx = qhx_malloc(((size_t)n + 1) * sizeof *idx), *low = qhx_malloc(((size_t)n + 1) * sizeof *low);
    int32_t *comp = qhx_malloc(((size_t)n + 1) * sizeof *comp), *st = qhx_malloc(((size_t)n + 1) * sizeof *st);
    int32_t *call = qhx_malloc(((size_t)n + 1) * sizeof *call), *edge = qhx_malloc(((size_t)n + 1) * sizeof *edge);
    bool *on = qhx_calloc((size_t)n + 1, sizeof *on);
    if (!gr.off || !idx || !low || !comp || !st || !call || !edge || !on) gb_fail(b, QHX_E_NOMEM, "grammar: out of memory");
    else lr_edges(b, nullable, &gr);
    if (!b->rc) {
        memset(idx, 0xFF, (size_t)n * sizeof *idx);
        int32_t counter = 0, n_st = 0, n_comp = 0;
        for (int32_t s = 0; s < n; s++) {
            if (idx[s] >= 0) continue;
            int32_t top = 0; /* the DFS: call[] the rules, edge[] the next edge of each */
            call[0] = s, edge[0] = gr.off[s];
            idx[s] = low[s] = counter++, st[n_st++] = s, on[s] = true;
            while (top >= 0) {
                int32_t v = call[top];
                if (edge[top] < gr.off[v + 1]) {
                    int32_t w = gr.to[edge[top]++];
                    if (idx[w] < 0) {
                        idx[w] = low[w] = counter++, st[n_st++] = w, on[w] = true;
                        top++;
                        call[top] = w, edge[top] = gr.off[w];
                    } else if (on[w] && idx[w] < low[v]) {
                        low[v] = idx[w];
                    }
                    continue;
                }
                if (low[v] == idx[v]) { /* v roots a component */
                    int32_t w;
                    do {
                        w = st[--n_st];
                        on[w] = false;
                        comp[w] = n_comp;
                    } while (w != v);
                    n_comp++;
                }
                top--;
                if (top >= 0 && low[v] < low[call[top]]) low[call[top]] = low[v];
            }
        }
        for (int32_t r = 0; r < n && !b->rc; r++)
            for (int32_t k = gr.off[r]; k < gr.off[r + 1]; k++)
                if (!gr.tail[k] && comp[gr.to[k]] == comp[r]) {
                    char w1[300], w2[300];
                    gb_fail(b, QHX_E_FORMAT, "grammar: %s is left-recursive (it can start with itself, via %s, before "
                                             "anything is matched)",
                            describe(b, gr.to[k], GB_WHY_WHERE, w1, sizeof w1), describe(b, r, GB_WHY_WHERE, w2, sizeof w2));
                    break;
                }
    }
    qhx_free(gr.off);
    qhx_free(gr.to);
    qhx_free(gr.tail);
    qhx_free(idx);
    qhx_free(low);
    qhx_free(comp);
    qhx_free(st);
    qhx_free(call);
    qhx_free(edge);
    qhx_free(on);
    return b->rc;
}

/* ---- the empty language --------------------------------------------------------------------
 * The start rule derives no finite text: every way through it meets an empty character class,
 * or a rule that only ever leads back into itself. Refused before anything is generated,
 * naming the chain of rules from the start to where the text dies. */

static qhx_status refuse_empty(gm_builder *b, const bool *productive, int32_t root) {
    int32_t n = b->n_rules;
    uint8_t *seen = qhx_calloc((size_t)n + 1, 1);
    int32_t *path = qhx_malloc(((size_t)n + 1) * sizeof *path);
    if (!seen || !path) {
        qhx_free(seen);
        qhx_free(path);
        return gb_fail(b, QHX_E_NOMEM, "grammar: out of memory"), b->rc;
    }
    int32_t n_path = 0, r = root, why = GB_WHY_CYCLE;
    for (;;) { /* follow the first unproductive reference not visited yet */
        seen[r] = 1;
        path[n_path++] = r;
        const gb_rule *ru = &b->rules[r];
        int32_t next = -1;
        bool dead_class = false, alt_blocked = false;
        for (int32_t i = 0; i < ru->n && next < 0; i++) {
            const gm_elem *e = &ru->e[i];
            if (e->kind == GM_END) alt_blocked = false;
            else if (alt_blocked) continue;
            else if (e->kind == GM_CLASS && cls_empty(&b->cls[e->arg])) dead_class = true, alt_blocked = true;
            else if (e->kind == GM_REF && !productive[e->arg]) {
                if (!seen[e->arg]) next = e->arg;
                alt_blocked = true;
            }
        }
        if (next < 0) {
            why = dead_class ? GB_WHY_EMPTY_CLASS : GB_WHY_CYCLE;
            break;
        }
        r = next;
    }
    /* the rules the user wrote along the way, each once */
    char msg[QHX_ERROR_MSG_SIZE], part[300];
    size_t len = 0;
    int32_t last_owner = -1, shown = 0;
    for (int32_t i = 0; i < n_path && len < sizeof msg - 40; i++) {
        int32_t o = b->rules[path[i]].owner;
        if (o == last_owner) continue;
        last_owner = o;
        if (shown++ == 6 && i < n_path - 2) { /* the middle of a long chain */
            len += (size_t)snprintf(msg + len, sizeof msg - len, " -> ...");
            while (i < n_path - 2) i++;
            o = b->rules[path[i]].owner;
            last_owner = o;
        }
        describe(b, path[i], GB_WHY_WHERE, part, sizeof part);
        len += (size_t)snprintf(msg + len, sizeof msg - len, "%s%s", i ? " -> " : "", part);
        if (len >= sizeof msg) len = sizeof msg - 1;
    }
    const char *tail = why == GB_WHY_EMPTY_CLASS ? "an empty character class (no character matches it) blocks every way on"
                                                 : "every way on leads back into a rule already open (no way to finish)";
    const char *culprit = b->rules[b->rules[path[n_path - 1]].owner].name;
    if (b->label && b->label(b->label_ctx, culprit, why, part, sizeof part))
        gb_fail(b, QHX_E_FORMAT, "%s", part); /* the front end says it in its own words */
    else
        gb_fail(b, QHX_E_FORMAT, "grammar: no text matches the grammar: %s: %s", msg, tail);
    qhx_free(seen);
    qhx_free(path);
    return b->rc;
}

void qhx_gm_free(qhx_gm *g) {
    if (!g) return;
    qhx_free(g->elems);
    qhx_free(g->alt_pos);
    qhx_free(g->rule_alt);
    qhx_free(g->cls);
    qhx_free(g);
}

int32_t qhx_gm_n_rules(const qhx_gm *g) { return g ? g->n_rules : 0; }

static bool alt_productive(const gm_builder *b, const gb_rule *ru, int32_t start, const bool *productive) {
    for (int32_t i = start; ru->e[i].kind != GM_END; i++) {
        const gm_elem *e = &ru->e[i];
        if (e->kind == GM_REF ? !productive[e->arg] : cls_empty(&b->cls[e->arg])) return false;
    }
    return true;
}

/* The compiled form: the alternatives that can complete (the others could only ever strand
 * the output where no continuation exists). */
static qhx_status compile(gm_builder *b, const gb_index *x, const bool *productive, int32_t root, qhx_gm **out) {
    qhx_gm *g = qhx_calloc(1, sizeof *g);
    if (g) {
        g->elems = qhx_malloc(((size_t)b->n_elems + 1) * sizeof *g->elems);
        g->alt_pos = qhx_malloc(((size_t)x->n_alts + 1) * sizeof *g->alt_pos);
        g->rule_alt = qhx_malloc(((size_t)b->n_rules + 1) * sizeof *g->rule_alt);
        g->cls = qhx_malloc(((size_t)b->n_cls + 1) * sizeof *g->cls);
    }
    if (!g || !g->elems || !g->alt_pos || !g->rule_alt || !g->cls) {
        qhx_gm_free(g);
        return gb_fail(b, QHX_E_NOMEM, "grammar: out of memory"), b->rc;
    }
    int32_t pe = 0, pa = 0, n_class = 0;
    for (int32_t a = 0, r = -1; a < x->n_alts; a++) {
        while (r < x->alt_rule[a]) g->rule_alt[++r] = pa; /* rules without alternatives too */
        const gb_rule *ru = &b->rules[r];
        if (!alt_productive(b, ru, x->alt_start[a], productive)) continue;
        g->alt_pos[pa++] = pe;
        int32_t i = x->alt_start[a];
        do {
            n_class += ru->e[i].kind == GM_CLASS;
            g->elems[pe++] = ru->e[i];
        } while (ru->e[i++].kind != GM_END);
    }
    for (int32_t r = x->n_alts ? x->alt_rule[x->n_alts - 1] + 1 : 0; r <= b->n_rules; r++) g->rule_alt[r] = pa;
    g->n_elems = pe;
    g->n_rules = b->n_rules;
    g->root = root;
    g->n_class_elems = n_class;
    if (b->n_cls) memcpy(g->cls, b->cls, (size_t)b->n_cls * sizeof *g->cls);
    g->n_cls = b->n_cls;
    *out = g;
    return QHX_OK;
}

qhx_status gb_finish(gm_builder *b, int32_t root, qhx_gm **out) {
    *out = NULL;
    if (b->rc) return b->rc;
    for (int32_t r = 0; r < b->n_rules; r++)
        if (!b->rules[r].defined)
            return gb_fail(b, QHX_E_FORMAT, "grammar: rule '%s' is used but never defined", b->rules[r].name), b->rc;
    gb_index x = {0};
    bool *nullable = qhx_calloc((size_t)b->n_rules + 1, sizeof *nullable);
    bool *productive = qhx_calloc((size_t)b->n_rules + 1, sizeof *productive);
    if (!nullable || !productive) gb_fail(b, QHX_E_NOMEM, "grammar: out of memory");
    else if (!index_build(b, &x) && !fixpoint(b, &x, false, nullable) && !fixpoint(b, &x, true, productive) &&
             !check_left_recursion(b, nullable)) {
        if (!productive[root]) refuse_empty(b, productive, root);
        else compile(b, &x, productive, root, out);
    }
    index_free(&x);
    qhx_free(nullable);
    qhx_free(productive);
    return b->rc;
}
