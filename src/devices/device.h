/* devices/device.h: the op-level device interface under the families, the shared blocks and
 * the vision tower. A device owns memory (buffers) and runs ops on views of it; model code
 * says what to compute and never how, where or on how many threads. The CPU device
 * (devices/cpu/) is today's kernel table and thread pool behind this table; a GPU or NPU device
 * adds an implementation of the same table (docs/backends.md, "Adding a device").
 *
 * Memory. A buffer (qhx_dbuf) is a handle the device made (alloc) plus, when the device's
 * memory is host memory, the host address of its first byte (host != NULL: the CPU device
 * always, an OpenCL device with a host-visible pool perhaps). Ops take views (qhx_dv): a
 * buffer and a byte offset into it, never raw pointers, so a device whose memory the host
 * cannot address works unchanged. Host data enters and leaves through set / get / copy; a
 * buffer that wraps host memory (qhx_dbuf_host: logits out, image rows in, the lm-head graph's
 * rows) is accepted by every op of every device: a device that cannot read host memory stages
 * it. Activations, scratch and sequence state (KV cache, conv FIFO, SSM state) live in device
 * buffers; weights are qhx_weight (kernels/kernels.h) bound once per model, and small f32
 * weight vectors (norms, conv taps, decay) are host arrays read-only for the model's life: a
 * device that cannot read host memory uploads both at bind (weight_prepare below).
 *
 * Determinism. Each op's result does not depend on how a device splits the work (threads,
 * work-groups): every output element is computed by one piece in a fixed order (the CPU
 * device's rule, ops/par.h formerly), so goldens are bitwise the same at any thread count.
 *
 * Every op has a reference definition: the scalar kernels of kernels/ref.h named at each entry
 * below; tests/test_device_ops.c checks each device against them with the tolerances it
 * writes down. */
#ifndef QHX_DEVICES_DEVICE_H
#define QHX_DEVICES_DEVICE_H

#include "core/status.h"
#include "kernels/attn.h"
#include "kernels/kernels.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct qhx_device qhx_device;

/* ---- memory -------------------------------------------------------------------------------- */

typedef struct qhx_dbuf {
    const qhx_device *dev; /* NULL: wraps host memory (qhx_dbuf_host) */
    void *host;            /* the host address of byte 0 where the memory is host memory, else NULL */
    void *handle;          /* the device's own handle (a cl_mem, ...); NULL on the CPU */
    size_t bytes;
} qhx_dbuf;

typedef struct qhx_dv {
    const qhx_dbuf *b;
    size_t off; /* bytes */
} qhx_dv;

static inline qhx_dbuf qhx_dbuf_host(void *p, size_t bytes) { return (qhx_dbuf){NULL, p, NULL, bytes}; }
static inline qhx_dv qhx_dv_of(const qhx_dbuf *b, size_t off) { return (qhx_dv){b, off}; }
/* The view n floats further on. */
static inline qhx_dv qhx_dv_f(qhx_dv v, int64_t n) { return (qhx_dv){v.b, v.off + (size_t)n * sizeof(float)}; }
static inline bool qhx_dv_null(qhx_dv v) { return v.b == NULL; }

/* ---- op parameters ----------------------------------------------------------------------- */

/* Qwen3-VL's RMSNorm is x * rsqrt(mean(x^2) + eps) * w; Qwen3.5's multiplies by (1 + w). */
typedef enum qhx_norm_kind { QHX_NORM_PLAIN = 0, QHX_NORM_ZERO_CENTRED = 1 } qhx_norm_kind;

/* One of several linear layers over the same input: Y (n, w->rows) stride ldy. */
typedef struct qhx_dlin {
    const qhx_weight *w;
    qhx_dv Y;
    int64_t ldy;
} qhx_dlin;

/* One linear layer over nb independent rows: Y[b] (w->rows) for row b. */
typedef struct qhx_dlin_multi {
    const qhx_weight *w;
    const qhx_dv *Y; /* (nb) */
} qhx_dlin_multi;

/* Most rows of a linears_multi call: the public batch width (qhx.h), since one batched decode
 * step is one linears_multi call per layer. */
#define QHX_DEV_MULTI_MAX QHX_MAX_BATCH

/* Bytes of one KV row of width values (q8: width a multiple of QHX_KV_Q8_BLOCK: the scales,
 * then the int8 values). */
static inline size_t qhx_kv_row_bytes(qhx_kv_type t, int64_t width) {
    if (t == QHX_KV_Q8) return (size_t)width + (size_t)(width / QHX_KV_Q8_BLOCK) * sizeof(float);
    return (size_t)width * (t == QHX_KV_F16 ? 2 : 4);
}

/* The KV cache of one sequence: per layer the keys of every position, then the values, rows of
 * qhx_kv_row_bytes(type, width) bytes (ops/kv.h), in a device buffer from byte off on. */
typedef struct qhx_kv_cache {
    qhx_kv_type type; /* QHX_KV_F32, QHX_KV_F16 or QHX_KV_Q8, never DEFAULT */
    qhx_dv at;        /* (n_layers, 2, n_ctx) rows */
    int64_t n_layers, n_ctx, width;
} qhx_kv_cache;

/* One attention mixer over n tokens at positions n_past .. n_past + n - 1 (GQA): the q and k
 * heads are RMS-normed and rotated (the first rot dims, NeoX halves) in place, k and v stored in
 * the cache at slot, then each token attends to the cache up to itself, scores scaled by
 * `scale`; with a gate the output is multiplied by sigmoid(gate). Reference: qhx_k_rmsnorm(_zc),
 * qhx_k_rope_neox, the f32/f16/q8 row store of ops/kv.h, qhx_k_attn_f32_ref over the widened
 * rows, qhx_k_mul_sigmoid. */
typedef struct qhx_dattn {
    const qhx_kv_cache *kv;
    int64_t slot;                 /* the layer's slot in the cache */
    int64_t nh, nkv, hd, rot;
    qhx_norm_kind norm;
    const float *q_norm, *k_norm; /* (hd) weights, shared by the heads */
    float eps, scale;
    qhx_dv q, k, v;               /* (n, nh hd), (n, nkv hd), (n, nkv hd) */
    const float *cos, *sin;       /* host (n, rot / 2): the rotary of each token */
    qhx_dv gate;                  /* (n, nh hd), or a null view */
    qhx_dv out;                   /* (n, nh hd) */
    qhx_dv work;                  /* attn_work floats (below) */
    int64_t n_past, n;
} qhx_dattn;

/* The Gated DeltaNet mixer's two middle steps (Qwen3.5, spec/qwen3_5.md) over n tokens, after
 * its input projections:
 *   prep:  cv = SiLU(causal_conv1d(ext, conv_w)) (ext: (K - 1 + n, C) = the FIFO then the new
 *          qkv rows), the q and k heads of cv L2-normed (eps 1e-6), q scaled by 1/sqrt(dk);
 *          beta = sigmoid(beta), g = A * softplus(g + dt_bias) in place.
 *   delta: per value head j (key head j / rep, or j % nk when v_tiled) the delta rule over the n tokens on S (nv, dk,
 *          dv) (n == 1: the recurrent step, else chunks of 64), out (n, nv dv); then the gated
 *          RMSNorm of each head by z with gnorm_w.
 * Reference: qhx_k_conv1d_causal, qhx_k_silu, qhx_k_l2norm, qhx_k_sigmoid, qhx_k_softplus,
 * qhx_k_delta_step / qhx_k_delta_chunked, qhx_k_rmsnorm_gated (kernels/ref.h). */
typedef struct qhx_dgdn {
    int64_t n, nk, nv, dk, dv, K, rep;
    bool v_tiled;         /* value head j reads key head j % nk (llama.cpp's GGUF order), not j / rep */
    float eps;
    const float *conv_w;  /* (C, K) host weights, C = 2 nk dk + nv dv */
    const float *A;       /* (nv) -exp(A_log) */
    const float *dt_bias; /* (nv) */
    const float *gnorm_w; /* (dv) */
    qhx_dv ext, cv;       /* (K - 1 + n, C), (n, C) */
    qhx_dv z;             /* (n, nv dv) */
    qhx_dv beta, g;       /* (n, nv) */
    qhx_dv S;             /* (nv, dk, dv) the layer's recurrent state */
    qhx_dv out;           /* (n, nv dv) */
    qhx_dv work;          /* gdn_work floats (below) */
} qhx_dgdn;

/* The activations of the vision tower's MLPs (and SiLU). */
typedef enum qhx_act { QHX_ACT_GELU_TANH = 0, QHX_ACT_GELU_ERF = 1, QHX_ACT_SILU = 2 } qhx_act;

/* ---- the table ------------------------------------------------------------------------------- */

/* What a device runs on, for reports (bench, --verbose). */
typedef struct qhx_device_info {
    int n_threads;   /* host threads its ops use, the calling one included */
    const char *isa; /* its kernels: "avx2", "avx512", "neon", "ref", or the device's own name */
} qhx_device_info;

/* The op table. Every op but destroy is listed once, here, as
 *   V(name, (its parameters after d), (their names))         an op that returns nothing
 *   R(type, name, (its parameters after d), (their names))   an op that returns a value
 * and the table (qhx_device_ops), the op numbers (qhx_dev_op) and the forwarding wrappers'
 * pass-through (devices/forward.h) are made from the list: docs/backends.md, "Adding an op". */
#define QHX_DEVICE_OPS(V, R)                                                                                          \
    V(info, (qhx_device_info *out), (out))                                                                            \
    /* Errors. The compute and memory ops return nothing: a device that queues work (OpenCL)                          \
       learns of a failure late, and one failed op makes the results of the ops after it                              \
       untrustworthy. So a device keeps its first failure (a status and one line naming the                           \
       device and what failed) for the rest of its life, never prints it, and sync returns it:                        \
       sync waits for every op enqueued so far, then returns QHX_OK or that first failure (the                        \
       same one on every later call: the model must be opened again). The layers above call it                        \
       where a library call completes (after a forward, a graph, a state save or restore). */                         \
    R(qhx_status, sync, (qhx_error *err), (err))                                                                      \
    /* memory: alloc gives a zeroed buffer (QHX_E_NOMEM); free accepts NULL. set/get/copy move                        \
       bytes between host memory and a view, or between views; zero fills bytes with 0. */                            \
    R(qhx_status, buf_alloc, (size_t bytes, qhx_dbuf **out, qhx_error *err), (bytes, out, err))                       \
    V(buf_free, (qhx_dbuf *b), (b))                                                                                   \
    V(set, (qhx_dv dst, const void *src, size_t bytes), (dst, src, bytes))                                            \
    V(get, (qhx_dv src, void *dst, size_t bytes), (src, dst, bytes))                                                  \
    V(copy, (qhx_dv dst, qhx_dv src, size_t bytes), (dst, src, bytes))                                                \
    V(zero, (qhx_dv dst, size_t bytes), (dst, bytes))                                                                 \
    /* weights: whether the device runs linear / embed_rows on this format; weight_prepare is                         \
       called once per bound weight (a device may upload or repack it; the CPU does nothing) */                       \
    R(bool, supports, (qhx_wfmt fmt), (fmt))                                                                          \
    R(qhx_status, weight_prepare, (qhx_weight *w, qhx_error *err), (w, err))                                          \
    /* floats of work space an attention call over n_ctx keys, a delta-rule call, a vision                            \
       attention over N patches need (the caller allocates them in a device buffer) */                                \
    R(int64_t, attn_work,                                                                                             \
      (int64_t n_ctx, int64_t nkv, int64_t rep, int64_t hd, qhx_kv_type t),                                           \
      (n_ctx, nkv, rep, hd, t))                                                                                       \
    R(int64_t, gdn_work, (int64_t dk, int64_t dv), (dk, dv))                                                          \
    R(int64_t, vit_attn_work, (int64_t N, int64_t D, int64_t H), (N, D, H))                                           \
    /* Y (n, w->rows) stride ldy = X (n, w->cols) stride ldx @ W^T (reference: the matvec /                           \
       matmul of kernels/ref for w->fmt) */                                                                           \
    V(linear, (const qhx_weight *w, qhx_dv X, int64_t ldx, qhx_dv Y, int64_t ldy, int64_t n), (w, X, ldx, Y, ldy, n)) \
    /* several layers over the same X (one dispatch) */                                                               \
    V(linears, (const qhx_dlin *ls, int n_ls, qhx_dv X, int64_t ldx, int64_t n), (ls, n_ls, X, ldx, n))               \
    /* G = silu(X @ gate^T) * (X @ up^T); U gets X @ up^T. (reference: qhx_k_swiglu) */                               \
    V(swiglu_linear,                                                                                                  \
      (const qhx_weight *gate, const qhx_weight *up, qhx_dv X, int64_t ldx, qhx_dv G, qhx_dv U, int64_t ld,           \
       int64_t n),                                                                                                    \
      (gate, up, X, ldx, G, U, ld, n))                                                                                \
    /* several layers over nb independent rows X[b] (one decode step of nb sequences), each row                       \
       with the bits of the single-row linear; swiglu: ls[0] gate, ls[1] up, as swiglu_linear */                      \
    V(linears_multi,                                                                                                  \
      (const qhx_dlin_multi *ls, int n_ls, const qhx_dv *X, int64_t nb, bool swiglu),                                 \
      (ls, n_ls, X, nb, swiglu))                                                                                      \
    /* out (n, w->cols) = rows ids of w widened to f32 (the embedding lookup; reference: row) */                      \
    V(embed_rows, (const qhx_weight *w, const int32_t *ids, int64_t n, qhx_dv out), (w, ids, n, out))                 \
    /* out (n, H) = norm(x) with w (host, H); out may be x. (qhx_k_rmsnorm(_zc)_f32_ref) */                           \
    V(rmsnorm,                                                                                                        \
      (qhx_norm_kind kind, qhx_dv x, const float *w, qhx_dv out, int64_t n, int64_t H, float eps),                    \
      (kind, x, w, out, n, H, eps))                                                                                   \
    /* x += add; out = norm(x) (row by row) */                                                                        \
    V(add_rmsnorm,                                                                                                    \
      (qhx_norm_kind kind, qhx_dv x, qhx_dv add, const float *w, qhx_dv out, int64_t n, int64_t H, float eps),        \
      (kind, x, add, w, out, n, H, eps))                                                                              \
    /* x (count) += add (count) (qhx_k_add_f32_ref) */                                                                \
    V(add, (qhx_dv x, qhx_dv add, int64_t count), (x, add, count))                                                    \
    /* the halves of n rows of nh heads of [a (hd) | b (hd)]: src (n, nh 2 hd) -> a, b (n, nh hd) */                  \
    V(split_heads, (qhx_dv src, qhx_dv a, qhx_dv b, int64_t n, int64_t nh, int64_t hd), (src, a, b, n, nh, hd))       \
    V(attention, (const qhx_dattn *a), (a))                                                                           \
    V(gdn_prep, (const qhx_dgdn *g), (g))                                                                             \
    V(gdn_delta, (const qhx_dgdn *g), (g))                                                                            \
    /* the vision tower: Y += b per row (b host, cols); the activation in place; LayerNorm of n                       \
       rows (w, b host); rotary of n rows of nh heads (stride ld, cos / sin host (n, hd / 2));                        \
       full attention over N patches of qkv (N, 3D) = [q | k | v] into att (N, D), with kv                            \
       (3 N D) and work scratch (reference: qhx_k_attn_f32_ref per head) */                                           \
    V(bias_rows, (qhx_dv Y, int64_t ldy, const float *b, int64_t cols, int64_t n), (Y, ldy, b, cols, n))              \
    V(act, (qhx_act a, qhx_dv x, int64_t count), (a, x, count))                                                       \
    V(layernorm,                                                                                                      \
      (qhx_dv x, const float *w, const float *b, qhx_dv y, int64_t n, int64_t width, float eps),                      \
      (x, w, b, y, n, width, eps))                                                                                    \
    V(rope_rows,                                                                                                      \
      (qhx_dv x, int64_t ld, int64_t n, int64_t nh, int64_t hd, const float *cos, const float *sin),                  \
      (x, ld, n, nh, hd, cos, sin))                                                                                   \
    V(vit_attention,                                                                                                  \
      (qhx_dv qkv, int64_t N, int64_t D, int64_t H, qhx_dv kv, qhx_dv work, qhx_dv att),                              \
      (qkv, N, D, H, kv, work, att))

#define QHX_DEV_UNPAREN_(...) __VA_ARGS__
#define QHX_DEV_UNPAREN(list) QHX_DEV_UNPAREN_ list

#define QHX_DEV_OP_V_(name, params, args) void (*name)(const qhx_device *d, QHX_DEV_UNPAREN(params));
#define QHX_DEV_OP_R_(type, name, params, args) type (*name)(const qhx_device *d, QHX_DEV_UNPAREN(params));
typedef struct qhx_device_ops {
    void (*destroy)(qhx_device *d); /* NULL allowed (the device's create made d) */
    QHX_DEVICE_OPS(QHX_DEV_OP_V_, QHX_DEV_OP_R_)
} qhx_device_ops;
#undef QHX_DEV_OP_V_
#undef QHX_DEV_OP_R_

/* The ops by number, in the list's order (a wrapper's per-op counters, tests). */
#define QHX_DEV_NUM_V_(name, params, args) QHX_DOP_##name,
#define QHX_DEV_NUM_R_(type, name, params, args) QHX_DOP_##name,
typedef enum qhx_dev_op { QHX_DEVICE_OPS(QHX_DEV_NUM_V_, QHX_DEV_NUM_R_) QHX_DOP_COUNT } qhx_dev_op;
#undef QHX_DEV_NUM_V_
#undef QHX_DEV_NUM_R_

struct qhx_device {
    const char *name;         /* "cpu" */
    const qhx_device_ops *op;
    void *impl;               /* the device's own (the CPU: its kernel table and pool) */
};

/* What a device is created with (a device ignores what it has no use for). */
typedef struct qhx_device_params {
    qhx_isa max_isa;               /* the CPU: the best kernels it may pick */
    unsigned int8_prefill_formats; /* the CPU: qhx_kern_use_int8's masks (bits 1u << qhx_wfmt); 0: f32 math */
    unsigned int8_decode_formats;
    int n_threads;                 /* the CPU: worker threads; <= 0: the physical cores */
    const char *spec;              /* the name it was selected by ("opencl:1"); NULL: its plain name */
} qhx_device_params;

/* One device of a kind on this machine, for listings (qhx devices, qhx_devices_list). */
typedef struct qhx_device_entry {
    char name[32];          /* what selects it: "cpu", "opencl:1" */
    char description[256];  /* one line: the hardware, its kind, its driver */
    uint64_t memory_bytes;  /* the memory it can use; 0: unknown */
    uint64_t free_bytes;    /* of that, free now, where the driver says; 0: unknown */
} qhx_device_entry;

/* devices/registry.c: the devices of this build, by kind ("cpu" first). */
typedef struct qhx_device_desc {
    const char *name;
    bool indexed; /* also "name:N" (N: 1 to 3 digits), the N-th device of the kind (list's order) */
    qhx_status (*create)(const qhx_device_params *p, qhx_device **out /* OUT: ->op->destroy */, qhx_error *err);
    /* The devices of the kind on this machine, at most cap of them into out, in the order "name:N"
       counts them; *n: how many there are (may exceed cap). QHX_E_UNSUPPORTED with err saying why
       when there is none (OpenCL: no platform, or no device on it). */
    qhx_status (*list)(qhx_device_entry *out, int cap, int *n, qhx_error *err);
} qhx_device_desc;
int qhx_device_count(void);
const qhx_device_desc *qhx_device_at(int i);          /* NULL past the end */
/* The kind of "name", or of "name:N" for an indexed kind; NULL when it names no device of this
 * build ("opencl:x", "opencl:1234", "gpu"). Whether this machine has that device is its create's. */
const qhx_device_desc *qhx_device_find(const char *name);
/* How the devices of this build are named, for help and messages: "cpu, opencl or opencl:N". */
const char *qhx_device_choices(void);

/* The host address of a view on a device whose memory is host memory, else NULL (layer
 * callbacks read the residual stream in place where they can). */
static inline void *qhx_dv_host(qhx_dv v) { return v.b && v.b->host ? (char *)v.b->host + v.off : NULL; }

#endif
