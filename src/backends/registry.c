/* backends/registry.c: the backends of this build. Adding a whole-graph backend: one file
 * implementing backends/backend.h and one line in BACKENDS; adding a device for the op-level
 * backend: devices/registry.c (docs/backends.md). */
#include "backends/backend.h"

#include <string.h>

extern const qhx_backend QHX_BACKEND_CPU;

static const qhx_backend *const BACKENDS[] = {
    &QHX_BACKEND_CPU,
};

qhx_status qhx_backend_find(const char *name, const qhx_backend **out, const qhx_device_desc **device,
                            qhx_error *err) {
    *out = NULL;
    *device = NULL;
    if (!name || !*name || !strcmp(name, "-")) name = "cpu";
    /* a device's name: the op-level backend (cpu.c) on that device */
    if ((*device = qhx_device_find(name))) {
        *out = &QHX_BACKEND_CPU;
        return QHX_OK;
    }
    for (size_t i = 0; i < sizeof BACKENDS / sizeof BACKENDS[0]; i++)
        if (!strcmp(BACKENDS[i]->name, name)) {
            *out = BACKENDS[i];
            return QHX_OK;
        }
    if (strstr(name, "Qnn") || strstr(name, "qnn") || strstr(name, "QNN"))
        return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: this build has no QNN backend (docs/backends.md); use cpu", name);
    return qhx_fail(err, QHX_E_UNSUPPORTED, "backend '%s' is not available in this build (the devices: %s)", name,
                    qhx_device_choices());
}
