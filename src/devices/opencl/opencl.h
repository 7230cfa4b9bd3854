/* devices/opencl/opencl.h: the OpenCL device (devices/device.h) and what the rest of the build
 * sees of it. Devices are named "opencl" (the first GPU, else the first device of any kind) or
 * "opencl:N" (the N-th device of all platforms, in the order qhx_opencl_list prints them).
 * Kernels: the .cl files of kernels/, embedded at build time, built once per device at creation, their
 * binary cached on disk (docs/backends.md, "The OpenCL device"). Built when CMake finds OpenCL
 * (QHX_HAVE_OPENCL); without it the functions below say so. */
#ifndef QHX_DEVICES_OPENCL_H
#define QHX_DEVICES_OPENCL_H

#include "devices/device.h"

#include <stdio.h>

qhx_status qhx_opencl_device_create(const qhx_device_params *p, qhx_device **out /* OUT: ->op->destroy */,
                                    qhx_error *err);

/* Print the platforms and devices (index, name, memory, compute units, extensions) to f.
 * QHX_E_UNSUPPORTED when OpenCL is absent (no platform, or a build without it). */
qhx_status qhx_opencl_list(FILE *f, qhx_error *err);

#endif
