/* fuzz_tokenizer_json: tokenizer.json bytes from the fuzzer -> qhx_tok_load_buffer; a file
 * that loads is then used to encode and decode a few texts. Nothing may crash or leak. */
#include "text/tokenizer.h"

#include "core/alloc.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    qhx_error err = {0};
    qhx_tok *tok = NULL;
    if (qhx_tok_load_buffer(data, size, "fuzz.json", &tok, &err) != QHX_OK) return 0;
    static const char *const texts[] = {"Hello world! 123 <|im_start|>user\n", "q\xCC\xA3 e\xCC\x81 \xE4\xBD\xA0\xE5\xA5\xBD",
                                        "  \t\n\n x's 'LL", "\xF0\x9F\x98\x80\xE2\x80\x8D\xF0\x9F\x91\x8D"};
    for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++) {
        int32_t *ids = NULL;
        size_t n = 0;
        if (qhx_tok_encode_alloc(tok, texts[k], strlen(texts[k]), &ids, &n, &err) == QHX_OK) {
            char *s = NULL;
            size_t len = 0;
            qhx_tok_decode_alloc(tok, ids, n, 0, &s, &len, &err);
            qhx_free(s);
        }
        qhx_free(ids);
    }
    int32_t some[] = {0, 1, 2, 255, 256, qhx_tok_n_vocab(tok) - 1, qhx_tok_n_vocab(tok), -1};
    char *s = NULL;
    size_t len = 0;
    qhx_tok_decode_alloc(tok, some, sizeof some / sizeof some[0], QHX_TOK_SKIP_SPECIAL, &s, &len, &err);
    qhx_free(s);
    qhx_tok_free(tok);
    return 0;
}
