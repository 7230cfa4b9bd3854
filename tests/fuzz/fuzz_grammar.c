/* fuzz_grammar: arbitrary bytes -> the GBNF parser, and the JSON Schema compiler; what parses
 * is then matched against the same bytes and masked over a small vocabulary, so the matcher's
 * caps (stacks, nodes) and the mask walk see hostile grammars too. Input byte 0 picks the
 * front end (even: GBNF, odd: JSON Schema; fuzz_schema feeds schemas alone); the rest is the
 * text. What compiles must match some text, and every prefix it accepts must be able to end
 * or go on. */
#include "grammar/grammar.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *const VOCAB[] = {"a", "b", "ab", "\"", "{", "}", ":", ",", " ", "1", "12", "x\xC3", "\xA9", "\\",
                                    "true", "null", "[", "]", "\n", "-", ".", "e", "\xE2\x82\xAC"};
#define NV ((int32_t)(sizeof VOCAB / sizeof VOCAB[0]) + 1)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    qhx_gm *g = NULL;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    if (data[0] & 1) qhx_gm_from_schema(text, len, &g, NULL);
    else qhx_gm_parse(text, len, NULL, &g, NULL);
    if (!g) return 0;
    const uint8_t *bytes[NV];
    uint32_t lens[NV];
    uint8_t kind[NV];
    for (int32_t i = 0; i < NV - 1; i++) {
        bytes[i] = (const uint8_t *)VOCAB[i];
        lens[i] = (uint32_t)strlen(VOCAB[i]);
        kind[i] = QHX_GM_TOK_TEXT;
    }
    bytes[NV - 1] = (const uint8_t *)"", lens[NV - 1] = 0, kind[NV - 1] = QHX_GM_TOK_END;
    qhx_gm_vocab *v = NULL;
    qhx_gm_match *m = NULL;
    if (qhx_gm_vocab_new(NV, bytes, lens, kind, &v, NULL) == QHX_OK && qhx_gm_match_new(g, &m, NULL) == QHX_OK) {
        if (!qhx_gm_match_can_end(m) && !qhx_gm_match_can_continue(m)) abort(); /* an empty language compiled */
        uint64_t words[1];
        /* follow the input's own bytes one at a time, masking every few steps */
        for (size_t i = 0; i < len && i < 256; i++) {
            if (i % 8 == 0 && qhx_gm_mask(m, v, words, NULL) < 0) break;
            if (qhx_gm_match_bytes(m, (const uint8_t *)text + i, 1, NULL) != 1) break;
            if (!qhx_gm_match_can_end(m) && !qhx_gm_match_can_continue(m)) abort(); /* stranded: a dead end kept */
        }
        qhx_gm_mask(m, v, words, NULL);
    }
    qhx_gm_match_free(m);
    qhx_gm_vocab_free(v);
    qhx_gm_free(g);
    return 0;
}
