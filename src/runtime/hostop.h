/* runtime/hostop.h: the host-ops, the generate loops a run plan's host_op names. A family
 * offers host-ops by name (families/family.h qhx_family_host_op), each one of the loops below;
 * a session calls its model's loop for every chat turn and every generate. A loop uses only the
 * session (feeding, sampling, streaming), the model's backend (through runtime/model.h) and the
 * tokenizer.
 *
 *   text        chat turns of text; images refused (the plan never loaded the vision graph)
 *   image_text  chat turns with images: each image decoded and preprocessed on the host, run
 *               through the vision graph, announced with the turn's ids and fed with them */
#ifndef QHX_RUNTIME_HOSTOP_H
#define QHX_RUNTIME_HOSTOP_H

#include "runtime/session.h"

#define QHX_HOSTOP_MAX_IMAGES 16 /* images in one chat turn */

typedef struct qhx_hostop {
    const char *name; /* the loop: "text", "image_text" */
    /* Feed one chat turn: msgs (n), the images of its last user message (n_images, in order,
     * each file capped to max_image_tokens image tokens; 0 = no cap). */
    qhx_status (*feed_chat)(qhx_session *s, const qhx_chat_msg *msgs, size_t n, const char *const *images,
                            int n_images, int64_t max_image_tokens, int thinking, qhx_error *err);
    qhx_status (*generate)(qhx_session *s, const qhx_generate_params *p, qhx_generate_stats *stats,
                           qhx_error *err);
} qhx_hostop;

/* The loop of a model's host-op. */
const qhx_hostop *qhx_hostop_of(const qhx_model *m);

#endif
