/* qhx inspect: placeholder until the safetensors/manifest readers land. */
#include "cli.h"

#include <stdio.h>

int qhx_cmd_inspect(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "qhx inspect: not built yet\n");
    return QHX_EXIT_RUNTIME;
}
