// ctest-labels: unit;golden
/* test_tokenizer: the tokenizer against the Hugging Face goldens (fixtures/tokenizer/qwen3),
 * the Qwen3.5 pre-tokenizer regex, the binary form, chat formats, streaming decode,
 * invalid input and allocation failures. Expected ids come only from the fixtures. */
#include "t.h"

#include "core/alloc.h"
#include "core/sha256.h"
#include "families/family.h"
#include "text/tok_internal.h"
#include "text/tokenizer.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <utf8proc.h>
#include <unistd.h>

/* The families' chat formats (src/families/<name>/chat.c), as the registry hands them out: the
 * text layer renders them with its helpers but names none. */
#define QHX_CHAT_QWEN35 (qhx_family_find("qwen3_5")->chat)
#define QHX_CHAT_QWEN3VL (qhx_family_find("qwen3_vl")->chat)

#define QWEN3_DIR QHX_DATA_DIR "/fixtures/tokenizer/qwen3"
#define QWEN35T_DIR QHX_DATA_DIR "/fixtures/tokenizer/qwen3_5"
#define QWEN35_JSON QHX_DATA_DIR "/fixtures/parity/qwen35-tiny-f32/tokenizer.json"
#define QWEN3VL_JSON QHX_DATA_DIR "/fixtures/parity/qwen3vl-tiny-f32/tokenizer.json"

/* ---- golden lines ----------------------------------------------------------------------- */

typedef struct golden {
    char *name, *text, *decoded;
    size_t text_len, decoded_len;
    int32_t *ids;
    size_t n_ids;
} golden;

static golden *G;
static size_t NG;

static char *dup_str(json_t *s, size_t *len) {
    *len = json_string_length(s);
    char *p = malloc(*len + 1);
    memcpy(p, json_string_value(s), *len);
    p[*len] = '\0';
    return p;
}

static int load_golden(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, f)) > 0) {
        json_error_t je;
        json_t *o = json_loadb(line, (size_t)n, JSON_ALLOW_NUL, &je);
        if (!o) continue;
        G = realloc(G, (NG + 1) * sizeof *G);
        golden *g = &G[NG++];
        size_t dummy;
        g->name = dup_str(json_object_get(o, "name"), &dummy);
        g->text = dup_str(json_object_get(o, "text"), &g->text_len);
        g->decoded = dup_str(json_object_get(o, "decoded"), &g->decoded_len);
        json_t *ids = json_object_get(o, "ids");
        g->n_ids = json_array_size(ids);
        g->ids = malloc((g->n_ids + 1) * sizeof *g->ids);
        for (size_t k = 0; k < g->n_ids; k++) g->ids[k] = (int32_t)json_integer_value(json_array_get(ids, k));
        json_decref(o);
    }
    free(line);
    fclose(f);
    return (int)NG;
}

static void free_golden(void) {
    for (size_t k = 0; k < NG; k++) {
        free(G[k].name);
        free(G[k].text);
        free(G[k].decoded);
        free(G[k].ids);
    }
    free(G);
}

/* Compare one line; on failure print the first diverging position with context. */
static int check_line(qhx_tok *tok, const golden *g, int verbose) {
    qhx_error err = {0};
    int32_t *ids = NULL;
    size_t n = 0;
    if (qhx_tok_encode_alloc(tok, g->text, g->text_len, &ids, &n, &err) != QHX_OK) {
        if (verbose) fprintf(stderr, "%s: encode failed: %s\n", g->name, err.msg);
        return 0;
    }
    size_t k = 0;
    while (k < n && k < g->n_ids && ids[k] == g->ids[k]) k++;
    int ok = k == n && k == g->n_ids;
    if (!ok && verbose) {
        fprintf(stderr, "%s: ids differ at position %zu (got %zu ids, want %zu)\n  got: ", g->name, k, n, g->n_ids);
        for (size_t q = k > 3 ? k - 3 : 0; q < k + 4 && q < n; q++) fprintf(stderr, "%s%d", q == k ? "[" : " ", ids[q]);
        fprintf(stderr, "\n  want:");
        for (size_t q = k > 3 ? k - 3 : 0; q < k + 4 && q < g->n_ids; q++) fprintf(stderr, "%s%d", q == k ? "[" : " ", g->ids[q]);
        fprintf(stderr, "\n");
    }
    char *text = NULL;
    size_t len = 0;
    if (qhx_tok_decode_alloc(tok, g->ids, g->n_ids, 0, &text, &len, &err) != QHX_OK) ok = 0;
    else if (len != g->decoded_len || memcmp(text, g->decoded, len)) {
        size_t q = 0;
        while (q < len && q < g->decoded_len && text[q] == g->decoded[q]) q++;
        if (verbose) fprintf(stderr, "%s: decoded text differs at byte %zu\n", g->name, q);
        ok = 0;
    }
    qhx_free(ids);
    qhx_free(text);
    return ok;
}

static int run_golden(qhx_tok *tok, const char *what) {
    int ok = 0;
    for (size_t k = 0; k < NG; k++) ok += check_line(tok, &G[k], 1);
    fprintf(stderr, "golden (%s): %d/%zu lines identical\n", what, ok, NG);
    return ok;
}

static void test_golden(void) {
    qhx_error err = {0};
    qhx_tok *tok = NULL;
    CHECK(load_golden(QWEN3_DIR "/golden.jsonl") == 200);
    CHECK_EQ(qhx_tok_load(QWEN3_DIR "/tokenizer.json", &tok, &err), QHX_OK);
    if (!tok) {
        fprintf(stderr, "load: %s\n", err.msg);
        return;
    }
    CHECK_EQ(qhx_tok_n_vocab(tok), 151669);
    CHECK_EQ(run_golden(tok, "tokenizer.json"), (long long)NG);
    CHECK_EQ(qhx_tok_token_to_id(tok, "<|im_end|>"), 151645);
    CHECK_EQ(qhx_tok_token_to_id(tok, "<think>"), 151667);
    CHECK_EQ(qhx_tok_token_to_id(tok, "\xC4\xA0world"), 1879); /* "Ġworld" */
    CHECK_EQ(qhx_tok_token_to_id(tok, "<|im_end|"), -1);
    CHECK_STR(qhx_tok_id_to_token(tok, 151644), "<|im_start|>");
    CHECK(qhx_tok_id_to_token(tok, 151700) == NULL);
    CHECK(qhx_tok_is_special(tok, 151645) && !qhx_tok_is_special(tok, 151667));

    /* buffer conventions */
    size_t n = 0;
    int32_t few[2];
    CHECK_EQ(qhx_tok_encode(tok, "Hello world, again", 18, NULL, 0, &n, &err), QHX_E_LIMIT);
    CHECK_EQ(n, 4);
    CHECK_EQ(qhx_tok_encode(tok, "Hello world, again", 18, few, 2, &n, &err), QHX_E_LIMIT);
    CHECK_EQ(n, 4);
    CHECK_EQ(few[1], 1879);
    int32_t all[8];
    CHECK_EQ(qhx_tok_encode(tok, "Hello world, again", 18, all, 8, &n, &err), QHX_OK);
    char buf[64];
    size_t len;
    CHECK_EQ(qhx_tok_decode(tok, all, n, 0, buf, 5, &len, &err), QHX_E_LIMIT);
    CHECK_EQ(len, 18);
    CHECK_EQ(qhx_tok_decode(tok, all, n, 0, buf, sizeof buf, &len, &err), QHX_OK);
    CHECK(len == 18 && !memcmp(buf, "Hello world, again", 18));
    /* unknown ids are skipped (as the library does); special ones on request */
    int32_t mixed[] = {151644, 9707, -5, 151700, 151645, 1000000};
    CHECK_EQ(qhx_tok_decode(tok, mixed, 6, 0, buf, sizeof buf, &len, &err), QHX_OK);
    CHECK(len == 27 && !memcmp(buf, "<|im_start|>Hello<|im_end|>", 27));
    CHECK_EQ(qhx_tok_decode(tok, mixed, 6, QHX_TOK_SKIP_SPECIAL, buf, sizeof buf, &len, &err), QHX_OK);
    CHECK(len == 5 && !memcmp(buf, "Hello", 5));
    CHECK_EQ(qhx_tok_encode(tok, "", 0, NULL, 0, &n, &err), QHX_OK);
    CHECK_EQ(n, 0);
    qhx_tok_free(tok);
}

/* ---- BPE paths agree ---------------------------------------------------------------------- */

static void test_bpe_paths(void) {
    qhx_error err = {0};
    qhx_tok *tok = NULL;
    if (qhx_tok_load(QWEN3_DIR "/tokenizer.json", &tok, &err) != QHX_OK) return;
    uint64_t x = 88172645463325252ull;
    const char *alpha[] = {"a", "b", "e", "th", "in", "er", " ", "\xC3\xA9", "\xE4\xB8\xAD", "0", "--"};
    int mismatches = 0;
    for (int trial = 0; trial < 300; trial++) {
        char w[48 * 3];
        size_t n = 0;
        for (;;) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            const char *a = alpha[x % 11];
            size_t l = strlen(a);
            if (n + l > 48) break;
            memcpy(w + n, a, l);
            n += l;
        }
        tok_ids v1 = {0}, v2 = {0};
        CHECK_EQ(qhx_tok_bpe_path(tok, (const uint8_t *)w, n, 0, &v1, &err), QHX_OK);
        CHECK_EQ(qhx_tok_bpe_path(tok, (const uint8_t *)w, n, 1, &v2, &err), QHX_OK);
        if (v1.n != v2.n || memcmp(v1.p, v2.p, v1.n * 4)) mismatches++;
        qhx_free(v1.p);
        qhx_free(v2.p);
    }
    CHECK_EQ(mismatches, 0);
    qhx_tok_free(tok);
}

/* ---- pre-tokenizer regexes ---------------------------------------------------------------- */

typedef struct pieces {
    char s[1024];
    size_t n;
    int count;
} pieces;

static int collect(void *ctx, const char *p, size_t n, int32_t added) {
    pieces *pc = ctx;
    if (pc->n + n + 2 >= sizeof pc->s) return 1;
    if (pc->count++) pc->s[pc->n++] = '|';
    if (added >= 0) pc->s[pc->n++] = '#';
    memcpy(pc->s + pc->n, p, n);
    pc->n += n;
    pc->s[pc->n] = '\0';
    return 0;
}

static const char *split(qhx_tok *tok, const char *text, pieces *pc) {
    qhx_error err = {0};
    memset(pc, 0, sizeof *pc);
    if (qhx_tok_pretokenize(tok, text, strlen(text), collect, pc, &err) != QHX_OK)
        snprintf(pc->s, sizeof pc->s, "error: %s", err.msg);
    return pc->s;
}

static void test_regexes(void) {
    qhx_error err = {0};
    qhx_tok *q35 = NULL, *q3 = NULL;
    CHECK_EQ(qhx_tok_load(QWEN35_JSON, &q35, &err), QHX_OK);
    CHECK_EQ(qhx_tok_load(QWEN3VL_JSON, &q3, &err), QHX_OK);
    if (!q35 || !q3) return;
    pieces pc;
    /* a combining mark NFC cannot compose stays with its letter in Qwen3.5, not in Qwen3 */
    CHECK_STR(split(q35, "q\xCC\xA3x ok", &pc), "q\xCC\xA3x| ok");
    CHECK_STR(split(q3, "q\xCC\xA3x ok", &pc), "q|\xCC\xA3x| ok"); /* the mark prefixes "x" */
    /* Devanagari vowel signs (Mc/Mn) */
    CHECK_STR(split(q35, "\xE0\xA4\xB9\xE0\xA4\xBF\xE0\xA4\xA8\xE0\xA5\x8D\xE0\xA4\xA6\xE0\xA5\x80", &pc),
              "\xE0\xA4\xB9\xE0\xA4\xBF\xE0\xA4\xA8\xE0\xA5\x8D\xE0\xA4\xA6\xE0\xA5\x80");
    CHECK(split(q3, "\xE0\xA4\xB9\xE0\xA4\xBF\xE0\xA4\xA8\xE0\xA5\x8D\xE0\xA4\xA6\xE0\xA5\x80", &pc) && pc.count > 1);
    /* NFC first: e + U+0301 becomes one letter in both */
    CHECK_STR(split(q3, "e\xCC\x81t\xC3\xA9", &pc), "\xC3\xA9t\xC3\xA9");
    /* shared rules: contractions (any case), single digits, newline runs, \s+(?!\S) */
    CHECK_STR(split(q35, "I'M 123 x\n\n  y", &pc), "I|'M| |1|2|3| x|\n\n| | y");
    CHECK_STR(split(q3, "don'T go", &pc), "don|'T| go");
    /* Unicode White_Space is \s; U+180E and U+FEFF are not */
    CHECK_STR(split(q3, "x\xE1\xA0\x8E y", &pc), "x|\xE1\xA0\x8E| y");
    CHECK_STR(split(q3, "a\xC2\x85" "b", &pc), "a|\xC2\x85" "b");
    /* letters of Unicode 15 (CJK Ext H) and 16 (Todhri) are letters, as in the reference */
    CHECK_STR(split(q3, "\xE4\xB8\xAD\xF0\xB1\x8D\x90\xE6\x96\x87!", &pc), "\xE4\xB8\xAD\xF0\xB1\x8D\x90\xE6\x96\x87|!");
    CHECK_STR(split(q3, "x\xF0\x90\x97\x92y", &pc), "x\xF0\x90\x97\x92y");
    /* added tokens split first, near misses stay text */
    CHECK_STR(split(q3, "a<|im_start|>b<|im_start|", &pc), "a|#<|im_start|>|b|<||im|_start||");
    CHECK_STR(split(q3, "<<|im_end|>>", &pc), "<|#<|im_end|>|>");
    /* every text tokenizes and decodes back (no NFC change here) */
    const char *texts[] = {"q\xCC\xA3 \xE0\xA4\xB9\xE0\xA4\xBF", "<think>\nabc</think>", "  \t\n x", "\xF0\x9F\x98\x80 ok"};
    for (int k = 0; k < 4; k++) {
        for (int t = 0; t < 2; t++) {
            qhx_tok *tok = t ? q3 : q35;
            int32_t *ids;
            size_t n, len;
            char *back;
            CHECK_EQ(qhx_tok_encode_alloc(tok, texts[k], strlen(texts[k]), &ids, &n, &err), QHX_OK);
            CHECK(n > 0);
            CHECK_EQ(qhx_tok_decode_alloc(tok, ids, n, 0, &back, &len, &err), QHX_OK);
            CHECK_STR(back, texts[k]);
            qhx_free(ids);
            qhx_free(back);
        }
    }
    /* the parity fixtures' special ids */
    CHECK_EQ(qhx_tok_token_to_id(q35, "<|im_start|>"), 961);
    CHECK_EQ(qhx_tok_token_to_id(q35, "<|image_pad|>"), 972);
    CHECK_EQ(qhx_tok_token_to_id(q3, "<|vision_start|>"), 999);
    qhx_tok_free(q35);
    qhx_tok_free(q3);
}

/* ---- invalid input -------------------------------------------------------------------------- */

static void test_invalid_utf8(void) {
    qhx_error err = {0};
    qhx_tok *tok = NULL;
    if (qhx_tok_load(QWEN3VL_JSON, &tok, &err) != QHX_OK) return;
    struct { const char *s; size_t n; size_t at; } bad[] = {
        {"abc\xC3(", 5, 3},          /* bad continuation */
        {"\xFF", 1, 0},              /* never valid */
        {"ok\xC0\xAF", 4, 2},        /* overlong */
        {"x\xED\xA0\x80y", 5, 1},    /* surrogate */
        {"end\xE4\xB8", 5, 3},       /* truncated */
        {"\xF4\x90\x80\x80", 4, 0},  /* above U+10FFFF */
        {"<|im_start|>\x80", 13, 12} /* after an added token */
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        size_t n = 99;
        int32_t ids[16];
        CHECK_EQ(qhx_tok_encode(tok, bad[k].s, bad[k].n, ids, 16, &n, &err), QHX_E_FORMAT);
        char want[32];
        snprintf(want, sizeof want, "offset %zu", bad[k].at);
        CHECK_CONTAINS(err.msg, want);
        CHECK_EQ(n, 0);
    }
    /* NUL is an ordinary character */
    size_t n;
    int32_t ids[8];
    CHECK_EQ(qhx_tok_encode(tok, "a\0b", 3, ids, 8, &n, &err), QHX_OK);
    CHECK(n >= 2);
    qhx_tok_free(tok);
}

/* ---- streaming decode ------------------------------------------------------------------------ */

static int utf8_ok(const char *s, size_t n) {
    return qhx_tok_utf8_check((const uint8_t *)s, n) == n;
}

static void stream_case(qhx_tok *tok, const int32_t *ids, size_t n, int *split_seen) {
    qhx_error err = {0};
    qhx_tok_stream *st = NULL;
    CHECK_EQ(qhx_tok_stream_create(tok, 0, &st, &err), QHX_OK);
    if (!st) return;
    char got[4096];
    size_t len = 0;
    for (size_t k = 0; k < n; k++) {
        const char *t;
        size_t l;
        CHECK_EQ(qhx_tok_stream_push(st, ids[k], &t, &l, &err), QHX_OK);
        CHECK(utf8_ok(t, l)); /* never half a character */
        if (l == 0) *split_seen = 1;
        if (len + l < sizeof got) memcpy(got + len, t, l), len += l;
    }
    const char *t;
    size_t l;
    CHECK_EQ(qhx_tok_stream_flush(st, &t, &l, &err), QHX_OK);
    if (len + l < sizeof got) memcpy(got + len, t, l), len += l;
    char *whole;
    size_t wlen;
    CHECK_EQ(qhx_tok_decode_alloc(tok, ids, n, 0, &whole, &wlen, &err), QHX_OK);
    CHECK(wlen == len && !memcmp(whole, got, len));
    qhx_free(whole);
    qhx_tok_stream_free(st);
}

static void test_stream(void) {
    qhx_error err = {0};
    qhx_tok *tok = NULL;
    if (qhx_tok_load(QWEN3_DIR "/tokenizer.json", &tok, &err) != QHX_OK) return;
    /* emoji and rare CJK are several tokens each */
    const char *text = "ok \xF0\x9F\xAB\xB1\xF0\x9F\x8F\xBB \xE4\xBD\xA0\xE5\xA5\xBD \xF0\xA0\x80\x80 \xE0\xB8\xA3\xE0\xB8\xB2";
    int32_t *ids;
    size_t n;
    CHECK_EQ(qhx_tok_encode_alloc(tok, text, strlen(text), &ids, &n, &err), QHX_OK);
    int split_seen = 0;
    stream_case(tok, ids, n, &split_seen);
    CHECK(split_seen); /* some character did span tokens */
    qhx_free(ids);
    /* ill-formed byte sequences: one U+FFFD per maximal subpart, same as the whole decode */
    int32_t f0 = qhx_tok_token_to_id(tok, "\xC3\xB0\xC5\x81"); /* "ðŁ" = F0 9F */
    int32_t cont = qhx_tok_token_to_id(tok, "\xC2\xAB");      /* "«" = AB */
    int32_t sp = qhx_tok_token_to_id(tok, "\xC4\xA0");        /* "Ġ" = 20 */
    CHECK(f0 >= 0 && cont >= 0 && sp >= 0);
    int32_t bad[] = {f0, sp, cont, cont, f0, cont, sp, f0};
    stream_case(tok, bad, 8, &split_seen);
    char *s;
    size_t len;
    CHECK_EQ(qhx_tok_decode_alloc(tok, bad, 8, 0, &s, &len, &err), QHX_OK);
    /* F0 9F | 20 | AB | AB | F0 9F AB | 20 | F0 9F: "F0 9F AB" is one maximal subpart */
    CHECK_STR(s, "\xEF\xBF\xBD \xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD \xEF\xBF\xBD");
    qhx_free(s);
    /* a held-back start is not shown until completed */
    qhx_tok_stream *st;
    const char *t;
    size_t l;
    CHECK_EQ(qhx_tok_stream_create(tok, 0, &st, &err), QHX_OK);
    CHECK_EQ(qhx_tok_stream_push(st, f0, &t, &l, &err), QHX_OK);
    CHECK_EQ(l, 0);
    CHECK_EQ(qhx_tok_stream_flush(st, &t, &l, &err), QHX_OK);
    CHECK(l == 3 && !memcmp(t, "\xEF\xBF\xBD", 3));
    qhx_tok_stream_free(st);
    qhx_tok_free(tok);
}

/* ---- binary form -------------------------------------------------------------------------------- */

static int copy_file(const char *from, const char *to) {
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    char buf[65536];
    size_t n;
    int ok = a && b;
    while (ok && (n = fread(buf, 1, sizeof buf, a)) > 0) ok = fwrite(buf, 1, n, b) == n;
    if (a) fclose(a);
    if (b) fclose(b);
    return ok;
}

static void test_binary(void) {
    qhx_error err = {0};
    qhx_tok *tok = NULL, *bin = NULL;
    char dir[] = "/tmp/qhx_tok_test_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(!"mkdtemp");
        return;
    }
    char path[256], json[256];
    snprintf(path, sizeof path, "%s/qwen3.qhxtok", dir);
    CHECK_EQ(qhx_tok_load(QWEN3_DIR "/tokenizer.json", &tok, &err), QHX_OK);
    if (!tok) return;
    CHECK_EQ(qhx_tok_save(tok, path, &err), QHX_OK);
    CHECK_EQ(qhx_tok_load_binary(path, &bin, &err), QHX_OK);
    if (bin) {
        CHECK_EQ(qhx_tok_n_vocab(bin), 151669);
        CHECK_EQ(run_golden(bin, "binary form"), (long long)NG);
        qhx_tok_free(bin);
    }
    /* qhx_tok_load on a .qhxtok file takes it as binary */
    CHECK_EQ(qhx_tok_load(path, &bin, &err), QHX_OK);
    CHECK(bin && bin->borrowed);
    qhx_tok_free(bin);
    qhx_tok_free(tok);
    /* a damaged file is refused, not trusted */
    FILE *f = fopen(path, "r+b");
    if (f) {
        fseek(f, 4096, SEEK_SET);
        fputc(0x5a, f);
        fclose(f);
    }
    CHECK_EQ(qhx_tok_load_binary(path, &bin, &err), QHX_E_FORMAT);
    CHECK_CONTAINS(err.msg, "checksum");
    CHECK(bin == NULL);
    remove(path);

    /* a model folder: tokenizer.qhxtok is used only while it matches tokenizer.json */
    snprintf(json, sizeof json, "%s/tokenizer.json", dir);
    snprintf(path, sizeof path, "%s/tokenizer.qhxtok", dir);
    CHECK(copy_file(QWEN35_JSON, json));
    CHECK_EQ(qhx_tok_load(dir, &tok, &err), QHX_OK);
    CHECK(tok && !tok->borrowed);
    if (tok) CHECK_EQ(qhx_tok_save(tok, path, &err), QHX_OK);
    qhx_tok_free(tok);
    CHECK_EQ(qhx_tok_load(dir, &tok, &err), QHX_OK);
    CHECK(tok && tok->borrowed);
    int32_t *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    const char *text = "Hello q\xCC\xA3 <|im_start|>user\n\xE4\xBD\xA0\xE5\xA5\xBD";
    if (tok) CHECK_EQ(qhx_tok_encode_alloc(tok, text, strlen(text), &a, &na, &err), QHX_OK);
    qhx_tok_free(tok);
    f = fopen(json, "ab"); /* the JSON changes: the binary is stale */
    if (f) {
        fputs("\n", f);
        fclose(f);
    }
    CHECK_EQ(qhx_tok_load(dir, &tok, &err), QHX_OK);
    CHECK(tok && !tok->borrowed);
    if (tok) CHECK_EQ(qhx_tok_encode_alloc(tok, text, strlen(text), &b, &nb, &err), QHX_OK);
    CHECK(na == nb && na > 0 && !memcmp(a, b, na * 4));
    qhx_tok_free(tok);
    qhx_free(a);
    qhx_free(b);
    remove(json); /* only the binary left: still loads */
    CHECK_EQ(qhx_tok_load(dir, &tok, &err), QHX_OK);
    CHECK(tok && tok->borrowed);
    qhx_tok_free(tok);
    remove(path);
    rmdir(dir);
    CHECK_EQ(qhx_tok_load(dir, &tok, &err), QHX_E_IO);
}

/* ---- refusing what is not supported ------------------------------------------------------------ */

static qhx_status load_str(const char *json, qhx_error *err) {
    qhx_tok *tok = NULL;
    qhx_status rc = qhx_tok_load_buffer(json, strlen(json), "t.json", &tok, err);
    qhx_tok_free(tok);
    return rc;
}

#define MINI_MODEL "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2,\"\\u0120\":3},\"merges\":[\"a b\"]}"
#define MINI_PRE "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}"

/* PCRE2's match limit is per call; the pre-tokenizer's budget is per input. The pattern
 * (?:.|.){0,20}X|. backtracks about 2^20 steps at every position (1 KB took 12.5 s, 8 KB over a
 * minute): now refused with QHX_E_LIMIT in well under a second, while the usual patterns take
 * long inputs (2 MB of spaces in one \s+ match) as before. */
static void test_regex_budget(void) {
    const char *json = "{" MINI_MODEL ",\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\","
                       "\"pattern\":{\"Regex\":\"(?:.|.){0,20}X|.\"},\"behavior\":\"Isolated\"},{\"type\":\"ByteLevel\","
                       "\"add_prefix_space\":false,\"use_regex\":false}]}}";
    qhx_error err = {0};
    qhx_tok *tok = NULL;
    CHECK_EQ(qhx_tok_load_buffer(json, strlen(json), "t.json", &tok, &err), QHX_OK);
    size_t n = 8192;
    char *text = qhx_malloc(n);
    memset(text, 'a', n);
    int32_t *ids = NULL;
    size_t n_ids = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK_EQ(qhx_tok_encode_alloc(tok, text, n, &ids, &n_ids, &err), QHX_E_LIMIT);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    CHECK_CONTAINS(err.msg, "budget");
    double sec = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    CHECK(sec < 5.0);
    CHECK_EQ(qhx_tok_encode_alloc(tok, "ab", 2, &ids, &n_ids, &err), QHX_OK); /* short text: within budget */
    qhx_free(ids);
    qhx_tok_free(tok);
    qhx_tok *q3 = NULL;
    CHECK_EQ(qhx_tok_load(QWEN3VL_JSON, &q3, &err), QHX_OK);
    size_t big = (size_t)2 << 20;
    char *spaces = qhx_malloc(big);
    memset(spaces, ' ', big);
    ids = NULL;
    CHECK_EQ(qhx_tok_encode_alloc(q3, spaces, big, &ids, &n_ids, &err), QHX_OK);
    qhx_free(ids);
    qhx_free(spaces);
    qhx_free(text);
    qhx_tok_free(q3);
}

static void test_refusals(void) {
    qhx_error err = {0};
    CHECK_EQ(load_str("{" MINI_MODEL "," MINI_PRE ",\"decoder\":{\"type\":\"ByteLevel\"}}", &err), QHX_OK);
    CHECK_EQ(load_str("{" MINI_MODEL "," MINI_PRE ",\"normalizer\":{\"type\":\"NFKC\"}}", &err), QHX_E_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "NFKC");
    CHECK_EQ(load_str("{" MINI_MODEL ",\"pre_tokenizer\":{\"type\":\"Metaspace\"}}", &err), QHX_E_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "Metaspace");
    CHECK_EQ(load_str("{" MINI_MODEL "," MINI_PRE ",\"decoder\":{\"type\":\"WordPiece\"}}", &err), QHX_E_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "WordPiece");
    CHECK_EQ(load_str("{\"model\":{\"type\":\"Unigram\",\"vocab\":[]}," MINI_PRE "}", &err), QHX_E_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "Unigram");
    CHECK_EQ(load_str("{\"model\":{\"type\":\"BPE\",\"byte_fallback\":true,\"vocab\":{\"a\":0},\"merges\":[]}," MINI_PRE "}", &err), QHX_E_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "byte_fallback");
    CHECK_EQ(load_str("{" MINI_MODEL "," MINI_PRE ",\"added_tokens\":[{\"id\":9,\"content\":\"x\",\"single_word\":true}]}", &err), QHX_E_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "single_word");
    CHECK_EQ(load_str("{" MINI_MODEL ",\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\w+\"},\"behavior\":\"Isolated\"},{\"type\":\"ByteLevel\"}]}}", &err), QHX_E_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "\\w");
    CHECK_EQ(load_str("{" MINI_MODEL ",\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(\"},\"behavior\":\"Isolated\"},{\"type\":\"ByteLevel\"}]}}", &err), QHX_E_FORMAT);
    CHECK_EQ(load_str("{" MINI_MODEL "," MINI_PRE ",\"truncation\":{\"max_length\":5}}", &err), QHX_E_UNSUPPORTED);
    /* malformed */
    CHECK_EQ(load_str("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"a\":1},\"merges\":[]}," MINI_PRE "}", &err), QHX_E_FORMAT);
    CHECK_CONTAINS(err.msg, "twice");
    CHECK_EQ(load_str("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":0},\"merges\":[]}," MINI_PRE "}", &err), QHX_E_FORMAT);
    CHECK_EQ(load_str("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[\"a c\"]}," MINI_PRE "}", &err), QHX_E_FORMAT);
    CHECK_CONTAINS(err.msg, "not in the vocab");
    CHECK_EQ(load_str("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":99999999},\"merges\":[]}," MINI_PRE "}", &err), QHX_E_LIMIT);
    CHECK_EQ(load_str("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"\\ud800\":0},\"merges\":[]}}", &err), QHX_E_FORMAT);
    CHECK_EQ(load_str("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}} x", &err), QHX_E_FORMAT);
    CHECK_EQ(load_str("", &err), QHX_E_FORMAT);
    CHECK_EQ(load_str("[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", &err), QHX_E_FORMAT);
    /* the pair form of merges, and ignore_merges */
    qhx_tok *tok = NULL;
    const char *pairs = "{\"model\":{\"type\":\"BPE\",\"ignore_merges\":true,\"vocab\":{\"a\":0,\"b\":1,\"ab\":2,\"ba\":3,\"aba\":4},"
                        "\"merges\":[[\"a\",\"b\"],[\"b\",\"a\"]]}," MINI_PRE ",\"decoder\":{\"type\":\"ByteLevel\"}}";
    CHECK_EQ(qhx_tok_load_buffer(pairs, strlen(pairs), NULL, &tok, &err), QHX_OK);
    if (tok) {
        int32_t ids[8];
        size_t n;
        CHECK_EQ(qhx_tok_encode(tok, "aba", 3, ids, 8, &n, &err), QHX_OK);
        CHECK(n == 1 && ids[0] == 4); /* whole word, not ab + a */
        CHECK_EQ(qhx_tok_encode(tok, "abab", 4, ids, 8, &n, &err), QHX_OK);
        CHECK(n == 2 && ids[0] == 2 && ids[1] == 2);
        CHECK_EQ(qhx_tok_encode(tok, "abc", 3, ids, 8, &n, &err), QHX_OK); /* no 'c', no unk: dropped */
        CHECK(n == 1 && ids[0] == 2);
        qhx_tok_free(tok);
    }
    CHECK_EQ(qhx_tok_load("/nonexistent/tokenizer.json", &tok, &err), QHX_E_IO);
    CHECK_CONTAINS(err.msg, "/nonexistent/tokenizer.json");
}

/* ---- chat formats ---------------------------------------------------------------------------------- */

static char *fmt(qhx_chat_family fam, const qhx_chat_message *m, size_t n, qhx_chat_options o, qhx_status *rc) {
    qhx_error err = {0};
    char *out = NULL;
    size_t len;
    *rc = qhx_tok_chat_format(fam, m, n, &o, &out, &len, &err);
    if (out) CHECK_EQ(strlen(out), len);
    return out;
}

/* The message and option literals below are positional: the later fields (tools, tool calls)
 * stay zero, which is what these cases mean. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static void test_chat(void) {
    qhx_status rc;
    char *s;
    qhx_chat_options gen = {1, 0, 0}, think = {1, 1, 0}, nogen = {0, 0, 0};
    qhx_chat_message one[] = {{"user", "Hello", NULL, 0}};
    /* Qwen3.5, thinking off / on */
    s = fmt(QHX_CHAT_QWEN35, one, 1, gen, &rc);
    CHECK_STR(s, "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
    qhx_free(s);
    s = fmt(QHX_CHAT_QWEN35, one, 1, think, &rc);
    CHECK_STR(s, "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n");
    qhx_free(s);
    /* history: contents trimmed, reasoning before the last query dropped */
    qhx_chat_message conv[] = {
        {"system", "  You are helpful.\n", NULL, 0},
        {"user", "Hi", NULL, 0},
        {"assistant", "<think>\nplan\n</think>\n\nHello!", NULL, 0},
        {"user", " How are you? ", NULL, 0}};
    s = fmt(QHX_CHAT_QWEN35, conv, 4, gen, &rc);
    CHECK_STR(s, "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                 "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nHow are you?<|im_end|>\n"
                 "<|im_start|>assistant\n<think>\n\n</think>\n\n");
    qhx_free(s);
    /* an assistant turn after the last query keeps its reasoning */
    s = fmt(QHX_CHAT_QWEN35, conv + 1, 2, nogen, &rc);
    CHECK_STR(s, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\nplan\n</think>\n\nHello!<|im_end|>\n");
    qhx_free(s);
    /* Qwen3-VL Instruct: the spec's rendering of one image + text, then the expanded form */
    qhx_chat_part parts[] = {{NULL, 0, 0}, {"Describe this image.", 20, 0}};
    qhx_chat_message vl[] = {{"user", NULL, parts, 2}};
    s = fmt(QHX_CHAT_QWEN3VL, vl, 1, gen, &rc);
    CHECK_STR(s, "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Describe this image.<|im_end|>\n<|im_start|>assistant\n");
    qhx_free(s);
    parts[0].image_tokens = 3;
    s = fmt(QHX_CHAT_QWEN3VL, vl, 1, (qhx_chat_options){1, 1, 1}, &rc);
    CHECK_STR(s, "<|im_start|>user\nPicture 1: <|vision_start|><|image_pad|><|image_pad|><|image_pad|><|vision_end|>"
                 "Describe this image.<|im_end|>\n<|im_start|>assistant\n");
    qhx_free(s);
    qhx_chat_message vl2[] = {{"system", "Be brief. ", NULL, 0}, {"user", " Hi ", NULL, 0}, {"assistant", "Yo", NULL, 0}};
    s = fmt(QHX_CHAT_QWEN3VL, vl2, 3, nogen, &rc);
    CHECK_STR(s, "<|im_start|>system\nBe brief. <|im_end|>\n<|im_start|>user\n Hi <|im_end|>\n<|im_start|>assistant\nYo<|im_end|>\n");
    qhx_free(s);
    /* Qwen3.5 with an image */
    parts[0].image_tokens = 2;
    s = fmt(QHX_CHAT_QWEN35, vl, 1, gen, &rc);
    CHECK_STR(s, "<|im_start|>user\n<|vision_start|><|image_pad|><|image_pad|><|vision_end|>Describe this image.<|im_end|>\n"
                 "<|im_start|>assistant\n<think>\n\n</think>\n\n");
    qhx_free(s);
    /* errors */
    qhx_chat_message late_sys[] = {{"user", "a", NULL, 0}, {"system", "b", NULL, 0}};
    CHECK(fmt(QHX_CHAT_QWEN35, late_sys, 2, gen, &rc) == NULL && rc == QHX_E_ARG);
    qhx_chat_message odd_role[] = {{"function", "a", NULL, 0}};
    CHECK(fmt(QHX_CHAT_QWEN3VL, odd_role, 1, gen, &rc) == NULL && rc == QHX_E_UNSUPPORTED);
    /* Qwen3-VL: a tool response run folded into one user turn, a call after content, tools */
    {
        qhx_chat_tool_call calls[] = {{"f", NULL, 0, "{\"a\": 1}"}, {"g", NULL, 0, NULL}};
        qhx_chat_message vlc[] = {{"user", "q", NULL, 0}, {"assistant", "ok", NULL, 0, calls, 2},
                                   {"tool", "r1", NULL, 0}, {"tool", "r2", NULL, 0}};
        const char *defs[] = {"{\"type\": \"function\"}"};
        qhx_chat_options o = {.add_generation_prompt = 1, .tools = defs, .n_tools = 1};
        s = fmt(QHX_CHAT_QWEN3VL, vlc, 4, o, &rc);
        CHECK(s && !strncmp(s, "<|im_start|>system\n# Tools\n\n", 27) && strstr(s, "<tools>\n{\"type\": \"function\"}\n</tools>"));
        CHECK(s && strstr(s, "<|im_start|>assistant\nok\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>"
                             "\n<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call><|im_end|>\n"
                             "<|im_start|>user\n<tool_response>\nr1\n</tool_response>\n<tool_response>\nr2\n</tool_response>"
                             "<|im_end|>\n<|im_start|>assistant\n"));
        qhx_free(s);
        calls[0].name = NULL;
        CHECK(fmt(QHX_CHAT_QWEN3VL, vlc, 4, o, &rc) == NULL && rc == QHX_E_ARG);
    }
    qhx_chat_message sys_img[] = {{"system", NULL, parts, 2}, {"user", "x", NULL, 0}};
    CHECK(fmt(QHX_CHAT_QWEN35, sys_img, 2, gen, &rc) == NULL && rc == QHX_E_ARG);
    qhx_chat_message no_user[] = {{"system", "x", NULL, 0}};
    CHECK(fmt(QHX_CHAT_QWEN35, no_user, 1, gen, &rc) == NULL && rc == QHX_E_ARG);

    /* tokenized with the VL fixture tokenizer: the special ids land where the prompts put them */
    qhx_error err = {0};
    qhx_tok *tok = NULL;
    if (qhx_tok_load(QWEN3VL_JSON, &tok, &err) == QHX_OK) {
        parts[0].image_tokens = 4;
        s = fmt(QHX_CHAT_QWEN3VL, vl, 1, gen, &rc);
        int32_t *ids;
        size_t n;
        CHECK_EQ(qhx_tok_encode_alloc(tok, s, strlen(s), &ids, &n, &err), QHX_OK);
        CHECK(n > 12 && ids[0] == 991 && ids[n - 1] == 198);
        size_t pads = 0, vs = 0, ve = 0, turn = 0;
        for (size_t k = 0; k < n; k++) {
            if (k + 2 < n && ids[k] == 992 && ids[k + 1] == 198 && ids[k + 2] == 991) turn++;
            pads += ids[k] == 1002;
            if (ids[k] == 999) vs = k;
            if (ids[k] == 1000) ve = k;
        }
        CHECK_EQ(pads, 4);
        CHECK_EQ(turn, 1);
        CHECK_EQ(ve - vs, 5);
        qhx_free(ids);
        qhx_free(s);
        qhx_tok_free(tok);
    }
}

#pragma GCC diagnostic pop

/* ---- concurrency ---------------------------------------------------------------------------------------- */

static void *encode_all(void *arg) {
    qhx_tok *tok = arg;
    long bad = 0;
    for (int round = 0; round < 3; round++)
        for (size_t k = 0; k < NG; k++) bad += !check_line(tok, &G[k], 0);
    return (void *)bad;
}

static void test_threads(void) {
    qhx_error err = {0};
    qhx_tok *tok = NULL;
    if (!NG || qhx_tok_load(QWEN3_DIR "/tokenizer.json", &tok, &err) != QHX_OK) return;
    pthread_t th[4];
    for (int k = 0; k < 4; k++) pthread_create(&th[k], NULL, encode_all, tok);
    long bad = 0;
    for (int k = 0; k < 4; k++) {
        void *r;
        pthread_join(th[k], &r);
        bad += (long)r;
    }
    CHECK_EQ(bad, 0);
    qhx_tok_free(tok);
}

/* ---- allocation failures ----------------------------------------------------------------------------------- */

static void test_alloc_failures(void) {
    int64_t n = 0;
    int done = 0;
    const char *text = "Hello q\xCC\xA3 <|im_start|>user\nworld 123";
    for (; n < 100000 && !done; n++) {
        qhx_error err = {0};
        qhx_tok *tok = NULL;
        qhx_alloc_fail_after(n);
        qhx_status rc = qhx_tok_load(QWEN35_JSON, &tok, &err);
        int32_t *ids = NULL;
        size_t k = 0;
        if (rc == QHX_OK) rc = qhx_tok_encode_alloc(tok, text, strlen(text), &ids, &k, &err);
        int fired = qhx_alloc_failed();
        qhx_alloc_fail_after(-1);
        if (rc != QHX_OK) {
            CHECK(fired);
            CHECK_EQ(rc, QHX_E_NOMEM);
            if (rc != QHX_E_NOMEM) fprintf(stderr, "failure %lld: %s\n", (long long)n, err.msg);
        } else if (!fired) {
            done = 1;
        }
        qhx_free(ids);
        qhx_tok_free(tok);
    }
    CHECK(done);
    fprintf(stderr, "allocation failure sweep: %lld points\n", (long long)n);
}

/* ---- the Qwen3.5 tokenizer: provenance and goldens ---------------------------------------- */

/* The published sha256 of Qwen3.5's vocab.json and merges.txt (fixtures/tokenizer/qwen3_5/README.md). */
#define QWEN35_VOCAB_SHA256 "ce99b4cb2983d118806ce0a8b777a35b093e2000a503ebde25853284c9dfa003"
#define QWEN35_VOCAB_BYTES 6722759
#define QWEN35_MERGES_SHA256 "a9d356d7bdf1ef4949e3e748e95b8e10ad9d4e2e838eddc38a0a7b6b94d1db8d"
#define QWEN35_MERGES_BYTES 3353259

typedef struct hashed {
    qhx_sha256 h;
    long long bytes;
} hashed;

static void hput(hashed *x, const char *s, size_t n) {
    qhx_sha256_update(&x->h, s, n);
    x->bytes += (long long)n;
}

static void hend(hashed *x, char hex[65]) {
    uint8_t d[32];
    qhx_sha256_final(&x->h, d);
    qhx_sha256_hex(d, hex);
}

/* A JSON string as Python's json.dumps(ensure_ascii=False) writes it. */
static void hput_json_string(hashed *x, const char *s) {
    hput(x, "\"", 1);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        char e[8];
        if (ch == '"' || ch == '\\') {
            e[0] = '\\', e[1] = (char)ch;
            hput(x, e, 2);
        } else if (ch < 0x20) {
            const char *named = ch == '\n' ? "\\n" : ch == '\r' ? "\\r" : ch == '\t' ? "\\t" : ch == '\b' ? "\\b" : ch == '\f' ? "\\f" : NULL;
            if (named) hput(x, named, 2);
            else {
                snprintf(e, sizeof e, "\\u%04x", ch);
                hput(x, e, 6);
            }
        } else hput(x, (const char *)&ch, 1);
    }
    hput(x, "\"", 1);
}

static int by_rank(const void *a, const void *b) {
    int32_t x = ((const tok_merge *)a)->rank, y = ((const tok_merge *)b)->rank;
    return (x > y) - (x < y);
}

/* vocab.json and merges.txt as the release writes them (json.dumps(vocab, indent=4,
 * ensure_ascii=False), id order, no final newline; "a b\n" per merge in rank order, no header),
 * made from what tok holds, and their sha256 against the published ones. */
static void check_released_files(const qhx_tok *tok, const char *what) {
    hashed v = {.bytes = 0};
    qhx_sha256_init(&v.h);
    hput(&v, "{\n", 2);
    int32_t n_vocab = 0;
    for (int32_t id = 0; id < tok->n_ids; id++) {
        if (!(tok->id_kind[id] & TOK_ID_VOCAB)) continue;
        char num[32];
        if (n_vocab++) hput(&v, ",\n", 2);
        hput(&v, "    ", 4);
        hput_json_string(&v, qhx_tok_id_to_token(tok, id));
        snprintf(num, sizeof num, ": %d", (int)id);
        hput(&v, num, strlen(num));
    }
    hput(&v, "\n}", 2);
    char hex[65];
    hend(&v, hex);
    CHECK_EQ(n_vocab, 248044);
    CHECK_EQ(v.bytes, QWEN35_VOCAB_BYTES);
    CHECK_STR(hex, QWEN35_VOCAB_SHA256);
    if (strcmp(hex, QWEN35_VOCAB_SHA256)) fprintf(stderr, "%s: vocab.json re-serialised: %s, %lld bytes\n", what, hex, v.bytes);

    size_t slots = tok->merge_mask + 1, n = 0;
    tok_merge *m = qhx_malloc(slots * sizeof *m);
    CHECK(m != NULL);
    if (!m) return;
    for (size_t k = 0; k < slots; k++)
        if (tok->merges[k].key != UINT64_MAX) m[n++] = tok->merges[k];
    qsort(m, n, sizeof *m, by_rank);
    CHECK_EQ((long long)n, 247587);
    CHECK_EQ((long long)n, (long long)tok->n_merges);
    hashed g = {.bytes = 0};
    qhx_sha256_init(&g.h);
    int ranks_ok = 1;
    for (size_t k = 0; k < n; k++) {
        ranks_ok &= m[k].rank == (int32_t)k;
        const char *a = qhx_tok_id_to_token(tok, (int32_t)(m[k].key >> 32)), *b = qhx_tok_id_to_token(tok, (int32_t)(uint32_t)m[k].key);
        hput(&g, a, strlen(a));
        hput(&g, " ", 1);
        hput(&g, b, strlen(b));
        hput(&g, "\n", 1);
    }
    qhx_free(m);
    hend(&g, hex);
    CHECK(ranks_ok);
    CHECK_EQ(g.bytes, QWEN35_MERGES_BYTES);
    CHECK_STR(hex, QWEN35_MERGES_SHA256);
    if (strcmp(hex, QWEN35_MERGES_SHA256)) fprintf(stderr, "%s: merges.txt re-serialised: %s, %lld bytes\n", what, hex, g.bytes);
}

/* The Qwen3.5 tokenizer (248,044 BPE entries + 33 added tokens, the Qwen3.5 pre-tokenizer with
 * [\p{L}\p{M}]+, legacy "a b" merges): what it carries is the released vocabulary and merges
 * (their published hashes), in tokenizer.json and in the binary form made from it, and it
 * encodes the goldens the Hugging Face tokenizers library made from it. Runs after the Qwen3
 * tests, on its own golden set. */
static void test_golden_qwen35(void) {
    golden *g3 = G;
    size_t n3 = NG;
    G = NULL;
    NG = 0;
    CHECK(load_golden(QWEN35T_DIR "/golden.jsonl") == 263);
    qhx_error err = {0};
    qhx_tok *tok = NULL, *bin = NULL;
    CHECK_EQ(qhx_tok_load(QWEN35T_DIR "/tokenizer.json", &tok, &err), QHX_OK);
    if (tok) {
        CHECK_EQ(qhx_tok_n_vocab(tok), 248077);
        check_released_files(tok, "tokenizer.json");
        CHECK_EQ(run_golden(tok, "Qwen3.5 tokenizer.json"), (long long)NG);
        CHECK_EQ(qhx_tok_token_to_id(tok, "<|endoftext|>"), 248044);
        CHECK_EQ(qhx_tok_token_to_id(tok, "<|im_end|>"), 248046);
        CHECK_EQ(qhx_tok_token_to_id(tok, "<think>"), 248068);
        CHECK_EQ(qhx_tok_token_to_id(tok, "<|audio_pad|>"), 248076);
        CHECK(qhx_tok_is_special(tok, 248076) && !qhx_tok_is_special(tok, 248068));
        char path[] = "/tmp/qhx_tok_q35_XXXXXX";
        int fd = mkstemp(path);
        CHECK(fd >= 0);
        if (fd >= 0) close(fd);
        CHECK_EQ(qhx_tok_save(tok, path, &err), QHX_OK);
        CHECK_EQ(qhx_tok_load_binary(path, &bin, &err), QHX_OK);
        if (bin) {
            struct stat st;
            if (!stat(path, &st)) fprintf(stderr, "Qwen3.5 binary form: %lld bytes\n", (long long)st.st_size);
            check_released_files(bin, "binary form");
            CHECK_EQ(run_golden(bin, "Qwen3.5 binary form"), (long long)NG);
            qhx_tok_free(bin);
        }
        unlink(path);
        qhx_tok_free(tok);
    } else {
        fprintf(stderr, "load: %s\n", err.msg);
    }
    free_golden();
    G = g3;
    NG = n3;
}

/* NFC as utf8proc computes it (its own canonical ordering: quadratic in a run of marks). */
static size_t nfc_utf8proc(const uint8_t *s, size_t n, int32_t *buf, size_t cap) {
    const utf8proc_option_t opt = UTF8PROC_STABLE | UTF8PROC_COMPOSE;
    utf8proc_ssize_t m = utf8proc_decompose(s, (utf8proc_ssize_t)n, buf, (utf8proc_ssize_t)cap, opt);
    if (m < 0 || (size_t)m > cap) return (size_t)-1;
    return (size_t)utf8proc_normalize_utf32(buf, m, opt);
}

/* qhx_tok_nfc (its own ordering: a stable sort per run of marks) equals utf8proc's NFC on random
 * mixes of starters, marks of several classes, singletons, exclusions and Hangul; and a long run
 * of marks costs milliseconds, not the minute the bubble sort took. */
static void test_nfc(void) {
    static const uint32_t pool[] = {'a', 'e', 'o', 'A', ' ', 0x301, 0x316, 0x327, 0x308, 0x323, 0x345, 0x344,
                                    0x1F00, 0x3B1, 0x3C9, 0xAC00, 0x1100, 0x1161, 0x11A8, 0xF73, 0xF71, 0xF72,
                                    0x1E0A, 0x958, 0x915, 0x93C, 0x2126, 0x212B, 0x5B0, 0x5B8, 0x5C1, 0x5BC, 0x1D15F};
    const size_t npool = sizeof pool / sizeof pool[0];
    uint64_t r = 12345;
    int32_t ref[512];
    char text[512];
    int same = 1;
    for (int t = 0; t < 5000 && same; t++) {
        size_t n = 0, len = 1 + (size_t)(t % 40);
        for (size_t k = 0; k < len; k++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            n += (size_t)qhx_tok_utf8_put(text + n, pool[(r >> 33) % npool]);
        }
        size_t m = nfc_utf8proc((const uint8_t *)text, n, ref, 512);
        tok_buf out = {0};
        CHECK(qhx_tok_nfc(text, n, &out));
        char want[2048];
        size_t wn = 0;
        for (size_t j = 0; m != (size_t)-1 && j < m; j++) wn += (size_t)qhx_tok_utf8_put(want + wn, (uint32_t)ref[j]);
        same = m != (size_t)-1 && out.n == wn && !memcmp(out.p, want, wn);
        if (!same) fprintf(stderr, "test_nfc: case %d differs from utf8proc\n", t);
        qhx_free(out.p);
    }
    CHECK(same);
    size_t pairs = 65536, n = 1 + 4 * pairs; /* 'a' + (U+0301 U+0316) x 65536: 256 KB */
    char *hostile = qhx_malloc(n);
    hostile[0] = 'a';
    for (size_t k = 0; k < pairs; k++) memcpy(hostile + 1 + 4 * k, "\xcc\x81\xcc\x96", 4);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    tok_buf out = {0};
    CHECK(qhx_tok_nfc(hostile, n, &out));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double sec = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    CHECK(sec < 3.0); /* the quadratic sort took over 60 s */
    /* the result: "á" (composed), then the 65536 U+0316 (class 220), then 65535 U+0301 (230) */
    CHECK(out.n == 2 + 2 * pairs + 2 * (pairs - 1) && !memcmp(out.p, "\xc3\xa1\xcc\x96", 4) &&
          !memcmp(out.p + out.n - 2, "\xcc\x81", 2));
    qhx_free(out.p);
    qhx_free(hostile);
}

int main(void) {
    test_nfc();
    test_golden();
    test_golden_qwen35();
    test_bpe_paths();
    test_regexes();
    test_invalid_utf8();
    test_stream();
    test_binary();
    test_refusals();
    test_regex_budget();
    test_chat();
    test_threads();
    test_alloc_failures();
    free_golden();
    return t_done("test_tokenizer");
}
