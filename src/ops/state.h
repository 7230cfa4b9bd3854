/* ops/state.h: how a sequence's persistent memory is described to whoever saves or copies it
 * (session files, checkpoints): a list of regions, each n_rows rows of row_bytes in a view of a
 * device buffer (or of a host wrapper, qhx_dbuf_host), read and written through the device's
 * get and set: a device whose memory is not host memory keeps its state where it is.
 * Everything else a sequence holds is scratch and is never saved. */
#ifndef QHX_OPS_STATE_H
#define QHX_OPS_STATE_H

#include "devices/device.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* per_token: row r belongs to position r, so only rows [0, n_past) carry information. */
typedef struct qhx_state_region {
    const qhx_device *dev; /* the device that holds it */
    qhx_dv at;
    size_t row_bytes;
    int64_t n_rows;
    bool per_token;
} qhx_state_region;

#define QHX_STATE_MAX_REGIONS 4096

/* bytes [off, off + n) of region r to dst / from src */
static inline void qhx_state_read(const qhx_state_region *r, size_t off, void *dst, size_t n) {
    r->dev->op->get(r->dev, (qhx_dv){r->at.b, r->at.off + off}, dst, n);
}
static inline void qhx_state_write(const qhx_state_region *r, size_t off, const void *src, size_t n) {
    r->dev->op->set(r->dev, (qhx_dv){r->at.b, r->at.off + off}, src, n);
}

/* After the reads or writes of a save, restore or rollback: the failure of the device that holds
 * the regions, if one of its ops failed (devices/device.h, "Errors"). */
static inline qhx_status qhx_state_sync(const qhx_state_region *r, int n, qhx_error *err) {
    return n > 0 ? r->dev->op->sync(r->dev, err) : QHX_OK;
}

#endif
