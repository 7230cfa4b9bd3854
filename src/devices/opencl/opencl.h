/* devices/opencl/opencl.h: the OpenCL device (devices/device.h) and what the rest of the build
 * sees of it. Devices are named "opencl" (the first GPU, else the first device of any kind) or
 * "opencl:N" (the N-th device of all platforms, in the order qhx_opencl_device_list lists them).
 * Kernels: the .cl files of kernels/, embedded at build time, built once per device at creation, their
 * binary cached on disk (docs/backends.md, "The OpenCL device"). Built when CMake finds OpenCL
 * (QHX_HAVE_OPENCL); without it devices/registry.c lists no "opencl". */
#ifndef QHX_DEVICES_OPENCL_H
#define QHX_DEVICES_OPENCL_H

#include "devices/device.h"

qhx_status qhx_opencl_device_create(const qhx_device_params *p, qhx_device **out /* OUT: ->op->destroy */,
                                    qhx_error *err);

/* The devices of every platform as "opencl:N" (qhx_device_desc.list): name, kind, platform,
 * OpenCL version, driver, compute units; memory, and free memory where the driver says (AMD's
 * cl_amd_device_attribute_query). QHX_E_UNSUPPORTED when there is no platform or device. */
qhx_status qhx_opencl_device_list(qhx_device_entry *out, int cap, int *n, qhx_error *err);

#endif
