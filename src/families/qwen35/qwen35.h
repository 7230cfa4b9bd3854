/* families/qwen35/qwen35.h: what the Qwen3.5 family's files share (config.c: the descriptor
 * and config parser; qwen35.c: weights, state and the forward pass). Not for other layers: they
 * reach the family through its descriptor (families/family.h). */
#ifndef QHX_FAMILIES_QWEN35_H
#define QHX_FAMILIES_QWEN35_H

/* The tensor-name prefix of the vision tower (the descriptor's vision_prefix, the binder's). */
#define QHX_QWEN35_VISION_PREFIX "model.visual."
#define QHX_QWEN35_VISION_PREFIX_PROBE QHX_QWEN35_VISION_PREFIX "patch_embed.proj.weight" /* present when the tower is */

#include "families/family.h"

/* Fill cfg from a parsed config.json (composite with text_config, or a bare text config).
 * `label` names the file in messages. Unsupported values are refused by field name. */
qhx_status qhx_qwen35_parse_config(const json_t *root, const char *label, qhx_model_config *cfg,
                                   qhx_error *err);

/* Bind the weights of set (owned from the call on; config already in m->cfg) into m->impl and
 * set m->vt. */
qhx_status qhx_qwen35_bind(qhx_net *m, qhx_st_set *set, const qhx_net_bind_args *a, qhx_error *err);

/* Its chat format (chat.c), the descriptor's chat entry. */
extern const qhx_chat_style qhx_chat_style_qwen35;
extern const qhx_family_gguf QHX_QWEN35_GGUF; /* gguf.c */

#endif
