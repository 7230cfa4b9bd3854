/* forge/forge_gguf.c: a bundle from a GGUF file (docs/bundle.md, "From a GGUF file"): the file
 * itself (and its vision tower's) copied as they are, blocks untouched, beside the config its
 * keys make, the tokenizer its tokenizer.ggml.* keys make, and the run plans naming them. */
#include "forge/forge.h"
#include "forge/forge_internal.h"

#include "core/alloc.h"
#include "families/family.h"
#include "io/gguf.h"
#include "io/gguf_tok.h"
#include "io/manifest.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* tokenizer.json of the file's tokenizer.ggml.* keys, into the stage */
static qhx_status write_tokenizer(const forge_job *job, const char *gguf, qhx_error *err) {
    qhx_gguf *g = NULL;
    char *text = NULL;
    size_t len = 0;
    qhx_status rc = qhx_gguf_open(gguf, QHX_FILE_MAP, &g, err);
    if (rc == QHX_OK) rc = qhx_gguf_tokenizer_json(g, &text, &len, err);
    qhx_gguf_free(g);
    if (rc) return rc;
    json_error_t je;
    json_t *doc = json_loadb(text, len, 0, &je);
    qhx_free(text);
    if (!doc) return qhx_fail(err, QHX_E_INTERNAL, "%s: the tokenizer made of it does not parse: %s", gguf, je.text);
    return forge_write_json(job, "tokenizer.json", doc, err);
}

/* The plan the manifests write: the files by their names in the bundle. */
static qhx_status rename_files(qhx_plan *plan, const char *name, int64_t ctx, const char *mmproj, qhx_error *err) {
    qhx_free(plan->name);
    plan->name = qhx_strdup(name);
    qhx_status rc = plan->name ? QHX_OK : qhx_fail(err, QHX_E_NOMEM, "out of memory");
    /* the name is copied first: setting the artifact frees the path it comes from */
    char *weights = qhx_strdup(base_name(plan->artifacts[QHX_ART_WEIGHTS].path));
    if (rc == QHX_OK && !weights) rc = qhx_fail(err, QHX_E_NOMEM, "out of memory");
    if (rc == QHX_OK) rc = qhx_plan_set_artifact(plan, QHX_ART_WEIGHTS, weights, QHX_ART_GGUF, false, QHX_DTYPE_F32, err);
    qhx_free(weights);
    if (rc == QHX_OK && mmproj)
        rc = qhx_plan_set_artifact(plan, QHX_ART_VISION, base_name(mmproj), QHX_ART_GGUF, false, QHX_DTYPE_F32, err);
    if (rc == QHX_OK) rc = qhx_plan_set_file(plan, &plan->tokenizer, "tokenizer.json", err);
    if (rc == QHX_OK) rc = qhx_plan_set_file(plan, &plan->model_config, "config.json", err);
    if (rc == QHX_OK && plan->preprocessor.present) rc = qhx_plan_set_file(plan, &plan->preprocessor, "preprocessor_config.json", err);
    plan->max_context = ctx;
    return rc;
}

/* One manifest per host-op of the family (the image ones only with a tower), each read back. */
static qhx_status write_manifests(const forge_job *job, const qhx_family_desc *f, qhx_plan *plan, const char *name,
                                  int64_t ctx, bool tower, qhx_error *err) {
    snprintf(plan->family, sizeof plan->family, "%s", f->name);
    qhx_plan_file vision = plan->artifacts[QHX_ART_VISION];
    for (const qhx_family_host_op *op = f->host_ops; op->name; op++) {
        if (op->loop->images && !tower) continue;
        char file[200];
        snprintf(file, sizeof file, "%s-%s%lld.json", name, op->loop->images ? "vlm-" : "", (long long)ctx);
        snprintf(plan->host_op, sizeof plan->host_op, "%s", op->name);
        plan->artifacts[QHX_ART_VISION].present = op->loop->images && vision.present;
        char *path = forge_job_path(job, file);
        if (!path) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
        qhx_plan *check = NULL;
        qhx_status rc = qhx_plan_save(plan, path, err);
        if (rc == QHX_OK) rc = qhx_plan_open(path, &check, err);
        qhx_plan_free(check);
        qhx_free(path);
        if (rc) return rc;
        forge_job_log(job, "manifest %s", file);
    }
    plan->artifacts[QHX_ART_VISION].present = vision.present;
    return QHX_OK;
}

/* The bundle's name: --name, else the file's name without .gguf, lower-cased. */
static void bundle_name(const char *gguf, const qhx_forge_params *p, char *out, size_t cap) {
    const char *b = p->name ? p->name : base_name(gguf);
    size_t n = strlen(b);
    if (!p->name && n > 5 && !strcmp(b + n - 5, ".gguf")) n -= 5;
    if (n >= cap) n = cap - 1;
    for (size_t i = 0; i < n; i++) out[i] = p->name ? b[i] : (char)(b[i] >= 'A' && b[i] <= 'Z' ? b[i] + 32 : b[i]);
    out[n] = '\0';
}

qhx_status qhx_forge_gguf(const char *gguf, const char *out_dir, const qhx_forge_params *p, qhx_error *err) {
    forge_job job;
    memset(&job, 0, sizeof job);
    qhx_plan *plan = NULL;
    qhx_status rc = qhx_family_gguf_plan(gguf, p->mmproj, &plan, err);
    const qhx_family_desc *f = rc ? NULL : qhx_family_for_model_type(plan->model_type);
    if (rc == QHX_OK && !f) rc = qhx_fail(err, QHX_E_INTERNAL, "%s: no family reads model_type '%s'", gguf, plan->model_type);
    if (rc == QHX_OK) rc = qhx_plan_name_tokens(plan, f->special_names, err);
    if (rc) {
        qhx_plan_free(plan);
        return rc;
    }
    char name[QHX_PLAN_MAX_NAME + 1];
    bundle_name(gguf, p, name, sizeof name);
    /* the trained context (the file's <arch>.context_length), unless given: as a bundle from a
       checkpoint folder keeps it */
    const int64_t mpe = json_integer_value(json_object_get(plan->text_config, "max_position_embeddings"));
    int64_t ctx = p->max_context ? p->max_context : mpe > 0 ? mpe : QHX_PLAN_DEFAULT_CONTEXT;
    struct stat sg, sm;
    uint64_t total = stat(gguf, &sg) ? 0 : (uint64_t)sg.st_size;
    if (p->mmproj && !stat(p->mmproj, &sm)) total += (uint64_t)sm.st_size;
    const char *pre = plan->preprocessor.present ? plan->preprocessor.path : NULL;
    if ((rc = forge_job_begin(&job, out_dir, p, err))) goto done;
    job.total = total;
    if ((rc = forge_job_check_space(&job, total + (8u << 20), err))) goto done;
    forge_job_log(&job, "%s -> %s: the %s file as it is (%.2f GB)%s", gguf, out_dir, f->title, (double)total / 1e9,
                  p->mmproj ? ", with its vision tower" : "");
    if ((rc = forge_copy_file(&job, gguf, base_name(gguf), err)) || (rc = forge_job_tick(&job, (uint64_t)sg.st_size, err)))
        goto done;
    if (p->mmproj && ((rc = forge_copy_file(&job, p->mmproj, base_name(p->mmproj), err)) ||
                      (rc = forge_job_tick(&job, (uint64_t)sm.st_size, err))))
        goto done;
    if (pre && (rc = forge_copy_file(&job, pre, "preprocessor_config.json", err))) goto done;
    if ((rc = forge_write_json(&job, "config.json", json_incref(plan->config), err)) ||
        (rc = write_tokenizer(&job, gguf, err)))
        goto done;
    if ((rc = rename_files(plan, name, ctx, p->mmproj, err))) goto done;
    if ((rc = write_manifests(&job, f, plan, name, ctx, p->mmproj != NULL, err))) goto done;
    rc = forge_job_commit(&job, err);
done:
    qhx_plan_free(plan);
    forge_job_end(&job, err);
    return rc;
}
