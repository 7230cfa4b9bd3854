/* devices/cpu/cpu.h: the CPU device: the kernel table chosen for this CPU (kernels/kernels.h)
 * and the persistent thread pool (core/pool.h) behind the op table of devices/device.h. Its
 * buffers are host memory (64-byte aligned, zeroed). Work is split as devices/cpu/par.h says:
 * pieces fixed by the problem size, so results do not depend on the thread count. */
#ifndef QHX_DEVICES_CPU_H
#define QHX_DEVICES_CPU_H

#include "core/pool.h"
#include "devices/device.h"

qhx_status qhx_cpu_device_create(const qhx_device_params *p, qhx_device **out /* OUT: qhx_cpu_device_free */,
                                 qhx_error *err);
void qhx_cpu_device_free(qhx_device *d); /* NULL allowed; the same as d->op->destroy */
/* The CPU as a device of the listing (qhx_device_desc.list): one entry, "cpu". */
qhx_status qhx_cpu_device_list(qhx_device_entry *out, int cap, int *n, qhx_error *err);

/* What the CPU device runs on (reports, benchmarks, kernel tests). */
const qhx_kernels *qhx_cpu_device_kernels(const qhx_device *d);
qhx_pool *qhx_cpu_device_pool(const qhx_device *d);

#endif
