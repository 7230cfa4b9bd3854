/* qhx devices: the devices a model can run on (--device) on this machine, from the library's
 * listing (qhx_devices_list): each device's name, one line about it, and its memory (and what is
 * free, where the system or driver says).
 *   qhx devices
 * Exit 0; 1 with one line per kind of the build that has no device here (OpenCL without a
 * platform), after the devices that are. */
#include "cli_dev.h"

#include <stdio.h>
#include <string.h>

static void print_memory(uint64_t total, uint64_t free_bytes) {
    const double gib = 1024.0 * 1024.0 * 1024.0;
    if (!total) {
        printf("memory unknown\n");
        return;
    }
    printf("memory %.1f GiB", (double)total / gib);
    if (free_bytes) printf(", %.1f GiB free\n", (double)free_bytes / gib);
    else printf(" (free: not said by the driver)\n");
}

int qhx_cmd_devices(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: qhx devices\n  the devices --device can name on this machine (this build names them %s),\n"
                   "  with their memory\n",
                   qhx_devices_choices());
            return QHX_EXIT_OK;
        }
        return qhx_cli_usage_error("devices", "unknown option '%s'", argv[i]);
    }
    qhx_device_item *items = NULL;
    size_t n = 0;
    qhx_error err = {0};
    if (qhx_devices_list(&items, &n, &err)) return qhx_cli_runtime_error("devices", &err);
    size_t width = 0;
    for (size_t i = 0; i < n; i++)
        if (items[i].available && strlen(items[i].name) > width) width = strlen(items[i].name);
    printf("devices (--device NAME; cpu is the default):\n");
    for (size_t i = 0; i < n; i++) {
        if (!items[i].available) continue;
        printf("  %-*s  %s\n  %-*s  ", (int)width, items[i].name, items[i].description, (int)width, "");
        print_memory(items[i].memory_bytes, items[i].memory_free_bytes);
    }
    int rc = QHX_EXIT_OK;
    for (size_t i = 0; i < n; i++) {
        if (items[i].available) continue;
        fflush(stdout);
        fprintf(stderr, "qhx devices: %s: %s\n", items[i].name, items[i].description);
        rc = QHX_EXIT_RUNTIME;
    }
    qhx_devices_free(items);
    return rc;
}
