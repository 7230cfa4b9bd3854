/* io/plan_gguf.c: a run plan from a GGUF file (docs/manifest.md, "GGUF files"). */
#include "io/plan_internal.h"

#include "core/alloc.h"
#include "core/file.h"
#include "io/gguf.h"

#include <stdio.h>
#include <string.h>

/* llama.cpp's token types (tokenizer.ggml.token_type) that are added tokens */
enum { GGUF_TOKEN_CONTROL = 3, GGUF_TOKEN_USER_DEFINED = 4 };

/* The {text: id} table of the file's added tokens (control and user-defined), the first id of
 * a text winning, as a checkpoint folder's tokenizer_config.json gives it. */
static qhx_status take_added_tokens(const qhx_gguf *g, json_t *table, qhx_error *err) {
    const qhx_gguf_kv *tok = qhx_gguf_find_kv(g, "tokenizer.ggml.tokens");
    const qhx_gguf_kv *typ = qhx_gguf_find_kv(g, "tokenizer.ggml.token_type");
    if (!tok || !typ || !tok->str || typ->type != QHX_GGUF_ARRAY || typ->elem == QHX_GGUF_STRING ||
        typ->n != tok->n)
        return QHX_OK; /* no types: no added tokens known (the tokenizer reader reports a bad table) */
    for (uint64_t i = 0; i < tok->n && i <= INT32_MAX; i++) {
        int64_t t = qhx_gguf_arr_int(typ, i);
        if (t != GGUF_TOKEN_CONTROL && t != GGUF_TOKEN_USER_DEFINED) continue;
        const qhx_gguf_str *s = &tok->str[i];
        if (s->len == 0 || s->len > 256 || memchr(s->p, 0, s->len)) continue;
        char text[257];
        memcpy(text, s->p, s->len);
        text[s->len] = '\0';
        if (json_object_get(table, text)) continue;
        if (json_object_set_new(table, text, json_integer((json_int_t)i))) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    }
    return QHX_OK;
}

/* An optional token id key into *slot (left alone when absent or out of range). */
static void take_gguf_id(const qhx_gguf *g, const char *key, int32_t *slot) {
    const qhx_gguf_kv *kv = qhx_gguf_find_kv(g, key);
    if (!kv || kv->type == QHX_GGUF_ARRAY || kv->type == QHX_GGUF_STRING || kv->type == QHX_GGUF_FLOAT32 ||
        kv->type == QHX_GGUF_FLOAT64 || kv->type == QHX_GGUF_BOOL)
        return;
    int64_t v = qhx_gguf_kv_int(kv);
    if (v >= 0 && v <= INT32_MAX) *slot = (int32_t)v;
}

static qhx_status fill_tokens(qhx_plan *plan, const qhx_gguf *g, qhx_error *err) {
    qhx_plan_tokens *t = &plan->special;
    take_gguf_id(g, "tokenizer.ggml.bos_token_id", &t->bos);
    take_gguf_id(g, "tokenizer.ggml.eos_token_id", &t->eos);
    take_gguf_id(g, "tokenizer.ggml.padding_token_id", &t->pad);
    int32_t eot = -1;
    take_gguf_id(g, "tokenizer.ggml.eot_token_id", &eot);
    const int32_t stops[2] = {t->eos, eot};
    for (int i = 0; i < 2; i++)
        if (stops[i] >= 0 && (t->n_stop_ids == 0 || t->stop_ids[0] != stops[i])) t->stop_ids[t->n_stop_ids++] = stops[i];
    if (!(plan->added_tokens = json_object())) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    return take_added_tokens(g, plan->added_tokens, err);
}

/* The plan's name: general.name, else the file name without ".gguf". */
static char *plan_name_of(const char *path, const qhx_gguf *g) {
    qhx_gguf_str s;
    if (qhx_gguf_get_str(g, "general.name", &s, NULL) == QHX_OK && s.len > 0 && s.len <= QHX_PLAN_MAX_NAME &&
        !memchr(s.p, 0, s.len))
        return qhx_strndup(s.p, (size_t)s.len);
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    size_t n = strlen(base);
    if (n > 5 && !strcmp(base + n - 5, ".gguf")) n -= 5;
    return qhx_strndup(base, n > QHX_PLAN_MAX_NAME ? QHX_PLAN_MAX_NAME : n);
}

static qhx_status set_file(qhx_plan_file *f, const char *path) {
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    plan_file_clear(f);
    f->file = qhx_strdup(base);
    f->path = qhx_strdup(path);
    if (!f->file || !f->path) return QHX_E_NOMEM;
    f->present = true;
    f->format = QHX_ART_GGUF;
    plan_file_set_size(f);
    return QHX_OK;
}

/* A preprocessor_config.json beside the tower's file sets the image sizes as a checkpoint
 * folder's does; without one the family's defaults (the released processor's) hold. */
static qhx_status find_preprocessor(qhx_plan *plan, const char *mmproj, qhx_error *err) {
    const char *slash = strrchr(mmproj, '/');
    char *dir = slash ? qhx_strndup(mmproj, slash == mmproj ? 1 : (size_t)(slash - mmproj)) : qhx_strdup(".");
    char *pp = dir ? qhx_path_join(dir, "preprocessor_config.json") : NULL;
    qhx_free(dir);
    if (!pp) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    if (qhx_path_is_file(pp)) {
        plan_file_clear(&plan->preprocessor);
        plan->preprocessor.present = true;
        plan->preprocessor.path = pp;
        plan->preprocessor.file = qhx_strdup("preprocessor_config.json");
        if (!plan->preprocessor.file) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
        plan_file_set_size(&plan->preprocessor);
        return QHX_OK;
    }
    qhx_free(pp);
    return QHX_OK;
}

/* The precision class of the file's main type (general.file_type, llama.cpp's numbering): f32,
 * f16, bf16 as such, w8 for Q8_0, q4 for the 2- to 6-bit types. Informational: the blocks run as
 * they are. */
static qhx_precision precision_of(const qhx_gguf *g) {
    int64_t ft = -1;
    if (qhx_gguf_find_kv(g, "general.file_type") && qhx_gguf_get_int(g, "general.file_type", &ft, NULL)) ft = -1;
    switch (ft) {
    case 0: return QHX_PREC_F32;
    case 1: return QHX_PREC_F16;
    case 32: return QHX_PREC_BF16;
    case 7: return QHX_PREC_W8;
    case -1: return QHX_PREC_F32;
    default: return QHX_PREC_Q4;
    }
}

static qhx_status fill_plan(qhx_plan *plan, const char *path, const qhx_gguf *g, qhx_error *err) {
    plan->source = QHX_PLAN_FROM_CHECKPOINT;
    plan->precision = precision_of(g);
    if (!(plan->name = plan_name_of(path, g))) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    pctx cc = {path, err};
    if (!json_is_object(plan->config)) return plan_bad(&cc, QHX_E_FORMAT, "", "no model configuration");
    qhx_status rc = plan_read_config_head(&cc, plan, plan->config, "");
    if (rc) return rc;
    if (set_file(&plan->artifacts[QHX_ART_WEIGHTS], path) || set_file(&plan->tokenizer, path))
        return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    plan->max_context = QHX_PLAN_DEFAULT_CONTEXT; /* the runtime caps it by the trained length */
    return fill_tokens(plan, g, err);
}

qhx_status qhx_plan_from_gguf(const char *path, const char *mmproj, const qhx_gguf *g, json_t *config,
                              qhx_plan **out, qhx_error *err) {
    *out = NULL;
    const char *slash = strrchr(path, '/');
    char *dir = slash ? qhx_strndup(path, slash == path ? 1 : (size_t)(slash - path)) : qhx_strdup(".");
    qhx_plan *plan = dir ? plan_new(path, dir) : NULL;
    qhx_free(dir);
    if (!plan) {
        json_decref(config);
        return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", path);
    }
    plan->config = config;
    qhx_status rc = fill_plan(plan, path, g, err);
    if (rc == QHX_OK && mmproj) {
        if (set_file(&plan->artifacts[QHX_ART_VISION], mmproj)) rc = qhx_fail(err, QHX_E_NOMEM, "out of memory");
        plan->vision_tensors = true;
        if (rc == QHX_OK) rc = find_preprocessor(plan, mmproj, err);
    }
    if (rc) {
        qhx_plan_free(plan);
        return rc;
    }
    *out = plan;
    return QHX_OK;
}
