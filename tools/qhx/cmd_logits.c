/* qhx logits: run a prompt of ids through a model and write the logits of every position. */
#include "vl_cli.h"

#include <stdio.h>
#include <string.h>

/* The model folder, from -m / --model. */
static const char *model_arg(int argc, char **argv) {
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) return argv[i + 1];
    return NULL;
}

int qhx_cmd_logits(int argc, char **argv) {
    const char *model = model_arg(argc, argv);
    if (model && qhx_cli_is_qwen3vl(model)) return qhx_vl_cmd_logits(argc, argv);
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return qhx_vl_cmd_logits(argc, argv);
    if (!model) return qhx_cli_usage_error("logits", "-m MODEL is required");
    fprintf(stderr, "qhx logits: %s: not a Qwen3-VL checkpoint (config.json model_type)\n", model);
    return QHX_EXIT_RUNTIME;
}
