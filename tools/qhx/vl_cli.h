/* vl_cli.h: the Qwen3-VL side of the qhx subcommands (embed-image, logits, generate): id lists,
 * float32 output files, and the runs themselves over models/qwen3vl.h. */
#ifndef QHX_VL_CLI_H
#define QHX_VL_CLI_H

#include "cli.h"

#include <stdint.h>

/* Parse an id list: "1,2,3", "1 2 3", a JSON list "[1, 2, 3]", or "@FILE" holding any of these.
 * *out is owned (free()). Returns 0, or -1 with a message in msg. */
int qhx_cli_parse_ids(const char *arg, int32_t **out, int64_t *n, char *msg, size_t msg_size);

/* Whether MODEL (a checkpoint folder) is a Qwen3-VL checkpoint (config.json model_type). */
int qhx_cli_is_qwen3vl(const char *model_dir);

/* `qhx logits` / `qhx generate` for a Qwen3-VL checkpoint; argv as the subcommand got it. */
int qhx_vl_cmd_logits(int argc, char **argv);
int qhx_vl_cmd_generate(int argc, char **argv);

#endif
