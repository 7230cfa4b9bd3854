/* devices/opencl/ocl_dev.c: the OpenCL device's creation: the devices of every platform as one
 * list, the choice by "opencl[:N]", the checks before anything is loaded, the context, queue and
 * program (ocl_cache.c), and the listing of `qhx devices`. */
#include "devices/opencl/ocl_impl.h"

#include "core/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OCL_MAX_DEVICES 64
#define OCL_MIN_MEMORY ((cl_ulong)64 << 20) /* less than this cannot hold even the tiny models */

const char *const QHX_OCL_KERNEL_NAMES[OK_COUNT] = {
    "k_linear_f32", "k_linear_f16", "k_linear_bf16", "k_linear_q8", "k_linear_q4", "k_linear_q6", "k_linear_q4a",
    "k_swiglu_f32", "k_swiglu_f16", "k_swiglu_bf16", "k_swiglu_q8", "k_swiglu_q4", "k_swiglu_q6", "k_swiglu_q4a",
    "k_embed", "k_add", "k_bias_rows", "k_act", "k_split_heads", "k_rmsnorm", "k_layernorm", "k_rope_rows",
    "k_attn_prep", "k_kv_store", "k_kv_store_q8", "k_attn", "k_gdn_conv", "k_gdn_l2", "k_gdn_gates", "k_gdn_delta",
    "k_gated_norm", "k_silu_mul",
};

/* ---- the devices of every platform, as one list ------------------------------------------- */

typedef struct ocl_list {
    cl_platform_id plat[OCL_MAX_DEVICES];
    cl_device_id dev[OCL_MAX_DEVICES];
    int n;
} ocl_list;

static qhx_status list_devices(ocl_list *l, qhx_error *err) {
    cl_platform_id plats[16];
    cl_uint np = 0;
    l->n = 0;
    cl_int rc = clGetPlatformIDs(16, plats, &np);
    if (rc != CL_SUCCESS || np == 0)
        return qhx_fail(err, QHX_E_UNSUPPORTED,
                        "device opencl: no OpenCL platform found (install an OpenCL driver, e.g. pocl-opencl-icd)");
    for (cl_uint p = 0; p < np && p < 16; p++) {
        cl_device_id ids[OCL_MAX_DEVICES];
        cl_uint nd = 0;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, OCL_MAX_DEVICES, ids, &nd) != CL_SUCCESS) continue;
        for (cl_uint i = 0; i < nd && l->n < OCL_MAX_DEVICES; i++) {
            l->plat[l->n] = plats[p];
            l->dev[l->n++] = ids[i];
        }
    }
    if (l->n == 0) return qhx_fail(err, QHX_E_UNSUPPORTED, "device opencl: the OpenCL platforms have no device");
    return QHX_OK;
}

static void dev_str(cl_device_id d, cl_device_info what, char *buf, size_t size) {
    buf[0] = 0;
    if (clGetDeviceInfo(d, what, size - 1, buf, NULL) != CL_SUCCESS) buf[0] = 0;
    buf[size - 1] = 0;
}

/* "opencl" -> -1 (the first GPU, else device 0), "opencl:N" -> N; -2: not a spelling of it */
static int parse_spec(const char *spec) {
    if (!spec || !strcmp(spec, "opencl")) return -1;
    if (strncmp(spec, "opencl:", 7) || !spec[7] || strlen(spec + 7) > 3) return -2;
    for (const char *c = spec + 7; *c; c++)
        if (*c < '0' || *c > '9') return -2;
    return atoi(spec + 7);
}

static int pick(const ocl_list *l, int want) {
    if (want >= 0) return want < l->n ? want : -1;
    for (int i = 0; i < l->n; i++) {
        cl_device_type t = 0;
        if (clGetDeviceInfo(l->dev[i], CL_DEVICE_TYPE, sizeof t, &t, NULL) == CL_SUCCESS && (t & CL_DEVICE_TYPE_GPU))
            return i;
    }
    return 0;
}

/* What the kernels need of a device, checked before a context exists. */
static qhx_status check_device(ocl_dev *o, qhx_error *err) {
    cl_bool avail = CL_FALSE, compiler = CL_FALSE, unified = CL_FALSE;
    size_t max_wg = 0;
    cl_ulong local = 0;
    clGetDeviceInfo(o->id, CL_DEVICE_AVAILABLE, sizeof avail, &avail, NULL);
    clGetDeviceInfo(o->id, CL_DEVICE_COMPILER_AVAILABLE, sizeof compiler, &compiler, NULL);
    clGetDeviceInfo(o->id, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof unified, &unified, NULL);
    clGetDeviceInfo(o->id, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof max_wg, &max_wg, NULL);
    clGetDeviceInfo(o->id, CL_DEVICE_LOCAL_MEM_SIZE, sizeof local, &local, NULL);
    clGetDeviceInfo(o->id, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof o->mem_bytes, &o->mem_bytes, NULL);
    clGetDeviceInfo(o->id, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof o->max_alloc, &o->max_alloc, NULL);
    if (!avail) return qhx_fail(err, QHX_E_UNSUPPORTED, "device %s: the device is not available", o->label);
    if (!compiler) return qhx_fail(err, QHX_E_UNSUPPORTED, "device %s: the driver has no OpenCL C compiler", o->label);
    if (o->mem_bytes < OCL_MIN_MEMORY)
        return qhx_fail(err, QHX_E_NOMEM, "device %s: too little memory: %llu MiB, at least %llu MiB needed", o->label,
                        (unsigned long long)(o->mem_bytes >> 20), (unsigned long long)(OCL_MIN_MEMORY >> 20));
    /* QHX_OPENCL_WG=16|32 starts from a smaller work-group (tests: the kernels at the sizes a
       device with fewer registers falls back to) */
    const char *wg_env = getenv("QHX_OPENCL_WG");
    o->wg = wg_env && (!strcmp(wg_env, "16") || !strcmp(wg_env, "32")) ? (size_t)atoi(wg_env) : 64;
    while (o->wg > max_wg) o->wg /= 2;
    if (o->wg < 16)
        return qhx_fail(err, QHX_E_UNSUPPORTED, "device %s: work-groups of at least 16 needed, the device has %zu",
                        o->label, max_wg);
    const size_t need = 4 * (OCL_TT * o->wg > 2 * OCL_HD_MAX + 2 * o->wg ? OCL_TT * o->wg : 2 * OCL_HD_MAX + 2 * o->wg) + 256;
    if (local < need)
        return qhx_fail(err, QHX_E_UNSUPPORTED, "device %s: %llu bytes of local memory, the kernels need %zu", o->label,
                        (unsigned long long)local, need);
    o->unified = unified == CL_TRUE;
    return QHX_OK;
}

static qhx_status open_context(ocl_dev *o, qhx_error *err) {
    cl_int rc;
    const cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)o->platform, 0};
    o->ctx = clCreateContext(props, 1, &o->id, NULL, NULL, &rc);
    if (rc != CL_SUCCESS) return qhx_fail(err, QHX_E_UNSUPPORTED, "device %s: no context: %s", o->label, qhx_ocl_err_name(rc));
    o->q = clCreateCommandQueue(o->ctx, o->id, 0, &rc);
    if (rc != CL_SUCCESS) return qhx_fail(err, QHX_E_UNSUPPORTED, "device %s: no queue: %s", o->label, qhx_ocl_err_name(rc));
    const unsigned char zero[16] = {0};
    o->dummy = clCreateBuffer(o->ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof zero, (void *)zero, &rc);
    if (rc != CL_SUCCESS) return qhx_fail(err, QHX_E_NOMEM, "device %s: out of memory", o->label);
    return QHX_OK;
}

static void ocl_destroy(qhx_device *d) {
    if (!d) return;
    ocl_dev *o = ocl_of(d);
    if (o->q) clFinish(o->q);
    qhx_ocl_mem_free_all(o);
    for (int i = 0; i < OK_COUNT; i++)
        if (o->k[i]) clReleaseKernel(o->k[i]);
    if (o->prog) clReleaseProgram(o->prog);
    if (o->dummy) clReleaseMemObject(o->dummy);
    if (o->q) clReleaseCommandQueue(o->q);
    if (o->ctx) clReleaseContext(o->ctx);
    pthread_mutex_destroy(&o->mu);
    pthread_mutex_destroy(&o->err_mu);
    qhx_free(o);
}

const qhx_device_ops QHX_OCL_OPS = {
    .destroy = ocl_destroy,
    .info = qhx_ocl_info,
    .sync = qhx_ocl_sync,
    .buf_alloc = qhx_ocl_buf_alloc,
    .buf_free = qhx_ocl_buf_free,
    .set = qhx_ocl_set,
    .get = qhx_ocl_get,
    .copy = qhx_ocl_copy,
    .zero = qhx_ocl_zero,
    .supports = qhx_ocl_supports,
    .weight_prepare = qhx_ocl_weight_prepare,
    .attn_work = qhx_ocl_attn_work,
    .gdn_work = qhx_ocl_gdn_work,
    .vit_attn_work = qhx_ocl_vit_attn_work,
    .linear = qhx_ocl_linear,
    .linears = qhx_ocl_linears,
    .swiglu_linear = qhx_ocl_swiglu_linear,
    .linears_multi = qhx_ocl_linears_multi,
    .embed_rows = qhx_ocl_embed_rows,
    .rmsnorm = qhx_ocl_rmsnorm,
    .add_rmsnorm = qhx_ocl_add_rmsnorm,
    .add = qhx_ocl_add,
    .split_heads = qhx_ocl_split_heads,
    .attention = qhx_ocl_attention,
    .gdn_prep = qhx_ocl_gdn_prep,
    .gdn_delta = qhx_ocl_gdn_delta,
    .bias_rows = qhx_ocl_bias_rows,
    .act = qhx_ocl_act,
    .layernorm = qhx_ocl_layernorm,
    .rope_rows = qhx_ocl_rope_rows,
    .vit_attention = qhx_ocl_vit_attention,
};

qhx_status qhx_opencl_device_create(const qhx_device_params *p, qhx_device **out, qhx_error *err) {
    *out = NULL;
    const int want = parse_spec(p->spec);
    if (want == -2) return qhx_fail(err, QHX_E_ARG, "device '%s': expected opencl or opencl:N", p->spec);
    ocl_list l;
    qhx_status rc = list_devices(&l, err);
    if (rc) return rc;
    const int i = pick(&l, want);
    if (i < 0)
        return qhx_fail(err, QHX_E_ARG, "device opencl:%d: no such device (this machine has %d OpenCL device%s, opencl:0 .. opencl:%d; see qhx devices)",
                        want, l.n, l.n == 1 ? "" : "s", l.n - 1);
    ocl_dev *o = qhx_calloc(1, sizeof *o);
    if (!o) return qhx_fail(err, QHX_E_NOMEM, "device opencl: out of memory");
    pthread_mutex_init(&o->mu, NULL);
    pthread_mutex_init(&o->err_mu, NULL);
    qhx_ocl_fault_init(o);
    o->platform = l.plat[i];
    o->id = l.dev[i];
    dev_str(o->id, CL_DEVICE_NAME, o->name, sizeof o->name);
    snprintf(o->label, sizeof o->label, "opencl:%d (%s)", i, o->name);
    o->dev = (qhx_device){.name = "opencl", .op = &QHX_OCL_OPS, .impl = o};
    rc = check_device(o, err);
    if (!rc) rc = open_context(o, err);
    if (!rc) rc = qhx_ocl_build(o, err);
    if (rc) {
        ocl_destroy(&o->dev);
        return rc;
    }
    *out = &o->dev;
    return QHX_OK;
}

void qhx_ocl_info(const qhx_device *d, qhx_device_info *out) {
    *out = (qhx_device_info){.n_threads = 1, .isa = ocl_of(d)->label};
}

/* ---- the listing (qhx devices, qhx_devices_list) ---------------------------------------- */

#define OCL_FREE_MEMORY_AMD 0x4039 /* cl_amd_device_attribute_query: size_t[2] in KiB, the free total first */

/* Free memory where the driver says (AMD's query); 0 elsewhere. */
static uint64_t free_bytes(cl_device_id d) {
    char ext[4096];
    dev_str(d, CL_DEVICE_EXTENSIONS, ext, sizeof ext);
    if (!strstr(ext, "cl_amd_device_attribute_query")) return 0;
    size_t kib[2] = {0, 0};
    if (clGetDeviceInfo(d, OCL_FREE_MEMORY_AMD, sizeof kib, kib, NULL) != CL_SUCCESS) return 0;
    return (uint64_t)kib[0] << 10;
}

static void describe(cl_platform_id p, cl_device_id d, qhx_device_entry *e) {
    char name[192], ver[96], drv[64], pname[96];
    cl_ulong mem = 0;
    cl_uint cu = 0;
    cl_bool unified = CL_FALSE;
    cl_device_type t = 0;
    dev_str(d, CL_DEVICE_NAME, name, sizeof name);
    dev_str(d, CL_DEVICE_VERSION, ver, sizeof ver);
    dev_str(d, CL_DRIVER_VERSION, drv, sizeof drv);
    char *sp = strchr(ver, ' '); /* "OpenCL 3.0 <the vendor's words>": the first two */
    if (sp && (sp = strchr(sp + 1, ' '))) *sp = 0;
    pname[0] = 0;
    clGetPlatformInfo(p, CL_PLATFORM_NAME, sizeof pname - 1, pname, NULL);
    pname[sizeof pname - 1] = 0;
    clGetDeviceInfo(d, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, NULL);
    clGetDeviceInfo(d, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
    clGetDeviceInfo(d, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof unified, &unified, NULL);
    clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof t, &t, NULL);
    e->memory_bytes = mem;
    e->free_bytes = free_bytes(d);
    snprintf(e->description, sizeof e->description, "%.80s (%s), %.40s, %.40s, driver %.24s, %u compute units%s", name,
             t & CL_DEVICE_TYPE_GPU ? "gpu" : t & CL_DEVICE_TYPE_CPU ? "cpu" : "other", pname, ver, drv, cu,
             unified ? ", host-unified memory" : "");
}

qhx_status qhx_opencl_device_list(qhx_device_entry *out, int cap, int *n, qhx_error *err) {
    ocl_list l;
    *n = 0;
    qhx_status rc = list_devices(&l, err);
    if (rc) return rc;
    for (int i = 0; i < l.n && i < cap; i++) {
        out[i] = (qhx_device_entry){0};
        snprintf(out[i].name, sizeof out[i].name, "opencl:%d", i);
        describe(l.plat[i], l.dev[i], &out[i]);
    }
    *n = l.n;
    return QHX_OK;
}
