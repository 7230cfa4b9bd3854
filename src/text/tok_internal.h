/* text/tok_internal: the tokenizer's in-memory layout, shared by the tok_*.c files only.
 * Nothing here is API; see tokenizer.h for the contracts. */
#ifndef QHX_TEXT_TOK_INTERNAL_H
#define QHX_TEXT_TOK_INTERNAL_H

#include "text/tokenizer.h"

#include "core/file.h"
#include "core/json_scan.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

/* ---- small growable buffers ----------------------------------------------------------- */

typedef qhx_bytes tok_buf; /* bytes (core/json_scan.h) */

typedef struct tok_ids { /* token ids */
    int32_t *p;
    size_t n, cap;
} tok_ids;

static inline bool qhx_tok_buf_reserve(tok_buf *b, size_t extra) { return qhx_bytes_reserve(b, extra); }
static inline bool qhx_tok_buf_put(tok_buf *b, const void *data, size_t n) { return qhx_bytes_put(b, data, n); }
bool qhx_tok_ids_push(tok_ids *v, int32_t id);

/* 64-bit hash of a byte string (for the hash tables; short strings). */
uint64_t qhx_tok_hash(const void *data, size_t n);
/* 64-bit hash of a whole file's bytes (fast on megabytes; part of the binary format). */
uint64_t qhx_tok_file_hash(const void *data, size_t n);

/* ---- components ----------------------------------------------------------------------- */

enum tok_split_behavior {
    TOK_SPLIT_REMOVED,
    TOK_SPLIT_ISOLATED,
    TOK_SPLIT_MERGED_PREV,
    TOK_SPLIT_MERGED_NEXT,
    TOK_SPLIT_CONTIGUOUS
};

typedef struct tok_split {
    pcre2_code *re;       /* with the Unicode 16.0 letter ranges */
    pcre2_code *re_plain; /* without them (NULL: same pattern), for text without such letters */
    int jit_plain;
    char *pattern; /* as tokenizer.json gives it (owned), for the binary form */
    uint32_t pattern_len;
    int literal;   /* a String pattern, not a Regex */
    int jit;       /* compiled for the JIT */
    int behavior; /* enum tok_split_behavior */
    int invert;
} tok_split;

typedef struct tok_added {
    int32_t id;
    uint32_t off, len; /* content bytes in qhx_tok.added_str */
    uint8_t special, lstrip, rstrip, normalized;
} tok_added;

/* Trie over the added tokens of one kind (matched on raw or on normalized text). */
typedef struct tok_trie {
    int32_t *node_token;   /* per node: index into qhx_tok.added, or -1 */
    uint64_t *edge_keys;   /* open addressing: (node << 8 | byte) + 1, 0 = empty */
    int32_t *edge_child;
    size_t n_nodes, edge_mask;
    int32_t root_child[256]; /* direct table for the first byte (-1 = none) */
} tok_trie;

typedef struct tok_merge tok_merge;
struct tok_merge {
    uint64_t key; /* (uint64)left << 32 | right; UINT64_MAX = empty slot */
    int32_t rank;
    int32_t id;   /* the merged token */
};

/* Cache of pre-token bytes -> ids: 64-byte lines (one CPU cache line: a lookup costs one
 * memory access), two-way set associative, for pre-tokens of at most TOK_CACHE_KEY bytes and
 * TOK_CACHE_IDS ids. Guarded by mu (trylock per encode call). */
#define TOK_CACHE_KEY 36
#define TOK_CACHE_IDS 5
typedef struct tok_cache_line {
    uint32_t tag; /* high half of the key's hash, with bit 0 set; 0 = empty */
    uint8_t key_len, n_ids, pad[2];
    int32_t ids[TOK_CACHE_IDS];
    char key[TOK_CACHE_KEY];
} tok_cache_line;

typedef struct tok_cache {
    pthread_mutex_t mu;
    int mu_ready;
    tok_cache_line *lines; /* allocated on first use */
    struct tok_merge *hot; /* recently looked-up merge pairs (tok_encode.c) */
} tok_cache;
_Static_assert(sizeof(tok_cache_line) == 64, "one cache line");

#define TOK_NO_STR UINT32_MAX
#define TOK_STR_HDR 8 /* bytes of an entry header in qhx_tok.str */

enum { TOK_NORM_NONE, TOK_NORM_NFC };
enum { TOK_DEC_BYTELEVEL, TOK_DEC_NONE };
enum { TOK_ID_VOCAB = 1, TOK_ID_ADDED = 2, TOK_ID_SPECIAL = 4 };

struct qhx_tok {
    /* model: vocab. str holds an entry per vocab token, [u32 id][u32 len][len bytes][NUL],
     * the token as tokenizer.json spells it (byte-level alphabet) */
    int32_t n_ids;         /* largest id + 1 (vocab and added) */
    uint32_t *str_off;     /* [n_ids] offset of id's entry in str, or TOK_NO_STR */
    char *str;
    size_t str_bytes;
    uint64_t *vocab_slots; /* open addressing: (hash tag << 32) | (entry offset + 1); 0 = empty */
    size_t vocab_mask;
    uint8_t *id_kind;      /* [n_ids] TOK_ID_* bits */
    uint32_t *dec_off;     /* [n_ids + 1] decoded bytes of each id in dec */
    uint8_t *dec;
    int32_t byte_id[256];  /* id of the one-byte symbol for each byte (-1: not in vocab) */
    /* model: merges */
    tok_merge *merges;
    size_t merge_mask;
    uint64_t *merge_filter; /* one bit per hash of the pairs that merge (no bit: no merge) */
    unsigned filter_shift;
    int32_t n_merges;
    int ignore_merges, fuse_unk;
    int32_t unk_id; /* -1: none */
    /* added tokens */
    tok_added *added;
    int32_t n_added;
    char *added_str;
    tok_trie trie_raw, trie_norm; /* non-normalized / normalized added tokens */
    int has_norm_added;
    /* normalizer, pre-tokenizer, decoder */
    int normalizer; /* TOK_NORM_* */
    tok_split splits[QHX_TOK_MAX_SPLITS + 1];
    int n_splits;
    int add_prefix_space; /* ByteLevel pre-tokenizer */
    int prefix_stage;     /* split stage at which ByteLevel adds the prefix space */
    int decoder;          /* TOK_DEC_* */
    pcre2_general_context *gctx;
    pcre2_match_context *mctx;
    tok_cache cache;
    /* where it came from */
    uint64_t source_bytes, source_hash; /* the tokenizer.json bytes and their file hash */
    qhx_file_map bin;                   /* binary form: the arrays above point into it */
    uint8_t *bin_copy;                  /* ... or into this copy (loaded from a buffer) */
    uint64_t *bin_starts;               /* scratch of the binary validation */
    int borrowed;
};

/* ---- shared helpers ------------------------------------------------------------------- */

/* GPT-2 byte <-> unicode table. */
extern const uint16_t qhx_tok_byte_to_cp[256];
/* Byte for a code point of the byte-level alphabet, or -1. */
int qhx_tok_cp_to_byte(uint32_t cp);

/* Decode one UTF-8 scalar at s[0..n) (n >= 1). Returns its length (1-4) and sets *cp, or 0
 * if the bytes are not a well-formed sequence (core/json_scan.h qhx_utf8_next). */
static inline int qhx_tok_utf8_next(const uint8_t *s, size_t n, uint32_t *cp) { return qhx_utf8_next(s, n, cp); }
/* Offset of the first byte that is not well-formed UTF-8, or n if all is valid. */
size_t qhx_tok_utf8_check(const uint8_t *s, size_t n);
/* Append text with ill-formed sequences replaced by U+FFFD (Rust from_utf8_lossy). If
 * `hold_tail` is set, an incomplete but so-far valid sequence at the end is not consumed;
 * returns the number of input bytes consumed. false on allocation failure. */
bool qhx_tok_utf8_lossy(tok_buf *out, const uint8_t *s, size_t n, bool hold_tail,
                        size_t *consumed);
static inline size_t qhx_tok_utf8_put(char *dst, uint32_t cp) { return qhx_utf8_put(dst, cp); }

/* Unicode data (tok_unicode_data.c, generated). */
int qhx_tok_nfc_maybe(uint32_t cp);
int qhx_tok_unicode9_assigned(uint32_t cp);
/* A letter, number or mark of Unicode 16.0 that PCRE2 10.42 may not know (assigned after 12.1). */
int qhx_tok_unicode_extra(uint32_t cp);
/* PCRE2 class text for the letters, numbers and marks of Unicode 16.0 assigned after 12.1. */
extern const char qhx_tok_extra_L[], qhx_tok_extra_N[], qhx_tok_extra_M[];

/* NFC as the reference computes it (Unicode 9.0 tables); appends to out. */
bool qhx_tok_nfc(const char *s, size_t n, tok_buf *out);
/* Whether NFC would leave s unchanged (fast check, may answer false for normalized text). */
bool qhx_tok_nfc_quick(const char *s, size_t n);
/* One pass over s: TOK_SCAN_NFC if NFC may change it, TOK_SCAN_EXTRA if it holds a character
 * of qhx_tok_unicode_extra. */
enum { TOK_SCAN_NFC = 1, TOK_SCAN_EXTRA = 2 };
unsigned qhx_tok_scan(const char *s, size_t n);

/* Longest added token at the start of s (index into tok->added, its length in *len), or -1. */
int32_t qhx_tok_trie_match(const tok_trie *t, const uint8_t *s, size_t n, size_t *len);

/* The vocab token of id (bytes and length), or NULL. */
static inline const char *qhx_tok_vocab_str(const qhx_tok *tok, int32_t id, uint32_t *len) {
    if (id < 0 || id >= tok->n_ids || tok->str_off[id] == TOK_NO_STR) return NULL;
    const char *e = tok->str + tok->str_off[id];
    memcpy(len, e + 4, 4);
    return e + TOK_STR_HDR;
}

/* Index the vocab entries of tok->str (str_off filled); duplicate tokens are errors. */
qhx_status qhx_tok_index_vocab(qhx_tok *tok, const char *name, qhx_error *err);
int32_t qhx_tok_vocab_find(const qhx_tok *tok, const char *s, size_t n);
/* As qhx_tok_vocab_find with h = qhx_tok_hash(s, n) computed by the caller. */
int32_t qhx_tok_vocab_find_h(const qhx_tok *tok, const char *s, size_t n, uint64_t h);
/* Prefetch for a later lookup of hash h: stage 0 its slot, stage 1 its entry. */
static inline void qhx_tok_vocab_prefetch(const qhx_tok *tok, uint64_t h, int stage) {
    if (!tok->vocab_slots) return;
    const uint64_t *slot = &tok->vocab_slots[(size_t)h & tok->vocab_mask];
    if (stage == 0) __builtin_prefetch(slot);
    else if (*slot && (*slot & ~0xffffffffull) == (h >> 32 << 32))
        __builtin_prefetch(tok->str + (uint32_t)(*slot - 1));
}

/* Home slot of a merge pair key (part of the binary format: changing it needs a new version). */
static inline size_t qhx_tok_merge_slot(uint64_t key, size_t mask) {
    uint64_t h = (key ^ (key >> 29)) * 0xbf58476d1ce4e5b9ull;
    return (size_t)(h ^ (h >> 32)) & mask;
}

typedef struct tok_merge_rec {
    int32_t a, b, id;
} tok_merge_rec;
/* Build the merge table from merges in rank order (a repeated pair keeps its last rank). */
qhx_status qhx_tok_index_merges(qhx_tok *tok, const tok_merge_rec *recs, size_t n,
                                const char *name, qhx_error *err);
static inline size_t qhx_tok_filter_bit(uint64_t key, unsigned shift) {
    return (size_t)((key * 0x9e3779b97f4a7c15ull) >> shift);
}

/* The merge of the pair (a, b), or NULL. Most pairs do not merge: a bit filter that fits the
 * CPU caches answers those without touching the (large) table. */
static inline const tok_merge *qhx_tok_merge_find(const qhx_tok *tok, int32_t a, int32_t b) {
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    if (tok->merge_filter) {
        size_t bit = qhx_tok_filter_bit(key, tok->filter_shift);
        if (!(tok->merge_filter[bit >> 6] >> (bit & 63) & 1)) return NULL;
    }
    for (size_t h = qhx_tok_merge_slot(key, tok->merge_mask);; h = (h + 1) & tok->merge_mask) {
        const tok_merge *m = &tok->merges[h];
        if (m->key == key) return m;
        if (m->key == UINT64_MAX) return NULL;
    }
}

/* A new, empty tokenizer with its PCRE2 contexts. */
qhx_status qhx_tok_new(const char *name, qhx_tok **out, qhx_error *err);

/* Derive id kinds and decoded bytes (from vocab and added tokens), then finish. */
qhx_status qhx_tok_derive(qhx_tok *tok, const char *name, qhx_error *err);
/* Tables every loader builds: byte symbols, added-token tries, the cache mutex. */
qhx_status qhx_tok_finish(qhx_tok *tok, const char *name, qhx_error *err);
/* Binary form (tok_binary.c): the magic check, and whether a binary file was made from
 * exactly these tokenizer.json bytes. */
int qhx_tok_is_binary(const void *data, size_t size);
int qhx_tok_binary_matches(const char *bin_path, const void *src, size_t src_size);

/* For tests: BPE of one pre-token (raw bytes) by the short-word path (use_heap = 0, at most
 * 48 symbols) or the heap path; appends to out. */
qhx_status qhx_tok_bpe_path(qhx_tok *tok, const uint8_t *s, size_t n, int use_heap, tok_ids *out,
                            qhx_error *err);

/* Compile a Split pattern taken from tokenizer.json (Oniguruma syntax) with PCRE2. */
qhx_status qhx_tok_compile_split(qhx_tok *tok, const char *pat, size_t len, int literal,
                                 const char *where, tok_split *out, qhx_error *err);

#endif
