/* io/gguf_tok: the tokenizer of a GGUF file as tokenizer.json text (gguf_tok.c says what the
 * tokenizer.ggml.* keys hold and which tokenizers are read), for qhx_tok_load_buffer. */
#ifndef QHX_IO_GGUF_TOK_H
#define QHX_IO_GGUF_TOK_H

#include "io/gguf.h"

#include <stddef.h>

/* *out: NUL-terminated JSON (qhx_free), *len its length. A model other than byte-level BPE, an
 * unknown pre-tokenizer, a missing or mistyped key, a token that is not UTF-8 or appears twice:
 * one message naming the key (and the index). */
qhx_status qhx_gguf_tokenizer_json(const qhx_gguf *g, char **out /* OUT */, size_t *len /* OUT */, qhx_error *err);

#endif
