/* devices/forward.c: the pass-through of every op of the list (devices/forward.h), made from
 * QHX_DEVICE_OPS so that no op is written out here. */
#include "devices/forward.h"

#define FWD_V(name, params, args)                                                                                     \
    static void fwd_##name(const qhx_device *d, QHX_DEV_UNPAREN(params)) {                                          \
        qhx_fwd_dev *f = qhx_fwd_of(d);                                                                               \
        const uint64_t token = f->before ? f->before(f, QHX_DOP_##name) : 0;                                          \
        f->inner->op->name(f->inner, QHX_DEV_UNPAREN(args));                                                          \
        if (f->after) f->after(f, QHX_DOP_##name, token);                                                             \
    }
#define FWD_R(type, name, params, args)                                                                               \
    static type fwd_##name(const qhx_device *d, QHX_DEV_UNPAREN(params)) {                                          \
        qhx_fwd_dev *f = qhx_fwd_of(d);                                                                               \
        const uint64_t token = f->before ? f->before(f, QHX_DOP_##name) : 0;                                          \
        type r = f->inner->op->name(f->inner, QHX_DEV_UNPAREN(args));                                                 \
        if (f->after) f->after(f, QHX_DOP_##name, token);                                                             \
        return r;                                                                                                     \
    }
QHX_DEVICE_OPS(FWD_V, FWD_R)
#undef FWD_V
#undef FWD_R

#define SET_V(name, params, args) f->ops.name = fwd_##name;
#define SET_R(type, name, params, args) f->ops.name = fwd_##name;
void qhx_fwd_init(qhx_fwd_dev *f, const qhx_device *inner, void (*destroy)(qhx_device *d)) {
    f->inner = inner;
    f->ops.destroy = destroy;
    QHX_DEVICE_OPS(SET_V, SET_R)
    f->before = NULL;
    f->after = NULL;
    f->self = (qhx_device){.name = inner->name, .op = &f->ops, .impl = f};
}
#undef SET_V
#undef SET_R
