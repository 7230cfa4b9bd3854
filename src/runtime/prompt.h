/* runtime/prompt.h: the prompt object (qhx.h qhx_prompt) from inside the library: the former
 * chat calls (api_frontend.c) build and feed prompts under the session guard they already hold. */
#ifndef QHX_RUNTIME_PROMPT_H
#define QHX_RUNTIME_PROMPT_H

#include "runtime/session.h"

/* qhx_prompt_from_chat (s NULL) or qhx_prompt_for_session (s the session it continues).
 * roles_as_arg: a role the chat format does not take is QHX_E_ARG (the public calls), else
 * QHX_E_UNSUPPORTED (the former chat calls). */
qhx_status qhx_prompt_build(const qhx_model *m, const qhx_session *s, const qhx_chat_spec *spec, bool roles_as_arg,
                            qhx_prompt **out, qhx_error *err);
/* qhx_prompt_from_text, tokenized as qhx_prompt_for_session tokenizes when s is not NULL. */
qhx_status qhx_prompt_build_text(const qhx_model *m, const qhx_session *s, const char *text, size_t len,
                                 qhx_prompt **out, qhx_error *err);
/* All of p's ids after what s holds (the pending token first), its images announced at their
 * pads; under the caller's session guard. */
qhx_status qhx_prompt_feed_all(qhx_session *s, const qhx_prompt *p, qhx_error *err);

#endif
