/* grammar: constrained output. A context-free grammar over bytes (written in GBNF, the grammar
 * syntax of llama.cpp: docs/grammar.md), a compiler from a JSON Schema subset into it, a matcher
 * that follows the bytes of an output, and token masks over a vocabulary (which tokens can
 * continue the output).
 *
 *   qhx_gm         a compiled grammar: immutable, shareable between threads
 *   qhx_gm_match   one output's parse state over a grammar (not thread-safe; one per output)
 *   qhx_gm_vocab   the byte strings of a tokenizer's ids, sorted for mask walks (immutable)
 *
 * The matcher keeps every parse stack that is still alive (a pushdown recognizer; stacks are
 * hash-consed, so equal stacks are one node and the states a loop revisits compare equal):
 * exact for any grammar without left recursion (refused when compiled), at a cost bounded by
 * the caps below. Bytes, not characters: a token ending inside a UTF-8 sequence is followed
 * exactly, and every character class compiles to well-formed UTF-8. */
#ifndef QHX_GRAMMAR_H
#define QHX_GRAMMAR_H

#include "core/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Caps (docs/grammar.md, "Limits"): input sizes, and the work one step may take. */
#define QHX_GM_MAX_TEXT ((size_t)1 << 20)     /* bytes of grammar text or JSON Schema */
#define QHX_GM_MAX_ELEMS (1 << 20)            /* compiled elements (after repetitions expand) */
#define QHX_GM_MAX_RULES (1 << 16)
#define QHX_GM_MAX_REPEAT 4096                /* m and n of x{m,n}; a schema's lengths and counts */
#define QHX_GM_MAX_NEST 256                   /* parentheses in a grammar, nesting in a schema */
#define QHX_GM_MAX_STACKS 8192                /* live parse stacks after one byte */
#define QHX_GM_MAX_NODES (1 << 22)            /* stack nodes held by one matcher */

typedef struct qhx_gm qhx_gm;

/* Parse GBNF text (len bytes); root: the start rule ("root" when NULL). Errors: QHX_E_FORMAT
 * with the line and column ("grammar:3:14: expected '::='"), an undefined rule, left recursion
 * (named), QHX_E_LIMIT for the caps above. */
qhx_status qhx_gm_parse(const char *text, size_t len, const char *root, qhx_gm **out /* OUT */, qhx_error *err);
void qhx_gm_free(qhx_gm *g); /* NULL allowed */
/* Rules in g (for tests and messages). */
int32_t qhx_gm_n_rules(const qhx_gm *g);

/* ---- JSON Schema -> grammar -------------------------------------------------------------------
 * The supported subset is in docs/grammar.md; a keyword outside it is QHX_E_UNSUPPORTED naming
 * the keyword and where it is ("json schema: #/properties/a: 'multipleOf' is not supported"). */
qhx_status qhx_gm_schema_to_gbnf(const char *json, size_t len, char **gbnf /* OUT, owned: qhx_free */,
                                 size_t *gbnf_len /* OUT, may be NULL */, qhx_error *err);
qhx_status qhx_gm_from_schema(const char *json, size_t len, qhx_gm **out /* OUT */, qhx_error *err);
/* Any JSON object (response_format json_object, --json-object). */
qhx_status qhx_gm_json_object(qhx_gm **out /* OUT */, qhx_error *err);
/* How a chat format writes one tool call (the family's chat style fills it in; this layer knows
 * no format of its own). Either form ends with call_end.
 *   blocks (!json): the text before is the call's opening and the function's name (named) or the
 *     opening up to the name (any); after the name comes named; each argument is
 *     param_open KEY param_open_end VALUE '\n' param_close '\n', then call_end. param_close
 *     must start with '<' (a raw string value never holds one, so it cannot run into the close);
 *   json: the call is one JSON object {"name": NAME, "arguments": ARGS}: the text before ends
 *     with the arguments key (named) or inside the name string (any: then named, the rest of
 *     the name string and the key, follows the name); ARGS one JSON value, then call_end (the
 *     object's close and the format's end marker). */
typedef struct qhx_gm_call_syntax {
    bool json;
    const char *named;
    const char *param_open, *param_open_end, *param_close; /* blocks only */
    const char *call_end;
} qhx_gm_call_syntax;

/* The rest of a tool call forced by tool_choice, its arguments held to each function's
 * "parameters" schema: tools (n_tools JSON texts, {"type": "function", "function": {...}}),
 * name: the one function or NULL for any of them; syntax: how the call is written (above).
 * GBNF text, owned: qhx_free. */
qhx_status qhx_gm_tool_call_gbnf(const char *const *tools, size_t n_tools, const char *name,
                                 const qhx_gm_call_syntax *syntax, char **gbnf /* OUT */, qhx_error *err);

/* ---- matching ---------------------------------------------------------------------------------- */
typedef struct qhx_gm_match qhx_gm_match;

qhx_status qhx_gm_match_new(const qhx_gm *g, qhx_gm_match **out /* OUT */, qhx_error *err);
void qhx_gm_match_free(qhx_gm_match *m); /* NULL allowed */
void qhx_gm_match_reset(qhx_gm_match *m); /* back to the start */
/* Follow n bytes. 1: accepted (the state moved); 0: rejected (state unchanged); -1: a cap was
 * hit (state unchanged, err set). */
int qhx_gm_match_bytes(qhx_gm_match *m, const uint8_t *p, size_t n, qhx_error *err);
/* Whether the bytes so far are a whole sentence of the grammar / can be continued. */
int qhx_gm_match_can_end(const qhx_gm_match *m);
int qhx_gm_match_can_continue(const qhx_gm_match *m);

/* ---- vocabularies and masks -------------------------------------------------------------------- */
typedef struct qhx_gm_vocab qhx_gm_vocab;

enum { QHX_GM_TOK_TEXT = 0, QHX_GM_TOK_END = 1, QHX_GM_TOK_NEVER = 2 };

/* n ids; bytes[i] / lens[i]: the bytes id i stands for; kind[i]: TEXT (allowed where the
 * grammar takes its bytes), END (an end of turn: allowed where the grammar may end), NEVER
 * (special tokens, unused ids). Copies what it needs. */
qhx_status qhx_gm_vocab_new(int32_t n, const uint8_t *const *bytes, const uint32_t *lens, const uint8_t *kind,
                            qhx_gm_vocab **out /* OUT */, qhx_error *err);
void qhx_gm_vocab_free(qhx_gm_vocab *v);
int32_t qhx_gm_vocab_n(const qhx_gm_vocab *v);
/* The kind of id (QHX_GM_TOK_*; NEVER out of range). */
int qhx_gm_vocab_kind(const qhx_gm_vocab *v, int32_t id);

/* The ids allowed next, as bits (bit i of words[i / 64]; qhx_gm_vocab_n bits). Masks of
 * states seen before come from the matcher's cache. 0, or -1 when a cap was hit (err set). */
int qhx_gm_mask(qhx_gm_match *m, const qhx_gm_vocab *v, uint64_t *words, qhx_error *err);
/* Whether one id is allowed next (no mask needed: for checking a sampled or drafted token). */
int qhx_gm_allows(qhx_gm_match *m, const qhx_gm_vocab *v, int32_t id, qhx_error *err);
/* Follow id: its bytes, or for an END id nothing (the output must be able to end). 1/0/-1 as
 * qhx_gm_match_bytes. */
int qhx_gm_accept(qhx_gm_match *m, const qhx_gm_vocab *v, int32_t id, qhx_error *err);

/* Counters for measurements: masks computed, masks from the cache, bytes followed in walks. */
typedef struct qhx_gm_counters {
    uint64_t masks, cache_hits, walk_bytes;
} qhx_gm_counters;
void qhx_gm_match_counters(const qhx_gm_match *m, qhx_gm_counters *out);

#endif
