/* io/plan_checkpoint.c: a run plan from a Hugging Face checkpoint folder (docs/manifest.md,
 * "Checkpoint folders"). */
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

/* One added token into the {text: id} table; the first id of a text wins. */
static qhx_status take_added_token(json_t *table, const char *content, int64_t id, qhx_error *err) {
    if (!content || id < 0 || id > INT32_MAX || json_object_get(table, content)) return QHX_OK;
    if (json_object_set_new(table, content, json_integer(id)))
        return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    return QHX_OK;
}

static qhx_status find_added_tokens(const char *dir, json_t *t, qhx_error *err) {
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
            if ((rc = take_added_token(t, json_string_value(json_object_get(v, "content")), id, err))) break;
        }
        json_decref(tc);
        return rc;
    }
    json_decref(tc);
    json_t *tj = NULL; /* fall back to tokenizer.json's added_tokens list */
    if ((rc = load_optional_json(dir, "tokenizer.json", &tj, err))) return rc;
    json_t *list = tj ? json_object_get(tj, "added_tokens") : NULL;
    for (size_t i = 0; json_is_array(list) && i < json_array_size(list) && !rc; i++) {
        json_t *e = json_array_get(list, i);
        json_t *id = json_object_get(e, "id");
        if (json_is_integer(id))
            rc = take_added_token(t, json_string_value(json_object_get(e, "content")), json_integer_value(id), err);
    }
    json_decref(tj);
    return rc;
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
        if (de->d_name[0] == '.' || !plan_has_suffix(de->d_name, ".safetensors")) continue;
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

qhx_status plan_file_set_size(qhx_plan_file *f) {
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
    if ((rc = plan_get_num_range(&c, gc, "", "temperature", 0, false, 100, &temperature))) return rc;
    g->temperature = do_sample ? temperature : 0.0;
    if ((rc = qhx_json_get_int(gc, "top_k", label, "", false, 0, (int64_t)1 << 24, &g->top_k, err)) ||
        (rc = plan_get_num_range(&c, gc, "", "top_p", 0, true, 1, &g->top_p)) ||
        (rc = plan_get_num_range(&c, gc, "", "min_p", 0, false, 1, &g->min_p)) ||
        (rc = plan_get_num_range(&c, gc, "", "repetition_penalty", 0, true, 100, &g->repetition_penalty)) ||
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
    if ((rc = plan_file_set_name(plan, &plan->model_config, "config.json", err))) return rc;
    cfg_path = plan->model_config.path;
    if (!(plan->config = qhx_json_load_file(cfg_path, err))) return err ? err->code : QHX_E_FORMAT;
    pctx cc = {cfg_path, err};
    if (!json_is_object(plan->config)) return plan_bad(&cc, QHX_E_FORMAT, "", "expected a JSON object");
    plan_file_set_size(&plan->model_config);
    if ((rc = plan_read_config_head(&cc, plan, plan->config, ""))) return rc;

    /* weights -> precision, whether a vision tower is there (the runtime picks the host-op) */
    if ((rc = find_weights(dir, &weights, err))) return rc;
    rc = qhx_plan_set_artifact(plan, QHX_ART_WEIGHTS, weights, QHX_ART_SAFETENSORS, false, QHX_DTYPE_F32, err);
    qhx_free(weights);
    if (rc) return rc;
    plan_file_set_size(&plan->artifacts[QHX_ART_WEIGHTS]);
    if ((rc = scan_weights(plan, &plan->vision_tensors, err))) return rc;
    plan->max_context = QHX_PLAN_DEFAULT_CONTEXT; /* the runtime caps it by the trained length */

    /* tokenizer, preprocessor */
    if ((rc = plan_file_set_name(plan, &plan->tokenizer, "tokenizer.json", err))) return rc;
    /* A checkpoint without tokenizer.json still runs on token ids; text calls then fail with
     * "the model has no tokenizer", and forge refuses it (a bundle needs one). */
    if (qhx_path_is_file(plan->tokenizer.path)) plan_file_set_size(&plan->tokenizer);
    else plan_file_clear(&plan->tokenizer);
    char *pp = qhx_path_join(dir, "preprocessor_config.json");
    if (!pp) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    int has_pp = qhx_path_is_file(pp);
    qhx_free(pp);
    if (has_pp) {
        if ((rc = plan_file_set_name(plan, &plan->preprocessor, "preprocessor_config.json", err))) return rc;
        plan_file_set_size(&plan->preprocessor);
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
    if (!(plan->added_tokens = json_object())) {
        rc = qhx_fail(err, QHX_E_NOMEM, "out of memory");
        goto done;
    }
    if ((rc = find_added_tokens(dir, plan->added_tokens, err))) goto done;
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
    if (gc && (rc = take_generation(plan, gc, gen_path, err))) goto done;

done:
    qhx_free(gen_path);
    json_decref(gc);
    return rc;
}

qhx_status qhx_plan_name_tokens(qhx_plan *plan, const qhx_plan_token_name *names, qhx_error *err) {
    if (plan->source != QHX_PLAN_FROM_CHECKPOINT) return QHX_OK;
    qhx_plan_tokens *t = &plan->special;
    const char *turn_end = NULL; /* the text of the "im_end" token, for the message */
    for (const qhx_plan_token_name *n = names; n && n->text; n++) {
        int k = 0;
        while (k < QHX_PLAN_N_TOKEN_IDS && strcmp(qhx_plan_token_key(k), n->key)) k++;
        if (k == QHX_PLAN_N_TOKEN_IDS)
            return qhx_fail(err, QHX_E_INTERNAL, "special token name '%s': '%s' is not a special_tokens key", n->text, n->key);
        if (!strcmp(n->key, "im_end")) turn_end = n->text;
        json_t *id = json_object_get(plan->added_tokens, n->text);
        int32_t *slot = plan_token_slot(t, k + 1);
        if (json_is_integer(id) && *slot < 0) *slot = (int32_t)json_integer_value(id);
    }
    if (t->n_stop_ids == 0 && t->im_end >= 0) t->stop_ids[t->n_stop_ids++] = t->im_end;
    if (t->n_stop_ids == 0)
        return qhx_fail(err, QHX_E_FORMAT, "%s: no stop tokens: neither generation_config.json nor config.json "
                        "gives an eos_token_id, and the tokenizer has no %s", plan->label,
                        turn_end ? turn_end : "end-of-turn token");
    return QHX_OK;
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
