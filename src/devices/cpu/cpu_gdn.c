/* devices/cpu/cpu_gdn.c: the Gated DeltaNet steps on the CPU device (device.h qhx_dgdn).
 * prep splits tokens (a prompt) or, for one token, channels in whole heads; delta splits value
 * heads. Each output element is computed by one piece in a fixed order. */
#include "devices/cpu/cpu_impl.h"

#include "kernels/ref.h"

#include <math.h>

#define DELTA_CHUNK 64 /* HF chunk_size for the chunked delta rule */

typedef struct gdn_job {
    const qhx_kernels *k;
    const qhx_dgdn *g;
    float *ext, *cv, *z, *beta, *gg, *S, *out, *work;
    int64_t C, key_dim, value_dim, work_floats;
} gdn_job;

int64_t qhx_cpu_gdn_work(const qhx_device *d, int64_t dk, int64_t dv) {
    return qhx_pool_n_threads(cpu_of(d)->pool) * qhx_k_delta_chunked_work(DELTA_CHUNK, dk, dv);
}

static gdn_job job_of(const qhx_device *d, const qhx_dgdn *g) {
    const int64_t key_dim = g->nk * g->dk, value_dim = g->nv * g->dv;
    return (gdn_job){.k = &cpu_of(d)->kern, .g = g, .ext = cpu_f(g->ext), .cv = cpu_f(g->cv), .z = cpu_f(g->z),
                     .beta = cpu_f(g->beta), .gg = cpu_f(g->g), .S = cpu_f(g->S), .out = cpu_f(g->out),
                     .work = cpu_f(g->work), .C = 2 * key_dim + value_dim, .key_dim = key_dim,
                     .value_dim = value_dim, .work_floats = qhx_k_delta_chunked_work(DELTA_CHUNK, g->dk, g->dv)};
}

/* tokens [t0, t1): causal conv + SiLU, q/k L2 norm (q scaled by 1/sqrt(dk), as HF in both
 * forms), beta = sigmoid(b), g = -exp(A_log) softplus(a + dt_bias) */
static void prep_task(void *ctx, int64_t t0, int64_t t1, int ti) {
    (void)ti;
    const gdn_job *j = ctx;
    const qhx_dgdn *g = j->g;
    const int64_t C = j->C;
    qhx_k_conv1d_causal_f32_ref(j->ext + t0 * C, g->conv_w, j->cv + t0 * C, t1 - t0, C, g->K);
    j->k->silu(j->cv + t0 * C, (t1 - t0) * C);
    const float scale = (float)(1.0 / sqrt((double)g->dk));
    for (int64_t t = t0; t < t1; t++) {
        float *row = j->cv + t * C;
        for (int64_t h = 0; h < g->nk; h++) {
            float *qh = row + h * g->dk, *kh = row + j->key_dim + h * g->dk;
            qhx_k_l2norm_f32_ref(qh, g->dk, 1e-6f);
            qhx_k_l2norm_f32_ref(kh, g->dk, 1e-6f);
            for (int64_t i = 0; i < g->dk; i++) qh[i] *= scale;
        }
        for (int64_t v = 0; v < g->nv; v++) {
            float *bj = j->beta + t * g->nv + v, *gj = j->gg + t * g->nv + v;
            *bj = qhx_k_sigmoid_ref(*bj);
            *gj = g->A[v] * qhx_k_softplus_ref(*gj + g->dt_bias[v]);
        }
    }
}

/* one token, channels [c0, c1) in whole heads of dk (q, k) or dv (v) channels: causal conv +
 * SiLU, then the L2 norm of the q / k heads among them (the same operations per channel as
 * prep_task; beta and g are done by the caller) */
static void prep1_task(void *ctx, int64_t c0, int64_t c1, int ti) {
    (void)ti;
    const gdn_job *j = ctx;
    const qhx_dgdn *g = j->g;
    const int64_t C = j->C, K = g->K;
    const float *w = g->conv_w;
    for (int64_t c = c0; c < c1; c++) {
        float acc = 0.0f;
        for (int64_t i = 0; i < K; i++) acc += w[c * K + i] * j->ext[i * C + c];
        j->cv[c] = acc;
    }
    j->k->silu(j->cv + c0, c1 - c0);
    const float scale = (float)(1.0 / sqrt((double)g->dk));
    for (int64_t h0 = c0; h0 < c1 && h0 < 2 * j->key_dim; h0 += g->dk) {
        float *v = j->cv + h0;
        qhx_k_l2norm_f32_ref(v, g->dk, 1e-6f);
        if (h0 < j->key_dim)
            for (int64_t i = 0; i < g->dk; i++) v[i] *= scale;
    }
}

void qhx_cpu_gdn_prep(const qhx_device *d, const qhx_dgdn *g) {
    gdn_job j = job_of(d, g);
    qhx_pool *pool = cpu_of(d)->pool;
    if (g->n == 1 && g->dk == g->dv && j.key_dim % g->dk == 0) {
        /* one token: split the channels (in whole heads) rather than the tokens */
        qhx_par_range(pool, j.C, 4 * g->dk, prep1_task, &j);
        for (int64_t v = 0; v < g->nv; v++) {
            j.beta[v] = qhx_k_sigmoid_ref(j.beta[v]);
            j.gg[v] = g->A[v] * qhx_k_softplus_ref(j.gg[v] + g->dt_bias[v]);
        }
    } else {
        qhx_par_range(pool, g->n, CPU_TOK_CHUNK, prep_task, &j);
    }
}

/* value heads [v0, v1): the delta rule over the n tokens (reading key head v / rep, HF
 * repeat_interleave; v % nk for the tiled order llama.cpp's converter writes), then the gated
 * RMSNorm of those heads */
static void delta_task(void *ctx, int64_t v0, int64_t v1, int ti) {
    const gdn_job *j = ctx;
    const qhx_dgdn *g = j->g;
    const int64_t C = j->C, n = g->n, dk = g->dk, dv = g->dv;
    for (int64_t v = v0; v < v1; v++) {
        int64_t kh = g->v_tiled ? v % g->nk : v / g->rep;
        float *S = j->S + v * dk * dv; /* (dk, dv) */
        const float *qp = j->cv + kh * dk, *kp = j->cv + j->key_dim + kh * dk;
        const float *vp = j->cv + 2 * j->key_dim + v * dv;
        float *op = j->out + v * dv;
        if (n == 1)
            j->k->delta_step(S, qp, kp, vp, j->beta[v], j->gg[v], op, dk, dv);
        else
            j->k->delta_chunked(S, qp, C, kp, C, vp, C, j->beta + v, j->gg + v, g->nv, op, j->value_dim, n, dk, dv,
                                DELTA_CHUNK, j->work + ti * j->work_floats);
        for (int64_t t = 0; t < n; t++) {
            float *o = j->out + t * j->value_dim + v * dv;
            qhx_k_rmsnorm_gated_f32_ref(o, j->z + t * j->value_dim + v * dv, g->gnorm_w, o, dv, g->eps);
        }
    }
}

void qhx_cpu_gdn_delta(const qhx_device *d, const qhx_dgdn *g) {
    gdn_job j = job_of(d, g);
    qhx_par_range(cpu_of(d)->pool, g->nv, 1, delta_task, &j);
}
