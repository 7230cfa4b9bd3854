/* cli_model.h: argument helpers shared by the commands that run a model (logits, generate). */
#ifndef QHX_CLI_MODEL_H
#define QHX_CLI_MODEL_H

#include "runtime/session.h"

#include <stddef.h>
#include <stdint.h>

/* Parse "1,2,3" or "1 2 3" (commas and whitespace separate) into a new array (owned: qhx_free) of *n ids in [0, INT32_MAX].
 * Returns 0, or -1 with a reason in why[why_size] (nothing allocated). */
int qhx_cli_parse_ids(const char *s, int32_t **ids /* OUT */, int64_t *n /* OUT */, char *why,
                      size_t why_size);

/* Load and encode image_path (may be NULL) into *im and announce ids (n,) with it as the
 * session's next tokens, so the image-pad ids take the image's embeddings; without an image the
 * ids must hold no image-pad id. A model whose host-op takes no images refuses an image. *im is
 * owned by the caller (qhx_image_embed_deinit) and must outlive the prefill. */
qhx_status qhx_cli_attach_image(const qhx_model *m, qhx_session *s, const char *image_path,
                                const int32_t *ids, int64_t n, qhx_image_embed *im /* OUT */,
                                qhx_error *err);

#endif
