/* runtime/devices_api.c: the devices of the build and machine through qhx.h (qhx_devices_list,
 * qhx_devices_choices, qhx_device_name_valid), read from the registry (devices/registry.c):
 * each kind lists its own devices (qhx_device_desc.list). */
#include "core/alloc.h"
#include "core/status.h"
#include "devices/device.h"

#include <string.h>

#define MAX_PER_KIND 64

/* src into dst (size bytes), cut to fit, NUL-terminated */
static void copy_text(char *dst, size_t size, const char *src) {
    size_t n = strlen(src);
    if (n >= size) n = size - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

static qhx_device_item item_of(const qhx_device_entry *e) {
    qhx_device_item it = {.memory_bytes = e->memory_bytes, .memory_free_bytes = e->free_bytes, .available = 1};
    copy_text(it.name, sizeof it.name, e->name);
    copy_text(it.description, sizeof it.description, e->description);
    return it;
}

qhx_status qhx_devices_list(qhx_device_item **out, size_t *n, qhx_error *err) {
    if (!out || !n) return qhx_fail(err, QHX_E_ARG, "devices: out and n are required");
    *out = NULL;
    *n = 0;
    qhx_device_entry *e = qhx_calloc(MAX_PER_KIND, sizeof *e);
    qhx_device_item *items = qhx_calloc((size_t)qhx_device_count() * MAX_PER_KIND, sizeof *items);
    if (!e || !items) {
        qhx_free(e);
        qhx_free(items);
        return qhx_fail(err, QHX_E_NOMEM, "devices: out of memory");
    }
    size_t k = 0;
    for (int i = 0; i < qhx_device_count(); i++) {
        const qhx_device_desc *dd = qhx_device_at(i);
        qhx_error why = {0};
        int found = 0;
        if (dd->list(e, MAX_PER_KIND, &found, &why) != QHX_OK || found < 1) { /* none here: say why */
            items[k] = (qhx_device_item){.available = 0};
            copy_text(items[k].name, sizeof items[k].name, dd->name);
            copy_text(items[k].description, sizeof items[k].description,
                      why.msg[0] ? why.msg : "no device of this kind on this machine");
            k++;
            continue;
        }
        for (int j = 0; j < found && j < MAX_PER_KIND; j++) items[k++] = item_of(&e[j]);
    }
    qhx_free(e);
    *out = items;
    *n = k;
    return QHX_OK;
}

void qhx_devices_free(qhx_device_item *list) { qhx_free(list); }

const char *qhx_devices_choices(void) { return qhx_device_choices(); }

int qhx_device_name_valid(const char *name) { return name && qhx_device_find(name) ? 1 : 0; }
