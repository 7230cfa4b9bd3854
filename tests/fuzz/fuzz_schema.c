/* fuzz_schema: arbitrary bytes -> the JSON Schema compiler alone (fuzz_grammar splits its
 * inputs between GBNF and schemas; here every input is a schema, with a JSON dictionary).
 * What compiles must match some text (the emptiness check refuses the rest), every prefix it
 * accepts must still be able to end or go on, and it is masked over a small vocabulary. */
#include "grammar/grammar.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *const VOCAB[] = {"{", "}", "[", "]", "\"", ":", ",", " ", "\"a\"", "\"x\": ", "0", "1", "-", ".5",
                                    "e3", "true", "false", "null", "ab", "\\u00e9", "\xC3\xA9", "\n"};
#define NV ((int32_t)(sizeof VOCAB / sizeof VOCAB[0]) + 1)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    qhx_gm *g = NULL;
    if (qhx_gm_from_schema((const char *)data, size, &g, NULL) != QHX_OK) return 0;
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
        /* walk the tokens the mask allows, picking by the input's bytes */
        for (size_t i = 0; i < size && i < 128; i++) {
            if (qhx_gm_mask(m, v, words, NULL) < 0) break;
            int32_t pick = -1;
            for (int32_t k = 0, want = data[i] % NV; k < NV; k++) {
                int32_t id = (want + k) % NV;
                if ((words[0] >> id) & 1 && qhx_gm_vocab_kind(v, id) == QHX_GM_TOK_TEXT) {
                    pick = id;
                    break;
                }
            }
            if (pick < 0) break;
            int r = qhx_gm_accept(m, v, pick, NULL);
            if (r == 0) abort(); /* the mask allowed it */
            if (r < 0) break;    /* a cap */
            if (!qhx_gm_match_can_end(m) && !qhx_gm_match_can_continue(m)) abort(); /* stranded */
        }
    }
    qhx_gm_match_free(m);
    qhx_gm_vocab_free(v);
    qhx_gm_free(g);
    return 0;
}
