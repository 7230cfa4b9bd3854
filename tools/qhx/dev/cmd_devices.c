/* qhx devices: the devices a model can run on (--device): the CPU, and the OpenCL platforms
 * and devices of this machine with their memory, compute units and extensions.
 *   qhx devices
 * Exit 0; 1 with one line when the build has OpenCL but the machine has no platform. */
#include "cli_dev.h"

#include "devices/device.h"
#ifdef QHX_HAVE_OPENCL
#include "devices/opencl/opencl.h"
#endif

#include <stdio.h>
#include <string.h>

int qhx_cmd_devices(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: qhx devices\n  the devices --device can name: cpu, and opencl:N for each OpenCL device\n");
            return QHX_EXIT_OK;
        }
        return qhx_cli_usage_error("devices", "unknown option '%s'", argv[i]);
    }
    printf("cpu  (the host CPU: --device cpu, the default)\n");
#ifdef QHX_HAVE_OPENCL
    qhx_error err = {0};
    if (qhx_opencl_list(stdout, &err)) {
        fprintf(stderr, "qhx devices: %s\n", err.msg);
        return QHX_EXIT_RUNTIME;
    }
#else
    printf("opencl: not in this build (built without OpenCL: no headers and ICD loader found, or -DQHX_OPENCL=OFF)\n");
#endif
    return QHX_EXIT_OK;
}
