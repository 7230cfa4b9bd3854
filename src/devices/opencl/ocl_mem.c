/* devices/opencl/ocl_mem.c: the OpenCL device's memory (ocl_impl.h, "Memory model"): buffers,
 * the moves between host and device, bound weights, the host-input cache, the staging of host
 * views, kernel arguments and launches, and the op table. */
#include "devices/opencl/ocl_impl.h"

#include "core/alloc.h"
#include "kernels/quant.h"

#include <stdint.h>
#include <string.h>

#define HOST_CACHE_MAX 4096 /* host inputs kept at once (a model has a few hundred) */

/* ---- buffers ---------------------------------------------------------------------------- */

qhx_status qhx_ocl_buf_alloc(const qhx_device *d, size_t bytes, qhx_dbuf **out, qhx_error *err) {
    ocl_dev *o = ocl_of(d);
    *out = NULL;
    if (bytes > o->max_alloc)
        return qhx_fail(err, QHX_E_NOMEM, "device %s: a buffer of %zu bytes is over the device's largest (%llu)",
                        o->label, bytes, (unsigned long long)o->max_alloc);
    qhx_dbuf *b = qhx_malloc(sizeof *b);
    if (!b) return qhx_fail(err, QHX_E_NOMEM, "device %s: out of memory", o->label);
    cl_int rc = qhx_ocl_inject(o, OCL_FAULT_BUFFER);
    const size_t n = bytes ? bytes : 4;
    cl_mem m = rc != CL_SUCCESS ? NULL
                                : clCreateBuffer(o->ctx, CL_MEM_READ_WRITE | (o->unified ? CL_MEM_ALLOC_HOST_PTR : 0), n, NULL, &rc);
    const cl_uchar zero = 0;
    if (rc == CL_SUCCESS) rc = clEnqueueFillBuffer(o->q, m, &zero, 1, 0, n, 0, NULL, NULL);
    if (rc != CL_SUCCESS) {
        if (m) clReleaseMemObject(m);
        qhx_free(b);
        return qhx_fail(err, QHX_E_NOMEM, "device %s: out of device memory for %zu bytes (%s)", o->label, bytes,
                        qhx_ocl_err_name(rc));
    }
    *b = (qhx_dbuf){d, NULL, m, bytes};
    *out = b;
    return QHX_OK;
}

void qhx_ocl_buf_free(const qhx_device *d, qhx_dbuf *b) {
    (void)d;
    if (!b) return;
    if (b->handle) clReleaseMemObject((cl_mem)b->handle);
    qhx_free(b);
}

static bool is_host(qhx_dv v) { return v.b && !v.b->dev; }
static char *host_at(qhx_dv v) { return (char *)v.b->host + v.off; }

void qhx_ocl_set(const qhx_device *d, qhx_dv dst, const void *src, size_t bytes) {
    ocl_dev *o = ocl_of(d);
    if (!bytes) return;
    if (is_host(dst)) {
        memcpy(host_at(dst), src, bytes);
        return;
    }
    pthread_mutex_lock(&o->mu);
    cl_int rc = qhx_ocl_inject(o, OCL_FAULT_WRITE);
    if (rc == CL_SUCCESS) rc = clEnqueueWriteBuffer(o->q, (cl_mem)dst.b->handle, CL_TRUE, dst.off, bytes, src, 0, NULL, NULL);
    if (rc != CL_SUCCESS) qhx_ocl_report(o, "a write", rc);
    pthread_mutex_unlock(&o->mu);
}

void qhx_ocl_get(const qhx_device *d, qhx_dv src, void *dst, size_t bytes) {
    ocl_dev *o = ocl_of(d);
    if (!bytes) return;
    if (is_host(src)) {
        memcpy(dst, host_at(src), bytes);
        return;
    }
    pthread_mutex_lock(&o->mu);
    cl_int rc = qhx_ocl_inject(o, OCL_FAULT_READ);
    if (rc == CL_SUCCESS) rc = clEnqueueReadBuffer(o->q, (cl_mem)src.b->handle, CL_TRUE, src.off, bytes, dst, 0, NULL, NULL);
    if (rc != CL_SUCCESS) {
        qhx_ocl_report(o, "a read", rc);
        memset(dst, 0xff, bytes); /* NaNs rather than stale bytes */
    }
    pthread_mutex_unlock(&o->mu);
}

void qhx_ocl_copy(const qhx_device *d, qhx_dv dst, qhx_dv src, size_t bytes) {
    ocl_dev *o = ocl_of(d);
    if (!bytes) return;
    if (is_host(src) && is_host(dst)) memmove(host_at(dst), host_at(src), bytes);
    else if (is_host(src)) qhx_ocl_set(d, dst, host_at(src), bytes);
    else if (is_host(dst)) qhx_ocl_get(d, src, host_at(dst), bytes);
    else {
        pthread_mutex_lock(&o->mu);
        cl_int rc = clEnqueueCopyBuffer(o->q, (cl_mem)src.b->handle, (cl_mem)dst.b->handle, src.off, dst.off, bytes,
                                        0, NULL, NULL);
        if (rc != CL_SUCCESS) qhx_ocl_report(o, "a copy", rc);
        pthread_mutex_unlock(&o->mu);
    }
}

void qhx_ocl_zero(const qhx_device *d, qhx_dv dst, size_t bytes) {
    ocl_dev *o = ocl_of(d);
    if (!bytes) return;
    if (is_host(dst)) {
        memset(host_at(dst), 0, bytes);
        return;
    }
    const cl_uchar zero = 0;
    pthread_mutex_lock(&o->mu);
    cl_int rc = clEnqueueFillBuffer(o->q, (cl_mem)dst.b->handle, &zero, 1, dst.off, bytes, 0, NULL, NULL);
    if (rc != CL_SUCCESS) qhx_ocl_report(o, "a fill", rc);
    pthread_mutex_unlock(&o->mu);
}

/* ---- weights ---------------------------------------------------------------------------- */

bool qhx_ocl_supports(const qhx_device *d, qhx_wfmt fmt) {
    (void)d;
    return fmt < QHX_W_COUNT && fmt != QHX_W_GGML; /* ggml blocks: the CPU device only, for now */
}

void qhx_ocl_weight_bytes(const qhx_weight *w, size_t b[3]) {
    const size_t r = (size_t)w->rows, c = (size_t)w->cols;
    b[1] = b[2] = 0;
    switch (w->fmt) {
    case QHX_W_F32: b[0] = r * c * 4; break;
    case QHX_W_F16:
    case QHX_W_BF16: b[0] = r * c * 2; break;
    case QHX_W_Q8: b[0] = r * c, b[1] = r * 4; break;
    case QHX_W_Q4: b[0] = r * c / 2, b[1] = r * (c / (size_t)w->group) * 2; break;
    case QHX_W_Q6: b[0] = r * c / 2, b[1] = r * (c / (size_t)w->group) * 2, b[2] = r * c / 4; break;
    default: b[0] = r * c / 2, b[1] = r * (size_t)qhx_q4a_row_supers(w->cols) * 2, b[2] = r * (size_t)qhx_q4a_row_sub_bytes(w->cols); break;
    }
}

static const void *plane_ptr(const qhx_weight *w, int i) {
    if (i == 0) return w->data;
    if (i == 1) return w->fmt == QHX_W_Q8 ? (const void *)w->scales : (const void *)w->gscales;
    return w->fmt == QHX_W_Q6 ? (const void *)w->high : (const void *)w->sub;
}

/* A plane on the device: wrapped in place on host-unified memory, else copied. */
static cl_mem plane_mem(ocl_dev *o, const void *p, size_t bytes, cl_int *rc) {
    const cl_mem_flags f = CL_MEM_READ_ONLY | (o->unified ? CL_MEM_USE_HOST_PTR : CL_MEM_COPY_HOST_PTR);
    return clCreateBuffer(o->ctx, f, bytes, (void *)p, rc);
}

static size_t wt_slot(const ocl_dev *o, const void *key) {
    size_t h = ((uintptr_t)key >> 4) * 0x9e3779b97f4a7c15ull;
    return h & (o->wt_cap - 1);
}

static ocl_wentry *wt_find(const ocl_dev *o, const void *key) {
    if (!o->wt_cap) return NULL;
    for (size_t i = wt_slot(o, key), k = 0; k < o->wt_cap; i = (i + 1) & (o->wt_cap - 1), k++) {
        if (o->wt[i].key == key) return &o->wt[i];
        if (!o->wt[i].key) return NULL;
    }
    return NULL;
}

static qhx_status wt_grow(ocl_dev *o, qhx_error *err) {
    size_t cap = o->wt_cap ? 2 * o->wt_cap : 256;
    ocl_wentry *t = qhx_calloc(cap, sizeof *t), *old = o->wt;
    if (!t) return qhx_fail(err, QHX_E_NOMEM, "device %s: out of memory", o->label);
    size_t old_cap = o->wt_cap;
    o->wt = t, o->wt_cap = cap;
    for (size_t i = 0; i < old_cap; i++) {
        if (!old[i].key) continue;
        size_t j = wt_slot(o, old[i].key);
        while (t[j].key) j = (j + 1) & (cap - 1);
        t[j] = old[i];
    }
    qhx_free(old);
    return QHX_OK;
}

qhx_status qhx_ocl_weight_prepare(const qhx_device *d, qhx_weight *w, qhx_error *err) {
    ocl_dev *o = ocl_of(d);
    size_t bytes[3];
    qhx_ocl_weight_bytes(w, bytes);
    pthread_mutex_lock(&o->mu);
    qhx_status st = QHX_OK;
    if (wt_find(o, w->data)) goto done; /* the same tensor bound twice (a tied head) */
    if ((o->wt_n + 1) * 2 > o->wt_cap && (st = wt_grow(o, err))) goto done;
    ocl_wentry e = {w->data, {NULL, NULL, NULL}};
    for (int i = 0; i < 3 && bytes[i]; i++) {
        cl_int rc;
        e.m[i] = bytes[i] > o->max_alloc ? NULL : plane_mem(o, plane_ptr(w, i), bytes[i], &rc);
        if (!e.m[i]) {
            for (int j = 0; j < i; j++) clReleaseMemObject(e.m[j]);
            st = qhx_fail(err, QHX_E_NOMEM,
                          "device %s: too little memory for a %lldx%lld weight (%zu bytes; device memory %llu MiB, largest buffer %llu MiB)",
                          o->label, (long long)w->rows, (long long)w->cols, bytes[i],
                          (unsigned long long)(o->mem_bytes >> 20), (unsigned long long)(o->max_alloc >> 20));
            goto done;
        }
    }
    size_t j = wt_slot(o, w->data);
    while (o->wt[j].key) j = (j + 1) & (o->wt_cap - 1);
    o->wt[j] = e;
    o->wt_n++;
done:
    pthread_mutex_unlock(&o->mu);
    return st;
}

/* A full list (an op over many rows of weights no weight_prepare saw): the temporaries that
 * need no read-back are released (the driver keeps them until the kernels enqueued on them
 * are done); views still to be read back stay. */
static bool stage_push(ocl_dev *o, cl_mem m, void *host, size_t bytes) {
    if (o->n_staged == OCL_MAX_STAGED) {
        int k = 0;
        for (int i = 0; i < o->n_staged; i++) {
            if (o->staged[i].host) o->staged[k++] = o->staged[i];
            else clReleaseMemObject(o->staged[i].m);
        }
        o->n_staged = k;
    }
    if (o->n_staged == OCL_MAX_STAGED) {
        qhx_ocl_refuse(o, QHX_E_LIMIT, "an op staging more than %d host views", OCL_MAX_STAGED);
        clReleaseMemObject(m);
        return false;
    }
    o->staged[o->n_staged++] = (ocl_staged){m, host, bytes};
    return true;
}

/* The planes of w: bound ones, or (a weight no weight_prepare saw, as the op tests make them)
 * temporary buffers for this op. */
void qhx_ocl_weight(ocl_dev *o, const qhx_weight *w, ocl_ref out[3]) {
    const ocl_wentry *e = wt_find(o, w->data);
    size_t bytes[3];
    qhx_ocl_weight_bytes(w, bytes);
    for (int i = 0; i < 3; i++) {
        out[i] = (ocl_ref){o->dummy, 0};
        if (e) {
            if (e->m[i]) out[i].m = e->m[i];
            continue;
        }
        if (!bytes[i]) continue;
        cl_int rc = qhx_ocl_inject(o, OCL_FAULT_BUFFER);
        cl_mem m = rc == CL_SUCCESS ? plane_mem(o, plane_ptr(w, i), bytes[i], &rc) : NULL;
        if (rc != CL_SUCCESS) {
            qhx_ocl_report(o, "a weight upload", rc);
            continue;
        }
        if (stage_push(o, m, NULL, 0)) out[i].m = m;
    }
}

/* ---- host inputs ------------------------------------------------------------------------ */

/* an entry's shadow may be rewritten or freed only once its upload is done */
static void ht_settle(ocl_hentry *e) {
    if (!e->ev) return;
    clWaitForEvents(1, &e->ev);
    clReleaseEvent(e->ev);
    e->ev = NULL;
}

static void ht_clear(ocl_dev *o) {
    for (size_t i = 0; i < o->ht_cap; i++)
        if (o->ht[i].ptr) {
            ht_settle(&o->ht[i]);
            clReleaseMemObject(o->ht[i].m); /* deferred by the driver while a kernel still reads it */
            qhx_free(o->ht[i].shadow);
        }
    qhx_free(o->ht);
    o->ht = NULL, o->ht_cap = o->ht_n = 0;
}

static ocl_hentry *ht_slot(ocl_dev *o, const void *p) {
    if (!o->ht_cap || o->ht_n * 2 >= o->ht_cap) {
        if (o->ht_n >= HOST_CACHE_MAX) ht_clear(o);
        size_t cap = o->ht_cap ? 2 * o->ht_cap : 512;
        ocl_hentry *t = qhx_calloc(cap, sizeof *t), *old = o->ht;
        if (!t) return NULL;
        size_t old_cap = o->ht_cap;
        o->ht = t, o->ht_cap = cap;
        for (size_t i = 0; i < old_cap; i++) {
            if (!old[i].ptr) continue;
            size_t j = (((uintptr_t)old[i].ptr >> 4) * 0x9e3779b97f4a7c15ull) & (cap - 1);
            while (t[j].ptr) j = (j + 1) & (cap - 1);
            t[j] = old[i];
        }
        qhx_free(old);
    }
    size_t j = (((uintptr_t)p >> 4) * 0x9e3779b97f4a7c15ull) & (o->ht_cap - 1);
    while (o->ht[j].ptr && o->ht[j].ptr != p) j = (j + 1) & (o->ht_cap - 1);
    return &o->ht[j];
}

/* p (bytes) as a device buffer: the cached upload when the bytes are still those it holds, else
 * uploaded (again). The upload is enqueued from the entry's own copy of the bytes, so the host
 * may change p as soon as the op returns and the queue need not drain. */
ocl_ref qhx_ocl_host(ocl_dev *o, const void *p, size_t bytes) {
    if (!p || !bytes) return (ocl_ref){o->dummy, 0};
    ocl_hentry *e = ht_slot(o, p);
    if (!e) return (ocl_ref){o->dummy, 0};
    if (e->ptr && e->bytes == bytes && !memcmp(e->shadow, p, bytes)) return (ocl_ref){e->m, 0};
    cl_int rc = CL_SUCCESS;
    ht_settle(e);
    if (e->ptr && e->bytes != bytes) {
        clReleaseMemObject(e->m);
        qhx_free(e->shadow);
        e->ptr = NULL;
        o->ht_n--;
    }
    if (!e->ptr) {
        void *shadow = qhx_malloc(bytes);
        if (shadow) rc = qhx_ocl_inject(o, OCL_FAULT_BUFFER);
        cl_mem m = shadow && rc == CL_SUCCESS ? clCreateBuffer(o->ctx, CL_MEM_READ_ONLY, bytes, NULL, &rc) : NULL;
        if (!m) {
            qhx_free(shadow);
            qhx_ocl_report(o, "a host input upload", shadow ? rc : CL_OUT_OF_HOST_MEMORY);
            return (ocl_ref){o->dummy, 0};
        }
        *e = (ocl_hentry){p, bytes, shadow, m, NULL};
        o->ht_n++;
    }
    memcpy(e->shadow, p, bytes);
    rc = qhx_ocl_inject(o, OCL_FAULT_WRITE);
    if (rc == CL_SUCCESS) rc = clEnqueueWriteBuffer(o->q, e->m, CL_FALSE, 0, bytes, e->shadow, 0, NULL, &e->ev);
    if (rc != CL_SUCCESS) {
        e->ev = NULL;
        qhx_ocl_report(o, "a host input upload", rc);
    }
    return (ocl_ref){e->m, 0};
}

/* ---- views ------------------------------------------------------------------------------ */

/* A view as a kernel argument. A host wrapper's bytes from off to its end are staged in a
 * temporary buffer (and read back after the op when the op writes them). */
ocl_ref qhx_ocl_view(ocl_dev *o, qhx_dv v, bool written) {
    if (!v.b) return (ocl_ref){o->dummy, 0};
    if (v.b->dev) return (ocl_ref){(cl_mem)v.b->handle, v.off};
    const size_t bytes = v.b->bytes > v.off ? v.b->bytes - v.off : 0;
    if (!bytes) return (ocl_ref){o->dummy, 0};
    cl_int rc = qhx_ocl_inject(o, OCL_FAULT_BUFFER);
    cl_mem m = rc == CL_SUCCESS ? clCreateBuffer(o->ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes, host_at(v), &rc) : NULL;
    if (rc != CL_SUCCESS) {
        qhx_ocl_report(o, "staging a host view", rc);
        return (ocl_ref){o->dummy, 0};
    }
    if (!stage_push(o, m, written ? host_at(v) : NULL, bytes)) return (ocl_ref){o->dummy, 0};
    return (ocl_ref){m, 0};
}

void qhx_ocl_op_begin(ocl_dev *o) { pthread_mutex_lock(&o->mu); }

static void op_release(ocl_dev *o) {
    for (int i = 0; i < o->n_staged; i++) {
        ocl_staged *s = &o->staged[i];
        if (s->host) {
            cl_int rc = qhx_ocl_inject(o, OCL_FAULT_READ);
            if (rc == CL_SUCCESS) rc = clEnqueueReadBuffer(o->q, s->m, CL_TRUE, 0, s->bytes, s->host, 0, NULL, NULL);
            if (rc != CL_SUCCESS) qhx_ocl_report(o, "reading a host view back", rc);
        }
        clReleaseMemObject(s->m);
    }
    o->n_staged = 0;
}

void qhx_ocl_op_end(ocl_dev *o) {
    op_release(o);
    pthread_mutex_unlock(&o->mu);
}

void qhx_ocl_mem_free_all(ocl_dev *o) {
    for (size_t i = 0; i < o->wt_cap; i++)
        for (int j = 0; j < 3; j++)
            if (o->wt[i].key && o->wt[i].m[j]) clReleaseMemObject(o->wt[i].m[j]);
    qhx_free(o->wt);
    o->wt = NULL, o->wt_cap = o->wt_n = 0;
    ht_clear(o);
}

/* ---- kernel arguments and launches ---------------------------------------------------------- */

ocl_args qhx_ocl_args(ocl_dev *o, ocl_kid id) { return (ocl_args){o, o->k[id], 0, CL_SUCCESS}; }

static void a_raw(ocl_args *a, size_t size, const void *v) {
    cl_int rc = clSetKernelArg(a->k, a->i++, size, v);
    if (a->rc == CL_SUCCESS) a->rc = rc;
}

void qhx_ocl_a_ref(ocl_args *a, ocl_ref r) {
    a_raw(a, sizeof r.m, &r.m);
    a_raw(a, sizeof r.off, &r.off);
}
void qhx_ocl_a_i64(ocl_args *a, int64_t v) {
    cl_long x = v;
    a_raw(a, sizeof x, &x);
}
void qhx_ocl_a_i32(ocl_args *a, int v) {
    cl_int x = v;
    a_raw(a, sizeof x, &x);
}
void qhx_ocl_a_f32(ocl_args *a, float v) { a_raw(a, sizeof v, &v); }

/* Nothing is launched once the device has failed: an input the failure left unwritten (token
 * ids, a staged view) may hold anything, and a kernel that indexes by it would read out of
 * bounds; the call fails at its sync anyway. */
void qhx_ocl_launch(ocl_args *a, size_t g0, size_t g1, size_t g2, size_t l0) {
    if (!g0 || !g1 || !g2 || atomic_load(&a->o->failed)) return;
    if (l0) g0 = (g0 + l0 - 1) / l0 * l0;
    const size_t g[3] = {g0, g1, g2}, l[3] = {l0, 1, 1};
    cl_int rc = a->rc;
    if (rc == CL_SUCCESS) rc = qhx_ocl_inject(a->o, OCL_FAULT_LAUNCH);
    if (rc == CL_SUCCESS) rc = clEnqueueNDRangeKernel(a->o->q, a->k, 3, NULL, g, l0 ? l : NULL, 0, NULL, NULL);
    if (rc != CL_SUCCESS) qhx_ocl_report(a->o, "a kernel launch", rc);
}
