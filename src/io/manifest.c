/* io/manifest: parsing, checking and writing run plans (docs/manifest.md).
 *
 * Every message has the form "<file>: <json.path>: <problem>". The parser validates the whole
 * manifest before it touches the filesystem, so qhx_plan_parse(..., base_dir = NULL, ...) is a
 * pure function of its buffer (the fuzz target). */
#include "io/manifest.h"

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
static const char *const ROLE_NAMES[QHX_ART_ROLE_COUNT] = {"weights", "embedding", "lm_head", "vision"};
/* "kv_cache": the element types of include/qhx.h's qhx_kv_type. */
static int kv_cache_from_name(const char *s, qhx_kv_type *out) {
    if (!strcmp(s, "f32")) *out = QHX_KV_F32;
    else if (!strcmp(s, "f16")) *out = QHX_KV_F16;
    else if (!strcmp(s, "q8")) *out = QHX_KV_Q8;
    else return -1;
    return 0;
}
static const char *const FORMAT_NAMES[QHX_ART_FORMAT_COUNT] = {"safetensors", "raw"};

static int name_index(const char *const *names, int n, const char *s) {
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], s)) return i;
    return -1;
}

const char *qhx_precision_name(qhx_precision p) { return (unsigned)p < QHX_PREC_COUNT ? PRECISION_NAMES[p] : "?"; }
const char *qhx_art_role_name(qhx_art_role r) { return (unsigned)r < QHX_ART_ROLE_COUNT ? ROLE_NAMES[r] : "?"; }
const char *qhx_art_format_name(qhx_art_format f) { return (unsigned)f < QHX_ART_FORMAT_COUNT ? FORMAT_NAMES[f] : "?"; }
int qhx_precision_from_name(const char *name, qhx_precision *out) {
    int i = name_index(PRECISION_NAMES, QHX_PREC_COUNT, name);
    if (i < 0) return -1;
    *out = (qhx_precision)i;
    return 0;
}


/* ==== messages and small checks ============================================================ */

/* Who is being parsed: the file named in messages, and where errors go. */
typedef struct pctx {
    const char *label;
    qhx_error *err;
} pctx;

/* "<label>: <jpath>: <formatted problem>" (jpath "" gives "<label>: <problem>"). */
static qhx_status bad(const pctx *c, qhx_status code, const char *jpath, const char *fmt, ...)
    QHX_PRINTF(4, 5);
static qhx_status bad(const pctx *c, qhx_status code, const char *jpath, const char *fmt, ...) {
    char msg[QHX_ERROR_MSG_SIZE];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (jpath && jpath[0]) return qhx_fail(c->err, code, "%s: %s: %s", c->label, jpath, msg);
    return qhx_fail(c->err, code, "%s: %s", c->label, msg);
}

/* parent.key into buf (parent "" gives key). */
static const char *jp(char *buf, size_t cap, const char *parent, const char *key) {
    if (parent && parent[0]) snprintf(buf, cap, "%s.%s", parent, key);
    else snprintf(buf, cap, "%s", key);
    return buf;
}

/* Keys starting with '_' are comments; any other key must be in `allowed` (NULL-terminated). */
static qhx_status check_keys(const pctx *c, const json_t *obj, const char *jpath,
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
        return bad(c, QHX_E_FORMAT, jp(p, sizeof p, jpath, key), "unknown key (expected one of: %s)", list);
    }
    return QHX_OK;
}

static qhx_status need_object(const pctx *c, const json_t *obj, const char *parent, const char *key,
                              bool required, json_t **out) {
    char p[300];
    json_t *v = json_object_get(obj, key);
    *out = NULL;
    if (!v || json_is_null(v)) {
        if (!required) return QHX_OK;
        return bad(c, QHX_E_FORMAT, jp(p, sizeof p, parent, key), "missing");
    }
    if (!json_is_object(v)) return bad(c, QHX_E_FORMAT, jp(p, sizeof p, parent, key), "expected an object");
    *out = v;
    return QHX_OK;
}

/* A string without NUL bytes or control characters, at most max_len bytes. */
static qhx_status get_string(const pctx *c, const json_t *obj, const char *parent, const char *key,
                             bool required, size_t max_len, const char **out) {
    char p[300];
    const char *s = NULL;
    qhx_status rc = qhx_json_get_str(obj, key, c->label, parent, required, &s, c->err);
    if (rc != QHX_OK || !s) return rc;
    size_t len = json_string_length(json_object_get(obj, key));
    if (len != strlen(s)) return bad(c, QHX_E_FORMAT, jp(p, sizeof p, parent, key), "contains a NUL byte");
    if (len > max_len)
        return bad(c, QHX_E_LIMIT, jp(p, sizeof p, parent, key), "%zu bytes, the limit is %zu", len, max_len);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return bad(c, QHX_E_FORMAT, jp(p, sizeof p, parent, key), "contains a control character");
    *out = s;
    return QHX_OK;
}

/* A required name of the run plan's plug points ("family", "host_op"): 1 to cap - 1 bytes of
 * [a-z0-9_], copied into out (cap bytes). */
static qhx_status get_ident(const pctx *c, const json_t *obj, const char *key, char *out, size_t cap) {
    const char *s = NULL;
    qhx_status rc = get_string(c, obj, "", key, true, cap - 1, &s);
    if (rc) return rc;
    if (!s[0]) return bad(c, QHX_E_FORMAT, key, "empty");
    for (const char *q = s; *q; q++)
        if (!((*q >= 'a' && *q <= 'z') || (*q >= '0' && *q <= '9') || *q == '_'))
            return bad(c, QHX_E_FORMAT, key, "'%s' is not a name (lower-case letters, digits, '_')", s);
    snprintf(out, cap, "%s", s);
    return QHX_OK;
}

static qhx_status get_num_range(const pctx *c, const json_t *obj, const char *parent,
                                const char *key, double lo, bool lo_open, double hi, double *out) {
    char p[300];
    double v = *out;
    qhx_status rc = qhx_json_get_num(obj, key, c->label, parent, false, &v, c->err);
    if (rc != QHX_OK) return rc;
    if (v < lo || (lo_open && v == lo) || v > hi)
        return bad(c, QHX_E_FORMAT, jp(p, sizeof p, parent, key), "%g is out of range %c%g, %g]", v,
                   lo_open ? '(' : '[', lo, hi);
    *out = v;
    return QHX_OK;
}

/* A file name relative to the bundle folder: no absolute path, no '..', no empty or '.'
 * components, no backslashes or control characters. */
static qhx_status check_rel_path(const pctx *c, const char *jpath, const char *s) {
    if (!s[0]) return bad(c, QHX_E_FORMAT, jpath, "empty file name");
    if (s[0] == '/')
        return bad(c, QHX_E_FORMAT, jpath, "'%s' is an absolute path; files must be relative to the bundle folder", s);
    if (strchr(s, '\\')) return bad(c, QHX_E_FORMAT, jpath, "'%s' contains a backslash; use '/'", s);
    const char *p = s;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        if (n == 0) return bad(c, QHX_E_FORMAT, jpath, "'%s' has an empty path component", s);
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return bad(c, QHX_E_FORMAT, jpath, "'%s' leaves the bundle folder ('..' is not allowed)", s);
        if (n == 1 && p[0] == '.') return bad(c, QHX_E_FORMAT, jpath, "'%s' has a '.' path component", s);
        if (!slash) break;
        p = slash + 1;
    }
    return QHX_OK;
}

static int is_hex64(const char *s) {
    if (strlen(s) != 64) return 0;
    for (int i = 0; i < 64; i++)
        if (!isxdigit((unsigned char)s[i])) return 0;
    return 1;
}

/* ==== the plan object ====================================================================== */

static void file_clear(qhx_plan_file *f) {
    qhx_free(f->file);
    qhx_free(f->path);
    memset(f, 0, sizeof *f);
    f->tensor_count = -1;
    f->bytes = -1;
}

void qhx_plan_free(qhx_plan *plan) {
    if (!plan) return;
    for (int r = 0; r < QHX_ART_ROLE_COUNT; r++) file_clear(&plan->artifacts[r]);
    file_clear(&plan->tokenizer);
    file_clear(&plan->preprocessor);
    file_clear(&plan->model_config);
    qhx_free(plan->label);
    qhx_free(plan->base_dir);
    qhx_free(plan->name);
    qhx_free(plan->description);
    json_decref(plan->config);
    qhx_free(plan);
}

static qhx_plan *plan_new(const char *label, const char *base_dir) {
    qhx_plan *p = qhx_calloc(1, sizeof *p);
    if (!p) return NULL;
    for (int r = 0; r < QHX_ART_ROLE_COUNT; r++) file_clear(&p->artifacts[r]);
    file_clear(&p->tokenizer);
    file_clear(&p->preprocessor);
    file_clear(&p->model_config);
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
static qhx_status file_set_name(const qhx_plan *plan, qhx_plan_file *f, const char *file, qhx_error *err) {
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

qhx_status qhx_plan_set_artifact(qhx_plan *plan, qhx_art_role role, const char *file,
                                 qhx_art_format format, bool has_dtype, qhx_dtype dtype,
                                 qhx_error *err) {
    if ((unsigned)role >= QHX_ART_ROLE_COUNT || (unsigned)format >= QHX_ART_FORMAT_COUNT ||
        (has_dtype && (unsigned)dtype >= QHX_DTYPE_COUNT) || !file)
        return qhx_fail(err, QHX_E_ARG, "qhx_plan_set_artifact: invalid argument");
    pctx c = {plan->label, err};
    char p[64];
    qhx_status rc = check_rel_path(&c, jp(p, sizeof p, "artifacts", ROLE_NAMES[role]), file);
    if (rc != QHX_OK) return rc;
    qhx_plan_file *f = &plan->artifacts[role];
    file_clear(f);
    if ((rc = file_set_name(plan, f, file, err)) != QHX_OK) return rc;
    f->format = format;
    f->has_dtype = has_dtype;
    f->dtype = has_dtype ? dtype : QHX_DTYPE_F32;
    return QHX_OK;
}

/* ==== manifest sections ==================================================================== */

enum { ENTRY_ARTIFACT, ENTRY_PLAIN };

/* {file, [format, dtype, shape, tensor_count,] bytes, sha256} at jpath. */
static qhx_status parse_file_entry(const pctx *c, qhx_plan *plan, const json_t *obj,
                                   const char *jpath, int kind, qhx_plan_file *f) {
    static const char *const art_keys[] = {"file", "format", "dtype", "shape", "tensor_count",
                                           "bytes", "sha256", NULL};
    static const char *const plain_keys[] = {"file", "bytes", "sha256", NULL};
    char p[300];
    qhx_status rc = check_keys(c, obj, jpath, kind == ENTRY_ARTIFACT ? art_keys : plain_keys);
    if (rc != QHX_OK) return rc;
    const char *file = NULL;
    if ((rc = get_string(c, obj, jpath, "file", true, QHX_PLAN_MAX_PATH, &file)) != QHX_OK) return rc;
    if ((rc = check_rel_path(c, jp(p, sizeof p, jpath, "file"), file)) != QHX_OK) return rc;
    if ((rc = file_set_name(plan, f, file, c->err)) != QHX_OK) return rc;

    int64_t bytes = -1;
    if ((rc = qhx_json_get_int(obj, "bytes", c->label, jpath, false, 0, (int64_t)1 << 53, &bytes,
                               c->err)) != QHX_OK)
        return rc;
    f->bytes = bytes;
    const char *sha = NULL;
    if ((rc = get_string(c, obj, jpath, "sha256", false, 64, &sha)) != QHX_OK) return rc;
    if (sha) {
        if (!is_hex64(sha))
            return bad(c, QHX_E_FORMAT, jp(p, sizeof p, jpath, "sha256"), "expected 64 hex digits");
        for (int i = 0; i < 64; i++) f->sha256[i] = (char)tolower((unsigned char)sha[i]);
        f->sha256[64] = '\0';
    }
    if (kind != ENTRY_ARTIFACT) return QHX_OK;

    const char *format = NULL;
    if ((rc = get_string(c, obj, jpath, "format", true, 32, &format)) != QHX_OK) return rc;
    int fi = name_index(FORMAT_NAMES, QHX_ART_FORMAT_COUNT, format);
    if (fi < 0)
        return bad(c, QHX_E_UNSUPPORTED, jp(p, sizeof p, jpath, "format"),
                   "unknown artifact format '%s' (expected safetensors or raw)", format);
    f->format = (qhx_art_format)fi;

    const char *dtype = NULL;
    if ((rc = get_string(c, obj, jpath, "dtype", false, 16, &dtype)) != QHX_OK) return rc;
    if (dtype) {
        if (qhx_dtype_from_name(dtype, &f->dtype) != 0)
            return bad(c, QHX_E_UNSUPPORTED, jp(p, sizeof p, jpath, "dtype"),
                       "unknown dtype '%s' (safetensors names: F32, F16, BF16, I8, ...)", dtype);
        f->has_dtype = true;
    }
    int64_t count = -1;
    if ((rc = qhx_json_get_int(obj, "tensor_count", c->label, jpath, false, 0, QHX_ST_MAX_TENSORS,
                               &count, c->err)) != QHX_OK)
        return rc;
    f->tensor_count = count;

    json_t *shape = json_object_get(obj, "shape");
    if (f->format == QHX_ART_SAFETENSORS) {
        if (shape) return bad(c, QHX_E_FORMAT, jp(p, sizeof p, jpath, "shape"), "only raw artifacts have a shape");
        return QHX_OK;
    }
    /* raw: one tensor, dtype and shape required, size implied */
    if (count >= 0)
        return bad(c, QHX_E_FORMAT, jp(p, sizeof p, jpath, "tensor_count"), "only safetensors artifacts have a tensor count");
    if (!dtype) return bad(c, QHX_E_FORMAT, jp(p, sizeof p, jpath, "dtype"), "missing (raw artifacts need one)");
    if (!shape) return bad(c, QHX_E_FORMAT, jp(p, sizeof p, jpath, "shape"), "missing (raw artifacts need one)");
    if (!json_is_array(shape)) return bad(c, QHX_E_FORMAT, jp(p, sizeof p, jpath, "shape"), "expected an array of integers");
    size_t rank = json_array_size(shape);
    if (rank < 1 || rank > QHX_ST_MAX_RANK)
        return bad(c, QHX_E_LIMIT, jp(p, sizeof p, jpath, "shape"), "rank %zu, allowed 1..%d", rank, QHX_ST_MAX_RANK);
    size_t total = qhx_dtype_size(f->dtype);
    for (size_t d = 0; d < rank; d++) {
        json_t *x = json_array_get(shape, d);
        if (!json_is_integer(x) || json_integer_value(x) < 0)
            return bad(c, QHX_E_FORMAT, jp(p, sizeof p, jpath, "shape"), "[%zu]: expected a non-negative integer", d);
        f->shape[d] = json_integer_value(x);
        if (!qhx_size_mul(total, (size_t)f->shape[d], &total) || total > ((size_t)1 << 53))
            return bad(c, QHX_E_LIMIT, jp(p, sizeof p, jpath, "shape"), "the tensor size overflows");
    }
    f->n_dims = (int)rank;
    if (bytes >= 0 && (uint64_t)bytes != (uint64_t)total)
        return bad(c, QHX_E_FORMAT, jp(p, sizeof p, jpath, "bytes"),
                   "%lld, but a %s tensor of this shape has %zu bytes", (long long)bytes, dtype, total);
    f->bytes = (int64_t)total;
    return QHX_OK;
}

static qhx_status parse_artifacts(const pctx *c, qhx_plan *plan, const json_t *arts) {
    static const char *const keys[] = {"weights", "embedding", "lm_head", "vision", NULL};
    qhx_status rc = check_keys(c, arts, "artifacts", keys);
    if (rc != QHX_OK) return rc;
    for (int r = 0; r < QHX_ART_ROLE_COUNT; r++) {
        json_t *a;
        if ((rc = need_object(c, arts, "artifacts", ROLE_NAMES[r], r == QHX_ART_WEIGHTS, &a)) != QHX_OK) return rc;
        if (!a) continue;
        char p[64];
        jp(p, sizeof p, "artifacts", ROLE_NAMES[r]);
        if ((rc = parse_file_entry(c, plan, a, p, ENTRY_ARTIFACT, &plan->artifacts[r])) != QHX_OK) return rc;
    }
    return QHX_OK;
}

static const char *const TOKEN_KEYS[] = {"stop_ids", "bos", "eos", "pad", "im_start", "im_end",
                                         "vision_start", "vision_end", "image_pad", "video_pad",
                                         "think_start", "think_end", NULL};

static int32_t *token_slot(qhx_plan_tokens *t, int i) {
    int32_t *slots[] = {NULL, &t->bos, &t->eos, &t->pad, &t->im_start, &t->im_end,
                        &t->vision_start, &t->vision_end, &t->image_pad, &t->video_pad,
                        &t->think_start, &t->think_end};
    return slots[i];
}

int32_t qhx_plan_token_id(const qhx_plan_tokens *t, int i) {
    return i >= 0 && i < QHX_PLAN_N_TOKEN_IDS ? *token_slot((qhx_plan_tokens *)t, i + 1) : -1;
}
const char *qhx_plan_token_key(int i) { return i >= 0 && i < QHX_PLAN_N_TOKEN_IDS ? TOKEN_KEYS[i + 1] : "?"; }

static qhx_status parse_special(const pctx *c, qhx_plan *plan, const json_t *st) {
    qhx_status rc = check_keys(c, st, "special_tokens", TOKEN_KEYS);
    if (rc != QHX_OK) return rc;
    qhx_plan_tokens *t = &plan->special;
    json_t *ids = json_object_get(st, "stop_ids");
    if (!ids || json_is_null(ids)) return bad(c, QHX_E_FORMAT, "special_tokens.stop_ids", "missing");
    if (!json_is_array(ids)) return bad(c, QHX_E_FORMAT, "special_tokens.stop_ids", "expected an array of token ids");
    size_t n = json_array_size(ids);
    if (n < 1) return bad(c, QHX_E_FORMAT, "special_tokens.stop_ids", "empty (at least one stop id is needed)");
    if (n > QHX_PLAN_MAX_STOP_IDS)
        return bad(c, QHX_E_LIMIT, "special_tokens.stop_ids", "%zu ids, the limit is %d", n, QHX_PLAN_MAX_STOP_IDS);
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(ids, i);
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > INT32_MAX)
            return bad(c, QHX_E_FORMAT, "special_tokens.stop_ids", "[%zu]: expected a token id (integer 0..%d)", i, INT32_MAX);
        int32_t id = (int32_t)json_integer_value(x);
        for (size_t j = 0; j < i; j++)
            if (t->stop_ids[j] == id)
                return bad(c, QHX_E_FORMAT, "special_tokens.stop_ids", "[%zu]: %d is listed twice", i, id);
        t->stop_ids[i] = id;
    }
    t->n_stop_ids = (int)n;
    for (int i = 1; TOKEN_KEYS[i]; i++) {
        int64_t v = -1;
        if ((rc = qhx_json_get_int(st, TOKEN_KEYS[i], c->label, "special_tokens", false, 0, INT32_MAX,
                                   &v, c->err)) != QHX_OK)
            return rc;
        *token_slot(t, i) = (int32_t)v;
    }
    return QHX_OK;
}

static qhx_status parse_generation(const pctx *c, qhx_plan *plan, const json_t *g) {
    static const char *const keys[] = {"temperature", "top_k", "top_p", "min_p", "repetition_penalty",
                                       "max_new_tokens", "thinking", NULL};
    qhx_plan_generation *d = &plan->generation;
    qhx_status rc;
    if ((rc = check_keys(c, g, "generation", keys)) != QHX_OK) return rc;
    if ((rc = get_num_range(c, g, "generation", "temperature", 0, false, 100, &d->temperature)) != QHX_OK) return rc;
    if ((rc = qhx_json_get_int(g, "top_k", c->label, "generation", false, 0, (int64_t)1 << 24, &d->top_k, c->err)) != QHX_OK) return rc;
    if ((rc = get_num_range(c, g, "generation", "top_p", 0, true, 1, &d->top_p)) != QHX_OK) return rc;
    if ((rc = get_num_range(c, g, "generation", "min_p", 0, false, 1, &d->min_p)) != QHX_OK) return rc;
    if ((rc = get_num_range(c, g, "generation", "repetition_penalty", 0, true, 100, &d->repetition_penalty)) != QHX_OK) return rc;
    if ((rc = qhx_json_get_int(g, "max_new_tokens", c->label, "generation", false, 1, QHX_PLAN_MAX_CONTEXT,
                               &d->max_new_tokens, c->err)) != QHX_OK)
        return rc;
    return qhx_json_get_bool(g, "thinking", c->label, "generation", false, &d->thinking, c->err);
}

/* ==== the model config ===================================================================== */

/* What the plan itself takes from `config` (an HF config object): its model_type (which family
 * reads it is the runtime's business: families/registry.c) and where its text part is. The
 * dimensions are parsed once, by the family (families/<name>/config.c). `prefix` is the JSON
 * path of config inside the file named by c->label ("" for a config file, "model" inline). */
static qhx_status read_config_head(const pctx *c, qhx_plan *plan, const json_t *config, const char *prefix) {
    qhx_status rc;
    const char *mt = NULL;
    if ((rc = get_string(c, config, prefix, "model_type", true, sizeof plan->model_type - 1, &mt)) != QHX_OK) return rc;
    snprintf(plan->model_type, sizeof plan->model_type, "%s", mt);
    json_t *text = NULL;
    if ((rc = need_object(c, config, prefix, "text_config", false, &text)) != QHX_OK) return rc;
    plan->text_config = text ? text : config;
    json_t *vc = NULL;
    if ((rc = need_object(c, config, prefix, "vision_config", false, &vc)) != QHX_OK) return rc;
    plan->has_vision_config = vc != NULL;
    return QHX_OK;
}

/* ==== cross-checks and files =============================================================== */

/* The file exists as a regular file (symlinks followed) with the expected size. */
static qhx_status check_file(const pctx *c, const qhx_plan_file *f, const char *jpath) {
    if (!f->present || !f->path) return QHX_OK;
    struct stat st;
    char p[300];
    if (stat(f->path, &st) != 0)
        return bad(c, QHX_E_IO, jp(p, sizeof p, jpath, "file"), "cannot open '%s': %s", f->path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return bad(c, QHX_E_IO, jp(p, sizeof p, jpath, "file"), "'%s' is not a regular file", f->path);
    if (f->bytes >= 0 && (int64_t)st.st_size != f->bytes)
        return bad(c, QHX_E_FORMAT, jp(p, sizeof p, jpath, "bytes"), "%lld, but '%s' has %lld bytes",
                   (long long)f->bytes, f->path, (long long)st.st_size);
    return QHX_OK;
}

/* A bundle's file must really be in the bundle: a symbolic link (the file itself or a folder on
 * its way) that leads outside the bundle folder is refused, so a manifest never makes the
 * runtime read, or quote in an error, a file elsewhere. (Checkpoint folders are not held to
 * this: the Hugging Face cache links every snapshot file to a blob outside it.) */
/* 1 when path resolves to something outside base_dir (0 inside, or when it does not resolve:
 * the existence checks report that). */
static int leads_outside(const char *base_dir, const char *path) {
    char *dir = realpath(base_dir, NULL), *real = realpath(path, NULL); /* libc malloc */
    size_t n = dir ? strlen(dir) : 0;
    int inside = dir && real && !strncmp(real, dir, n) && (real[n] == '/' || (n == 1 && dir[0] == '/'));
    int outside = real && !inside;
    free(dir);
    free(real);
    return outside;
}

static qhx_status check_inside(const pctx *c, const qhx_plan *plan, const qhx_plan_file *f, const char *jpath) {
    if (!f->present || !f->path || !plan->base_dir || !leads_outside(plan->base_dir, f->path)) return QHX_OK;
    char p[300];
    return bad(c, QHX_E_IO, jp(p, sizeof p, jpath, "file"),
               "'%s' is a symbolic link leading outside the bundle folder (refused)", f->file);
}

static qhx_status check_files(const pctx *c, const qhx_plan *plan) {
    qhx_status rc;
    for (int r = 0; r < QHX_ART_ROLE_COUNT; r++) {
        char p[64];
        jp(p, sizeof p, "artifacts", ROLE_NAMES[r]);
        if ((rc = check_file(c, &plan->artifacts[r], p)) || (rc = check_inside(c, plan, &plan->artifacts[r], p)))
            return rc;
    }
    if ((rc = check_file(c, &plan->tokenizer, "tokenizer")) || (rc = check_inside(c, plan, &plan->tokenizer, "tokenizer")))
        return rc;
    if ((rc = check_file(c, &plan->preprocessor, "preprocessor")) ||
        (rc = check_inside(c, plan, &plan->preprocessor, "preprocessor")))
        return rc;
    return QHX_OK;
}

/* ==== parsing a manifest =================================================================== */

static qhx_status parse_root(const pctx *c, qhx_plan *plan, const json_t *root) {
    static const char *const keys[] = {"format", "name", "description", "family", "host_op",
                                       "precision", "max_context", "kv_cache", "artifacts", "tokenizer",
                                       "preprocessor", "special_tokens", "generation", "model", NULL};
    qhx_status rc;
    if (!json_is_object(root)) return bad(c, QHX_E_FORMAT, "", "a manifest must be a JSON object");

    /* The version first: a newer manifest may legitimately carry keys this build does not know. */
    const char *format = NULL;
    json_t *fv = json_object_get(root, "format");
    if (!fv && json_object_get(root, "model_type"))
        return bad(c, QHX_E_FORMAT, "format",
                   "missing (this looks like a Hugging Face config.json: open its folder instead)");
    if ((rc = get_string(c, root, "", "format", true, 64, &format))) return rc;
    if (strncmp(format, "qhexrt/", 7) != 0)
        return bad(c, QHX_E_FORMAT, "format", "'%s' is not a qhexrt manifest format (expected \"%s\")", format,
                   QHX_PLAN_FORMAT);
    if (strcmp(format, QHX_PLAN_FORMAT) != 0)
        return bad(c, QHX_E_UNSUPPORTED, "format", "unsupported version '%s' (this build reads %s)", format,
                   QHX_PLAN_FORMAT);
    if ((rc = check_keys(c, root, "", keys))) return rc;

    const char *s = NULL;
    if ((rc = get_string(c, root, "", "name", true, QHX_PLAN_MAX_NAME, &s))) return rc;
    if (!s[0]) return bad(c, QHX_E_FORMAT, "name", "empty");
    if (!(plan->name = qhx_strdup(s))) return qhx_fail(c->err, QHX_E_NOMEM, "%s: out of memory", c->label);
    s = NULL;
    if ((rc = get_string(c, root, "", "description", false, 4096, &s))) return rc;
    if (s && !(plan->description = qhx_strdup(s))) return qhx_fail(c->err, QHX_E_NOMEM, "%s: out of memory", c->label);

    /* family and host-op are names here; the runtime resolves them (families/registry.c) */
    if ((rc = get_ident(c, root, "family", plan->family, sizeof plan->family)) ||
        (rc = get_ident(c, root, "host_op", plan->host_op, sizeof plan->host_op)))
        return rc;
    if ((rc = get_string(c, root, "", "precision", true, 16, &s))) return rc;
    if (qhx_precision_from_name(s, &plan->precision) != 0)
        return bad(c, QHX_E_UNSUPPORTED, "precision", "unknown precision '%s' (expected f32, bf16, f16, w8 or q4)", s);
    if ((rc = qhx_json_get_int(root, "max_context", c->label, "", true, 1, QHX_PLAN_MAX_CONTEXT,
                               &plan->max_context, c->err)))
        return rc;
    s = NULL;
    if ((rc = get_string(c, root, "", "kv_cache", false, 16, &s))) return rc;
    if (s && kv_cache_from_name(s, &plan->kv_cache) != 0)
        return bad(c, QHX_E_UNSUPPORTED, "kv_cache", "unknown KV cache type '%s' (expected f32, f16 or q8)", s);

    json_t *o;
    if ((rc = need_object(c, root, "", "artifacts", true, &o)) || (rc = parse_artifacts(c, plan, o))) return rc;
    if ((rc = need_object(c, root, "", "tokenizer", true, &o)) ||
        (rc = parse_file_entry(c, plan, o, "tokenizer", ENTRY_PLAIN, &plan->tokenizer)))
        return rc;
    if ((rc = need_object(c, root, "", "preprocessor", false, &o))) return rc;
    if (o && (rc = parse_file_entry(c, plan, o, "preprocessor", ENTRY_PLAIN, &plan->preprocessor))) return rc;
    if ((rc = need_object(c, root, "", "special_tokens", true, &o)) || (rc = parse_special(c, plan, o))) return rc;
    if ((rc = need_object(c, root, "", "generation", false, &o))) return rc;
    if (o && (rc = parse_generation(c, plan, o))) return rc;

    /* model: {"config": FILE} or an inline Hugging Face config object */
    json_t *m;
    if ((rc = need_object(c, root, "", "model", true, &m))) return rc;
    if (json_object_get(m, "config")) {
        static const char *const mkeys[] = {"config", NULL};
        if ((rc = check_keys(c, m, "model", mkeys))) return rc;
        if ((rc = get_string(c, m, "model", "config", true, QHX_PLAN_MAX_PATH, &s))) return rc;
        if ((rc = check_rel_path(c, "model.config", s))) return rc;
        if ((rc = file_set_name(plan, &plan->model_config, s, c->err))) return rc;
    } else {
        plan->config = json_incref(m);
        if ((rc = read_config_head(c, plan, m, "model"))) return rc;
    }
    return QHX_OK;
}

/* Load the model config file named by the plan (base_dir set). */
static qhx_status load_model_config(const pctx *c, qhx_plan *plan) {
    if (!plan->model_config.present || !plan->model_config.path) return QHX_OK;
    qhx_status rc = check_file(c, &plan->model_config, "model.config");
    if (rc == QHX_OK) rc = check_inside(c, plan, &plan->model_config, "model.config");
    if (rc) return rc;
    plan->config = qhx_json_load_file(plan->model_config.path, c->err);
    if (!plan->config) return c->err ? c->err->code : QHX_E_FORMAT;
    pctx cc = {plan->model_config.path, c->err};
    if (!json_is_object(plan->config)) return bad(&cc, QHX_E_FORMAT, "", "expected a JSON object");
    return read_config_head(&cc, plan, plan->config, "");
}

qhx_status qhx_plan_parse(const char *buf, size_t len, const char *base_dir, const char *label,
                          qhx_plan **out, qhx_error *err) {
    *out = NULL;
    if (!label) label = "manifest";
    if (len > QHX_PLAN_MAX_BYTES)
        return qhx_fail(err, QHX_E_LIMIT, "%s: %zu bytes, the manifest limit is %zu", label, len, QHX_PLAN_MAX_BYTES);
    qhx_plan *plan = plan_new(label, base_dir);
    if (!plan) return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", label);
    pctx c = {label, err};
    qhx_status rc;
    json_t *root = qhx_json_parse(buf, len, label, err);
    if (!root) {
        rc = err ? err->code : QHX_E_FORMAT;
        goto fail;
    }
    plan->source = QHX_PLAN_FROM_MANIFEST;
    if ((rc = parse_root(&c, plan, root))) goto fail;
    if (base_dir && (rc = load_model_config(&c, plan))) goto fail;
    if (base_dir && (rc = check_files(&c, plan))) goto fail;
    json_decref(root);
    *out = plan;
    return QHX_OK;
fail:
    json_decref(root);
    qhx_plan_free(plan);
    return rc ? rc : QHX_E_INTERNAL;
}

/* ==== opening: manifest file, bundle folder, checkpoint folder ============================= */

static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return qhx_strdup(".");
    if (slash == path) return qhx_strdup("/");
    return qhx_strndup(path, (size_t)(slash - path));
}

static qhx_status open_manifest_file(const char *path, qhx_plan **out, qhx_error *err) {
    char *buf = NULL;
    size_t len = 0;
    qhx_status rc = qhx_file_read_all(path, QHX_PLAN_MAX_BYTES, &buf, &len, err);
    if (rc) return rc;
    char *dir = dir_of(path);
    if (!dir) {
        qhx_free(buf);
        return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", path);
    }
    rc = qhx_plan_parse(buf, len, dir, path, out, err);
    qhx_free(dir);
    qhx_free(buf);
    return rc;
}

static int has_suffix(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Whether `path` is a qhexrt manifest: a .json file of at most QHX_PLAN_MAX_BYTES whose top
 * level has "format": "qhexrt/...". Files that never mention "qhexrt/ are not parsed at all. A
 * file that mentions it but does not parse counts, so that opening it reports the JSON error
 * rather than "no manifest". Returns 1, 0, or -1 when memory ran out (err set). */
static int is_manifest(const char *path, qhx_error *err) {
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size > QHX_PLAN_MAX_BYTES) return 0;
    char *buf;
    size_t len;
    qhx_error e;
    if (qhx_file_read_all(path, QHX_PLAN_MAX_BYTES, &buf, &len, &e) != QHX_OK) {
        if (e.code != QHX_E_NOMEM) return 0;
        qhx_fail(err, QHX_E_NOMEM, "%s", e.msg);
        return -1;
    }
    int yes = memmem(buf, len, "\"qhexrt/", 8) != NULL;
    if (yes) {
        json_t *root = qhx_json_parse(buf, len, path, &e);
        if (root) {
            const char *f = json_is_object(root) ? json_string_value(json_object_get(root, "format")) : NULL;
            yes = f && !strncmp(f, "qhexrt/", 7);
            json_decref(root);
        } else if (e.code == QHX_E_NOMEM) {
            qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", path);
            yes = -1;
        }
    }
    qhx_free(buf);
    return yes;
}

/* The manifests in dir, sorted (owned array of owned names). */
static qhx_status find_manifests(const char *dir, char ***names_out, int *n_out, qhx_error *err) {
    *names_out = NULL;
    *n_out = 0;
    DIR *d = opendir(dir);
    if (!d) return qhx_fail(err, QHX_E_IO, "%s: cannot open folder: %s", dir, strerror(errno));
    char **names = NULL;
    int n = 0, scanned = 0;
    qhx_status rc = QHX_OK;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.' || !has_suffix(de->d_name, ".json")) continue;
        if (++scanned > QHX_PLAN_MAX_SCAN) {
            rc = qhx_fail(err, QHX_E_LIMIT, "%s: more than %d .json files; name the manifest", dir, QHX_PLAN_MAX_SCAN);
            break;
        }
        char *p = qhx_path_join(dir, de->d_name);
        if (!p) { rc = qhx_fail(err, QHX_E_NOMEM, "out of memory"); break; }
        int yes = is_manifest(p, err);
        qhx_free(p);
        if (yes < 0) { rc = QHX_E_NOMEM; break; }
        if (!yes) continue;
        char **nn = qhx_realloc(names, (size_t)(n + 1) * sizeof *nn);
        if (!nn) { rc = qhx_fail(err, QHX_E_NOMEM, "out of memory"); break; }
        names = nn;
        if (!(names[n] = qhx_strdup(de->d_name))) { rc = qhx_fail(err, QHX_E_NOMEM, "out of memory"); break; }
        n++;
    }
    closedir(d);
    if (rc) {
        for (int i = 0; i < n; i++) qhx_free(names[i]);
        qhx_free(names);
        return rc;
    }
    if (n > 1) qsort(names, (size_t)n, sizeof *names, cmp_str);
    *names_out = names;
    *n_out = n;
    return QHX_OK;
}

qhx_status qhx_plan_open(const char *path, qhx_plan **out, qhx_error *err) {
    *out = NULL;
    if (!path || !path[0]) return qhx_fail(err, QHX_E_ARG, "no path given");
    if (!qhx_path_is_dir(path)) return open_manifest_file(path, out, err);

    char **names;
    int n;
    qhx_status rc = find_manifests(path, &names, &n, err);
    if (rc) return rc;
    if (n == 1) {
        char *p = qhx_path_join(path, names[0]);
        rc = p ? open_manifest_file(p, out, err) : qhx_fail(err, QHX_E_NOMEM, "out of memory");
        qhx_free(p);
    } else if (n > 1) {
        char list[300] = "";
        size_t k = 0;
        for (int i = 0; i < n && k < sizeof list; i++)
            k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", i ? ", " : "", names[i]);
        rc = qhx_fail(err, QHX_E_ARG, "%s: %d manifests in this folder (%s): name one", path, n, list);
    } else {
        char *cfg = qhx_path_join(path, "config.json");
        if (!cfg) rc = qhx_fail(err, QHX_E_NOMEM, "out of memory");
        else if (qhx_path_is_file(cfg)) rc = qhx_plan_from_checkpoint(path, out, err);
        else rc = qhx_fail(err, QHX_E_IO, "%s: no qhexrt manifest and no config.json in this folder", path);
        qhx_free(cfg);
    }
    for (int i = 0; i < n; i++) qhx_free(names[i]);
    qhx_free(names);
    return rc;
}

/* ==== Hugging Face checkpoint folders ====================================================== */

/* Optional JSON file in dir: *out NULL (and OK) when the file does not exist. */
static qhx_status load_optional_json(const char *dir, const char *name, json_t **out, qhx_error *err) {
    *out = NULL;
    char *p = qhx_path_join(dir, name);
    if (!p) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    qhx_status rc = QHX_OK;
    if (qhx_path_is_file(p)) {
        *out = qhx_json_load_file(p, err);
        if (!*out) rc = err ? err->code : QHX_E_FORMAT;
        else if (!json_is_object(*out)) {
            rc = qhx_fail(err, QHX_E_FORMAT, "%s: expected a JSON object", p);
            json_decref(*out);
            *out = NULL;
        }
    }
    qhx_free(p);
    return rc;
}

/* Append eos_token_id of obj (an integer or a list of integers) to the stop ids. */
static qhx_status add_eos_ids(qhx_plan_tokens *t, const json_t *obj, const char *label, const char *jpath,
                              qhx_error *err) {
    json_t *v = json_object_get(obj, "eos_token_id");
    if (!v || json_is_null(v)) return QHX_OK;
    size_t n = json_is_array(v) ? json_array_size(v) : 1;
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_is_array(v) ? json_array_get(v, i) : v;
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > INT32_MAX)
            return qhx_fail(err, QHX_E_FORMAT, "%s: %s%seos_token_id: expected a token id or a list of them",
                            label, jpath, jpath[0] ? "." : "");
        int32_t id = (int32_t)json_integer_value(x);
        int seen = 0;
        for (int j = 0; j < t->n_stop_ids; j++) seen |= t->stop_ids[j] == id;
        if (seen) continue;
        if (t->n_stop_ids == QHX_PLAN_MAX_STOP_IDS)
            return qhx_fail(err, QHX_E_LIMIT, "%s: more than %d eos token ids", label, QHX_PLAN_MAX_STOP_IDS);
        t->stop_ids[t->n_stop_ids++] = id;
    }
    return QHX_OK;
}

/* An optional non-negative integer id field of obj into *slot (left alone when absent). */
static void take_id(const json_t *obj, const char *key, int32_t *slot) {
    json_t *v = obj ? json_object_get(obj, key) : NULL;
    if (json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= INT32_MAX)
        *slot = (int32_t)json_integer_value(v);
}

/* Special ids by their text in the tokenizer's added tokens. */
static void take_added_token(qhx_plan_tokens *t, const char *content, int64_t id) {
    static const struct {
        const char *text;
        size_t off;
    } map[] = {
        {"<|im_start|>", offsetof(qhx_plan_tokens, im_start)},
        {"<|im_end|>", offsetof(qhx_plan_tokens, im_end)},
        {"<|vision_start|>", offsetof(qhx_plan_tokens, vision_start)},
        {"<|vision_end|>", offsetof(qhx_plan_tokens, vision_end)},
        {"<|image_pad|>", offsetof(qhx_plan_tokens, image_pad)},
        {"<|video_pad|>", offsetof(qhx_plan_tokens, video_pad)},
        {"<think>", offsetof(qhx_plan_tokens, think_start)},
        {"</think>", offsetof(qhx_plan_tokens, think_end)},
    };
    if (!content || id < 0 || id > INT32_MAX) return;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(content, map[i].text)) {
            int32_t *slot = (int32_t *)((char *)t + map[i].off);
            if (*slot < 0) *slot = (int32_t)id;
        }
}

static qhx_status find_added_tokens(const char *dir, qhx_plan_tokens *t, qhx_error *err) {
    json_t *tc = NULL;
    qhx_status rc = load_optional_json(dir, "tokenizer_config.json", &tc, err);
    if (rc) return rc;
    json_t *atd = tc ? json_object_get(tc, "added_tokens_decoder") : NULL;
    if (json_is_object(atd)) {
        const char *key;
        json_t *v;
        json_object_foreach(atd, key, v) {
            char *end;
            long long id = strtoll(key, &end, 10);
            if (*end || end == key) continue;
            take_added_token(t, json_string_value(json_object_get(v, "content")), id);
        }
        json_decref(tc);
        return QHX_OK;
    }
    json_decref(tc);
    json_t *tj = NULL; /* fall back to tokenizer.json's added_tokens list */
    if ((rc = load_optional_json(dir, "tokenizer.json", &tj, err))) return rc;
    json_t *list = tj ? json_object_get(tj, "added_tokens") : NULL;
    for (size_t i = 0; json_is_array(list) && i < json_array_size(list); i++) {
        json_t *e = json_array_get(list, i);
        json_t *id = json_object_get(e, "id");
        if (json_is_integer(id)) take_added_token(t, json_string_value(json_object_get(e, "content")), json_integer_value(id));
    }
    json_decref(tj);
    return QHX_OK;
}

/* The weights file of a checkpoint folder, relative to it (owned). */
static qhx_status find_weights(const char *dir, char **out, qhx_error *err) {
    *out = NULL;
    const char *prefer[] = {"model.safetensors.index.json", "model.safetensors"};
    for (int i = 0; i < 2; i++) {
        char *p = qhx_path_join(dir, prefer[i]);
        if (!p) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
        int yes = qhx_path_is_file(p);
        qhx_free(p);
        if (yes) return (*out = qhx_strdup(prefer[i])) ? QHX_OK : qhx_fail(err, QHX_E_NOMEM, "out of memory");
    }
    DIR *d = opendir(dir);
    if (!d) return qhx_fail(err, QHX_E_IO, "%s: cannot open folder: %s", dir, strerror(errno));
    char *found = NULL;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.' || !has_suffix(de->d_name, ".safetensors")) continue;
        if (n++ == 0) found = qhx_strdup(de->d_name);
    }
    closedir(d);
    if (n == 1 && !found) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    if (n == 1) {
        *out = found;
        return QHX_OK;
    }
    qhx_free(found);
    if (n == 0) return qhx_fail(err, QHX_E_IO, "%s: no .safetensors weights in this folder", dir);
    return qhx_fail(err, QHX_E_FORMAT, "%s: %d .safetensors files but no model.safetensors.index.json", dir, n);
}

static qhx_status file_set_size(qhx_plan_file *f) {
    struct stat st;
    if (f->path && stat(f->path, &st) == 0) f->bytes = (int64_t)st.st_size;
    return QHX_OK;
}

/* Summarise the weights: tensor count, the dtype holding most bytes, vision tensors present. */
static qhx_status scan_weights(qhx_plan *plan, bool *has_vision_tensors, qhx_error *err) {
    qhx_plan_file *w = &plan->artifacts[QHX_ART_WEIGHTS];
    qhx_st_set *set;
    qhx_status rc = qhx_st_open(w->path, &set, err);
    if (rc) return rc;
    uint64_t by_dtype[QHX_DTYPE_COUNT] = {0};
    *has_vision_tensors = false;
    int64_t n = qhx_st_n_tensors(set);
    for (int64_t i = 0; i < n; i++) {
        const qhx_st_tensor *t = qhx_st_tensor_at(set, i);
        by_dtype[t->dtype] += t->size;
        if (!strncmp(t->name, "model.visual.", 13) || !strncmp(t->name, "visual.", 7)) *has_vision_tensors = true;
    }
    qhx_st_free(set);
    int best = 0;
    for (int d = 1; d < QHX_DTYPE_COUNT; d++)
        if (by_dtype[d] > by_dtype[best]) best = d;
    w->tensor_count = n;
    w->has_dtype = true;
    w->dtype = (qhx_dtype)best;
    switch (w->dtype) {
    case QHX_DTYPE_F32: plan->precision = QHX_PREC_F32; break;
    case QHX_DTYPE_BF16: plan->precision = QHX_PREC_BF16; break;
    case QHX_DTYPE_F16: plan->precision = QHX_PREC_F16; break;
    default:
        return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: most weight bytes are %s; a checkpoint folder must hold F32, BF16 or F16 weights",
                        w->path, qhx_dtype_name(w->dtype));
    }
    return QHX_OK;
}

/* Sampling defaults from generation_config.json. */
static qhx_status take_generation(qhx_plan *plan, const json_t *gc, const char *label, qhx_error *err) {
    pctx c = {label, err};
    qhx_plan_generation *g = &plan->generation;
    qhx_status rc;
    bool do_sample = false;
    if ((rc = qhx_json_get_bool(gc, "do_sample", label, "", false, &do_sample, err))) return rc;
    double temperature = 1.0;
    if ((rc = get_num_range(&c, gc, "", "temperature", 0, false, 100, &temperature))) return rc;
    g->temperature = do_sample ? temperature : 0.0;
    if ((rc = qhx_json_get_int(gc, "top_k", label, "", false, 0, (int64_t)1 << 24, &g->top_k, err)) ||
        (rc = get_num_range(&c, gc, "", "top_p", 0, true, 1, &g->top_p)) ||
        (rc = get_num_range(&c, gc, "", "min_p", 0, false, 1, &g->min_p)) ||
        (rc = get_num_range(&c, gc, "", "repetition_penalty", 0, true, 100, &g->repetition_penalty)) ||
        (rc = qhx_json_get_int(gc, "max_new_tokens", label, "", false, 1, QHX_PLAN_MAX_CONTEXT, &g->max_new_tokens, err)))
        return rc;
    return QHX_OK;
}

static qhx_status checkpoint_fill(qhx_plan *plan, const char *dir, qhx_error *err) {
    qhx_status rc;
    char *cfg_path = NULL, *gen_path = NULL, *weights = NULL;
    json_t *gc = NULL;
    plan->source = QHX_PLAN_FROM_CHECKPOINT;

    /* name: the folder's last component */
    size_t len = strlen(dir);
    while (len > 1 && dir[len - 1] == '/') len--;
    size_t start = len;
    while (start > 0 && dir[start - 1] != '/') start--;
    size_t nlen = len - start;
    if (nlen == 0 || (nlen == 1 && dir[start] == '.')) plan->name = qhx_strdup("checkpoint");
    else plan->name = qhx_strndup(dir + start, nlen > QHX_PLAN_MAX_NAME ? QHX_PLAN_MAX_NAME : nlen);
    if (!plan->name) return qhx_fail(err, QHX_E_NOMEM, "out of memory");

    /* config.json -> model_type (the runtime finds the family that reads it) */
    if ((rc = file_set_name(plan, &plan->model_config, "config.json", err))) return rc;
    cfg_path = plan->model_config.path;
    if (!(plan->config = qhx_json_load_file(cfg_path, err))) return err ? err->code : QHX_E_FORMAT;
    pctx cc = {cfg_path, err};
    if (!json_is_object(plan->config)) return bad(&cc, QHX_E_FORMAT, "", "expected a JSON object");
    file_set_size(&plan->model_config);
    if ((rc = read_config_head(&cc, plan, plan->config, ""))) return rc;

    /* weights -> precision, whether a vision tower is there (the runtime picks the host-op) */
    if ((rc = find_weights(dir, &weights, err))) return rc;
    rc = qhx_plan_set_artifact(plan, QHX_ART_WEIGHTS, weights, QHX_ART_SAFETENSORS, false, QHX_DTYPE_F32, err);
    qhx_free(weights);
    if (rc) return rc;
    file_set_size(&plan->artifacts[QHX_ART_WEIGHTS]);
    if ((rc = scan_weights(plan, &plan->vision_tensors, err))) return rc;
    plan->max_context = QHX_PLAN_DEFAULT_CONTEXT; /* the runtime caps it by the trained length */

    /* tokenizer, preprocessor */
    if ((rc = file_set_name(plan, &plan->tokenizer, "tokenizer.json", err))) return rc;
    /* A checkpoint without tokenizer.json still runs on token ids; text calls then fail with
     * "the model has no tokenizer", and forge refuses it (a bundle needs one). */
    if (qhx_path_is_file(plan->tokenizer.path)) file_set_size(&plan->tokenizer);
    else file_clear(&plan->tokenizer);
    char *pp = qhx_path_join(dir, "preprocessor_config.json");
    if (!pp) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    int has_pp = qhx_path_is_file(pp);
    qhx_free(pp);
    if (has_pp) {
        if ((rc = file_set_name(plan, &plan->preprocessor, "preprocessor_config.json", err))) return rc;
        file_set_size(&plan->preprocessor);
    }

    /* special tokens: stops from generation_config.json, then config (text part, top level) */
    qhx_plan_tokens *t = &plan->special;
    if ((rc = load_optional_json(dir, "generation_config.json", &gc, err))) return rc;
    if (!(gen_path = qhx_path_join(dir, "generation_config.json"))) {
        rc = qhx_fail(err, QHX_E_NOMEM, "out of memory");
        goto done;
    }
    if (gc && (rc = add_eos_ids(t, gc, gen_path, "", err))) goto done;
    if ((rc = add_eos_ids(t, plan->text_config, cfg_path, plan->text_config != plan->config ? "text_config" : "", err)) ||
        (rc = add_eos_ids(t, plan->config, cfg_path, "", err)))
        goto done;
    if ((rc = find_added_tokens(dir, t, err))) goto done;
    const json_t *sources[] = {plan->config, plan->text_config, gc};
    for (int i = 0; i < 3; i++) { /* later sources win: generation_config.json last */
        take_id(sources[i], "bos_token_id", &t->bos);
        take_id(sources[i], "pad_token_id", &t->pad);
    }
    take_id(plan->text_config, "eos_token_id", &t->eos);
    if (t->eos < 0) take_id(plan->config, "eos_token_id", &t->eos);
    if (t->eos < 0 && t->n_stop_ids > 0) t->eos = t->stop_ids[0];
    take_id(plan->config, "image_token_id", &t->image_pad);
    take_id(plan->config, "video_token_id", &t->video_pad);
    take_id(plan->config, "vision_start_token_id", &t->vision_start);
    take_id(plan->config, "vision_end_token_id", &t->vision_end);
    if (t->n_stop_ids == 0 && t->im_end >= 0) t->stop_ids[t->n_stop_ids++] = t->im_end;
    if (t->n_stop_ids == 0) {
        rc = qhx_fail(err, QHX_E_FORMAT, "%s: no stop tokens: neither generation_config.json nor config.json "
                      "gives an eos_token_id, and the tokenizer has no <|im_end|>", dir);
        goto done;
    }
    if (gc && (rc = take_generation(plan, gc, gen_path, err))) goto done;

done:
    qhx_free(gen_path);
    json_decref(gc);
    return rc;
}

qhx_status qhx_plan_from_checkpoint(const char *dir, qhx_plan **out, qhx_error *err) {
    *out = NULL;
    if (!qhx_path_is_dir(dir)) return qhx_fail(err, QHX_E_IO, "%s: not a folder", dir);
    qhx_plan *plan = plan_new(dir, dir);
    if (!plan) return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", dir);
    qhx_status rc = checkpoint_fill(plan, dir, err);
    if (rc) {
        qhx_plan_free(plan);
        return rc;
    }
    *out = plan;
    return QHX_OK;
}

/* ==== verification ========================================================================= */

/* The dtype that holds most bytes of the weights artifact at each precision. */
static const qhx_dtype PRECISION_DTYPE[QHX_PREC_COUNT] = {
    [QHX_PREC_F32] = QHX_DTYPE_F32, [QHX_PREC_BF16] = QHX_DTYPE_BF16, [QHX_PREC_F16] = QHX_DTYPE_F16,
    [QHX_PREC_W8] = QHX_DTYPE_I8, [QHX_PREC_Q4] = QHX_DTYPE_U8};

/* The precision whose weights are mostly of dtype d, for messages. */
static const char *precision_of_dtype(qhx_dtype d) {
    for (int p = 0; p < QHX_PREC_COUNT; p++)
        if (PRECISION_DTYPE[p] == d) return qhx_precision_name((qhx_precision)p);
    return "no known";
}

static qhx_status verify_artifact(const qhx_plan *plan, const qhx_plan_file *f, const char *jpath,
                                  unsigned flags, int is_weights, qhx_error *err) {
    pctx c = {plan->label, err};
    char p[300];
    qhx_status rc;
    if ((rc = check_file(&c, f, jpath))) return rc;
    int bundle = plan->source == QHX_PLAN_FROM_MANIFEST;
    if ((flags & QHX_PLAN_VERIFY_HEADERS) && f->format == QHX_ART_SAFETENSORS &&
        (f->tensor_count >= 0 || f->has_dtype || is_weights || bundle)) {
        qhx_st_set *set;
        if ((rc = qhx_st_open(f->path, &set, err))) return rc;
        for (int i = 0; bundle && i < qhx_st_n_files(set); i++) /* the shards of an index too */
            if (leads_outside(plan->base_dir, qhx_st_file_path(set, i))) {
                rc = bad(&c, QHX_E_IO, jp(p, sizeof p, jpath, "file"),
                         "shard '%s' is a symbolic link leading outside the bundle folder (refused)",
                         qhx_st_file_path(set, i));
                qhx_st_free(set);
                return rc;
            }
        uint64_t by_dtype[QHX_DTYPE_COUNT] = {0};
        int64_t n = qhx_st_n_tensors(set);
        for (int64_t i = 0; i < n; i++) by_dtype[qhx_st_tensor_at(set, i)->dtype] += qhx_st_tensor_at(set, i)->size;
        qhx_st_free(set);
        int best = 0;
        for (int d = 1; d < QHX_DTYPE_COUNT; d++)
            if (by_dtype[d] > by_dtype[best]) best = d;
        if (f->tensor_count >= 0 && n != f->tensor_count)
            return bad(&c, QHX_E_FORMAT, jp(p, sizeof p, jpath, "tensor_count"), "%lld, but '%s' has %lld tensors",
                       (long long)f->tensor_count, f->file, (long long)n);
        if (f->has_dtype && n > 0 && (qhx_dtype)best != f->dtype)
            return bad(&c, QHX_E_FORMAT, jp(p, sizeof p, jpath, "dtype"), "%s, but most bytes of '%s' are %s",
                       qhx_dtype_name(f->dtype), f->file, qhx_dtype_name((qhx_dtype)best));
        if (is_weights && n > 0 && (unsigned)plan->precision < QHX_PREC_COUNT &&
            (qhx_dtype)best != PRECISION_DTYPE[plan->precision])
            return bad(&c, QHX_E_FORMAT, "precision", "'%s', but most bytes of '%s' are %s (%s weights)",
                       qhx_precision_name(plan->precision), f->file, qhx_dtype_name((qhx_dtype)best),
                       precision_of_dtype((qhx_dtype)best));
    }
    if ((flags & QHX_PLAN_VERIFY_HEADERS) && f->format == QHX_ART_RAW) {
        struct stat st;
        if (stat(f->path, &st) == 0 && (int64_t)st.st_size != f->bytes)
            return bad(&c, QHX_E_FORMAT, jp(p, sizeof p, jpath, "shape"), "needs %lld bytes, but '%s' has %lld",
                       (long long)f->bytes, f->file, (long long)st.st_size);
    }
    if ((flags & QHX_PLAN_VERIFY_SHA256) && f->sha256[0]) {
        char hex[65];
        if ((rc = qhx_sha256_file(f->path, hex, err))) return rc;
        if (strcmp(hex, f->sha256) != 0)
            return bad(&c, QHX_E_FORMAT, jp(p, sizeof p, jpath, "sha256"), "'%s' hashes to %s", f->file, hex);
    }
    return QHX_OK;
}

qhx_status qhx_plan_verify(const qhx_plan *plan, unsigned flags, qhx_error *err) {
    if (!plan->base_dir) return qhx_fail(err, QHX_E_ARG, "%s: the plan has no folder to check files in", plan->label);
    qhx_status rc;
    for (int r = 0; r < QHX_ART_ROLE_COUNT; r++) {
        if (!plan->artifacts[r].present) continue;
        char p[64];
        if ((rc = verify_artifact(plan, &plan->artifacts[r], jp(p, sizeof p, "artifacts", ROLE_NAMES[r]), flags,
                                  r == QHX_ART_WEIGHTS, err)))
            return rc;
    }
    const qhx_plan_file *others[] = {&plan->tokenizer, &plan->preprocessor, &plan->model_config};
    const char *names[] = {"tokenizer", "preprocessor", "model.config"};
    for (int i = 0; i < 3; i++)
        if (others[i]->present && (rc = verify_artifact(plan, others[i], names[i], flags & QHX_PLAN_VERIFY_SHA256, 0, err)))
            return rc;
    return QHX_OK;
}

/* ==== writing ============================================================================== */

/* json_object_set_new that reports failure (jansson returns -1 on allocation failure). */
static int put(json_t *obj, const char *key, json_t *v) { return v ? json_object_set_new(obj, key, v) : -1; }

static json_t *file_json(const qhx_plan_file *f, int kind) {
    json_t *o = json_object();
    if (!o) return NULL;
    int bad_ = put(o, "file", json_string(f->file));
    if (kind == ENTRY_ARTIFACT) {
        bad_ |= put(o, "format", json_string(FORMAT_NAMES[f->format]));
        if (f->has_dtype) bad_ |= put(o, "dtype", json_string(qhx_dtype_name(f->dtype)));
        if (f->format == QHX_ART_RAW) {
            json_t *s = json_array();
            for (int d = 0; s && d < f->n_dims; d++) bad_ |= json_array_append_new(s, json_integer(f->shape[d]));
            bad_ |= put(o, "shape", s);
        }
        if (f->format == QHX_ART_SAFETENSORS && f->tensor_count >= 0)
            bad_ |= put(o, "tensor_count", json_integer(f->tensor_count));
    }
    if (f->bytes >= 0) bad_ |= put(o, "bytes", json_integer(f->bytes));
    if (f->sha256[0]) bad_ |= put(o, "sha256", json_string(f->sha256));
    if (bad_) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *qhx_plan_to_json(const qhx_plan *plan, qhx_error *err) {
    if (!plan->family[0] || !plan->host_op[0]) {
        qhx_fail(err, QHX_E_ARG, "%s: the plan names no family or host-op (a checkpoint folder: set them first)",
                 plan->label);
        return NULL;
    }
    json_t *root = json_object(), *arts = json_object(), *st = json_object(), *gen = json_object();
    int b = !root || !arts || !st || !gen;
    if (!b) {
        b |= put(root, "format", json_string(QHX_PLAN_FORMAT));
        b |= put(root, "name", json_string(plan->name ? plan->name : "unnamed"));
        if (plan->description) b |= put(root, "description", json_string(plan->description));
        b |= put(root, "family", json_string(plan->family));
        b |= put(root, "host_op", json_string(plan->host_op));
        b |= put(root, "precision", json_string(qhx_precision_name(plan->precision)));
        b |= put(root, "max_context", json_integer(plan->max_context));
        if (plan->kv_cache) b |= put(root, "kv_cache", json_string(plan->kv_cache == QHX_KV_F16 ? "f16" : plan->kv_cache == QHX_KV_Q8 ? "q8" : "f32"));
        for (int r = 0; r < QHX_ART_ROLE_COUNT; r++)
            if (plan->artifacts[r].present) b |= put(arts, ROLE_NAMES[r], file_json(&plan->artifacts[r], ENTRY_ARTIFACT));
        b |= put(root, "artifacts", json_incref(arts));
        b |= put(root, "tokenizer", file_json(&plan->tokenizer, ENTRY_PLAIN));
        if (plan->preprocessor.present) b |= put(root, "preprocessor", file_json(&plan->preprocessor, ENTRY_PLAIN));

        json_t *ids = json_array();
        for (int i = 0; ids && i < plan->special.n_stop_ids; i++)
            b |= json_array_append_new(ids, json_integer(plan->special.stop_ids[i]));
        b |= put(st, "stop_ids", ids);
        for (int i = 1; TOKEN_KEYS[i]; i++) {
            int32_t v = *token_slot((qhx_plan_tokens *)&plan->special, i);
            if (v >= 0) b |= put(st, TOKEN_KEYS[i], json_integer(v));
        }
        b |= put(root, "special_tokens", json_incref(st));

        const qhx_plan_generation *g = &plan->generation;
        b |= put(gen, "temperature", json_real(g->temperature));
        b |= put(gen, "top_k", json_integer(g->top_k));
        b |= put(gen, "top_p", json_real(g->top_p));
        b |= put(gen, "min_p", json_real(g->min_p));
        b |= put(gen, "repetition_penalty", json_real(g->repetition_penalty));
        b |= put(gen, "max_new_tokens", json_integer(g->max_new_tokens));
        b |= put(gen, "thinking", json_boolean(g->thinking));
        b |= put(root, "generation", json_incref(gen));

        if (plan->model_config.present) {
            json_t *m = json_object();
            b |= put(m, "config", json_string(plan->model_config.file));
            b |= put(root, "model", m);
        } else if (plan->config) {
            b |= put(root, "model", json_deep_copy(plan->config));
        } else {
            b = 1;
        }
    }
    json_decref(arts);
    json_decref(st);
    json_decref(gen);
    if (b) {
        json_decref(root);
        qhx_fail(err, QHX_E_NOMEM, "%s: cannot build the manifest JSON", plan->label);
        return NULL;
    }
    return root;
}

/* Whether every real in v prints exactly with 15 significant digits (then the shorter,
 * human-friendly form is used; otherwise 17 digits, which always round-trip). */
static int reals_fit_15(const json_t *v) {
    if (json_is_real(v)) {
        char buf[40];
        double x = json_real_value(v);
        snprintf(buf, sizeof buf, "%.15g", x);
        return strtod(buf, NULL) == x;
    }
    if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++)
            if (!reals_fit_15(json_array_get(v, i))) return 0;
    } else if (json_is_object(v)) {
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x) if (!reals_fit_15(x)) return 0;
    }
    return 1;
}

qhx_status qhx_plan_write_json(const qhx_plan *plan, char **out, size_t *out_len, qhx_error *err) {
    *out = NULL;
    *out_len = 0;
    json_t *root = qhx_plan_to_json(plan, err);
    if (!root) return err ? err->code : QHX_E_NOMEM;
    size_t flags = JSON_INDENT(2) | JSON_REAL_PRECISION(reals_fit_15(root) ? 15 : 17);
    char *text = json_dumps(root, flags);
    json_decref(root);
    if (!text) return qhx_fail(err, QHX_E_NOMEM, "%s: cannot write the manifest JSON", plan->label);
    size_t n = strlen(text);
    char *buf = qhx_malloc(n + 2);
    if (!buf) {
        qhx_free(text); /* jansson allocates through the same funnel */
        return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", plan->label);
    }
    memcpy(buf, text, n);
    buf[n] = '\n';
    buf[n + 1] = '\0';
    qhx_free(text);
    *out = buf;
    *out_len = n + 1;
    return QHX_OK;
}

qhx_status qhx_plan_save(const qhx_plan *plan, const char *path, qhx_error *err) {
    char *text;
    size_t len;
    qhx_status rc = qhx_plan_write_json(plan, &text, &len, err);
    if (rc) return rc;
    qhx_out_file of;
    if ((rc = qhx_out_open(&of, path, 0666, err)) == QHX_OK) {
        if (fwrite(text, 1, len, of.f) != len) {
            rc = qhx_fail(err, QHX_E_IO, "%s: write failed: %s", path, strerror(errno));
            qhx_out_abort(&of);
        } else {
            rc = qhx_out_commit(&of, err);
        }
    }
    qhx_free(text);
    return rc;
}
