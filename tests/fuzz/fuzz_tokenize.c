/* fuzz_tokenize: arbitrary bytes -> encode / pre-tokenize / decode / stream decode.
 *
 * Three small tokenizers are built once, in memory (the replay runs without fixture paths):
 * the full byte alphabet, some merges, added tokens (special, strip flags, normalized), and
 *   0: NFC + the Qwen3.5 Split regex (Isolated) + ByteLevel, as the Qwen3.5 files;
 *   1: a String split MergedWithPrevious + ByteLevel with prefix space and its own regex,
 *      ignore_merges, an unk token with fuse_unk;
 *   2: a Contiguous and an inverted Removed split.
 * Input byte 0 picks the tokenizer and the action; the rest is the text (or ids). */
#include "text/tokenizer.h"

#include "core/alloc.h"
#include "text/tok_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static qhx_tok *TOKS[3];
static int ready;

static void put(tok_buf *b, const char *s) { qhx_tok_buf_put(b, s, strlen(s)); }

/* JSON-escaped byte-level spelling of one byte */
static void put_byte_token(tok_buf *b, int byte) {
    char tmp[16];
    uint32_t cp = qhx_tok_byte_to_cp[byte];
    if (cp == '"' || cp == '\\') snprintf(tmp, sizeof tmp, "\\%c", (char)cp);
    else snprintf(tmp, sizeof tmp, "\\u%04x", (unsigned)cp);
    put(b, tmp);
}

static const char *const MERGES[][2] = {
    {"t", "h"}, {"th", "e"}, {"i", "n"}, {"\\u0120", "t"}, {"\\u0120t", "he"}, {"e", "r"}, {"a", "n"},
    {"o", "n"}, {"\\u0120", "a"}, {"r", "e"}, {"\\u00e4", "\\u00b8"}, {"\\u00f0", "\\u0141"},
    {"\\u0120", "\\u0120"}, {"\\u010a", "\\u010a"}, {"in", "g"}, {"\\u0120a", "n"}, {"1", "2"},
    {"'", "s"}, {"\\u00cc", "\\u0123"}, {"e", "\\u00cc"}, {"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}};

static qhx_tok *build(int variant) {
    tok_buf b = {0};
    put(&b, "{\"version\":\"1.0\",\"added_tokens\":["
             "{\"id\":400,\"content\":\"<|im_start|>\",\"special\":true,\"normalized\":false},"
             "{\"id\":401,\"content\":\"<|im_end|>\",\"special\":true,\"normalized\":false},"
             "{\"id\":402,\"content\":\"<think>\",\"special\":false,\"normalized\":false},"
             "{\"id\":403,\"content\":\"[S]\",\"lstrip\":true,\"rstrip\":true,\"normalized\":false},"
             "{\"id\":404,\"content\":\"e\\u0301!\",\"normalized\":true}],");
    if (variant == 0) {
        put(&b, "\"normalizer\":{\"type\":\"NFC\"},\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":["
                 "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?[\\\\p{L}\\\\p{M}]+|"
                 "\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{M}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},"
                 "\"behavior\":\"Isolated\",\"invert\":false},"
                 "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":false,\"use_regex\":false}]},");
    } else if (variant == 1) {
        put(&b, "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFC\"}]},"
                 "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":["
                 "{\"type\":\"Split\",\"pattern\":{\"String\":\"ab\"},\"behavior\":\"MergedWithPrevious\"},"
                 "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"x*\"},\"behavior\":\"MergedWithNext\"},"
                 "{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"use_regex\":true}]},");
    } else {
        put(&b, "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":["
                 "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\p{N}+|\\\\s\"},\"behavior\":\"Contiguous\"},"
                 "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"[aeiou]\"},\"behavior\":\"Removed\",\"invert\":true},"
                 "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":false}]},");
    }
    put(&b, "\"decoder\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"BPE\"");
    if (variant == 1) put(&b, ",\"ignore_merges\":true,\"fuse_unk\":true,\"unk_token\":\"<unk>\"");
    put(&b, ",\"vocab\":{");
    int id = 0;
    for (int byte = 0; byte < 256; byte++) {
        if (variant == 1 && byte >= 0xF8) continue; /* some bytes unknown: unk */
        if (id) put(&b, ",");
        put(&b, "\"");
        put_byte_token(&b, byte);
        char tmp[32];
        snprintf(tmp, sizeof tmp, "\":%d", id++);
        put(&b, tmp);
    }
    for (size_t m = 0; m < sizeof MERGES / sizeof MERGES[0]; m++) {
        char tmp[64];
        snprintf(tmp, sizeof tmp, ",\"%s%s\":%d", MERGES[m][0], MERGES[m][1], id++);
        put(&b, tmp);
    }
    char tmp[64];
    snprintf(tmp, sizeof tmp, ",\"<unk>\":%d},\"merges\":[", id++);
    put(&b, tmp);
    for (size_t m = 0; m < sizeof MERGES / sizeof MERGES[0]; m++) {
        if (m) put(&b, ",");
        if (m % 2) snprintf(tmp, sizeof tmp, "\"%s %s\"", MERGES[m][0], MERGES[m][1]);
        else snprintf(tmp, sizeof tmp, "[\"%s\",\"%s\"]", MERGES[m][0], MERGES[m][1]);
        put(&b, tmp);
    }
    put(&b, "]}}");
    qhx_error err = {0};
    qhx_tok *tok = NULL;
    if (qhx_tok_load_buffer(b.p, b.n, "fuzz", &tok, &err) != QHX_OK) {
        fprintf(stderr, "fuzz_tokenize: built-in tokenizer %d does not load: %s\n", variant, err.msg);
        __builtin_trap();
    }
    qhx_free(b.p);
    return tok;
}

static int count_piece(void *ctx, const char *p, size_t n, int32_t id) {
    (void)p;
    (void)id;
    *(size_t *)ctx += n;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!ready) {
        for (int v = 0; v < 3; v++) TOKS[v] = build(v);
        ready = 1;
    }
    if (size < 1) return 0;
    qhx_tok *tok = TOKS[data[0] % 3];
    int action = (data[0] / 3) % 4;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    qhx_error err = {0};
    if (action == 0 || action == 1) {
        int32_t *ids = NULL;
        size_t n = 0;
        if (qhx_tok_encode_alloc(tok, text, len, &ids, &n, &err) == QHX_OK) {
            char *s = NULL;
            size_t slen = 0;
            if (qhx_tok_decode_alloc(tok, ids, n, action, &s, &slen, &err) == QHX_OK &&
                qhx_tok_utf8_check((const uint8_t *)s, slen) != slen)
                __builtin_trap(); /* decode always gives UTF-8 */
            qhx_free(s);
        }
        qhx_free(ids);
    } else if (action == 2) {
        size_t total = 0;
        qhx_tok_pretokenize(tok, text, len, count_piece, &total, &err);
    } else { /* the bytes as little-endian ids: whole decode and stream decode must agree */
        size_t n = len / 4;
        int32_t *ids = qhx_malloc(n ? n * 4 : 1);
        if (!ids) return 0;
        for (size_t k = 0; k < n; k++) {
            uint32_t v;
            memcpy(&v, text + 4 * k, 4);
            ids[k] = (int32_t)(v % 1024) - 8; /* mostly valid ids, some negative / unknown */
        }
        char *whole = NULL;
        size_t wlen = 0;
        qhx_tok_stream *st = NULL;
        if (qhx_tok_decode_alloc(tok, ids, n, 0, &whole, &wlen, &err) == QHX_OK &&
            qhx_tok_stream_create(tok, 0, &st, &err) == QHX_OK) {
            size_t at = 0;
            for (size_t k = 0; k <= n; k++) {
                const char *t;
                size_t l;
                qhx_status rc = k < n ? qhx_tok_stream_push(st, ids[k], &t, &l, &err)
                                      : qhx_tok_stream_flush(st, &t, &l, &err);
                if (rc != QHX_OK) break;
                if (at + l > wlen || memcmp(whole + at, t, l)) __builtin_trap();
                at += l;
            }
            if (at != wlen) __builtin_trap();
        }
        qhx_tok_stream_free(st);
        qhx_free(whole);
        qhx_free(ids);
    }
    return 0;
}
