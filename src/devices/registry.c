/* devices/registry.c: the devices of this build (devices/device.h). A new device adds its line
 * here (docs/backends.md, "Adding a device"); tests/test_device_ops.c checks every one, and the
 * names a user may write (--device, qhx_model_params.backend, qhx devices) all come from here. */
#include "devices/device.h"

#include "devices/cpu/cpu.h"
#ifdef QHX_HAVE_OPENCL
#include "devices/opencl/opencl.h"
#endif

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static const qhx_device_desc DEVICES[] = {
    {"cpu", false, qhx_cpu_device_create, qhx_cpu_device_list},
#ifdef QHX_HAVE_OPENCL
    {"opencl", true, qhx_opencl_device_create, qhx_opencl_device_list}, /* also "opencl:N" */
#endif
};

#define N_DEVICES ((int)(sizeof DEVICES / sizeof DEVICES[0]))

int qhx_device_count(void) { return N_DEVICES; }

const qhx_device_desc *qhx_device_at(int i) { return i >= 0 && i < N_DEVICES ? &DEVICES[i] : NULL; }

/* ":N", N of 1 to 3 digits */
static bool is_index(const char *s) {
    size_t n = strlen(s);
    if (s[0] != ':' || n < 2 || n > 4) return false;
    for (size_t i = 1; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return false;
    return true;
}

const qhx_device_desc *qhx_device_find(const char *name) {
    for (int i = 0; name && i < N_DEVICES; i++) {
        size_t n = strlen(DEVICES[i].name);
        if (strncmp(DEVICES[i].name, name, n)) continue;
        if (name[n] == 0 || (DEVICES[i].indexed && is_index(name + n))) return &DEVICES[i];
    }
    return NULL;
}

/* every spelling, "a, b or c" */
static char choices[256];
static pthread_once_t choices_once = PTHREAD_ONCE_INIT;

static void make_choices(void) {
    const char *forms[2 * N_DEVICES];
    char indexed[N_DEVICES][40];
    int n = 0;
    for (int i = 0; i < N_DEVICES; i++) {
        forms[n++] = DEVICES[i].name;
        if (DEVICES[i].indexed) {
            snprintf(indexed[i], sizeof indexed[i], "%s:N", DEVICES[i].name);
            forms[n++] = indexed[i];
        }
    }
    size_t at = 0;
    for (int k = 0; k < n && at < sizeof choices; k++) {
        const char *sep = k == 0 ? "" : k == n - 1 ? " or " : ", ";
        int w = snprintf(choices + at, sizeof choices - at, "%s%s", sep, forms[k]);
        if (w < 0) break;
        at += (size_t)w;
    }
}

const char *qhx_device_choices(void) {
    pthread_once(&choices_once, make_choices);
    return choices;
}
