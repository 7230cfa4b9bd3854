/* io/manifest_write.c: a plan as manifest JSON, in the canonical key order of
 * docs/manifest.md. */
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

/* ==== writing ============================================================================== */

/* json_object_set_new that reports failure (jansson returns -1 on allocation failure). */
static int put(json_t *obj, const char *key, json_t *v) { return v ? json_object_set_new(obj, key, v) : -1; }

static json_t *file_json(const qhx_plan_file *f, int kind) {
    json_t *o = json_object();
    if (!o) return NULL;
    int bad_ = put(o, "file", json_string(f->file));
    if (kind == ENTRY_ARTIFACT) {
        bad_ |= put(o, "format", json_string(PLAN_FORMAT_NAMES[f->format]));
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
            if (plan->artifacts[r].present) b |= put(arts, PLAN_ROLE_NAMES[r], file_json(&plan->artifacts[r], ENTRY_ARTIFACT));
        b |= put(root, "artifacts", json_incref(arts));
        b |= put(root, "tokenizer", file_json(&plan->tokenizer, ENTRY_PLAIN));
        if (plan->preprocessor.present) b |= put(root, "preprocessor", file_json(&plan->preprocessor, ENTRY_PLAIN));

        json_t *ids = json_array();
        for (int i = 0; ids && i < plan->special.n_stop_ids; i++)
            b |= json_array_append_new(ids, json_integer(plan->special.stop_ids[i]));
        b |= put(st, "stop_ids", ids);
        for (int i = 1; PLAN_TOKEN_KEYS[i]; i++) {
            int32_t v = *plan_token_slot((qhx_plan_tokens *)&plan->special, i);
            if (v >= 0) b |= put(st, PLAN_TOKEN_KEYS[i], json_integer(v));
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
