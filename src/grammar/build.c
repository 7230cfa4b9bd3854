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

static int32_t new_rule(gm_builder *b, char *name) {
    if (!name) return gb_fail(b, QHX_E_NOMEM, "grammar: out of memory");
    if (b->n_rules >= QHX_GM_MAX_RULES) {
        qhx_free(name);
        return gb_fail(b, QHX_E_LIMIT, "grammar: more than %d rules", QHX_GM_MAX_RULES);
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
    b->rules[b->n_rules] = (gb_rule){.name = name};
    return b->n_rules++;
}

int32_t gb_rule_named(gm_builder *b, const char *name, size_t n) {
    if (b->rc) return -1;
    for (int32_t r = 0; r < b->n_rules; r++)
        if (strlen(b->rules[r].name) == n && !memcmp(b->rules[r].name, name, n)) return r;
    char *s = qhx_malloc(n + 1);
    if (s) {
        memcpy(s, name, n);
        s[n] = '\0';
    }
    return new_rule(b, s);
}

int32_t gb_rule_anon(gm_builder *b, int32_t base) {
    if (b->rc) return -1;
    const char *bn = base >= 0 && base < b->n_rules ? b->rules[base].name : "rule";
    size_t n = strlen(bn) + 16;
    char *s = qhx_malloc(n);
    if (s) snprintf(s, n, "%s-%d", bn, (int)b->n_rules);
    int32_t r = new_rule(b, s);
    if (r >= 0) b->rules[r].defined = true;
    return r;
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
    for (int32_t k = 0; k < b->n_cls; k++)
        if (!memcmp(&b->cls[k], c, sizeof *c)) return k;
    if (b->n_cls == b->cap_cls) {
        int32_t cap = b->cap_cls ? b->cap_cls * 2 : 16;
        if (cap > QHX_GM_MAX_ELEMS) return gb_fail(b, QHX_E_LIMIT, "grammar: too many character classes");
        gm_cls *p = qhx_realloc(b->cls, (size_t)cap * sizeof *p);
        if (!p) return gb_fail(b, QHX_E_NOMEM, "grammar: out of memory");
        b->cls = p;
        b->cap_cls = cap;
    }
    b->cls[b->n_cls] = *c;
    return b->n_cls++;
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

/* ---- checks and the compiled form ----------------------------------------------------------- */

/* nullable[r]: rule r can match the empty string (fixpoint over the rules). */
static void find_nullable(const gm_builder *b, bool *nullable) {
    for (bool changed = true; changed;) {
        changed = false;
        for (int32_t r = 0; r < b->n_rules; r++) {
            if (nullable[r]) continue;
            const gb_rule *ru = &b->rules[r];
            bool alt_ok = true, null = false;
            for (int32_t i = 0; i < ru->n && !null; i++) {
                const gm_elem *e = &ru->e[i];
                if (e->kind == GM_END) {
                    null = alt_ok;
                    alt_ok = true;
                } else if (e->kind == GM_CLASS || !nullable[e->arg]) {
                    alt_ok = false;
                }
            }
            if (null) {
                nullable[r] = true;
                changed = true;
            }
        }
    }
}

/* Left recursion: rule r reaching itself through the leftmost symbols of its alternatives (a
 * nullable prefix included) would make the matcher expand forever; refused with its name.
 * Depth-first over the "leftmost" edges with an explicit stack (colour 1: on the path). */
static qhx_status check_left_recursion(gm_builder *b, const bool *nullable) {
    int32_t n = b->n_rules;
    uint8_t *colour = qhx_calloc((size_t)n, 1);
    int32_t *st_r = qhx_malloc((size_t)n * sizeof *st_r), *st_i = qhx_malloc((size_t)n * sizeof *st_i);
    bool *st_a = qhx_malloc((size_t)n * sizeof *st_a);
    qhx_status rc = QHX_OK;
    if (!colour || !st_r || !st_i || !st_a) rc = gb_fail(b, QHX_E_NOMEM, "grammar: out of memory"), rc = b->rc;
    for (int32_t s = 0; s < n && !rc; s++) {
        if (colour[s]) continue;
        int32_t top = 0;
        st_r[0] = s, st_i[0] = 0, st_a[0] = true, colour[s] = 1;
        while (top >= 0 && !rc) {
            const gb_rule *ru = &b->rules[st_r[top]];
            int32_t i = st_i[top], next = -1;
            /* find the next leftmost reference from element i on; at_start: every element
             * since the alternative began was a nullable reference */
            bool at_start = st_a[top];
            for (; i < ru->n; i++) {
                const gm_elem *e = &ru->e[i];
                if (e->kind == GM_END) {
                    at_start = true;
                    continue;
                }
                if (!at_start) continue;
                if (e->kind == GM_CLASS) {
                    at_start = false;
                    continue;
                }
                next = e->arg;
                at_start = nullable[e->arg];
                i++;
                break;
            }
            st_i[top] = i;
            st_a[top] = at_start;
            if (next < 0) {
                colour[st_r[top]] = 2;
                top--;
            } else if (colour[next] == 1) {
                rc = gb_fail(b, QHX_E_FORMAT, "grammar: rule '%s' is left-recursive (it can start with itself, via '%s')",
                             b->rules[next].name, b->rules[st_r[top]].name);
                rc = b->rc;
            } else if (colour[next] == 0) {
                colour[next] = 1;
                top++;
                st_r[top] = next, st_i[top] = 0, st_a[top] = true;
            }
        }
    }
    qhx_free(colour);
    qhx_free(st_r);
    qhx_free(st_i);
    qhx_free(st_a);
    return rc;
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

qhx_status gb_finish(gm_builder *b, int32_t root, qhx_gm **out) {
    *out = NULL;
    if (b->rc) return b->rc;
    for (int32_t r = 0; r < b->n_rules; r++)
        if (!b->rules[r].defined)
            return gb_fail(b, QHX_E_FORMAT, "grammar: rule '%s' is used but never defined", b->rules[r].name), b->rc;
    bool *nullable = qhx_calloc((size_t)b->n_rules + 1, sizeof *nullable);
    if (!nullable) return gb_fail(b, QHX_E_NOMEM, "grammar: out of memory"), b->rc;
    find_nullable(b, nullable);
    qhx_status rc = check_left_recursion(b, nullable);
    qhx_free(nullable);
    if (rc) return rc;
    qhx_gm *g = qhx_calloc(1, sizeof *g);
    int64_t n_alts = 0;
    for (int32_t r = 0; r < b->n_rules; r++)
        for (int32_t i = 0; i < b->rules[r].n; i++) n_alts += b->rules[r].e[i].kind == GM_END;
    if (g) {
        g->elems = qhx_malloc(((size_t)b->n_elems + 1) * sizeof *g->elems);
        g->alt_pos = qhx_malloc(((size_t)n_alts + 1) * sizeof *g->alt_pos);
        g->rule_alt = qhx_malloc(((size_t)b->n_rules + 1) * sizeof *g->rule_alt);
        g->cls = qhx_malloc(((size_t)b->n_cls + 1) * sizeof *g->cls);
    }
    if (!g || !g->elems || !g->alt_pos || !g->rule_alt || !g->cls) {
        qhx_gm_free(g);
        return gb_fail(b, QHX_E_NOMEM, "grammar: out of memory"), b->rc;
    }
    int32_t pe = 0, pa = 0;
    for (int32_t r = 0; r < b->n_rules; r++) {
        g->rule_alt[r] = pa;
        const gb_rule *ru = &b->rules[r];
        bool start = true;
        for (int32_t i = 0; i < ru->n; i++) {
            if (start) g->alt_pos[pa++] = pe;
            g->elems[pe++] = ru->e[i];
            start = ru->e[i].kind == GM_END;
        }
    }
    g->rule_alt[b->n_rules] = pa;
    g->n_elems = pe;
    g->n_rules = b->n_rules;
    g->root = root;
    memcpy(g->cls, b->cls, (size_t)b->n_cls * sizeof *g->cls);
    g->n_cls = b->n_cls;
    *out = g;
    return QHX_OK;
}
