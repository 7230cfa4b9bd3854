/* devices/registry.c: the devices of this build (devices/device.h). A new device adds its line
 * here (docs/backends.md, "Adding a device"); tests/test_device_ops.c checks every one. */
#include "devices/device.h"

#include "devices/cpu/cpu.h"
#ifdef QHX_HAVE_OPENCL
#include "devices/opencl/opencl.h"
#endif

#include <string.h>

static const qhx_device_desc DEVICES[] = {
    {"cpu", qhx_cpu_device_create},
#ifdef QHX_HAVE_OPENCL
    {"opencl", qhx_opencl_device_create}, /* also "opencl:N" (devices/opencl/opencl.h) */
#endif
};

#define N_DEVICES ((int)(sizeof DEVICES / sizeof DEVICES[0]))

int qhx_device_count(void) { return N_DEVICES; }

const qhx_device_desc *qhx_device_at(int i) { return i >= 0 && i < N_DEVICES ? &DEVICES[i] : NULL; }

/* "name", or "name:..." (a device of that kind by index: the device parses the rest) */
const qhx_device_desc *qhx_device_find(const char *name) {
    for (int i = 0; name && i < N_DEVICES; i++) {
        size_t n = strlen(DEVICES[i].name);
        if (!strncmp(DEVICES[i].name, name, n) && (name[n] == 0 || name[n] == ':')) return &DEVICES[i];
    }
    return NULL;
}
