/* fuzz_tokenizer_bin: bytes -> qhx_tok_load_binary_buffer. The checksum is recomputed first
 * (when the input is long enough to have a header) so that mutations reach the structural
 * checks instead of stopping at the checksum. A file that loads is used to encode and decode. */
#include "text/tokenizer.h"

#include "core/alloc.h"
#include "text/tok_internal.h"

#include <stdint.h>
#include <string.h>

#define HEADER_BYTES 128
#define BODY_HASH_AT 40

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *copy = qhx_malloc(size ? size : 1);
    if (!copy) return 0;
    if (size) memcpy(copy, data, size);
    if (size >= HEADER_BYTES) {
        uint64_t h = qhx_tok_file_hash(copy + HEADER_BYTES, size - HEADER_BYTES);
        memcpy(copy + BODY_HASH_AT, &h, 8);
    }
    qhx_error err = {0};
    qhx_tok *tok = NULL;
    if (qhx_tok_load_binary_buffer(copy, size, "fuzz.qhxtok", &tok, &err) == QHX_OK) {
        static const char *const texts[] = {"Hello world! 123 <|im_start|>user\n", "q\xCC\xA3 \xE4\xBD\xA0\xE5\xA5\xBD"};
        for (size_t k = 0; k < 2; k++) {
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
        qhx_tok_token_to_id(tok, "<|im_end|>");
        qhx_tok_free(tok);
    }
    qhx_free(copy);
    return 0;
}
