/* cli_dev.c: the developer commands' shared pieces: tokenizer loading from any path, the
 * whole-or-nothing output files, an image announced with prompt ids. */
#include "cli_dev.h"

#include "core/alloc.h"
#include "core/status.h"
#include "families/family.h"
#include "io/manifest.h"
#include "text/tokenizer.h"

#include <string.h>

/* A manifest or bundle: the run plan knows where its tokenizer is. */
static qhx_status tokenizer_of_plan(const char *path, struct qhx_tok **out, qhx_error *err) {
    qhx_plan *plan = NULL;
    qhx_status rc = qhx_plan_open(path, &plan, err);
    if (rc == QHX_OK && !(plan->tokenizer.present && plan->tokenizer.path))
        rc = qhx_fail(err, QHX_E_FORMAT, "%s: the run plan names no tokenizer", path);
    if (rc == QHX_OK) rc = qhx_tok_load(plan->tokenizer.path, out, err);
    qhx_plan_free(plan);
    return rc;
}

qhx_status qhx_cli_load_tokenizer(const char *path, struct qhx_tok **out, qhx_error *err) {
    *out = NULL;
    if (qhx_gguf_path_has_magic(path)) return qhx_family_gguf_tokenizer(path, out, err);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    int is_json = n > 5 && !strcmp(base + n - 5, ".json");
    if (qhx_path_is_dir(path)) {
        char *tj = qhx_path_join(path, "tokenizer.json");
        char *tb = qhx_path_join(path, "tokenizer.qhxtok");
        int direct = (tj && qhx_path_is_file(tj)) || (tb && qhx_path_is_file(tb));
        qhx_free(tj);
        qhx_free(tb);
        return direct ? qhx_tok_load(path, out, err) : tokenizer_of_plan(path, out, err);
    }
    if (is_json && strcmp(base, "tokenizer.json")) {
        /* a manifest declares its format; anything else is taken as a tokenizer file */
        char *head = NULL;
        size_t len = 0;
        if (qhx_file_read_all(path, (size_t)1 << 20, &head, &len, NULL) == QHX_OK && strstr(head, "\"qhexrt/")) {
            qhx_free(head);
            return tokenizer_of_plan(path, out, err);
        }
        qhx_free(head);
    }
    return qhx_tok_load(path, out, err);
}

/* ---- whole-or-nothing output files ---------------------------------------------------------- */

qhx_status qhx_cli_out_open(qhx_cli_out *o, const char *path, qhx_error *err) {
    memset(o, 0, sizeof *o);
    qhx_status rc = qhx_out_open(&o->file, path, 0666, err);
    o->f = o->file.f;
    qhx_cli_live_set(o->file.tmp);
    return rc;
}

qhx_status qhx_cli_out_commit(qhx_cli_out *o, qhx_error *err) {
    o->f = NULL;
    qhx_status rc = qhx_out_commit(&o->file, err);
    qhx_cli_live_set(NULL);
    return rc;
}

void qhx_cli_out_abort(qhx_cli_out *o) {
    o->f = NULL;
    qhx_out_abort(&o->file);
    qhx_cli_live_set(NULL);
}

qhx_status qhx_cli_attach_images(const qhx_model *m, qhx_session *s, const char *const *paths, int n_paths,
                                 const int32_t *ids, int64_t n, qhx_image_embed *ims, qhx_error *err) {
    if (n_paths > 0) {
        if (!qhx_model_takes_images(m))
            return qhx_fail(err, QHX_E_UNSUPPORTED, "--image needs a model whose run plan takes images (%s takes none)",
                            qhx_model_host_op(m));
        qhx_status rc = qhx_model_images_load(m, paths, n_paths, 0, ims, err);
        if (rc) return rc;
    }
    return qhx_model_state_attach(qhx_session_state(s), ims, n_paths, ids, n, err);
}
