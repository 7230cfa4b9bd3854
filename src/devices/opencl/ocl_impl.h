/* devices/opencl/ocl_impl.h: what the OpenCL device's files share (not for model code).
 *
 * Memory model. Every buffer is a cl_mem (handle), its host address NULL: the host reaches it
 * only through set / get / copy, so the same code runs on a discrete GPU. On a device with
 * host-unified memory (phones, integrated GPUs, PoCL) buffers are CL_MEM_ALLOC_HOST_PTR and
 * weights are wrapped in place (CL_MEM_USE_HOST_PTR over the loaded tensor bytes), so they are
 * not held twice; elsewhere weights are copied once at weight_prepare. Host inputs of an op
 * (norm weights, rotary tables, token ids) go through a small cache that keeps a copy of the
 * bytes it uploaded and uploads again when they changed (asynchronously, from that copy). Views of host wrappers
 * (qhx_dbuf_host) are staged in temporary buffers for the op and read back after it.
 *
 * One in-order queue per device; every op enqueues under the device's mutex, and ops are
 * asynchronous up to the next get (or a staged host view). A call that fails inside an op is
 * kept as the device's first failure (ocl_err.c), which sync returns (devices/device.h,
 * "Errors"). */
#ifndef QHX_DEVICES_OPENCL_IMPL_H
#define QHX_DEVICES_OPENCL_IMPL_H

#include "devices/opencl/opencl.h"

#include <CL/cl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

typedef enum ocl_kid {
    OK_LINEAR_F32, OK_LINEAR_F16, OK_LINEAR_BF16, OK_LINEAR_Q8, OK_LINEAR_Q4, OK_LINEAR_Q6, OK_LINEAR_Q4A,
    OK_SWIGLU_F32, OK_SWIGLU_F16, OK_SWIGLU_BF16, OK_SWIGLU_Q8, OK_SWIGLU_Q4, OK_SWIGLU_Q6, OK_SWIGLU_Q4A,
    OK_EMBED, OK_ADD, OK_BIAS_ROWS, OK_ACT, OK_SPLIT_HEADS, OK_RMSNORM, OK_LAYERNORM, OK_ROPE_ROWS,
    OK_ATTN_PREP, OK_KV_STORE, OK_KV_STORE_Q8, OK_ATTN, OK_GDN_CONV, OK_GDN_L2, OK_GDN_GATES, OK_GDN_DELTA,
    OK_GATED_NORM, OK_SILU_MUL, OK_COUNT
} ocl_kid;

extern const char *const QHX_OCL_KERNEL_NAMES[OK_COUNT];

/* A bound weight's planes on the device (values/codes, scales, high bits or group bytes). */
typedef struct ocl_wentry {
    const void *key; /* the weight's data pointer; NULL: free slot */
    cl_mem m[3];
} ocl_wentry;

/* A host array uploaded for ops, with the bytes it held then. */
typedef struct ocl_hentry {
    const void *ptr; /* NULL: free slot */
    size_t bytes;
    void *shadow;  /* the bytes uploaded, and the source of the upload */
    cl_mem m;
    cl_event ev;   /* the pending upload from shadow, or NULL */
} ocl_hentry;

#define OCL_MAX_STAGED 64

/* A temporary buffer of one op: a staged host view (read back after the op when written) or
 * the planes of a weight no weight_prepare saw. */
typedef struct ocl_staged {
    cl_mem m;
    void *host;   /* read back here after the op; NULL: release only */
    size_t bytes;
} ocl_staged;

typedef struct ocl_dev {
    qhx_device dev; /* first: a qhx_device * is an ocl_dev * */
    cl_platform_id platform;
    cl_device_id id;
    cl_context ctx;
    cl_command_queue q;
    cl_program prog;
    cl_kernel k[OK_COUNT];
    cl_mem dummy;   /* bound where a kernel's optional buffer is absent */
    bool unified;   /* CL_DEVICE_HOST_UNIFIED_MEMORY */
    size_t wg;      /* the reducing kernels' work-group size */
    cl_ulong mem_bytes, max_alloc;
    char name[192];
    char label[240]; /* "opencl:N (name)" for info and messages */
    pthread_mutex_t mu;
    ocl_wentry *wt; /* open addressing by data pointer */
    size_t wt_cap, wt_n;
    ocl_hentry *ht;
    size_t ht_cap, ht_n;
    ocl_staged staged[OCL_MAX_STAGED];
    int n_staged;
    /* the first failure (devices/device.h, "Errors"): code QHX_OK until an op fails */
    pthread_mutex_t err_mu;
    qhx_error sticky;
    _Atomic bool failed; /* sticky.code != QHX_OK: kernels are no longer launched */
    /* QHX_OPENCL_FAIL=KIND:N (tests): the N-th call of that kind fails (ocl_err.c) */
    int fail_kind;
    long fail_at;
    long fail_seen[4];
} ocl_dev;

static inline ocl_dev *ocl_of(const qhx_device *d) { return (ocl_dev *)(void *)d; }

/* A buffer argument of a kernel: a cl_mem and a byte offset into it. */
typedef struct ocl_ref {
    cl_mem m;
    cl_ulong off;
} ocl_ref;

/* ocl_err.c: status words, the device's first failure, the failures tests inject */
const char *qhx_ocl_err_name(cl_int rc);
/* Keep "device LABEL: WHAT failed: CL_... (rc)" as the device's failure unless it has one. */
void qhx_ocl_report(ocl_dev *o, const char *what, cl_int rc);
/* Keep "device LABEL: MESSAGE" with code unless the device has a failure (work it refuses). */
void qhx_ocl_refuse(ocl_dev *o, qhx_status code, const char *fmt, ...) QHX_PRINTF(3, 4);
qhx_status qhx_ocl_sync(const qhx_device *d, qhx_error *err);
/* The kinds of call a test can make fail (QHX_OPENCL_FAIL=launch:N, write:N, read:N, buffer:N):
   qhx_ocl_inject returns the error the N-th call of kind k gets (CL_SUCCESS otherwise). */
typedef enum ocl_fault { OCL_FAULT_LAUNCH, OCL_FAULT_WRITE, OCL_FAULT_READ, OCL_FAULT_BUFFER } ocl_fault;
void qhx_ocl_fault_init(ocl_dev *o);
cl_int qhx_ocl_inject(ocl_dev *o, ocl_fault k);

/* ocl_dev.c: platforms, devices, the program and its cache */
qhx_status qhx_ocl_build(ocl_dev *o, qhx_error *err);          /* ocl_cache.c */

/* ocl_mem.c: memory, weights, host inputs, views */
extern const qhx_device_ops QHX_OCL_OPS;
qhx_status qhx_ocl_buf_alloc(const qhx_device *d, size_t bytes, qhx_dbuf **out, qhx_error *err);
void qhx_ocl_buf_free(const qhx_device *d, qhx_dbuf *b);
void qhx_ocl_set(const qhx_device *d, qhx_dv dst, const void *src, size_t bytes);
void qhx_ocl_get(const qhx_device *d, qhx_dv src, void *dst, size_t bytes);
void qhx_ocl_copy(const qhx_device *d, qhx_dv dst, qhx_dv src, size_t bytes);
void qhx_ocl_zero(const qhx_device *d, qhx_dv dst, size_t bytes);
bool qhx_ocl_supports(const qhx_device *d, qhx_wfmt fmt);
qhx_status qhx_ocl_weight_prepare(const qhx_device *d, qhx_weight *w, qhx_error *err);
void qhx_ocl_mem_free_all(ocl_dev *o);
/* within an op (the mutex held): */
ocl_ref qhx_ocl_view(ocl_dev *o, qhx_dv v, bool written);  /* null view: the dummy buffer */
ocl_ref qhx_ocl_host(ocl_dev *o, const void *p, size_t bytes); /* NULL p: the dummy buffer */
void qhx_ocl_weight(ocl_dev *o, const qhx_weight *w, ocl_ref out[3]);
void qhx_ocl_op_begin(ocl_dev *o);
void qhx_ocl_op_end(ocl_dev *o); /* reads staged outputs back, releases the op's temporaries */
/* the byte sizes of a weight's planes */
void qhx_ocl_weight_bytes(const qhx_weight *w, size_t bytes[3]);

/* Kernel arguments, set in order; the first failure is kept and reported at launch. */
typedef struct ocl_args {
    ocl_dev *o;
    cl_kernel k;
    cl_uint i;
    cl_int rc;
} ocl_args;
ocl_args qhx_ocl_args(ocl_dev *o, ocl_kid id);
void qhx_ocl_a_ref(ocl_args *a, ocl_ref r); /* two arguments: the buffer and the offset */
void qhx_ocl_a_i64(ocl_args *a, int64_t v);
void qhx_ocl_a_i32(ocl_args *a, int v);
void qhx_ocl_a_f32(ocl_args *a, float v);
/* Launch over global (g0, g1, g2) work-items (g0 rounded up to a multiple of l0; l0 0: the
 * driver's choice). */
void qhx_ocl_launch(ocl_args *a, size_t g0, size_t g1, size_t g2, size_t l0);

/* ocl_ops.c, ocl_attn.c: the op table's entries */
void qhx_ocl_info(const qhx_device *d, qhx_device_info *out);
void qhx_ocl_linear(const qhx_device *d, const qhx_weight *w, qhx_dv X, int64_t ldx, qhx_dv Y, int64_t ldy, int64_t n);
void qhx_ocl_linears(const qhx_device *d, const qhx_dlin *ls, int n_ls, qhx_dv X, int64_t ldx, int64_t n);
void qhx_ocl_swiglu_linear(const qhx_device *d, const qhx_weight *gate, const qhx_weight *up, qhx_dv X, int64_t ldx,
                           qhx_dv G, qhx_dv U, int64_t ld, int64_t n);
void qhx_ocl_linears_multi(const qhx_device *d, const qhx_dlin_multi *ls, int n_ls, const qhx_dv *X, int64_t nb,
                           bool swiglu);
void qhx_ocl_embed_rows(const qhx_device *d, const qhx_weight *w, const int32_t *ids, int64_t n, qhx_dv out);
void qhx_ocl_rmsnorm(const qhx_device *d, qhx_norm_kind kind, qhx_dv x, const float *w, qhx_dv out, int64_t n,
                     int64_t H, float eps);
void qhx_ocl_add_rmsnorm(const qhx_device *d, qhx_norm_kind kind, qhx_dv x, qhx_dv add, const float *w, qhx_dv out,
                         int64_t n, int64_t H, float eps);
void qhx_ocl_add(const qhx_device *d, qhx_dv x, qhx_dv add, int64_t count);
void qhx_ocl_split_heads(const qhx_device *d, qhx_dv src, qhx_dv a, qhx_dv b, int64_t n, int64_t nh, int64_t hd);
int64_t qhx_ocl_attn_work(const qhx_device *d, int64_t n_ctx, int64_t nkv, int64_t rep, int64_t hd, qhx_kv_type t);
int64_t qhx_ocl_gdn_work(const qhx_device *d, int64_t dk, int64_t dv);
int64_t qhx_ocl_vit_attn_work(const qhx_device *d, int64_t N, int64_t D, int64_t H);
void qhx_ocl_attention(const qhx_device *d, const qhx_dattn *a);
void qhx_ocl_gdn_prep(const qhx_device *d, const qhx_dgdn *g);
void qhx_ocl_gdn_delta(const qhx_device *d, const qhx_dgdn *g);
void qhx_ocl_bias_rows(const qhx_device *d, qhx_dv Y, int64_t ldy, const float *b, int64_t cols, int64_t n);
void qhx_ocl_act(const qhx_device *d, qhx_act a, qhx_dv x, int64_t count);
void qhx_ocl_layernorm(const qhx_device *d, qhx_dv x, const float *w, const float *b, qhx_dv y, int64_t n,
                       int64_t width, float eps);
void qhx_ocl_rope_rows(const qhx_device *d, qhx_dv x, int64_t ld, int64_t n, int64_t nh, int64_t hd,
                       const float *cos, const float *sin);
void qhx_ocl_vit_attention(const qhx_device *d, qhx_dv qkv, int64_t N, int64_t D, int64_t H, qhx_dv kv, qhx_dv work,
                           qhx_dv att);

#define OCL_HD_MAX 256 /* the kernels' largest head (kernels/00_common.cl HD_MAX) */
#define OCL_TT 8       /* tokens per work-group of the linear kernels (kernels/10_linear.cl TT) */

#endif
