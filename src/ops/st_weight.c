/* io/st_weight: recognise plain, Q8 and Q4 matrices in a safetensors set (see st_weight.h). */
#include "ops/st_weight.h"

#include "kernels/gguf_quant.h"
#include "kernels/quant.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static int has_suffix(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !memcmp(s + a - b, suf, b);
}

int qhx_st_is_side_tensor(const char *name) {
    return has_suffix(name, QHX_QSCALE_SUFFIX) || has_suffix(name, QHX_QMIN_SUFFIX) || has_suffix(name, QHX_QHIGH_SUFFIX) ||
           has_suffix(name, QHX_QSUPER_SUFFIX) || has_suffix(name, QHX_QSUB_SUFFIX);
}

static qhx_status check_align(const qhx_st_set *set, const qhx_st_tensor *t, size_t align, qhx_error *err) {
    if ((uintptr_t)t->data % align == 0) return QHX_OK;
    return qhx_fail(err, QHX_E_UNSUPPORTED,
                    "%s: tensor '%s': data at byte %llu is not %zu-byte aligned; copy it to aligned memory",
                    qhx_st_file_path(set, t->file_index), t->name, (unsigned long long)t->offset, align);
}

static qhx_status not_finite(const qhx_st_set *set, const qhx_st_tensor *sc, int64_t i, qhx_error *err) {
    return qhx_fail(err, QHX_E_FORMAT, "%s: tensor '%s': element %lld is not finite",
                    qhx_st_file_path(set, sc->file_index), sc->name, (long long)i);
}

/* The f16 group scales of a Q4 matrix t (rows R, C columns): `side` F16 [R, C / group] with an
 * even group. Q4 scales in F32 are the format of bundles forged before f16 scales: refused by
 * name, so the message says what to do. */
static qhx_status get_q4_scales(const qhx_st_set *set, const qhx_st_tensor *t, const char *side, int64_t R,
                                int64_t C, const qhx_st_tensor **sc, int64_t *group, qhx_error *err) {
    const char *file = qhx_st_file_path(set, t->file_index);
    const qhx_st_tensor *old = qhx_st_find(set, side);
    if (old && old->dtype == QHX_DTYPE_F32)
        return qhx_fail(err, QHX_E_FORMAT,
                        "%s: tensor '%s': Q4 group scales in F32 are the format of older bundles (now F16); "
                        "forge the bundle again",
                        file, side);
    qhx_status rc = qhx_st_get(set, side, QHX_DT_BIT(QHX_DTYPE_F16), 2, (int64_t[]){R, -1}, sc, err);
    if (rc != QHX_OK) return rc;
    int64_t ng = (*sc)->shape[1];
    if (ng <= 0 || C % ng || (C / ng) % 2)
        return qhx_fail(err, QHX_E_FORMAT, "%s: tensor '%s': %lld columns do not split into %lld groups of an even size",
                        file, side, (long long)C, (long long)ng);
    *group = C / ng;
    return QHX_OK;
}

/* A U8 matrix with "<name>.qhigh" is Q6: the high plane U8 [R, C / 4], groups a multiple of 4. */
static qhx_status get_q6_high(const qhx_st_set *set, const char *name, int64_t R, int64_t C, qhx_weight *out,
                              qhx_error *err) {
    char hname[QHX_ST_MAX_NAME + 16];
    snprintf(hname, sizeof hname, "%s%s", name, QHX_QHIGH_SUFFIX);
    if (!qhx_st_find(set, hname)) return QHX_OK;
    const qhx_st_tensor *h;
    qhx_status rc = qhx_st_get(set, hname, QHX_DT_BIT(QHX_DTYPE_U8), 2, (int64_t[]){R, C / 4}, &h, err);
    if (rc != QHX_OK) return rc;
    if (C % 4 || out->group % 4)
        return qhx_fail(err, QHX_E_FORMAT, "%s: tensor '%s': Q6 needs groups of a multiple of 4 values, not %lld",
                        qhx_st_file_path(set, h->file_index), hname, (long long)out->group);
    out->fmt = QHX_W_Q6;
    out->high = h->data;
    return QHX_OK;
}

/* A U8 matrix with "<name>.qsub" is Q4A: "<name>.qsuper" F16 [R, ceil(C / 256)] (returned in
 * *sc, checked finite by the caller) and "<name>.qsub" U8 [R, C / 16], C a multiple of 32. */
static qhx_status get_q4a(const qhx_st_set *set, const char *name, int64_t R, int64_t C, const qhx_st_tensor **sc,
                          qhx_weight *out, qhx_error *err) {
    char sname[QHX_ST_MAX_NAME + 16], qname[QHX_ST_MAX_NAME + 16];
    snprintf(sname, sizeof sname, "%s%s", name, QHX_QSUPER_SUFFIX);
    snprintf(qname, sizeof qname, "%s%s", name, QHX_QSUB_SUFFIX);
    const qhx_st_tensor *sub;
    if (C % QHX_Q4A_GROUP)
        return qhx_fail(err, QHX_E_FORMAT, "tensor '%s': Q4A needs a multiple of %d columns, not %lld", name,
                        QHX_Q4A_GROUP, (long long)C);
    qhx_status rc = qhx_st_get(set, qname, QHX_DT_BIT(QHX_DTYPE_U8), 2, (int64_t[]){R, qhx_q4a_row_sub_bytes(C)}, &sub, err);
    if (rc == QHX_OK)
        rc = qhx_st_get(set, sname, QHX_DT_BIT(QHX_DTYPE_F16), 2, (int64_t[]){R, qhx_q4a_row_supers(C)}, sc, err);
    if (rc != QHX_OK) return rc;
    out->fmt = QHX_W_Q4A;
    out->group = QHX_Q4A_GROUP;
    out->sub = sub->data;
    return QHX_OK;
}

qhx_status qhx_st_get_weight(const qhx_st_set *set, const char *name, int64_t rows, int64_t cols,
                             qhx_weight *out, qhx_error *err) {
    memset(out, 0, sizeof *out);
    const qhx_st_tensor *t = NULL, *sc = NULL;
    qhx_status rc = qhx_st_get(set, name, 0, 2, (int64_t[]){rows, -1}, &t, err);
    if (rc != QHX_OK) return rc;
    const char *file = qhx_st_file_path(set, t->file_index);
    char side[QHX_ST_MAX_NAME + 16];
    snprintf(side, sizeof side, "%s%s", name, QHX_QMIN_SUFFIX);
    if (qhx_st_find(set, side))
        return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: tensor '%s': zero-point Q4 ('%s') is not supported", file,
                        name, side);
    snprintf(side, sizeof side, "%s%s", name, QHX_QSCALE_SUFFIX);
    const int64_t R = t->shape[0];
    int64_t C = t->shape[1];
    switch (t->dtype) {
    case QHX_DTYPE_F32: out->fmt = QHX_W_F32; break;
    case QHX_DTYPE_F16: out->fmt = QHX_W_F16; break;
    case QHX_DTYPE_BF16: out->fmt = QHX_W_BF16; break;
    case QHX_DTYPE_I8:
        out->fmt = QHX_W_Q8;
        rc = qhx_st_get(set, side, QHX_DT_BIT(QHX_DTYPE_F32), 1, (int64_t[]){R}, &sc, err);
        break;
    case QHX_DTYPE_U8: {
        char qsub[QHX_ST_MAX_NAME + 16];
        snprintf(qsub, sizeof qsub, "%s%s", name, QHX_QSUB_SUFFIX);
        C = 2 * t->shape[1];
        if (qhx_st_find(set, qsub)) {
            if (qhx_st_find(set, side))
                return qhx_fail(err, QHX_E_FORMAT, "%s: tensor '%s': both '%s' (Q4A) and '%s' (Q4) beside it", file,
                                name, qsub, side);
            rc = get_q4a(set, name, R, C, &sc, out, err);
            break;
        }
        out->fmt = QHX_W_Q4;
        rc = get_q4_scales(set, t, side, R, C, &sc, &out->group, err);
        if (rc == QHX_OK) rc = get_q6_high(set, name, R, C, out, err);
        break;
    }
    case QHX_DTYPE_GGML: /* a GGUF tensor's blocks, read in place */
        if (!qhx_gguf_can_dequant(t->ggml_type))
            return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: tensor '%s': type %s has no kernel in this build", file,
                            name, qhx_ggml_type_name(t->ggml_type) ? qhx_ggml_type_name(t->ggml_type) : "?");
        out->fmt = QHX_W_GGML;
        out->gtype = t->ggml_type;
        out->row_bytes = (int64_t)(t->size / (size_t)R);
        break;
    default:
        return qhx_fail(err, QHX_E_FORMAT, "%s: tensor '%s': dtype %s is not a weight format", file, name,
                        qhx_dtype_name(t->dtype));
    }
    if (rc != QHX_OK) return rc;
    if (cols >= 0 && C != cols)
        return qhx_fail(err, QHX_E_FORMAT, "%s: tensor '%s': expected %lld columns, got %lld", file, name,
                        (long long)cols, (long long)C);
    if (t->dtype != QHX_DTYPE_GGML && (rc = check_align(set, t, qhx_dtype_size(t->dtype), err)) != QHX_OK) return rc;
    if (sc && sc->dtype == QHX_DTYPE_F32) {
        if ((rc = check_align(set, sc, 4, err)) != QHX_OK) return rc;
        const float *v = (const float *)sc->data;
        for (int64_t i = 0; i < sc->n_elements; i++)
            if (!isfinite(v[i])) return not_finite(set, sc, i, err);
        out->scales = v;
    } else if (sc) {
        if ((rc = check_align(set, sc, 2, err)) != QHX_OK) return rc;
        const uint16_t *v = (const uint16_t *)sc->data;
        for (int64_t i = 0; i < sc->n_elements; i++)
            if ((v[i] & 0x7c00u) == 0x7c00u) return not_finite(set, sc, i, err); /* f16 Inf or NaN */
        out->gscales = v;
    }
    out->rows = R;
    out->cols = C;
    out->data = t->data;
    return QHX_OK;
}
