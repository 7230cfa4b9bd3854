/* families/gguf.c: GGUF files as models. A family that reads llama.cpp's files gives a table
 * (family.h qhx_family_gguf): the architectures it reads, its config from their keys, and
 * which of llama.cpp's tensor names are which of its own. This file turns a file into a run
 * plan and its tensors into a set under the family's names; the blocks stay where they are. */
#include "families/family.h"
#include "families/gguf_keys.h"

#include "core/alloc.h"
#include "io/gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const qhx_family_desc QHX_FAMILY_QWEN3_5;
extern const qhx_family_desc QHX_FAMILY_QWEN3_VL;

static const qhx_family_desc *const GGUF_FAMILIES[] = {&QHX_FAMILY_QWEN3_5, &QHX_FAMILY_QWEN3_VL};
#define N_GGUF_FAMILIES (sizeof GGUF_FAMILIES / sizeof GGUF_FAMILIES[0])

const qhx_family_desc *qhx_family_for_gguf_arch(const char *arch) {
    for (size_t i = 0; arch && i < N_GGUF_FAMILIES; i++) {
        const qhx_family_gguf *t = GGUF_FAMILIES[i]->gguf;
        for (const char *const *a = t ? t->archs : NULL; a && *a; a++)
            if (!strcmp(*a, arch)) return GGUF_FAMILIES[i];
    }
    return NULL;
}

/* "qwen35, qwen3vl": the architectures this build reads, into buf. */
static const char *arch_names(char *buf, size_t cap) {
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < N_GGUF_FAMILIES; i++) {
        const qhx_family_gguf *t = GGUF_FAMILIES[i]->gguf;
        for (const char *const *a = t ? t->archs : NULL; a && *a; a++) {
            int n = snprintf(buf + at, cap - at, "%s%s", at ? ", " : "", *a);
            if (n < 0 || (size_t)n >= cap - at) return buf;
            at += (size_t)n;
        }
    }
    return buf;
}

/* ---- keys ---------------------------------------------------------------------------------- */

qhx_status qhx_gguf_arch_int(const qhx_gguf *g, const char *arch, const char *key, bool required, int64_t *out,
                             qhx_error *err) {
    char full[160];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    if (!qhx_gguf_find_kv(g, full) && !required) return QHX_OK;
    return qhx_gguf_get_int(g, full, out, err);
}

qhx_status qhx_gguf_arch_float(const qhx_gguf *g, const char *arch, const char *key, bool required, double *out,
                               qhx_error *err) {
    char full[160];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    if (!qhx_gguf_find_kv(g, full) && !required) return QHX_OK;
    return qhx_gguf_get_float(g, full, out, err);
}

qhx_status qhx_gguf_arch_sections(const qhx_gguf *g, const char *arch, json_t **out, qhx_error *err) {
    char full[160];
    snprintf(full, sizeof full, "%s.rope.dimension_sections", arch);
    const qhx_gguf_kv *kv = qhx_gguf_find_kv(g, full);
    *out = NULL;
    if (!kv) return QHX_OK;
    if (kv->type != QHX_GGUF_ARRAY || kv->elem == QHX_GGUF_STRING || kv->elem == QHX_GGUF_ARRAY || kv->n < 3 || kv->n > 4)
        return qhx_fail(err, QHX_E_FORMAT, "%s: GGUF: %s: expected 3 or 4 integers", qhx_gguf_label(g), full);
    if (!(*out = json_array())) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    for (uint64_t i = 0; i < 3; i++) {
        int64_t v = qhx_gguf_arr_int(kv, i);
        if (v < 0 || v > 4096) {
            json_decref(*out);
            *out = NULL;
            return qhx_fail(err, QHX_E_FORMAT, "%s: GGUF: %s[%llu]: %lld is out of range", qhx_gguf_label(g), full,
                            (unsigned long long)i, (long long)v);
        }
        json_array_append_new(*out, json_integer(v));
    }
    if (kv->n == 4 && qhx_gguf_arr_int(kv, 3) != 0) {
        json_decref(*out);
        *out = NULL;
        return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: GGUF: %s: a fourth rotary section is not supported",
                        qhx_gguf_label(g), full);
    }
    return QHX_OK;
}

qhx_status qhx_gguf_embedding_shape(const qhx_gguf *g, int64_t *rows, int64_t *cols, qhx_error *err) {
    const qhx_gguf_tensor *t = qhx_gguf_find_tensor(g, "token_embd.weight");
    if (!t || t->n_dims != 2)
        return qhx_fail(err, QHX_E_FORMAT, "%s: GGUF: no token_embd.weight matrix", qhx_gguf_label(g));
    *cols = t->ne[0];
    *rows = t->ne[1];
    return QHX_OK;
}

/* ---- plans --------------------------------------------------------------------------------- */

static qhx_status arch_of(const qhx_gguf *g, char *arch, size_t cap, qhx_error *err) {
    qhx_gguf_str s;
    if (!qhx_gguf_find_kv(g, "general.architecture"))
        return qhx_fail(err, QHX_E_FORMAT, "%s: GGUF: no general.architecture: not a model file", qhx_gguf_label(g));
    qhx_status rc = qhx_gguf_get_str(g, "general.architecture", &s, err);
    if (rc) return rc;
    if (s.len == 0 || s.len >= cap || memchr(s.p, 0, s.len))
        return qhx_fail(err, QHX_E_FORMAT, "%s: GGUF: general.architecture is not a name", qhx_gguf_label(g));
    memcpy(arch, s.p, s.len);
    arch[s.len] = '\0';
    return QHX_OK;
}

qhx_status qhx_family_gguf_plan(const char *path, qhx_plan **out, qhx_error *err) {
    *out = NULL;
    qhx_gguf *g = NULL;
    qhx_status rc = qhx_gguf_open(path, QHX_FILE_MAP, &g, err);
    if (rc) return rc;
    char arch[64], names[256];
    const qhx_family_desc *f = NULL;
    json_t *config = NULL;
    if ((rc = arch_of(g, arch, sizeof arch, err))) goto done;
    if (!(f = qhx_family_for_gguf_arch(arch))) {
        rc = qhx_fail(err, QHX_E_UNSUPPORTED, "%s: GGUF architecture '%s' is not one qhexrt runs (it runs %s)", path,
                      arch, arch_names(names, sizeof names));
        goto done;
    }
    if ((rc = f->gguf->config(g, arch, &config, err))) goto done;
    rc = qhx_plan_from_gguf(path, g, config, out, err); /* takes config */
done:
    qhx_gguf_free(g);
    return rc;
}

/* ---- tensors ------------------------------------------------------------------------------- */

static const qhx_gguf_name *find_name(const qhx_gguf_name *tab, const char *gguf) {
    for (const qhx_gguf_name *e = tab; e && e->gguf; e++)
        if (!strcmp(e->gguf, gguf)) return e;
    return NULL;
}

/* The family's name of GGUF tensor `name` into out (cap bytes); 0, or -1 when it has none. */
static int map_name(const qhx_family_gguf *t, const qhx_model_config *cfg, const char *name, char *out, size_t cap,
                    unsigned *flags) {
    const qhx_gguf_name *e = find_name(t->globals, name);
    *flags = 0;
    if (e) {
        *flags = e->flags;
        return snprintf(out, cap, "%s", e->name) < (int)cap ? 0 : -1;
    }
    if (strncmp(name, "blk.", 4)) return -1;
    char *end;
    long long blk = strtoll(name + 4, &end, 10);
    if (end == name + 4 || *end != '.' || blk < 0 || blk >= 2 * QHX_MODEL_MAX_LAYERS) return -1;
    const char *rest = end + 1;
    const int64_t L = cfg->num_hidden_layers;
    if (blk >= L) { /* the multi-token-prediction block */
        if (!t->mtp_prefix || blk - L >= cfg->mtp_num_hidden_layers) return -1;
        if ((e = find_name(t->mtp_names, rest))) {
            *flags = e->flags;
            return snprintf(out, cap, "%s", e->name) < (int)cap ? 0 : -1;
        }
        if (!(e = find_name(t->block, rest))) return -1;
        *flags = e->flags;
        return snprintf(out, cap, "%s%lld.%s", t->mtp_prefix, blk - L, e->name) < (int)cap ? 0 : -1;
    }
    if (!(e = find_name(t->block, rest))) return -1;
    *flags = e->flags;
    return snprintf(out, cap, "%s%lld.%s", t->layer_prefix, blk, e->name) < (int)cap ? 0 : -1;
}

static bool skipped(const char *const *skip, const char *name) {
    for (const char *const *p = skip; p && *p; p++)
        if (!strncmp(name, *p, strlen(*p))) return true;
    return false;
}

/* The set's description of GGUF tensor gt under the family's name: row-major shape (ggml's
 * dimensions reversed), F32/F16/BF16 as those dtypes, every other type as ggml blocks. */
static qhx_st_tensor describe(const qhx_gguf_tensor *gt, const char *name, unsigned flags) {
    qhx_st_tensor t = {.name = name, .data = gt->data, .size = (size_t)gt->size, .offset = gt->offset,
                       .n_elements = gt->n_elements};
    t.n_dims = gt->n_dims;
    for (int d = 0; d < gt->n_dims; d++) t.shape[d] = gt->ne[gt->n_dims - 1 - d];
    if ((flags & QHX_GGUF_MAP_UNSQUEEZE1) && t.n_dims == 2) {
        t.shape[2] = t.shape[1];
        t.shape[1] = 1;
        t.n_dims = 3;
    }
    switch (gt->type) {
    case QHX_GGML_F32: t.dtype = QHX_DTYPE_F32; break;
    case QHX_GGML_F16: t.dtype = QHX_DTYPE_F16; break;
    case QHX_GGML_BF16: t.dtype = QHX_DTYPE_BF16; break;
    default: t.dtype = QHX_DTYPE_GGML, t.ggml_type = gt->type; break;
    }
    return t;
}

static void free_gguf(void *g) { qhx_gguf_free(g); }

qhx_status qhx_family_gguf_weights(const qhx_family_desc *f, const qhx_model_config *cfg, const char *path,
                                   qhx_file_mode mode, const char *const *skip, qhx_st_set **out, qhx_error *err) {
    *out = NULL;
    if (!f->gguf) return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: the %s family reads no GGUF file", path, f->title);
    qhx_gguf *g = NULL;
    qhx_status rc = qhx_gguf_open(path, mode, &g, err);
    if (rc) return rc;
    qhx_st_set *set = qhx_st_external_new(path, g, free_gguf); /* owns g from here on */
    if (!set) return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", path);
    for (int64_t i = 0; i < qhx_gguf_n_tensors(g) && rc == QHX_OK; i++) {
        const qhx_gguf_tensor *gt = qhx_gguf_tensor_at(g, i);
        char name[QHX_ST_MAX_NAME];
        unsigned flags;
        if (map_name(f->gguf, cfg, gt->name, name, sizeof name, &flags) || skipped(skip, name)) continue;
        qhx_st_tensor t = describe(gt, name, flags);
        rc = qhx_st_external_add(set, &t, err);
    }
    if (rc == QHX_OK) rc = qhx_st_external_finish(set, err);
    if (rc) {
        qhx_st_free(set);
        return rc;
    }
    *out = set;
    return QHX_OK;
}
