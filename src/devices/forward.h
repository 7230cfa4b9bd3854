/* devices/forward.h: the base of a device that wraps another (devices/profile.h times its ops,
 * devices/calib.h watches its linear layers' inputs, tests stand in for a failing device).
 *
 * qhx_fwd_init fills the wrapper's own op table with a pass-through of every op of the list in
 * devices/device.h (QHX_DEVICE_OPS): each calls the same op of inner with inner as its d. The
 * wrapper then replaces the entries it does something in (f->ops.linear = ...), and may set
 * hooks that run around every pass-through call (a timer). An op added to the list is forwarded
 * by every wrapper without an edit. */
#ifndef QHX_DEVICES_FORWARD_H
#define QHX_DEVICES_FORWARD_H

#include "devices/device.h"

#include <stdint.h>

typedef struct qhx_fwd_dev qhx_fwd_dev;

struct qhx_fwd_dev {
    qhx_device self;     /* what the wrapper hands out: .op = &ops, .impl = this struct */
    const qhx_device *inner;
    qhx_device_ops ops;  /* the pass-through, entries replaced by the wrapper */
    /* NULL, or called before and after each pass-through call of op (before's value is handed
       to after): the wrapper's own entries do not go through them */
    uint64_t (*before)(qhx_fwd_dev *f, qhx_dev_op op);
    void (*after)(qhx_fwd_dev *f, qhx_dev_op op, uint64_t token);
};

/* f (the first member of the wrapper's struct) forwarding to inner, named as inner; destroy
 * frees the wrapper (never inner). */
void qhx_fwd_init(qhx_fwd_dev *f, const qhx_device *inner, void (*destroy)(qhx_device *d));

/* The wrapper behind a device qhx_fwd_init made, and the device it forwards to. */
static inline qhx_fwd_dev *qhx_fwd_of(const qhx_device *d) { return (qhx_fwd_dev *)d->impl; }
static inline const qhx_device *qhx_fwd_inner(const qhx_device *d) { return qhx_fwd_of(d)->inner; }

#endif
