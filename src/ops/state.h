/* ops/state.h: how a sequence's persistent memory is described to whoever saves or copies it
 * (session files, checkpoints): a list of regions, each n_rows rows of row_bytes. Everything
 * else a sequence holds is scratch and is never saved. */
#ifndef QHX_OPS_STATE_H
#define QHX_OPS_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* per_token: row r belongs to position r, so only rows [0, n_past) carry information. */
typedef struct qhx_state_region {
    void *data;
    size_t row_bytes;
    int64_t n_rows;
    bool per_token;
} qhx_state_region;

#define QHX_STATE_MAX_REGIONS 4096

#endif
