/* families/net.c: the calls every family shares (argument and limit checks), then the family's
 * entry in its qhx_net_vt. */
#include "families/family.h"

#include "core/alloc.h"

void qhx_image_embed_deinit(qhx_image_embed *im) {
    if (!im) return;
    qhx_free(im->embd);
    *im = (qhx_image_embed){0};
}

void qhx_net_free(qhx_net *m) {
    if (!m) return;
    if (m->vt && m->impl) m->vt->free_impl(m->impl);
    qhx_free(m);
}

qhx_status qhx_net_state_create(const qhx_net *m, const qhx_seq_params *p, qhx_seq **out,
                                qhx_error *err) {
    *out = NULL;
    if (!m || !p) return qhx_fail(err, QHX_E_ARG, "state: model and params are required");
    int64_t n_ctx = p->n_ctx, n_batch = p->n_batch;
    if (n_ctx < 1 || n_ctx > ((int64_t)1 << 24))
        return qhx_fail(err, QHX_E_ARG, "state: n_ctx %lld is outside [1, %lld]", (long long)n_ctx,
                        (long long)1 << 24);
    if (n_batch == 0) n_batch = n_ctx < 512 ? n_ctx : 512;
    if (n_batch < 1 || n_batch > n_ctx)
        return qhx_fail(err, QHX_E_ARG, "state: n_batch %lld is outside [1, n_ctx = %lld]",
                        (long long)n_batch, (long long)n_ctx);
    if (p->kv_cache < QHX_KV_F32 || p->kv_cache > QHX_KV_Q8)
        return qhx_fail(err, QHX_E_ARG, "state: kv_cache %d is not one of f32, f16, q8", (int)p->kv_cache);
    qhx_seq *st = qhx_calloc(1, sizeof *st);
    if (!st) return qhx_fail(err, QHX_E_NOMEM, "state: out of memory");
    st->m = m;
    st->kv_type = p->kv_cache;
    st->n_ctx = n_ctx;
    st->n_batch = n_batch;
    qhx_status rc = qhx_net_sync(m, m->vt->state_create(st, err), err);
    if (rc) {
        if (st->impl) m->vt->state_free(st->impl);
        qhx_free(st);
        return rc;
    }
    *out = st;
    return QHX_OK;
}

void qhx_net_state_free(qhx_seq *st) {
    if (!st) return;
    if (st->impl) st->m->vt->state_free(st->impl);
    qhx_free(st);
}

void qhx_net_state_reset(qhx_seq *st) {
    st->m->vt->state_reset(st);
    st->n_past = 0;
}

qhx_status qhx_net_forward(const qhx_net *m, qhx_seq *st, const int32_t *ids, int64_t n,
                           const qhx_forward_opts *opts, qhx_error *err) {
    if (!m || !st || st->m != m) return qhx_fail(err, QHX_E_ARG, "forward: state does not belong to this model");
    if (n < 1 || !ids) return qhx_fail(err, QHX_E_ARG, "forward: no tokens");
    if (n > st->n_ctx - st->n_past)
        return qhx_fail(err, QHX_E_LIMIT, "forward: %lld tokens at position %lld exceed the context of %lld",
                        (long long)n, (long long)st->n_past, (long long)st->n_ctx);
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= m->cfg.vocab_size)
            return qhx_fail(err, QHX_E_ARG, "forward: token %lld: id %d is outside the vocabulary [0, %lld)",
                            (long long)i, ids[i], (long long)m->cfg.vocab_size);
    static const qhx_forward_opts none = {0};
    return qhx_net_sync(m, m->vt->forward(m, st, ids, n, opts ? opts : &none, err), err);
}

qhx_status qhx_net_sync(const qhx_net *m, qhx_status rc, qhx_error *err) {
    if (rc || !m->dev) return rc;
    return m->dev->op->sync(m->dev, err);
}

int qhx_net_state_regions(const qhx_seq *st, qhx_state_region *out, int cap) {
    return st->m->vt->state_regions ? st->m->vt->state_regions(st, out, cap) : 0;
}

qhx_status qhx_net_attach(qhx_seq *st, const qhx_image_embed *images, int n_images, const int32_t *ids,
                          int64_t n, qhx_error *err) {
    if (!st) return qhx_fail(err, QHX_E_ARG, "attach: state is NULL");
    if (n_images < 0 || (n_images > 0 && !images))
        return qhx_fail(err, QHX_E_ARG, "attach: %d images but no array", n_images);
    if (!st->m->vt->attach) {
        if (n_images == 0) return QHX_OK; /* nothing to announce to a text-only family */
        return qhx_fail(err, QHX_E_UNSUPPORTED, "the %s family takes no images", st->m->family->name);
    }
    return qhx_net_sync(st->m, st->m->vt->attach(st, images, n_images, ids, n, err), err);
}
