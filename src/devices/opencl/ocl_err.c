/* devices/opencl/ocl_err.c: OpenCL status codes as words, the device's first failure
 * (devices/device.h, "Errors"; every file of the device records its failures here, so it sits
 * below them all), and the failures a test can inject. */
#include "devices/opencl/ocl_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *qhx_ocl_err_name(cl_int rc) {
    switch (rc) {
    case CL_DEVICE_NOT_FOUND: return "CL_DEVICE_NOT_FOUND";
    case CL_OUT_OF_RESOURCES: return "CL_OUT_OF_RESOURCES";
    case CL_OUT_OF_HOST_MEMORY: return "CL_OUT_OF_HOST_MEMORY";
    case CL_MEM_OBJECT_ALLOCATION_FAILURE: return "CL_MEM_OBJECT_ALLOCATION_FAILURE";
    case CL_BUILD_PROGRAM_FAILURE: return "CL_BUILD_PROGRAM_FAILURE";
    case CL_INVALID_VALUE: return "CL_INVALID_VALUE";
    case CL_INVALID_BUFFER_SIZE: return "CL_INVALID_BUFFER_SIZE";
    case CL_INVALID_BINARY: return "CL_INVALID_BINARY";
    case CL_INVALID_KERNEL_ARGS: return "CL_INVALID_KERNEL_ARGS";
    case CL_INVALID_WORK_GROUP_SIZE: return "CL_INVALID_WORK_GROUP_SIZE";
    case CL_INVALID_ARG_VALUE: return "CL_INVALID_ARG_VALUE";
    case CL_INVALID_ARG_SIZE: return "CL_INVALID_ARG_SIZE";
    case CL_INVALID_ARG_INDEX: return "CL_INVALID_ARG_INDEX";
    case CL_INVALID_MEM_OBJECT: return "CL_INVALID_MEM_OBJECT";
    case CL_INVALID_GLOBAL_WORK_SIZE: return "CL_INVALID_GLOBAL_WORK_SIZE";
    default: return "an OpenCL error";
    }
}

/* Memory the driver could not find is QHX_E_NOMEM; any other refusal of the driver is work this
 * device cannot do here (QHX_E_UNSUPPORTED). */
static qhx_status status_of(cl_int rc) {
    return rc == CL_OUT_OF_RESOURCES || rc == CL_OUT_OF_HOST_MEMORY || rc == CL_MEM_OBJECT_ALLOCATION_FAILURE
               ? QHX_E_NOMEM
               : QHX_E_UNSUPPORTED;
}

static void keep_first(ocl_dev *o, qhx_status code, const char *fmt, va_list ap) {
    pthread_mutex_lock(&o->err_mu);
    if (o->sticky.code == QHX_OK) {
        char what[QHX_ERROR_MSG_SIZE];
        vsnprintf(what, sizeof what, fmt, ap);
        qhx_fail(&o->sticky, code, "device %s: %s", o->label, what);
        atomic_store(&o->failed, true);
    }
    pthread_mutex_unlock(&o->err_mu);
}

void qhx_ocl_refuse(ocl_dev *o, qhx_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    keep_first(o, code, fmt, ap);
    va_end(ap);
}

void qhx_ocl_report(ocl_dev *o, const char *what, cl_int rc) {
    qhx_ocl_refuse(o, status_of(rc), "%s failed: %s (%d)", what, qhx_ocl_err_name(rc), (int)rc);
}

qhx_status qhx_ocl_sync(const qhx_device *d, qhx_error *err) {
    ocl_dev *o = ocl_of(d);
    pthread_mutex_lock(&o->mu);
    const cl_int rc = clFinish(o->q);
    pthread_mutex_unlock(&o->mu);
    if (rc != CL_SUCCESS) qhx_ocl_report(o, "waiting for the queue", rc);
    pthread_mutex_lock(&o->err_mu);
    const qhx_status st = o->sticky.code;
    if (st && err) *err = o->sticky;
    pthread_mutex_unlock(&o->err_mu);
    return st;
}

/* ---- injected failures (tests) ---------------------------------------------------------- */

static const char *const FAULT_NAMES[4] = {"launch", "write", "read", "buffer"};

/* QHX_OPENCL_FAIL=KIND:N, N >= 1; anything else: no failure injected */
void qhx_ocl_fault_init(ocl_dev *o) {
    o->fail_kind = -1;
    const char *v = getenv("QHX_OPENCL_FAIL");
    const char *colon = v ? strchr(v, ':') : NULL;
    if (!colon) return;
    for (int k = 0; k < 4; k++)
        if ((size_t)(colon - v) == strlen(FAULT_NAMES[k]) && !strncmp(v, FAULT_NAMES[k], (size_t)(colon - v))) {
            char *end = NULL;
            long n = strtol(colon + 1, &end, 10);
            if (end != colon + 1 && !*end && n >= 1) o->fail_kind = k, o->fail_at = n;
        }
}

cl_int qhx_ocl_inject(ocl_dev *o, ocl_fault k) {
    if (o->fail_kind != (int)k) return CL_SUCCESS;
    pthread_mutex_lock(&o->err_mu);
    const long seen = ++o->fail_seen[k];
    pthread_mutex_unlock(&o->err_mu);
    if (seen != o->fail_at) return CL_SUCCESS;
    return k == OCL_FAULT_BUFFER ? CL_MEM_OBJECT_ALLOCATION_FAILURE : CL_OUT_OF_RESOURCES;
}
