/* runtime/hostop.h: the host-ops, the loops a run plan's host_op names. A family offers
 * host-ops by name (families/family.h qhx_family_host_op), each one of the loops below; a
 * session calls its model's loop for every generate. A loop uses only the session (feeding,
 * sampling, streaming) and the generation step (runtime/gen.h). Prompts, with or without
 * images, are the prompt object's (runtime/prompt.c); whether a model takes images is the
 * loop's flag.
 *
 *   text        text only; images refused (the plan never loaded the vision graph)
 *   image_text  images too: decoded and preprocessed on the host, run through the vision graph,
 *               announced with the prompt's ids and fed with them */
#ifndef QHX_RUNTIME_HOSTOP_H
#define QHX_RUNTIME_HOSTOP_H

#include "runtime/session.h"

#define QHX_HOSTOP_MAX_IMAGES 16                 /* images in one turn of the former chat calls */
#define QHX_CHAT_MAX_MESSAGES 4096               /* messages in one chat call */
#define QHX_CHAT_MAX_IMAGE_TOKENS ((int64_t)1 << 20) /* pads of one image, as text/tok_chat.c */

/* The loop of a model's host-op (families/family.h qhx_hostop). */
const qhx_hostop *qhx_hostop_of(const qhx_model *m);

#endif
