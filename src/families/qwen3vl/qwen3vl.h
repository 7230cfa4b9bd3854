/* families/qwen3vl/qwen3vl.h: what the Qwen3-VL family's files share (config.c: the descriptor
 * and config parser; qwen3vl.c: weights, vision tower, state and the forward pass). Not for
 * other layers: they reach the family through its descriptor (families/family.h). */
#ifndef QHX_FAMILIES_QWEN3VL_H
#define QHX_FAMILIES_QWEN3VL_H

/* The tensor-name prefix of the vision tower (the descriptor's vision_prefix, the binder's). */
#define QHX_QWEN3VL_VISION_PREFIX "model.visual."
#define QHX_QWEN3VL_VISION_PREFIX_PROBE QHX_QWEN3VL_VISION_PREFIX "patch_embed.proj.weight" /* present when the tower is */

#include "families/family.h"

/* Bind the text decoder and, when a.vision asks for it and the checkpoint has one, the vision
 * tower of set (owned from the call on; config already in m->cfg) into m->impl; set m->vt. */
qhx_status qhx_qwen3vl_bind(qhx_net *m, qhx_st_set *set, const qhx_net_bind_args *a, qhx_error *err);

/* Its chat format (chat.c), the descriptor's chat entry. */
extern const qhx_chat_style qhx_chat_style_qwen3vl;
extern const qhx_family_gguf QHX_QWEN3VL_GGUF; /* gguf.c */

#endif
