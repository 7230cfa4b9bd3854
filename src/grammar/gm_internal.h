/* grammar/gm_internal.h: the compiled grammar and the builder the GBNF parser fills, shared by
 * the files of src/grammar only. */
#ifndef QHX_GRAMMAR_INTERNAL_H
#define QHX_GRAMMAR_INTERNAL_H

#include "grammar/grammar.h"

#include <stdbool.h>
#include <string.h>

/* An element of an alternative. Each alternative ends with an END; a position is an index into
 * qhx_gm.elems and names the next element to match. */
enum { GM_END = 0, GM_CLASS = 1, GM_REF = 2 };
typedef struct gm_elem {
    int32_t kind;
    int32_t arg; /* CLASS: index into cls; REF: rule id */
} gm_elem;

/* A byte class: 256 bits. */
typedef struct gm_cls {
    uint64_t w[4];
} gm_cls;

/* memcpy / memmove / memcmp that allow n == 0 with a NULL pointer (an empty state, an empty
 * literal, a token of no bytes): the C library's versions do not. */
static inline void gm_copy(void *dst, const void *src, size_t n) {
    if (n) memmove(dst, src, n);
}
static inline int gm_cmp(const void *a, const void *b, size_t n) { return n ? memcmp(a, b, n) : 0; }

static inline bool gm_cls_has(const gm_cls *c, uint8_t b) { return (c->w[b >> 6] >> (b & 63)) & 1u; }

struct qhx_gm {
    gm_elem *elems;
    int32_t n_elems;
    int32_t *alt_pos;  /* start positions of every alternative, rule by rule */
    int32_t *rule_alt; /* [n_rules + 1]: rule r's alternatives are alt_pos[rule_alt[r] .. rule_alt[r+1]) */
    int32_t n_rules, root;
    gm_cls *cls;
    int32_t n_cls;
    int32_t n_class_elems; /* class positions: how many stacks may live without any ambiguity */
};

/* ---- the builder ------------------------------------------------------------------------------ */
typedef struct gb_rule {
    char *name;
    gm_elem *e; /* alternatives, each ended by an END */
    int32_t n, cap;
    int32_t owner; /* the rule the user named that this one was made for (itself when named) */
    bool defined;
} gb_rule;

/* What a front end says about its own rules in messages: for the named rule `rule`, why 0 (it
 * is where the language empties: GB_WHY_EMPTY_CLASS / GB_WHY_CYCLE) or GB_WHY_WHERE (just where
 * it is), written into buf. 1 when it wrote one, 0 to leave the default ("rule 'x'"). */
enum { GB_WHY_WHERE = 0, GB_WHY_EMPTY_CLASS = 1, GB_WHY_CYCLE = 2 };
typedef int (*gb_label_fn)(void *ctx, const char *rule, int why, char *buf, size_t size);

typedef struct gm_builder {
    gb_rule *rules;
    int32_t n_rules, cap_rules;
    gm_cls *cls;
    int32_t n_cls, cap_cls;
    int64_t n_elems; /* all rules together, for the cap */
    int32_t *names;  /* named rules by name (open addressing, -1 empty; anonymous ones not in it) */
    size_t names_mask;
    int32_t *cls_ht; /* classes by content, the same way */
    size_t cls_mask;
    gb_label_fn label; /* NULL: messages name the rules as the text does */
    void *label_ctx;
    qhx_error *err;
    qhx_status rc;   /* first failure, sticky */
} gm_builder;

void gb_init(gm_builder *b, qhx_error *err);
void gb_deinit(gm_builder *b);
/* The rule named name (n bytes), created when new. -1 on failure (b->rc set). */
int32_t gb_rule_named(gm_builder *b, const char *name, size_t n);
/* The named rule, or -1 when there is none (nothing created). */
int32_t gb_rule_find(const gm_builder *b, const char *name, size_t n);
/* Forget rule r's elements (a scratch rule reused). */
void gb_rule_clear(gm_builder *b, int32_t r);
/* A new rule named after base ("value-3"). -1 on failure. */
int32_t gb_rule_anon(gm_builder *b, int32_t base);
/* Append an element to rule r's current alternative; gb_end closes the alternative. */
void gb_push(gm_builder *b, int32_t r, int32_t kind, int32_t arg);
void gb_end(gm_builder *b, int32_t r);
/* A byte class (deduplicated); -1 on failure. */
int32_t gb_class(gm_builder *b, const gm_cls *c);
/* Code point ranges lo[i]..hi[i] (n of them, any order, surrogates ignored; negate: their
 * complement in U+0000..U+10FFFF) as one element appended to rule r: one byte class when all
 * of it is ASCII, else a reference to a new rule of UTF-8 byte sequences. */
void gb_push_cps(gm_builder *b, int32_t r, int32_t base, const uint32_t *lo, const uint32_t *hi, int n, bool negate);
/* Append code point cp as its UTF-8 bytes. */
void gb_push_cp(gm_builder *b, int32_t r, uint32_t cp);
/* Check (every rule defined, no harmful left recursion, the start rule matches some text) and
 * compile, leaving out the alternatives that can never complete; *out owned. */
qhx_status gb_finish(gm_builder *b, int32_t root, qhx_gm **out);
/* qhx_gm_parse with the front end's names in messages (label, ctx: see gb_label_fn). */
qhx_status gm_parse_labeled(const char *text, size_t len, const char *root, gb_label_fn label, void *ctx, qhx_gm **out,
                            qhx_error *err);
/* Failure helper: records the first error. Returns -1. */
int gb_fail(gm_builder *b, qhx_status code, const char *fmt, ...) QHX_PRINTF(3, 4);

#endif
