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

#define QHX_HOSTOP_MAX_IMAGES 16                 /* images in one chat turn */
#define QHX_CHAT_MAX_MESSAGES 4096               /* messages in one chat call */
#define QHX_CHAT_MAX_IMAGE_TOKENS ((int64_t)1 << 20) /* pads of one image, as text/tok_chat.c */

/* The prompt text of a chat turn (owned: qhx_free, *len_out bytes): msgs in the model's chat
 * format, with image_tokens[k] pads for image k (n_images, in order) before the text of the last
 * user message. With a session s that already holds an answer, the text first closes it: its
 * stop token is pending (then only the newline), or after another stop the end-of-turn marker
 * is added. s NULL: no closing. The one writer of chat turns: sessions, host-ops and the public
 * chat-formatting calls use it. */
qhx_status qhx_chat_turn_text(const qhx_model *m, const qhx_session *s, const qhx_chat_msg *msgs, size_t n,
                              const int64_t *image_tokens, int n_images, int add_generation_prompt, int thinking,
                              char **out, size_t *len_out, qhx_error *err);


/* The loop of a model's host-op (families/family.h qhx_hostop). */
const qhx_hostop *qhx_hostop_of(const qhx_model *m);

#endif
