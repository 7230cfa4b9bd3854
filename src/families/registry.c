/* families/registry.c: the model families of this build. Adding a family: its folder under
 * src/families/ exporting one qhx_family_desc, and one line in FAMILIES. */
#include "families/family.h"

#include <string.h>

extern const qhx_family_desc QHX_FAMILY_QWEN3_5;
extern const qhx_family_desc QHX_FAMILY_QWEN3_VL;

static const qhx_family_desc *const FAMILIES[] = {
    &QHX_FAMILY_QWEN3_5,
    &QHX_FAMILY_QWEN3_VL,
};

#define N_FAMILIES (sizeof FAMILIES / sizeof FAMILIES[0])

const qhx_family_desc *qhx_family_find(const char *name) {
    for (size_t i = 0; name && i < N_FAMILIES; i++)
        if (!strcmp(FAMILIES[i]->name, name)) return FAMILIES[i];
    return NULL;
}

const qhx_family_desc *qhx_family_first(void) { return FAMILIES[0]; }

const qhx_family_desc *qhx_family_for_model_type(const char *model_type) {
    for (size_t i = 0; model_type && i < N_FAMILIES; i++)
        for (const char *const *t = FAMILIES[i]->model_types; *t; t++)
            if (!strcmp(*t, model_type)) return FAMILIES[i];
    return NULL;
}

const qhx_family_host_op *qhx_family_host_op_find(const qhx_family_desc *f, const char *name) {
    for (const qhx_family_host_op *h = f->host_ops; name && h->name; h++)
        if (!strcmp(h->name, name)) return h;
    return NULL;
}

/* The family's first host-op whose loop feeds images (or not), or NULL. */
static const qhx_family_host_op *first_of(const qhx_family_desc *f, bool images) {
    for (const qhx_family_host_op *h = f->host_ops; h->name; h++)
        if (h->loop->images == images) return h;
    return NULL;
}

bool qhx_family_takes_images(const qhx_family_desc *f) { return first_of(f, true) != NULL; }

const qhx_family_host_op *qhx_family_default_host_op(const qhx_family_desc *f, bool has_vision) {
    const qhx_family_host_op *h = has_vision ? first_of(f, true) : NULL;
    if (!h) h = first_of(f, false);
    return h ? h : f->host_ops;
}

const char *qhx_family_names(char *buf, size_t cap) {
    size_t at = 0;
    if (cap) buf[0] = '\0';
    for (size_t i = 0; i < N_FAMILIES; i++) {
        size_t len = strlen(FAMILIES[i]->name);
        if (at + len + 3 > cap) break;
        if (i) buf[at++] = ',', buf[at++] = ' ';
        memcpy(buf + at, FAMILIES[i]->name, len + 1);
        at += len;
    }
    return buf;
}

qhx_status qhx_family_name_plan_tokens(qhx_plan *plan, qhx_error *err) {
    if (plan->source != QHX_PLAN_FROM_CHECKPOINT) return QHX_OK;
    const qhx_family_desc *f = qhx_family_for_model_type(plan->model_type);
    return qhx_plan_name_tokens(plan, f ? f->special_names : NULL, err);
}
