/* io/plan.c: the run plan object, its names, and the message and field helpers every part of
 * io/ that reads a plan shares (io/plan_internal.h). */
#include "io/plan_internal.h"

#include "core/alloc.h"
#include "core/file.h"
#include "core/sha256.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ==== names ================================================================================ */

static const char *const PRECISION_NAMES[QHX_PREC_COUNT] = {"f32", "bf16", "f16", "w8", "q4"};
const char *const PLAN_ROLE_NAMES[QHX_ART_ROLE_COUNT] = {"weights", "embedding", "lm_head", "vision", "mtp"};
int plan_has_suffix(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* "kv_cache": the element types of include/qhx.h's qhx_kv_type. */
int plan_kv_cache_from_name(const char *s, qhx_kv_type *out) {
    if (!strcmp(s, "f32")) *out = QHX_KV_F32;
    else if (!strcmp(s, "f16")) *out = QHX_KV_F16;
    else if (!strcmp(s, "q8")) *out = QHX_KV_Q8;
    else return -1;
    return 0;
}
const char *const PLAN_FORMAT_NAMES[QHX_ART_FORMAT_COUNT] = {"safetensors", "raw", "gguf"};

int plan_name_index(const char *const *names, int n, const char *s) {
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], s)) return i;
    return -1;
}

const char *qhx_precision_name(qhx_precision p) { return (unsigned)p < QHX_PREC_COUNT ? PRECISION_NAMES[p] : "?"; }
const char *qhx_art_role_name(qhx_art_role r) { return (unsigned)r < QHX_ART_ROLE_COUNT ? PLAN_ROLE_NAMES[r] : "?"; }
const char *qhx_art_format_name(qhx_art_format f) { return (unsigned)f < QHX_ART_FORMAT_COUNT ? PLAN_FORMAT_NAMES[f] : "?"; }
int qhx_precision_from_name(const char *name, qhx_precision *out) {
    int i = plan_name_index(PRECISION_NAMES, QHX_PREC_COUNT, name);
    if (i < 0) return -1;
    *out = (qhx_precision)i;
    return 0;
}


/* ==== messages and small checks ============================================================ */


qhx_status plan_bad(const pctx *c, qhx_status code, const char *jpath, const char *fmt, ...) {
    char msg[QHX_ERROR_MSG_SIZE];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (jpath && jpath[0]) return qhx_fail(c->err, code, "%s: %s: %s", c->label, jpath, msg);
    return qhx_fail(c->err, code, "%s: %s", c->label, msg);
}

/* parent.key into buf (parent "" gives key). */
const char *plan_jp(char *buf, size_t cap, const char *parent, const char *key) {
    if (parent && parent[0]) snprintf(buf, cap, "%s.%s", parent, key);
    else snprintf(buf, cap, "%s", key);
    return buf;
}

/* Keys starting with '_' are comments; any other key must be in `allowed` (NULL-terminated). */
qhx_status plan_check_keys(const pctx *c, const json_t *obj, const char *jpath,
                             const char *const *allowed) {
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        if (key[0] == '_') continue;
        int ok = 0;
        for (int i = 0; allowed[i] && !ok; i++) ok = !strcmp(allowed[i], key);
        if (ok) continue;
        char list[256] = "", p[300];
        size_t n = 0;
        for (int i = 0; allowed[i] && n < sizeof list; i++)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", allowed[i]);
        return plan_bad(c, QHX_E_FORMAT, plan_jp(p, sizeof p, jpath, key), "unknown key (expected one of: %s)", list);
    }
    return QHX_OK;
}

qhx_status plan_need_object(const pctx *c, const json_t *obj, const char *parent, const char *key,
                              bool required, json_t **out) {
    char p[300];
    json_t *v = json_object_get(obj, key);
    *out = NULL;
    if (!v || json_is_null(v)) {
        if (!required) return QHX_OK;
        return plan_bad(c, QHX_E_FORMAT, plan_jp(p, sizeof p, parent, key), "missing");
    }
    if (!json_is_object(v)) return plan_bad(c, QHX_E_FORMAT, plan_jp(p, sizeof p, parent, key), "expected an object");
    *out = v;
    return QHX_OK;
}

/* A string without NUL bytes or control characters, at most max_len bytes. */
qhx_status plan_get_string(const pctx *c, const json_t *obj, const char *parent, const char *key,
                             bool required, size_t max_len, const char **out) {
    char p[300];
    const char *s = NULL;
    qhx_status rc = qhx_json_get_str(obj, key, c->label, parent, required, &s, c->err);
    if (rc != QHX_OK || !s) return rc;
    size_t len = json_string_length(json_object_get(obj, key));
    if (len != strlen(s)) return plan_bad(c, QHX_E_FORMAT, plan_jp(p, sizeof p, parent, key), "contains a NUL byte");
    if (len > max_len)
        return plan_bad(c, QHX_E_LIMIT, plan_jp(p, sizeof p, parent, key), "%zu bytes, the limit is %zu", len, max_len);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return plan_bad(c, QHX_E_FORMAT, plan_jp(p, sizeof p, parent, key), "contains a control character");
    *out = s;
    return QHX_OK;
}

/* A required name of the run plan's plug points ("family", "host_op"): 1 to cap - 1 bytes of
 * [a-z0-9_], copied into out (cap bytes). */
qhx_status plan_get_ident(const pctx *c, const json_t *obj, const char *key, char *out, size_t cap) {
    const char *s = NULL;
    qhx_status rc = plan_get_string(c, obj, "", key, true, cap - 1, &s);
    if (rc) return rc;
    if (!s[0]) return plan_bad(c, QHX_E_FORMAT, key, "empty");
    for (const char *q = s; *q; q++)
        if (!((*q >= 'a' && *q <= 'z') || (*q >= '0' && *q <= '9') || *q == '_'))
            return plan_bad(c, QHX_E_FORMAT, key, "'%s' is not a name (lower-case letters, digits, '_')", s);
    snprintf(out, cap, "%s", s);
    return QHX_OK;
}

qhx_status plan_get_num_range(const pctx *c, const json_t *obj, const char *parent,
                                const char *key, double lo, bool lo_open, double hi, double *out) {
    char p[300];
    double v = *out;
    qhx_status rc = qhx_json_get_num(obj, key, c->label, parent, false, &v, c->err);
    if (rc != QHX_OK) return rc;
    if (v < lo || (lo_open && v == lo) || v > hi)
        return plan_bad(c, QHX_E_FORMAT, plan_jp(p, sizeof p, parent, key), "%g is out of range %c%g, %g]", v,
                   lo_open ? '(' : '[', lo, hi);
    *out = v;
    return QHX_OK;
}

/* A file name relative to the bundle folder: no absolute path, no '..', no empty or '.'
 * components, no backslashes or control characters. */
qhx_status plan_check_rel_path(const pctx *c, const char *jpath, const char *s) {
    if (!s[0]) return plan_bad(c, QHX_E_FORMAT, jpath, "empty file name");
    if (s[0] == '/')
        return plan_bad(c, QHX_E_FORMAT, jpath, "'%s' is an absolute path; files must be relative to the bundle folder", s);
    if (strchr(s, '\\')) return plan_bad(c, QHX_E_FORMAT, jpath, "'%s' contains a backslash; use '/'", s);
    const char *p = s;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        if (n == 0) return plan_bad(c, QHX_E_FORMAT, jpath, "'%s' has an empty path component", s);
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return plan_bad(c, QHX_E_FORMAT, jpath, "'%s' leaves the bundle folder ('..' is not allowed)", s);
        if (n == 1 && p[0] == '.') return plan_bad(c, QHX_E_FORMAT, jpath, "'%s' has a '.' path component", s);
        if (!slash) break;
        p = slash + 1;
    }
    return QHX_OK;
}

int plan_is_hex64(const char *s) {
    if (strlen(s) != 64) return 0;
    for (int i = 0; i < 64; i++)
        if (!isxdigit((unsigned char)s[i])) return 0;
    return 1;
}

/* ==== the plan object ====================================================================== */

void plan_file_clear(qhx_plan_file *f) {
    qhx_free(f->file);
    qhx_free(f->path);
    memset(f, 0, sizeof *f);
    f->tensor_count = -1;
    f->bytes = -1;
}

void qhx_plan_free(qhx_plan *plan) {
    if (!plan) return;
    for (int r = 0; r < QHX_ART_ROLE_COUNT; r++) plan_file_clear(&plan->artifacts[r]);
    plan_file_clear(&plan->tokenizer);
    plan_file_clear(&plan->preprocessor);
    plan_file_clear(&plan->model_config);
    qhx_free(plan->label);
    qhx_free(plan->base_dir);
    qhx_free(plan->name);
    qhx_free(plan->description);
    json_decref(plan->config);
    json_decref(plan->added_tokens);
    qhx_free(plan);
}

qhx_plan *plan_new(const char *label, const char *base_dir) {
    qhx_plan *p = qhx_calloc(1, sizeof *p);
    if (!p) return NULL;
    for (int r = 0; r < QHX_ART_ROLE_COUNT; r++) plan_file_clear(&p->artifacts[r]);
    plan_file_clear(&p->tokenizer);
    plan_file_clear(&p->preprocessor);
    plan_file_clear(&p->model_config);
    qhx_plan_tokens *t = &p->special;
    t->bos = t->eos = t->pad = t->im_start = t->im_end = -1;
    t->vision_start = t->vision_end = t->image_pad = t->video_pad = -1;
    t->think_start = t->think_end = -1;
    p->generation = (qhx_plan_generation){.temperature = 0.0, .top_k = 0, .top_p = 1.0, .min_p = 0.0,
                                          .repetition_penalty = 1.0, .max_new_tokens = 256,
                                          .thinking = false};
    p->label = qhx_strdup(label);
    p->base_dir = base_dir ? qhx_strdup(base_dir) : NULL;
    if (!p->label || (base_dir && !p->base_dir)) {
        qhx_plan_free(p);
        return NULL;
    }
    return p;
}

/* Set f->file (and f->path when the plan has a base_dir). */
qhx_status plan_file_set_name(const qhx_plan *plan, qhx_plan_file *f, const char *file, qhx_error *err) {
    char *name = qhx_strdup(file);
    char *path = plan->base_dir ? qhx_path_join(plan->base_dir, file) : NULL;
    if (!name || (plan->base_dir && !path)) {
        qhx_free(name);
        qhx_free(path);
        return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", plan->label);
    }
    qhx_free(f->file);
    qhx_free(f->path);
    f->file = name;
    f->path = path;
    f->present = true;
    return QHX_OK;
}

qhx_status qhx_plan_set_file(qhx_plan *plan, qhx_plan_file *f, const char *file, qhx_error *err) {
    pctx c = {plan->label, err};
    qhx_status rc = plan_check_rel_path(&c, "file", file);
    if (rc) return rc;
    plan_file_clear(f);
    if ((rc = plan_file_set_name(plan, f, file, err))) return rc;
    f->present = true;
    return QHX_OK;
}

qhx_status qhx_plan_set_artifact(qhx_plan *plan, qhx_art_role role, const char *file,
                                 qhx_art_format format, bool has_dtype, qhx_dtype dtype,
                                 qhx_error *err) {
    if ((unsigned)role >= QHX_ART_ROLE_COUNT || (unsigned)format >= QHX_ART_FORMAT_COUNT ||
        (has_dtype && (unsigned)dtype >= QHX_DTYPE_COUNT) || !file)
        return qhx_fail(err, QHX_E_ARG, "qhx_plan_set_artifact: invalid argument");
    pctx c = {plan->label, err};
    char p[64];
    qhx_status rc = plan_check_rel_path(&c, plan_jp(p, sizeof p, "artifacts", PLAN_ROLE_NAMES[role]), file);
    if (rc != QHX_OK) return rc;
    qhx_plan_file *f = &plan->artifacts[role];
    plan_file_clear(f);
    if ((rc = plan_file_set_name(plan, f, file, err)) != QHX_OK) return rc;
    f->format = format;
    f->has_dtype = has_dtype;
    f->dtype = has_dtype ? dtype : QHX_DTYPE_F32;
    return QHX_OK;
}

/* ---- special token keys ---- */

const char *const PLAN_TOKEN_KEYS[] = {"stop_ids", "bos", "eos", "pad", "im_start", "im_end",
                                         "vision_start", "vision_end", "image_pad", "video_pad",
                                         "think_start", "think_end", NULL};

int32_t *plan_token_slot(qhx_plan_tokens *t, int i) {
    int32_t *slots[] = {NULL, &t->bos, &t->eos, &t->pad, &t->im_start, &t->im_end,
                        &t->vision_start, &t->vision_end, &t->image_pad, &t->video_pad,
                        &t->think_start, &t->think_end};
    return slots[i];
}

int32_t qhx_plan_token_id(const qhx_plan_tokens *t, int i) {
    return i >= 0 && i < QHX_PLAN_N_TOKEN_IDS ? *plan_token_slot((qhx_plan_tokens *)t, i + 1) : -1;
}
const char *qhx_plan_token_key(int i) { return i >= 0 && i < QHX_PLAN_N_TOKEN_IDS ? PLAN_TOKEN_KEYS[i + 1] : "?"; }
