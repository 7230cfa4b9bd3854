/* text/tok_binary: the compact binary form of a loaded tokenizer (".qhxtok").
 *
 * The file holds the tokenizer's arrays as they are in memory (vocab entries and index,
 * decode strings, merge table, added tokens, pre-tokenizer patterns) so that loading is a
 * map plus a validation pass; the arrays are used in place. Everything is checked as hostile
 * input: sizes, offsets, ids, table contents and a checksum. Layout: docs/tokenizer.md.
 * Little-endian hosts only (the arrays are native). */
#include "text/tok_internal.h"

#include "core/alloc.h"
#include "core/file.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#define TOKBIN_BIG_ENDIAN 1
#endif

static const uint8_t MAGIC[8] = {'q', 'h', 'x', 't', 'o', 'k', '\n', 0x1a};
#define TOKBIN_VERSION 1u
#define HEADER_BYTES 128u
#define ALIGN 64u

enum { S_STR_OFF, S_STR, S_VOCAB_SLOTS, S_ID_KIND, S_DEC_OFF, S_DEC, S_MERGES, S_ADDED,
       S_ADDED_STR, S_SPLITS, S_PATTERNS, N_SECTIONS };
static const char *const SECTION_NAMES[N_SECTIONS] = {
    "vocab offsets", "vocab strings", "vocab index", "id kinds", "decode offsets",
    "decode bytes", "merges", "added tokens", "added token text", "splits", "patterns"};

/* The fixed header; integers little-endian. */
typedef struct tokbin_header {
    uint8_t magic[8];
    uint32_t version, header_bytes;
    uint64_t file_bytes;
    uint64_t source_bytes, source_hash; /* the tokenizer.json it was made from (0: unknown) */
    uint64_t body_hash;                 /* qhx_tok_file_hash of bytes [HEADER_BYTES, file_bytes) */
    uint32_t n_ids, n_merges, n_added, n_splits;
    uint32_t vocab_slots, merge_slots;
    int32_t unk_id;
    uint8_t normalizer, decoder, add_prefix_space, prefix_stage, ignore_merges, fuse_unk, pad[2];
    uint32_t n_sections;
    uint8_t reserved[HEADER_BYTES - 88];
} tokbin_header;
_Static_assert(sizeof(tokbin_header) == HEADER_BYTES, "header layout");

typedef struct tokbin_section {
    uint64_t offset, bytes;
} tokbin_section;

typedef struct tokbin_added { /* 16 bytes */
    int32_t id;
    uint32_t off, len;
    uint8_t special, lstrip, rstrip, normalized;
} tokbin_added;

typedef struct tokbin_split { /* 16 bytes */
    uint32_t behavior, invert, literal, pattern_len;
} tokbin_split;

_Static_assert(sizeof(tok_merge) == 16, "merge layout");
_Static_assert(sizeof(tokbin_added) == 16 && sizeof(tokbin_split) == 16, "record layout");

#define BODY_START (HEADER_BYTES + N_SECTIONS * sizeof(tokbin_section))

/* ---- saving ---------------------------------------------------------------------------- */

qhx_status qhx_tok_save(const qhx_tok *tok, const char *path, qhx_error *err) {
#ifdef TOKBIN_BIG_ENDIAN
    (void)tok;
    return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: the binary tokenizer form needs a little-endian host", path);
#else
    if (!tok || !path) return qhx_fail(err, QHX_E_ARG, "tokenizer: nothing to save");
    size_t n_vslots = tok->vocab_mask + 1, n_mslots = tok->merge_mask + 1, pat_bytes = 0;
    for (int k = 0; k < tok->n_splits; k++) pat_bytes += tok->splits[k].pattern_len;
    size_t added_bytes = 0;
    for (int32_t k = 0; k < tok->n_added; k++) added_bytes += tok->added[k].len;
    const void *data[N_SECTIONS];
    size_t bytes[N_SECTIONS] = {
        (size_t)tok->n_ids * 4, tok->str_bytes, n_vslots * 8, (size_t)tok->n_ids,
        ((size_t)tok->n_ids + 1) * 4, tok->dec_off[tok->n_ids], n_mslots * sizeof(tok_merge),
        (size_t)tok->n_added * sizeof(tokbin_added), added_bytes,
        (size_t)tok->n_splits * sizeof(tokbin_split), pat_bytes};
    tokbin_added *added = qhx_calloc(tok->n_added ? (size_t)tok->n_added : 1, sizeof *added);
    char *added_str = qhx_malloc(added_bytes + 1);
    tokbin_split *splits = qhx_calloc(QHX_TOK_MAX_SPLITS + 1, sizeof *splits);
    char *pats = qhx_malloc(pat_bytes + 1);
    qhx_status rc = QHX_OK;
    if (!added || !added_str || !splits || !pats) {
        rc = qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", path);
        goto out;
    }
    size_t off = 0;
    for (int32_t k = 0; k < tok->n_added; k++) {
        const tok_added *a = &tok->added[k];
        added[k] = (tokbin_added){a->id, (uint32_t)off, a->len, a->special, a->lstrip, a->rstrip, a->normalized};
        memcpy(added_str + off, tok->added_str + a->off, a->len);
        off += a->len;
    }
    off = 0;
    for (int k = 0; k < tok->n_splits; k++) {
        const tok_split *s = &tok->splits[k];
        splits[k] = (tokbin_split){(uint32_t)s->behavior, (uint32_t)s->invert, (uint32_t)s->literal, s->pattern_len};
        memcpy(pats + off, s->pattern, s->pattern_len);
        off += s->pattern_len;
    }
    data[S_STR_OFF] = tok->str_off;
    data[S_STR] = tok->str;
    data[S_VOCAB_SLOTS] = tok->vocab_slots;
    data[S_ID_KIND] = tok->id_kind;
    data[S_DEC_OFF] = tok->dec_off;
    data[S_DEC] = tok->dec;
    data[S_MERGES] = tok->merges;
    data[S_ADDED] = added;
    data[S_ADDED_STR] = added_str;
    data[S_SPLITS] = splits;
    data[S_PATTERNS] = pats;

    tokbin_header h = {0};
    tokbin_section sec[N_SECTIONS];
    uint64_t pos = (BODY_START + ALIGN - 1) / ALIGN * ALIGN;
    for (int k = 0; k < N_SECTIONS; k++) {
        sec[k] = (tokbin_section){pos, bytes[k]};
        pos = (pos + bytes[k] + ALIGN - 1) / ALIGN * ALIGN;
    }
    memcpy(h.magic, MAGIC, 8);
    h.version = TOKBIN_VERSION;
    h.header_bytes = HEADER_BYTES;
    h.file_bytes = pos;
    h.source_bytes = tok->source_bytes;
    h.source_hash = tok->source_hash;
    h.n_ids = (uint32_t)tok->n_ids;
    h.n_merges = (uint32_t)tok->n_merges;
    h.n_added = (uint32_t)tok->n_added;
    h.n_splits = (uint32_t)tok->n_splits;
    h.vocab_slots = (uint32_t)n_vslots;
    h.merge_slots = (uint32_t)n_mslots;
    h.unk_id = tok->unk_id;
    h.normalizer = (uint8_t)tok->normalizer;
    h.decoder = (uint8_t)tok->decoder;
    h.add_prefix_space = (uint8_t)tok->add_prefix_space;
    h.prefix_stage = (uint8_t)tok->prefix_stage;
    h.ignore_merges = (uint8_t)tok->ignore_merges;
    h.fuse_unk = (uint8_t)tok->fuse_unk;
    h.n_sections = N_SECTIONS;

    /* assemble the body in memory for its checksum, then write the file under a temporary
     * name and rename it, so a reader never sees half a file */
    uint8_t *body = qhx_calloc(1, (size_t)pos);
    if (!body) {
        rc = qhx_fail(err, QHX_E_NOMEM, "%s: out of memory (%llu bytes)", path, (unsigned long long)pos);
        goto out;
    }
    memcpy(body + HEADER_BYTES, sec, sizeof sec);
    for (int k = 0; k < N_SECTIONS; k++)
        if (bytes[k]) memcpy(body + sec[k].offset, data[k], bytes[k]);
    h.body_hash = qhx_tok_file_hash(body + HEADER_BYTES, (size_t)pos - HEADER_BYTES);
    memcpy(body, &h, sizeof h);
    qhx_out_file of;
    if ((rc = qhx_out_open(&of, path, 0666, err)) == QHX_OK) {
        if (fwrite(body, 1, (size_t)pos, of.f) != (size_t)pos) {
            rc = qhx_fail(err, QHX_E_IO, "%s: write failed: %s", path, strerror(errno));
            qhx_out_abort(&of);
        } else {
            rc = qhx_out_commit(&of, err);
        }
    }
    qhx_free(body);
out:
    qhx_free(added);
    qhx_free(added_str);
    qhx_free(splits);
    qhx_free(pats);
    return rc;
#endif
}

/* ---- loading --------------------------------------------------------------------------- */

#define BAD(...) return qhx_fail(err, QHX_E_FORMAT, __VA_ARGS__)

static int is_pow2(uint64_t x) { return x && !(x & (x - 1)); }

/* Validate the file and point tok's arrays into it. */
static qhx_status parse(qhx_tok *tok, const uint8_t *d, size_t size, const char *name, qhx_error *err) {
    tokbin_header h;
    if (size < BODY_START) BAD("%s: %zu bytes is too short for a binary tokenizer", name, size);
    memcpy(&h, d, sizeof h);
    if (memcmp(h.magic, MAGIC, 8)) BAD("%s: not a binary tokenizer (bad magic)", name);
    if (h.version != TOKBIN_VERSION)
        return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: binary tokenizer version %u, this build reads %u",
                        name, h.version, TOKBIN_VERSION);
    if (h.header_bytes != HEADER_BYTES || h.n_sections != N_SECTIONS)
        BAD("%s: header size %u / %u sections, expected %u / %d", name, h.header_bytes, h.n_sections,
            HEADER_BYTES, N_SECTIONS);
    if (h.file_bytes != size)
        BAD("%s: header says %llu bytes, the file has %zu (truncated?)", name,
            (unsigned long long)h.file_bytes, size);
    for (size_t k = 0; k < sizeof h.reserved; k++)
        if (h.reserved[k] || (k < 2 && h.pad[k])) BAD("%s: reserved header bytes are not zero", name);
    if (qhx_tok_file_hash(d + HEADER_BYTES, size - HEADER_BYTES) != h.body_hash)
        BAD("%s: checksum mismatch (the file is damaged)", name);
    if (h.n_ids < 1 || h.n_ids > QHX_TOK_MAX_IDS || h.n_merges > QHX_TOK_MAX_MERGES ||
        h.n_added > QHX_TOK_MAX_ADDED || h.n_splits > QHX_TOK_MAX_SPLITS + 1)
        return qhx_fail(err, QHX_E_LIMIT, "%s: counts out of range (ids %u, merges %u, added %u, splits %u)",
                        name, h.n_ids, h.n_merges, h.n_added, h.n_splits);
    if (!is_pow2(h.vocab_slots) || h.vocab_slots < 16 || h.vocab_slots > (1u << 24) ||
        !is_pow2(h.merge_slots) || h.merge_slots < 16 || h.merge_slots > (1u << 24) ||
        h.merge_slots <= h.n_merges)
        BAD("%s: bad table sizes (%u vocab slots, %u merge slots)", name, h.vocab_slots, h.merge_slots);
    if (h.normalizer > TOK_NORM_NFC || h.decoder > TOK_DEC_NONE || h.add_prefix_space > 1 ||
        h.prefix_stage > h.n_splits || h.ignore_merges > 1 || h.fuse_unk > 1 ||
        h.unk_id < -1 || h.unk_id >= (int32_t)h.n_ids)
        BAD("%s: bad settings in the header", name);

    tokbin_section sec[N_SECTIONS];
    memcpy(sec, d + HEADER_BYTES, sizeof sec);
    const uint64_t n = h.n_ids;
    const uint64_t expect[N_SECTIONS] = {n * 4, UINT64_MAX, (uint64_t)h.vocab_slots * 8, n, (n + 1) * 4,
                                         UINT64_MAX, (uint64_t)h.merge_slots * 16, (uint64_t)h.n_added * 16,
                                         UINT64_MAX, (uint64_t)h.n_splits * 16, UINT64_MAX};
    for (int k = 0; k < N_SECTIONS; k++) {
        if (sec[k].offset % ALIGN || sec[k].offset < BODY_START || sec[k].offset > size ||
            sec[k].bytes > size - sec[k].offset || sec[k].bytes >= UINT32_MAX)
            BAD("%s: section '%s' (offset %llu, %llu bytes) lies outside the file", name,
                SECTION_NAMES[k], (unsigned long long)sec[k].offset, (unsigned long long)sec[k].bytes);
        if (expect[k] != UINT64_MAX && sec[k].bytes != expect[k])
            BAD("%s: section '%s' has %llu bytes, expected %llu", name, SECTION_NAMES[k],
                (unsigned long long)sec[k].bytes, (unsigned long long)expect[k]);
    }
#define SEC(k) (d + sec[k].offset)
    const uint32_t *str_off = (const uint32_t *)SEC(S_STR_OFF);
    const char *str = (const char *)SEC(S_STR);
    const uint64_t str_bytes = sec[S_STR].bytes;
    const uint64_t *vslots = (const uint64_t *)SEC(S_VOCAB_SLOTS);
    const uint8_t *kind = SEC(S_ID_KIND);
    const uint32_t *dec_off = (const uint32_t *)SEC(S_DEC_OFF);
    const tok_merge *merges = (const tok_merge *)SEC(S_MERGES);

    /* vocab entries: sequential, each where str_off says, each token valid UTF-8; their starts
     * go in a bitmap for checking the index without random reads */
    uint64_t pos = 0, entries = 0, present = 0;
    tok->bin_starts = qhx_calloc((size_t)(str_bytes / 64 + 1), sizeof(uint64_t));
    if (!tok->bin_starts) return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", name);
    uint64_t *starts = tok->bin_starts;
    while (pos < str_bytes) {
        uint32_t id, len;
        if (str_bytes - pos < TOK_STR_HDR) BAD("%s: vocab strings: truncated entry at %llu", name, (unsigned long long)pos);
        memcpy(&id, str + pos, 4);
        memcpy(&len, str + pos + 4, 4);
        if (id >= n || len < 1 || len > QHX_TOK_MAX_TOKEN_BYTES || str_bytes - pos - TOK_STR_HDR < (uint64_t)len + 1 ||
            str[pos + TOK_STR_HDR + len] != '\0' || str_off[id] != pos ||
            qhx_tok_utf8_check((const uint8_t *)str + pos + TOK_STR_HDR, len) != len)
            BAD("%s: vocab strings: bad entry at %llu", name, (unsigned long long)pos);
        starts[pos / 64] |= 1ull << (pos % 64);
        pos += TOK_STR_HDR + (uint64_t)len + 1;
        entries++;
    }
    for (uint64_t id = 0; id < n; id++) {
        if (str_off[id] == TOK_NO_STR) continue;
        present++;
        if (!(kind[id] & TOK_ID_VOCAB)) BAD("%s: id %llu: kind does not match the vocab", name, (unsigned long long)id);
    }
    if (present != entries) BAD("%s: vocab offsets do not match the entries", name);
    if (h.unk_id >= 0 && str_off[h.unk_id] == TOK_NO_STR) BAD("%s: the unk token is not in the vocab", name);
    /* the index: empty, or an entry start; at least one empty slot so lookups end */
    uint64_t empty = 0;
    for (uint64_t k = 0; k < h.vocab_slots; k++) {
        uint64_t e = vslots[k];
        if (!e) {
            empty++;
            continue;
        }
        uint64_t off = (uint32_t)(e - 1);
        if ((uint32_t)e == 0 || off >= str_bytes || !(starts[off / 64] >> (off % 64) & 1))
            BAD("%s: vocab index slot %llu is bad", name, (unsigned long long)k);
    }
    if (!empty) BAD("%s: the vocab index is full", name);
    /* a sample of the index must be where the hash puts it */
    for (uint64_t k = 0; k < h.vocab_slots; k += 61) {
        uint64_t e = vslots[k];
        if (!e) continue;
        uint32_t len;
        memcpy(&len, str + (uint32_t)(e - 1) + 4, 4);
        uint64_t hv = qhx_tok_hash(str + (uint32_t)(e - 1) + TOK_STR_HDR, len);
        size_t at = (size_t)hv & (h.vocab_slots - 1);
        while (at != k && vslots[at]) at = (at + 1) & (h.vocab_slots - 1);
        if (at != k || (e >> 32) != (hv >> 32)) BAD("%s: vocab index slot %llu is not where its hash puts it", name, (unsigned long long)k);
    }
    qhx_free(tok->bin_starts);
    tok->bin_starts = NULL;
    /* decode offsets */
    if (dec_off[0] != 0 || dec_off[n] != sec[S_DEC].bytes) BAD("%s: decode offsets are bad", name);
    for (uint64_t id = 0; id < n; id++)
        if (dec_off[id + 1] < dec_off[id]) BAD("%s: decode offsets are bad at id %llu", name, (unsigned long long)id);
    /* merges */
    empty = 0;
    for (uint64_t k = 0; k < h.merge_slots; k++) {
        const tok_merge *m = &merges[k];
        if (m->key == UINT64_MAX) {
            empty++;
            continue;
        }
        if ((m->key >> 32) >= n || (m->key & 0xffffffffu) >= n || m->rank < 0 ||
            (uint32_t)m->rank >= h.n_merges || m->id < 0 || (uint64_t)m->id >= n)
            BAD("%s: merge slot %llu is bad", name, (unsigned long long)k);
    }
    if (!empty) BAD("%s: the merge table is full", name);
    /* every entry must be reachable from its home slot without crossing an empty one (this
     * also catches a table written with another hash function) */
    for (uint64_t k = 0; k < h.merge_slots; k++) {
        if (merges[k].key == UINT64_MAX) continue;
        size_t at = qhx_tok_merge_slot(merges[k].key, h.merge_slots - 1);
        while (at != k && merges[at].key != UINT64_MAX) at = (at + 1) & (h.merge_slots - 1);
        if (at != k) BAD("%s: merge slot %llu is not where its hash puts it", name, (unsigned long long)k);
    }

    /* added tokens: copied, with NUL-terminated text */
    const tokbin_added *ad = (const tokbin_added *)SEC(S_ADDED);
    const char *ad_str = (const char *)SEC(S_ADDED_STR);
    tok->added = qhx_calloc(h.n_added ? h.n_added : 1, sizeof *tok->added);
    tok->added_str = qhx_malloc(sec[S_ADDED_STR].bytes + h.n_added + 1);
    if (!tok->added || !tok->added_str) return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", name);
    uint64_t aoff = 0;
    for (uint32_t k = 0; k < h.n_added; k++) {
        tokbin_added a;
        memcpy(&a, &ad[k], sizeof a);
        if (a.id < 0 || (uint64_t)a.id >= n || a.len < 1 || a.len > QHX_TOK_MAX_ADDED_BYTES ||
            a.off > sec[S_ADDED_STR].bytes || a.len > sec[S_ADDED_STR].bytes - a.off ||
            a.special > 1 || a.lstrip > 1 || a.rstrip > 1 || a.normalized > 1 ||
            !(kind[a.id] & TOK_ID_ADDED) || qhx_tok_utf8_check((const uint8_t *)ad_str + a.off, a.len) != a.len)
            BAD("%s: added token %u is bad", name, k);
        memcpy(tok->added_str + aoff, ad_str + a.off, a.len);
        tok->added_str[aoff + a.len] = '\0';
        tok->added[k] = (tok_added){a.id, (uint32_t)aoff, a.len, a.special, a.lstrip, a.rstrip, a.normalized};
        aoff += a.len + 1;
        tok->n_added = (int32_t)k + 1;
    }
    uint64_t n_added_kind = 0;
    for (uint64_t id = 0; id < n; id++) {
        if (kind[id] & ~(TOK_ID_VOCAB | TOK_ID_ADDED | TOK_ID_SPECIAL)) BAD("%s: id %llu: bad kind", name, (unsigned long long)id);
        n_added_kind += (kind[id] & TOK_ID_ADDED) != 0;
    }
    if (n_added_kind != h.n_added) BAD("%s: added tokens do not match the id kinds", name);

    /* settings and arrays */
    tok->n_ids = (int32_t)n;
    tok->str_off = (uint32_t *)str_off;
    tok->str = (char *)str;
    tok->str_bytes = (size_t)str_bytes;
    tok->vocab_slots = (uint64_t *)vslots;
    tok->vocab_mask = h.vocab_slots - 1;
    tok->id_kind = (uint8_t *)kind;
    tok->dec_off = (uint32_t *)dec_off;
    tok->dec = (uint8_t *)SEC(S_DEC);
    tok->merges = (tok_merge *)merges;
    tok->merge_mask = h.merge_slots - 1;
    tok->n_merges = (int32_t)h.n_merges;
    tok->borrowed = 1;
    tok->unk_id = h.unk_id;
    tok->normalizer = h.normalizer;
    tok->decoder = h.decoder;
    tok->add_prefix_space = h.add_prefix_space;
    tok->prefix_stage = h.prefix_stage;
    tok->ignore_merges = h.ignore_merges;
    tok->fuse_unk = h.fuse_unk;
    tok->source_bytes = h.source_bytes;
    tok->source_hash = h.source_hash;

    /* pre-tokenizer patterns, compiled again */
    const tokbin_split *sp = (const tokbin_split *)SEC(S_SPLITS);
    const char *pats = (const char *)SEC(S_PATTERNS);
    uint64_t poff = 0;
    for (uint32_t k = 0; k < h.n_splits; k++) {
        tokbin_split s;
        memcpy(&s, &sp[k], sizeof s);
        if (s.behavior > TOK_SPLIT_CONTIGUOUS || s.invert > 1 || s.literal > 1 ||
            s.pattern_len > sec[S_PATTERNS].bytes - poff)
            BAD("%s: split %u is bad", name, k);
        char where[48];
        snprintf(where, sizeof where, "%s: split %u", name, k);
        qhx_status rc = qhx_tok_compile_split(tok, pats + poff, s.pattern_len, (int)s.literal, where,
                                              &tok->splits[k], err);
        if (rc) return rc;
        tok->splits[k].behavior = (int)s.behavior;
        tok->splits[k].invert = (int)s.invert;
        tok->n_splits = (int)k + 1;
        poff += s.pattern_len;
    }
    if (poff != sec[S_PATTERNS].bytes) BAD("%s: patterns section has extra bytes", name);
#undef SEC
    return qhx_tok_finish(tok, name, err);
}

qhx_status qhx_tok_load_binary(const char *path, qhx_tok **out, qhx_error *err) {
    *out = NULL;
#ifdef TOKBIN_BIG_ENDIAN
    return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: the binary tokenizer form needs a little-endian host", path);
#else
    qhx_tok *tok;
    qhx_status rc = qhx_tok_new(path, &tok, err);
    if (rc) return rc;
    if ((rc = qhx_file_map_open(path, &tok->bin, err)) ||
        (rc = parse(tok, tok->bin.data, tok->bin.size, path, err))) {
        qhx_tok_free(tok);
        return rc;
    }
    *out = tok;
    return QHX_OK;
#endif
}

qhx_status qhx_tok_load_binary_buffer(const void *data, size_t size, const char *name,
                                      qhx_tok **out, qhx_error *err) {
    *out = NULL;
    if (!name) name = "tokenizer.qhxtok";
#ifdef TOKBIN_BIG_ENDIAN
    (void)data;
    (void)size;
    return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: the binary tokenizer form needs a little-endian host", name);
#else
    if (!data && size) return qhx_fail(err, QHX_E_ARG, "%s: no data", name);
    qhx_tok *tok;
    qhx_status rc = qhx_tok_new(name, &tok, err);
    if (rc) return rc;
    /* an aligned private copy, owned through the map record */
    uint8_t *copy = size ? qhx_aligned_alloc(size) : NULL;
    if (size && !copy) {
        qhx_tok_free(tok);
        return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory (%zu bytes)", name, size);
    }
    if (size) memcpy(copy, data, size);
    tok->bin_copy = copy;
    if ((rc = parse(tok, copy, size, name, err))) {
        qhx_tok_free(tok);
        return rc;
    }
    *out = tok;
    return QHX_OK;
#endif
}

int qhx_tok_is_binary(const void *data, size_t size) {
    return size >= sizeof MAGIC && !memcmp(data, MAGIC, sizeof MAGIC);
}

/* Whether the binary file at bin_path records (size, hash) of the source bytes. */
int qhx_tok_binary_matches(const char *bin_path, const void *src, size_t src_size) {
    qhx_file_map m;
    if (qhx_file_map_open(bin_path, &m, NULL) != QHX_OK) return 0;
    int ok = 0;
    if (m.size >= HEADER_BYTES && !memcmp(m.data, MAGIC, 8)) {
        tokbin_header h;
        memcpy(&h, m.data, sizeof h);
        ok = h.version == TOKBIN_VERSION && h.source_bytes == src_size && src_size &&
             h.source_hash == qhx_tok_file_hash(src, src_size);
    }
    qhx_file_map_close(&m);
    return ok;
}
