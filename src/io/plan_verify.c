/* io/plan_verify.c: checking a plan's files beyond existence: safetensors headers, raw sizes,
 * hashes. */
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
    if ((rc = plan_check_file(&c, f, jpath))) return rc;
    int bundle = plan->source == QHX_PLAN_FROM_MANIFEST;
    if ((flags & QHX_PLAN_VERIFY_HEADERS) && f->format == QHX_ART_SAFETENSORS &&
        (f->tensor_count >= 0 || f->has_dtype || is_weights || bundle)) {
        qhx_st_set *set;
        if ((rc = qhx_st_open(f->path, &set, err))) return rc;
        for (int i = 0; bundle && i < qhx_st_n_files(set); i++) /* the shards of an index too */
            if (plan_leads_outside(plan->base_dir, qhx_st_file_path(set, i))) {
                rc = plan_bad(&c, QHX_E_IO, plan_jp(p, sizeof p, jpath, "file"),
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
            return plan_bad(&c, QHX_E_FORMAT, plan_jp(p, sizeof p, jpath, "tensor_count"), "%lld, but '%s' has %lld tensors",
                       (long long)f->tensor_count, f->file, (long long)n);
        if (f->has_dtype && n > 0 && (qhx_dtype)best != f->dtype)
            return plan_bad(&c, QHX_E_FORMAT, plan_jp(p, sizeof p, jpath, "dtype"), "%s, but most bytes of '%s' are %s",
                       qhx_dtype_name(f->dtype), f->file, qhx_dtype_name((qhx_dtype)best));
        if (is_weights && n > 0 && (unsigned)plan->precision < QHX_PREC_COUNT &&
            (qhx_dtype)best != PRECISION_DTYPE[plan->precision])
            return plan_bad(&c, QHX_E_FORMAT, "precision", "'%s', but most bytes of '%s' are %s (%s weights)",
                       qhx_precision_name(plan->precision), f->file, qhx_dtype_name((qhx_dtype)best),
                       precision_of_dtype((qhx_dtype)best));
    }
    if ((flags & QHX_PLAN_VERIFY_HEADERS) && f->format == QHX_ART_RAW) {
        struct stat st;
        if (stat(f->path, &st) == 0 && (int64_t)st.st_size != f->bytes)
            return plan_bad(&c, QHX_E_FORMAT, plan_jp(p, sizeof p, jpath, "shape"), "needs %lld bytes, but '%s' has %lld",
                       (long long)f->bytes, f->file, (long long)st.st_size);
    }
    if ((flags & QHX_PLAN_VERIFY_SHA256) && f->sha256[0]) {
        char hex[65];
        if ((rc = qhx_sha256_file(f->path, hex, err))) return rc;
        if (strcmp(hex, f->sha256) != 0)
            return plan_bad(&c, QHX_E_FORMAT, plan_jp(p, sizeof p, jpath, "sha256"), "'%s' hashes to %s", f->file, hex);
    }
    return QHX_OK;
}

qhx_status qhx_plan_verify(const qhx_plan *plan, unsigned flags, qhx_error *err) {
    if (!plan->base_dir) return qhx_fail(err, QHX_E_ARG, "%s: the plan has no folder to check files in", plan->label);
    qhx_status rc;
    for (int r = 0; r < QHX_ART_ROLE_COUNT; r++) {
        if (!plan->artifacts[r].present) continue;
        char p[64];
        if ((rc = verify_artifact(plan, &plan->artifacts[r], plan_jp(p, sizeof p, "artifacts", PLAN_ROLE_NAMES[r]), flags,
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
