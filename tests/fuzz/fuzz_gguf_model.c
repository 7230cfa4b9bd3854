/* Fuzz target: a GGUF file as a model, from a buffer: after the reader, every family's config
 * made of the <arch>.* keys and read back by the family's config parser, and the tokenizer made
 * of the tokenizer.ggml.* keys loaded (the paths -m FILE.gguf takes before any weight). */
#include "core/alloc.h"
#include "families/family.h"
#include "io/gguf.h"
#include "io/gguf_tok.h"
#include "text/tokenizer.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void try_families(const qhx_gguf *g) {
    static const char *const archs[] = {"qwen35", "qwen3vl"};
    for (int i = 0; i < 2; i++) {
        const qhx_family_desc *f = qhx_family_for_gguf_arch(archs[i]);
        json_t *config = NULL;
        qhx_error err;
        if (!f || qhx_family_gguf_config(f, g, archs[i], &config, &err) != QHX_OK) continue;
        qhx_model_config *cfg = malloc(sizeof *cfg);
        if (cfg) f->parse_config(config, "fuzz", cfg, &err);
        free(cfg);
        json_decref(config);
    }
}

static void try_tokenizer(const qhx_gguf *g) {
    char *json = NULL;
    size_t len = 0;
    qhx_error err;
    if (qhx_gguf_tokenizer_json(g, &json, &len, &err) != QHX_OK) return;
    qhx_tok *tok = NULL;
    if (qhx_tok_load_buffer(json, len, "fuzz", &tok, &err) == QHX_OK) qhx_tok_free(tok);
    qhx_free(json);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    qhx_gguf *g = NULL;
    qhx_error err;
    if (qhx_gguf_parse(data, size, "fuzz", &g, &err) != QHX_OK) return 0;
    try_families(g);
    try_tokenizer(g);
    qhx_gguf_free(g);
    return 0;
}
