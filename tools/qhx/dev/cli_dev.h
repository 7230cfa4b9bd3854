/* cli_dev.h: what only the developer commands share (inspect, logits, parity, forge, bench,
 * tokenize, detokenize, chat-format, embed-image). Unlike the product commands (cli.h), these
 * look inside the library: they include internal headers (src/, through the qhx_internal CMake
 * target), and so does this header. */
#ifndef QHX_CLI_DEV_H
#define QHX_CLI_DEV_H

#include "cli.h"

#include "core/file.h"
#include "runtime/model.h"
#include "runtime/session.h"

#include <stdio.h>

/* qhx inspect on a GGUF file (inspect_gguf.c): text, or one JSON document with as_json. */
int qhx_inspect_gguf(const char *path, int as_json);

/* Load the tokenizer named by --tokenizer: a tokenizer.json (or its binary form), a model
 * folder holding one, a manifest, or a bundle folder (the run plan's tokenizer artifact). */
struct qhx_tok;
qhx_status qhx_cli_load_tokenizer(const char *path, struct qhx_tok **out, qhx_error *err);

/* An output file that appears whole or not at all, by the library's one policy (qhx_out_open,
 * src/core/file.h: a temporary file beside path, renamed by commit; a device or a FIFO written in
 * place; a link's target written, the link kept). The CLI adds the signal path: the temporary
 * file being written is known to qhx_cli_out_unlink_live. Both commit and abort accept an
 * output that was never opened. */
typedef struct qhx_cli_out {
    FILE *f;          /* file.f while open */
    qhx_out_file file;
} qhx_cli_out;
qhx_status qhx_cli_out_open(qhx_cli_out *o /* OUT */, const char *path, qhx_error *err);
qhx_status qhx_cli_out_commit(qhx_cli_out *o, qhx_error *err);
void qhx_cli_out_abort(qhx_cli_out *o);

/* Load and encode the n_paths images (in order) into ims (n_paths,) and announce ids (n,) with
 * them as the session's next tokens: one run of the image-pad id per image, which takes its
 * embeddings; without images the ids must hold no image-pad id (a model that takes images) or
 * are all text (one that does not). A model whose host-op takes no images refuses images. ims
 * are owned by the caller (qhx_image_embed_deinit each) and must outlive the prefill. */
qhx_status qhx_cli_attach_images(const qhx_model *m, qhx_session *s, const char *const *paths, int n_paths,
                                 const int32_t *ids, int64_t n, qhx_image_embed *ims /* OUT (n_paths,) */,
                                 qhx_error *err);

#endif
