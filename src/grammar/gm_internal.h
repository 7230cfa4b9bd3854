/* grammar/gm_internal.h: the compiled grammar and the builder the GBNF parser fills, shared by
 * the files of src/grammar only. */
#ifndef QHX_GRAMMAR_INTERNAL_H
#define QHX_GRAMMAR_INTERNAL_H

#include "grammar/grammar.h"

#include <stdbool.h>

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

static inline bool gm_cls_has(const gm_cls *c, uint8_t b) { return (c->w[b >> 6] >> (b & 63)) & 1u; }

struct qhx_gm {
    gm_elem *elems;
    int32_t n_elems;
    int32_t *alt_pos;  /* start positions of every alternative, rule by rule */
    int32_t *rule_alt; /* [n_rules + 1]: rule r's alternatives are alt_pos[rule_alt[r] .. rule_alt[r+1]) */
    int32_t n_rules, root;
    gm_cls *cls;
    int32_t n_cls;
};

/* ---- the builder ------------------------------------------------------------------------------ */
typedef struct gb_rule {
    char *name;
    gm_elem *e; /* alternatives, each ended by an END */
    int32_t n, cap;
    bool defined;
} gb_rule;

typedef struct gm_builder {
    gb_rule *rules;
    int32_t n_rules, cap_rules;
    gm_cls *cls;
    int32_t n_cls, cap_cls;
    int64_t n_elems; /* all rules together, for the cap */
    qhx_error *err;
    qhx_status rc;   /* first failure, sticky */
} gm_builder;

void gb_init(gm_builder *b, qhx_error *err);
void gb_deinit(gm_builder *b);
/* The rule named name (n bytes), created when new. -1 on failure (b->rc set). */
int32_t gb_rule_named(gm_builder *b, const char *name, size_t n);
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
/* Check (every rule defined, no left recursion) and compile; *out owned. */
qhx_status gb_finish(gm_builder *b, int32_t root, qhx_gm **out);
/* Failure helper: records the first error. Returns -1. */
int gb_fail(gm_builder *b, qhx_status code, const char *fmt, ...) QHX_PRINTF(3, 4);

#endif
