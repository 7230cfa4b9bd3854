/* qhx generate: greedy generation after a prompt of ids. */
#include "vl_cli.h"

#include <stdio.h>
#include <string.h>

static const char *model_arg(int argc, char **argv) {
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) return argv[i + 1];
    return NULL;
}

int qhx_cmd_generate(int argc, char **argv) {
    const char *model = model_arg(argc, argv);
    if (model && qhx_cli_is_qwen3vl(model)) return qhx_vl_cmd_generate(argc, argv);
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return qhx_vl_cmd_generate(argc, argv);
    if (!model) return qhx_cli_usage_error("generate", "-m MODEL is required");
    fprintf(stderr, "qhx generate: %s: not a Qwen3-VL checkpoint (config.json model_type)\n", model);
    return QHX_EXIT_RUNTIME;
}
