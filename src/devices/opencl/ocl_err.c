/* devices/opencl/ocl_err.c: OpenCL status codes as words, and the one-time report of a failed
 * enqueue (used by every file of the device, so it sits below them all). */
#include "devices/opencl/ocl_impl.h"

#include <stdio.h>

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

/* Ops cannot return a status: the first failed enqueue of a device is said once on stderr, so a
 * failure is never silent (the results of that op are not to be trusted). */
void qhx_ocl_report(ocl_dev *o, const char *what, cl_int rc) {
    if (o->reported) return;
    o->reported = true;
    fprintf(stderr, "qhx: device %s: %s failed: %s (%d)\n", o->label, what, qhx_ocl_err_name(rc), (int)rc);
}
