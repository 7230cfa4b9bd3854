/* cli_model.h: argument helpers shared by the commands that run a model (logits, generate); public API only. */
#ifndef QHX_CLI_MODEL_H
#define QHX_CLI_MODEL_H

#include "qhx.h"

#include <stddef.h>
#include <stdint.h>

/* Parse "1,2,3" or "1 2 3" (commas and whitespace separate) into a new array (owned: free) of *n ids in [0, INT32_MAX].
 * Returns 0, or -1 with a reason in why[why_size] (nothing allocated). */
int qhx_cli_parse_ids(const char *s, int32_t **ids /* OUT */, int64_t *n /* OUT */, char *why,
                      size_t why_size);

#endif
