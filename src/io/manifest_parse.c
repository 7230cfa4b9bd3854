/* io/manifest_parse.c: parsing a manifest (docs/manifest.md). Every message has the form
 * "<file>: <json.path>: <problem>". The parser validates the whole manifest before it touches
 * the filesystem, so qhx_plan_parse(..., base_dir = NULL, ...) is a pure function of its buffer
 * (the fuzz target). */
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

/* ==== manifest sections ==================================================================== */


/* {file, [format, dtype, shape, tensor_count,] bytes, sha256} at jpath. */
qhx_status plan_parse_file_entry(const pctx *c, qhx_plan *plan, const json_t *obj,
                                   const char *jpath, int kind, qhx_plan_file *f) {
    static const char *const art_keys[] = {"file", "format", "dtype", "shape", "tensor_count",
                                           "bytes", "sha256", NULL};
    static const char *const plain_keys[] = {"file", "bytes", "sha256", NULL};
    char p[300];
    qhx_status rc = plan_check_keys(c, obj, jpath, kind == ENTRY_ARTIFACT ? art_keys : plain_keys);
    if (rc != QHX_OK) return rc;
    const char *file = NULL;
    if ((rc = plan_get_string(c, obj, jpath, "file", true, QHX_PLAN_MAX_PATH, &file)) != QHX_OK) return rc;
    if ((rc = plan_check_rel_path(c, plan_jp(p, sizeof p, jpath, "file"), file)) != QHX_OK) return rc;
    if ((rc = plan_file_set_name(plan, f, file, c->err)) != QHX_OK) return rc;

    int64_t bytes = -1;
    if ((rc = qhx_json_get_int(obj, "bytes", c->label, jpath, false, 0, (int64_t)1 << 53, &bytes,
                               c->err)) != QHX_OK)
        return rc;
    f->bytes = bytes;
    const char *sha = NULL;
    if ((rc = plan_get_string(c, obj, jpath, "sha256", false, 64, &sha)) != QHX_OK) return rc;
    if (sha) {
        if (!plan_is_hex64(sha))
            return plan_bad(c, QHX_E_FORMAT, plan_jp(p, sizeof p, jpath, "sha256"), "expected 64 hex digits");
        for (int i = 0; i < 64; i++) f->sha256[i] = (char)tolower((unsigned char)sha[i]);
        f->sha256[64] = '\0';
    }
    if (kind != ENTRY_ARTIFACT) return QHX_OK;

    const char *format = NULL;
    if ((rc = plan_get_string(c, obj, jpath, "format", true, 32, &format)) != QHX_OK) return rc;
    int fi = plan_name_index(PLAN_FORMAT_NAMES, QHX_ART_FORMAT_COUNT, format);
    if (fi < 0)
        return plan_bad(c, QHX_E_UNSUPPORTED, plan_jp(p, sizeof p, jpath, "format"),
                   "unknown artifact format '%s' (expected safetensors, raw or gguf)", format);
    f->format = (qhx_art_format)fi;

    const char *dtype = NULL;
    if ((rc = plan_get_string(c, obj, jpath, "dtype", false, 16, &dtype)) != QHX_OK) return rc;
    if (dtype) {
        if (qhx_dtype_from_name(dtype, &f->dtype) != 0)
            return plan_bad(c, QHX_E_UNSUPPORTED, plan_jp(p, sizeof p, jpath, "dtype"),
                       "unknown dtype '%s' (safetensors names: F32, F16, BF16, I8, ...)", dtype);
        f->has_dtype = true;
    }
    int64_t count = -1;
    if ((rc = qhx_json_get_int(obj, "tensor_count", c->label, jpath, false, 0, QHX_ST_MAX_TENSORS,
                               &count, c->err)) != QHX_OK)
        return rc;
    f->tensor_count = count;

    json_t *shape = json_object_get(obj, "shape");
    if (f->format == QHX_ART_GGUF) {
        if (shape || count >= 0 || dtype)
            return plan_bad(c, QHX_E_FORMAT, jpath, "a gguf artifact has no shape, tensor_count or dtype (the file says)");
        return QHX_OK;
    }
    if (f->format == QHX_ART_SAFETENSORS) {
        if (shape) return plan_bad(c, QHX_E_FORMAT, plan_jp(p, sizeof p, jpath, "shape"), "only raw artifacts have a shape");
        return QHX_OK;
    }
    /* raw: one tensor, dtype and shape required, size implied */
    if (count >= 0)
        return plan_bad(c, QHX_E_FORMAT, plan_jp(p, sizeof p, jpath, "tensor_count"), "only safetensors artifacts have a tensor count");
    if (!dtype) return plan_bad(c, QHX_E_FORMAT, plan_jp(p, sizeof p, jpath, "dtype"), "missing (raw artifacts need one)");
    if (!shape) return plan_bad(c, QHX_E_FORMAT, plan_jp(p, sizeof p, jpath, "shape"), "missing (raw artifacts need one)");
    if (!json_is_array(shape)) return plan_bad(c, QHX_E_FORMAT, plan_jp(p, sizeof p, jpath, "shape"), "expected an array of integers");
    size_t rank = json_array_size(shape);
    if (rank < 1 || rank > QHX_ST_MAX_RANK)
        return plan_bad(c, QHX_E_LIMIT, plan_jp(p, sizeof p, jpath, "shape"), "rank %zu, allowed 1..%d", rank, QHX_ST_MAX_RANK);
    size_t total = qhx_dtype_size(f->dtype);
    for (size_t d = 0; d < rank; d++) {
        json_t *x = json_array_get(shape, d);
        if (!json_is_integer(x) || json_integer_value(x) < 0)
            return plan_bad(c, QHX_E_FORMAT, plan_jp(p, sizeof p, jpath, "shape"), "[%zu]: expected a non-negative integer", d);
        f->shape[d] = json_integer_value(x);
        if (!qhx_size_mul(total, (size_t)f->shape[d], &total) || total > ((size_t)1 << 53))
            return plan_bad(c, QHX_E_LIMIT, plan_jp(p, sizeof p, jpath, "shape"), "the tensor size overflows");
    }
    f->n_dims = (int)rank;
    if (bytes >= 0 && (uint64_t)bytes != (uint64_t)total)
        return plan_bad(c, QHX_E_FORMAT, plan_jp(p, sizeof p, jpath, "bytes"),
                   "%lld, but a %s tensor of this shape has %zu bytes", (long long)bytes, dtype, total);
    f->bytes = (int64_t)total;
    return QHX_OK;
}

static qhx_status parse_artifacts(const pctx *c, qhx_plan *plan, const json_t *arts) {
    static const char *const keys[] = {"weights", "embedding", "lm_head", "vision", "mtp", NULL};
    qhx_status rc = plan_check_keys(c, arts, "artifacts", keys);
    if (rc != QHX_OK) return rc;
    for (int r = 0; r < QHX_ART_ROLE_COUNT; r++) {
        json_t *a;
        if ((rc = plan_need_object(c, arts, "artifacts", PLAN_ROLE_NAMES[r], r == QHX_ART_WEIGHTS, &a)) != QHX_OK) return rc;
        if (!a) continue;
        char p[64];
        plan_jp(p, sizeof p, "artifacts", PLAN_ROLE_NAMES[r]);
        if ((rc = plan_parse_file_entry(c, plan, a, p, ENTRY_ARTIFACT, &plan->artifacts[r])) != QHX_OK) return rc;
    }
    /* a GGUF file holds the whole decoder (and an mmproj file the whole tower): gguf weights
     * take no embedding, lm_head or mtp artifact beside them, and only they take a gguf tower */
    const bool gguf = plan->artifacts[QHX_ART_WEIGHTS].format == QHX_ART_GGUF;
    for (int r = 1; r < QHX_ART_ROLE_COUNT; r++) {
        const qhx_plan_file *f = &plan->artifacts[r];
        if (!f->present) continue;
        if (gguf && r != QHX_ART_VISION)
            return plan_bad(c, QHX_E_FORMAT, "artifacts", "gguf weights hold the whole decoder: no '%s' artifact beside them",
                            PLAN_ROLE_NAMES[r]);
        if (gguf != (f->format == QHX_ART_GGUF))
            return plan_bad(c, QHX_E_FORMAT, "artifacts", "'%s' and 'weights' are gguf together or not at all", PLAN_ROLE_NAMES[r]);
    }
    return QHX_OK;
}


static qhx_status parse_special(const pctx *c, qhx_plan *plan, const json_t *st) {
    qhx_status rc = plan_check_keys(c, st, "special_tokens", PLAN_TOKEN_KEYS);
    if (rc != QHX_OK) return rc;
    qhx_plan_tokens *t = &plan->special;
    json_t *ids = json_object_get(st, "stop_ids");
    if (!ids || json_is_null(ids)) return plan_bad(c, QHX_E_FORMAT, "special_tokens.stop_ids", "missing");
    if (!json_is_array(ids)) return plan_bad(c, QHX_E_FORMAT, "special_tokens.stop_ids", "expected an array of token ids");
    size_t n = json_array_size(ids);
    if (n < 1) return plan_bad(c, QHX_E_FORMAT, "special_tokens.stop_ids", "empty (at least one stop id is needed)");
    if (n > QHX_PLAN_MAX_STOP_IDS)
        return plan_bad(c, QHX_E_LIMIT, "special_tokens.stop_ids", "%zu ids, the limit is %d", n, QHX_PLAN_MAX_STOP_IDS);
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(ids, i);
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > INT32_MAX)
            return plan_bad(c, QHX_E_FORMAT, "special_tokens.stop_ids", "[%zu]: expected a token id (integer 0..%d)", i, INT32_MAX);
        int32_t id = (int32_t)json_integer_value(x);
        for (size_t j = 0; j < i; j++)
            if (t->stop_ids[j] == id)
                return plan_bad(c, QHX_E_FORMAT, "special_tokens.stop_ids", "[%zu]: %d is listed twice", i, id);
        t->stop_ids[i] = id;
    }
    t->n_stop_ids = (int)n;
    for (int i = 1; PLAN_TOKEN_KEYS[i]; i++) {
        int64_t v = -1;
        if ((rc = qhx_json_get_int(st, PLAN_TOKEN_KEYS[i], c->label, "special_tokens", false, 0, INT32_MAX,
                                   &v, c->err)) != QHX_OK)
            return rc;
        *plan_token_slot(t, i) = (int32_t)v;
    }
    return QHX_OK;
}

static qhx_status parse_generation(const pctx *c, qhx_plan *plan, const json_t *g) {
    static const char *const keys[] = {"temperature", "top_k", "top_p", "min_p", "repetition_penalty",
                                       "max_new_tokens", "thinking", NULL};
    qhx_plan_generation *d = &plan->generation;
    qhx_status rc;
    if ((rc = plan_check_keys(c, g, "generation", keys)) != QHX_OK) return rc;
    if ((rc = plan_get_num_range(c, g, "generation", "temperature", 0, false, 100, &d->temperature)) != QHX_OK) return rc;
    if ((rc = qhx_json_get_int(g, "top_k", c->label, "generation", false, 0, (int64_t)1 << 24, &d->top_k, c->err)) != QHX_OK) return rc;
    if ((rc = plan_get_num_range(c, g, "generation", "top_p", 0, true, 1, &d->top_p)) != QHX_OK) return rc;
    if ((rc = plan_get_num_range(c, g, "generation", "min_p", 0, false, 1, &d->min_p)) != QHX_OK) return rc;
    if ((rc = plan_get_num_range(c, g, "generation", "repetition_penalty", 0, true, 100, &d->repetition_penalty)) != QHX_OK) return rc;
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
qhx_status plan_read_config_head(const pctx *c, qhx_plan *plan, const json_t *config, const char *prefix) {
    qhx_status rc;
    const char *mt = NULL;
    if ((rc = plan_get_string(c, config, prefix, "model_type", true, sizeof plan->model_type - 1, &mt)) != QHX_OK) return rc;
    snprintf(plan->model_type, sizeof plan->model_type, "%s", mt);
    json_t *text = NULL;
    if ((rc = plan_need_object(c, config, prefix, "text_config", false, &text)) != QHX_OK) return rc;
    plan->text_config = text ? text : config;
    json_t *vc = NULL;
    if ((rc = plan_need_object(c, config, prefix, "vision_config", false, &vc)) != QHX_OK) return rc;
    plan->has_vision_config = vc != NULL;
    return QHX_OK;
}

/* ==== cross-checks and files =============================================================== */

/* The file exists as a regular file (symlinks followed) with the expected size. */
qhx_status plan_check_file(const pctx *c, const qhx_plan_file *f, const char *jpath) {
    if (!f->present || !f->path) return QHX_OK;
    struct stat st;
    char p[300];
    if (stat(f->path, &st) != 0)
        return plan_bad(c, QHX_E_IO, plan_jp(p, sizeof p, jpath, "file"), "cannot open '%s': %s", f->path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return plan_bad(c, QHX_E_IO, plan_jp(p, sizeof p, jpath, "file"), "'%s' is not a regular file", f->path);
    if (f->bytes >= 0 && (int64_t)st.st_size != f->bytes)
        return plan_bad(c, QHX_E_FORMAT, plan_jp(p, sizeof p, jpath, "bytes"), "%lld, but '%s' has %lld bytes",
                   (long long)f->bytes, f->path, (long long)st.st_size);
    return QHX_OK;
}

/* A bundle's file must really be in the bundle: a symbolic link (the file itself or a folder on
 * its way) that leads outside the bundle folder is refused, so a manifest never makes the
 * runtime read, or quote in an error, a file elsewhere. (Checkpoint folders are not held to
 * this: the Hugging Face cache links every snapshot file to a blob outside it.) */
/* 1 when path resolves to something outside base_dir (0 inside, or when it does not resolve:
 * the existence checks report that). */
int plan_leads_outside(const char *base_dir, const char *path) {
    char *dir = realpath(base_dir, NULL), *real = realpath(path, NULL); /* libc malloc */
    size_t n = dir ? strlen(dir) : 0;
    int inside = dir && real && !strncmp(real, dir, n) && (real[n] == '/' || (n == 1 && dir[0] == '/'));
    int outside = real && !inside;
    free(dir);
    free(real);
    return outside;
}

qhx_status plan_check_inside(const pctx *c, const qhx_plan *plan, const qhx_plan_file *f, const char *jpath) {
    if (!f->present || !f->path || !plan->base_dir || !plan_leads_outside(plan->base_dir, f->path)) return QHX_OK;
    char p[300];
    return plan_bad(c, QHX_E_IO, plan_jp(p, sizeof p, jpath, "file"),
               "'%s' is a symbolic link leading outside the bundle folder (refused)", f->file);
}

static qhx_status check_files(const pctx *c, const qhx_plan *plan) {
    qhx_status rc;
    for (int r = 0; r < QHX_ART_ROLE_COUNT; r++) {
        char p[64];
        plan_jp(p, sizeof p, "artifacts", PLAN_ROLE_NAMES[r]);
        if ((rc = plan_check_file(c, &plan->artifacts[r], p)) || (rc = plan_check_inside(c, plan, &plan->artifacts[r], p)))
            return rc;
    }
    if ((rc = plan_check_file(c, &plan->tokenizer, "tokenizer")) || (rc = plan_check_inside(c, plan, &plan->tokenizer, "tokenizer")))
        return rc;
    if ((rc = plan_check_file(c, &plan->preprocessor, "preprocessor")) ||
        (rc = plan_check_inside(c, plan, &plan->preprocessor, "preprocessor")))
        return rc;
    return QHX_OK;
}

/* ==== parsing a manifest =================================================================== */

static qhx_status parse_root(const pctx *c, qhx_plan *plan, const json_t *root) {
    static const char *const keys[] = {"format", "name", "description", "family", "host_op",
                                       "precision", "max_context", "kv_cache", "artifacts", "tokenizer",
                                       "preprocessor", "special_tokens", "generation", "model", NULL};
    qhx_status rc;
    if (!json_is_object(root)) return plan_bad(c, QHX_E_FORMAT, "", "a manifest must be a JSON object");

    /* The version first: a newer manifest may legitimately carry keys this build does not know. */
    const char *format = NULL;
    json_t *fv = json_object_get(root, "format");
    if (!fv && json_object_get(root, "model_type"))
        return plan_bad(c, QHX_E_FORMAT, "format",
                   "missing (this looks like a Hugging Face config.json: open its folder instead)");
    if ((rc = plan_get_string(c, root, "", "format", true, 64, &format))) return rc;
    if (strncmp(format, "qhexrt/", 7) != 0)
        return plan_bad(c, QHX_E_FORMAT, "format", "'%s' is not a qhexrt manifest format (expected \"%s\")", format,
                   QHX_PLAN_FORMAT);
    if (strcmp(format, QHX_PLAN_FORMAT) != 0)
        return plan_bad(c, QHX_E_UNSUPPORTED, "format", "unsupported version '%s' (this build reads %s)", format,
                   QHX_PLAN_FORMAT);
    if ((rc = plan_check_keys(c, root, "", keys))) return rc;

    const char *s = NULL;
    if ((rc = plan_get_string(c, root, "", "name", true, QHX_PLAN_MAX_NAME, &s))) return rc;
    if (!s[0]) return plan_bad(c, QHX_E_FORMAT, "name", "empty");
    if (!(plan->name = qhx_strdup(s))) return qhx_fail(c->err, QHX_E_NOMEM, "%s: out of memory", c->label);
    s = NULL;
    if ((rc = plan_get_string(c, root, "", "description", false, 4096, &s))) return rc;
    if (s && !(plan->description = qhx_strdup(s))) return qhx_fail(c->err, QHX_E_NOMEM, "%s: out of memory", c->label);

    /* family and host-op are names here; the runtime resolves them (families/registry.c) */
    if ((rc = plan_get_ident(c, root, "family", plan->family, sizeof plan->family)) ||
        (rc = plan_get_ident(c, root, "host_op", plan->host_op, sizeof plan->host_op)))
        return rc;
    if ((rc = plan_get_string(c, root, "", "precision", true, 16, &s))) return rc;
    if (qhx_precision_from_name(s, &plan->precision) != 0)
        return plan_bad(c, QHX_E_UNSUPPORTED, "precision", "unknown precision '%s' (expected f32, bf16, f16, w8 or q4)", s);
    if ((rc = qhx_json_get_int(root, "max_context", c->label, "", true, 1, QHX_PLAN_MAX_CONTEXT,
                               &plan->max_context, c->err)))
        return rc;
    s = NULL;
    if ((rc = plan_get_string(c, root, "", "kv_cache", false, 16, &s))) return rc;
    if (s && plan_kv_cache_from_name(s, &plan->kv_cache) != 0)
        return plan_bad(c, QHX_E_UNSUPPORTED, "kv_cache", "unknown KV cache type '%s' (expected f32, f16 or q8)", s);

    json_t *o;
    if ((rc = plan_need_object(c, root, "", "artifacts", true, &o)) || (rc = parse_artifacts(c, plan, o))) return rc;
    if ((rc = plan_need_object(c, root, "", "tokenizer", true, &o)) ||
        (rc = plan_parse_file_entry(c, plan, o, "tokenizer", ENTRY_PLAIN, &plan->tokenizer)))
        return rc;
    if ((rc = plan_need_object(c, root, "", "preprocessor", false, &o))) return rc;
    if (o && (rc = plan_parse_file_entry(c, plan, o, "preprocessor", ENTRY_PLAIN, &plan->preprocessor))) return rc;
    if ((rc = plan_need_object(c, root, "", "special_tokens", true, &o)) || (rc = parse_special(c, plan, o))) return rc;
    if ((rc = plan_need_object(c, root, "", "generation", false, &o))) return rc;
    if (o && (rc = parse_generation(c, plan, o))) return rc;

    /* model: {"config": FILE} or an inline Hugging Face config object */
    json_t *m;
    if ((rc = plan_need_object(c, root, "", "model", true, &m))) return rc;
    if (json_object_get(m, "config")) {
        static const char *const mkeys[] = {"config", NULL};
        if ((rc = plan_check_keys(c, m, "model", mkeys))) return rc;
        if ((rc = plan_get_string(c, m, "model", "config", true, QHX_PLAN_MAX_PATH, &s))) return rc;
        if ((rc = plan_check_rel_path(c, "model.config", s))) return rc;
        if ((rc = plan_file_set_name(plan, &plan->model_config, s, c->err))) return rc;
    } else {
        plan->config = json_incref(m);
        if ((rc = plan_read_config_head(c, plan, m, "model"))) return rc;
    }
    return QHX_OK;
}

/* Load the model config file named by the plan (base_dir set). */
static qhx_status load_model_config(const pctx *c, qhx_plan *plan) {
    if (!plan->model_config.present || !plan->model_config.path) return QHX_OK;
    qhx_status rc = plan_check_file(c, &plan->model_config, "model.config");
    if (rc == QHX_OK) rc = plan_check_inside(c, plan, &plan->model_config, "model.config");
    if (rc) return rc;
    plan->config = qhx_json_load_file(plan->model_config.path, c->err);
    if (!plan->config) return c->err ? c->err->code : QHX_E_FORMAT;
    pctx cc = {plan->model_config.path, c->err};
    if (!json_is_object(plan->config)) return plan_bad(&cc, QHX_E_FORMAT, "", "expected a JSON object");
    return plan_read_config_head(&cc, plan, plan->config, "");
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
