/* qhx_bench_grammar: what a grammar costs per generated token over a real vocabulary.
 *   qhx_bench_grammar TOKENIZER.json [ROUNDS]
 *   qhx_bench_grammar --compile [ROUNDS]
 * For each (schema, document) pair below, the document (valid under the schema) is tokenized
 * with the tokenizer, and for every token of it, as if a model had sampled it: the full mask
 * with the matcher's cache as generation has it, the same mask walked with the cache emptied
 * first, and the check of that one token (what a greedy pick pays when the argmax is allowed);
 * then the token is accepted. Prints the mean and largest times per token. Not a test. */
#include "core/alloc.h"
#include "core/time.h"
#include "grammar/gm_match.h"
#include "grammar/grammar.h"
#include "text/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const CASES[][3] = {
    {"weather object",
     "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"maxLength\": 40}, \"temp\": {\"type\": "
     "\"number\", \"minimum\": -60, \"maximum\": 60}, \"sky\": {\"enum\": [\"clear\", \"cloudy\", \"rain\", \"snow\"]}}, "
     "\"required\": [\"city\", \"temp\", \"sky\"], \"additionalProperties\": false}",
     "{\"city\": \"Paris\", \"temp\": 21.5, \"sky\": \"cloudy\"}"},
    {"people list",
     "{\"type\": \"array\", \"items\": {\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}, "
     "\"email\": {\"type\": \"string\", \"format\": \"email\"}, \"age\": {\"type\": \"integer\", \"minimum\": 0, "
     "\"maximum\": 150}, \"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}}}, \"required\": [\"name\", "
     "\"age\"]}}",
     "[{\"name\": \"Alice Smith\", \"age\": 34, \"email\": \"alice@example.com\", \"tags\": [\"admin\", \"ops\"]},\n "
     "{\"name\": \"Bob\", \"age\": 27, \"tags\": []}]"},
    {"json_object, free text",
     "{\"type\": \"object\", \"additionalProperties\": true}",
     "{\"summary\": \"The quick brown fox jumps over the lazy dog. It was a bright cold day in April, and the clocks "
     "were striking thirteen.\", \"score\": 0.75, \"ok\": true}"},
};

/* CPU time of this thread: the machine is shared, and wall time would count other programs. */
static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* --compile: the time to compile GBNF of n rules (chains r_i ::= "a" r_{i+1}, alternatives
 * root ::= k_0 | ... with k_i ::= "i" ";", and one rule of n alternatives), the best of rounds,
 * for n = 1k, 8k, 32k: compile time should grow linearly with n. */
static int bench_compile(int rounds) {
    static const char *const shapes[] = {"chain", "rule alternatives", "literal alternatives"};
    static const int sizes[] = {1000, 8000, 32000};
    size_t cap = (size_t)32 << 20;
    char *t = malloc(cap);
    if (!t) return 1;
    printf("%-22s %8s %10s %12s\n", "grammar", "rules", "bytes", "compile ms");
    for (int s = 0; s < 3; s++)
        for (int z = 0; z < 3; z++) {
            int n = sizes[z];
            size_t len = 0;
            if (s == 0) {
                len += (size_t)snprintf(t + len, cap - len, "root ::= \"a\" r1\n");
                for (int i = 1; i < n; i++) len += (size_t)snprintf(t + len, cap - len, "r%d ::= \"a\" r%d\n", i, i + 1);
                len += (size_t)snprintf(t + len, cap - len, "r%d ::= \"b\"\n", n);
            } else {
                len += (size_t)snprintf(t + len, cap - len, "root ::= ");
                for (int i = 0; i < n; i++)
                    len += (size_t)snprintf(t + len, cap - len, s == 1 ? "%sk%d" : "%s\"w%d\"", i ? " | " : "", i);
                len += (size_t)snprintf(t + len, cap - len, "\n");
                for (int i = 0; s == 1 && i < n; i++) len += (size_t)snprintf(t + len, cap - len, "k%d ::= \"%d\" \";\"\n", i, i);
            }
            double best = 1e30;
            for (int r = 0; r < rounds; r++) {
                qhx_error err = {0};
                qhx_gm *g = NULL;
                double t0 = now_ms();
                if (qhx_gm_parse(t, len, NULL, &g, &err)) {
                    fprintf(stderr, "%s %d: %s\n", shapes[s], n, err.msg);
                    free(t);
                    return 1;
                }
                double ms = now_ms() - t0;
                if (ms < best) best = ms;
                qhx_gm_free(g);
            }
            printf("%-22s %8d %10zu %12.2f\n", shapes[s], n, len, best);
        }
    free(t);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "--compile")) return bench_compile(argc > 2 ? atoi(argv[2]) : 3);
    if (argc < 2) {
        fprintf(stderr, "usage: qhx_bench_grammar TOKENIZER.json [ROUNDS] | --compile [ROUNDS]\n");
        return 2;
    }
    int rounds = argc > 2 ? atoi(argv[2]) : 3;
    qhx_error err = {0};
    qhx_tok *tok = NULL;
    if (qhx_tok_load(argv[1], &tok, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    int32_t n = qhx_tok_n_vocab(tok);
    const uint8_t **bytes = calloc((size_t)n, sizeof *bytes);
    uint32_t *lens = calloc((size_t)n, sizeof *lens);
    uint8_t *kind = calloc((size_t)n, 1);
    int32_t im_end = qhx_tok_token_to_id(tok, "<|im_end|>");
    for (int32_t i = 0; i < n; i++) { /* as runtime/constrain.c builds it */
        size_t len;
        int added;
        bytes[i] = qhx_tok_id_bytes(tok, i, &len, &added);
        lens[i] = (uint32_t)len;
        kind[i] = i == im_end ? QHX_GM_TOK_END : !bytes[i] || added ? QHX_GM_TOK_NEVER : QHX_GM_TOK_TEXT;
    }
    double t0 = now_ms();
    qhx_gm_vocab *v = NULL;
    if (qhx_gm_vocab_new(n, bytes, lens, kind, &v, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    printf("vocabulary: %d ids, byte table built in %.1f ms\n", n, now_ms() - t0);
    uint64_t *words = malloc(((size_t)n + 63) / 64 * sizeof *words);
    for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++) {
        qhx_gm *g = NULL;
        if (qhx_gm_from_schema(CASES[k][1], strlen(CASES[k][1]), &g, &err)) {
            fprintf(stderr, "%s: %s\n", CASES[k][0], err.msg);
            return 1;
        }
        int32_t *ids = NULL;
        size_t n_ids = 0;
        if (qhx_tok_encode_alloc(tok, CASES[k][2], strlen(CASES[k][2]), &ids, &n_ids, &err)) return 1;
        double best_cached = 1e30, best_cold = 1e30, best_check = 1e30, max_cold = 0;
        uint64_t hits = 0, masks = 0;
        for (int r = 0; r < rounds; r++) {
            qhx_gm_match *m = NULL, *m2 = NULL; /* m keeps its cache, m2 empties it every token */
            qhx_gm_match_new(g, &m, NULL);
            qhx_gm_match_new(g, &m2, NULL);
            double cached = 0, cold = 0, check = 0, worst = 0;
            for (size_t i = 0; i < n_ids; i++) {
                double a = now_ms();
                qhx_gm_mask(m, v, words, NULL);
                double b = now_ms();
                if (!((words[ids[i] >> 6] >> (ids[i] & 63)) & 1)) {
                    fprintf(stderr, "%s: token %zu (%d '%s') refused: the document does not follow the schema\n", CASES[k][0], i,
                            ids[i], qhx_tok_id_to_token(tok, ids[i]));
                    return 1;
                }
                gm_cache_clear(m2);
                double c = now_ms();
                qhx_gm_mask(m2, v, words, NULL);
                double d = now_ms();
                qhx_gm_allows(m2, v, ids[i], NULL);
                double e = now_ms();
                cached += b - a, cold += d - c, check += e - d;
                if (d - c > worst) worst = d - c;
                qhx_gm_accept(m, v, ids[i], NULL);
                qhx_gm_accept(m2, v, ids[i], NULL);
            }
            qhx_gm_match_free(m2);
            qhx_gm_counters cnt;
            qhx_gm_match_counters(m, &cnt);
            hits = cnt.cache_hits, masks = cnt.masks;
            if (cached < best_cached) best_cached = cached;
            if (cold < best_cold) best_cold = cold, max_cold = worst;
            if (check < best_check) best_check = check;
            qhx_gm_match_free(m);
        }
        printf("%-24s %3zu tokens: mask %.3f ms/token as generation caches it (%llu of %llu from the cache), "
               "%.3f ms/token uncached (largest %.3f ms), one-token check %.4f ms\n",
               CASES[k][0], n_ids, best_cached / (double)n_ids, (unsigned long long)hits, (unsigned long long)masks,
               best_cold / (double)n_ids, max_cold, best_check / (double)n_ids);
        qhx_free(ids);
        qhx_gm_free(g);
    }
    free(words);
    qhx_gm_vocab_free(v);
    free(bytes);
    free(lens);
    free(kind);
    qhx_tok_free(tok);
    return 0;
}
