/* devices/profile.h: a device that times every op of another (the per-op profile of a forward).
 *
 * qhx_profile_wrap gives a device whose ops forward to `inner` and add the wall time of each
 * call to a counter per op; the linear ops also count the weight bytes they read, so a report
 * can put each op's time against the memory bandwidth (qhx bench --profile). Ops on the CPU
 * return when their work is done, so a call's wall time is its cost, the pool's dispatch
 * included; on a device that queues work (OpenCL) the time lands on the op that waits.
 *
 * The op-level backend wraps its device when QHX_PROFILE is set (and not "0") in the
 * environment at load; nothing changes otherwise. */
#ifndef QHX_DEVICES_PROFILE_H
#define QHX_DEVICES_PROFILE_H

#include "devices/device.h"

#include <stdint.h>

typedef enum qhx_prof_op {
    QHX_PROF_LINEAR,        /* linear, linears, swiglu_linear: prefill rows or one decode row */
    QHX_PROF_LINEARS_MULTI, /* several sequences' rows (batched decode, verify) */
    QHX_PROF_EMBED,
    QHX_PROF_NORM,          /* rmsnorm, add_rmsnorm, layernorm */
    QHX_PROF_ELEMENTWISE,   /* add, split_heads, bias_rows, act, rope_rows */
    QHX_PROF_ATTENTION,
    QHX_PROF_GDN_PREP,      /* the delta rule's conv, norms and gates */
    QHX_PROF_GDN_DELTA,     /* the delta rule itself and its gated norm */
    QHX_PROF_VIT_ATTENTION,
    QHX_PROF_MEMORY,        /* set, get, copy, zero */
    QHX_PROF_COUNT
} qhx_prof_op;

typedef struct qhx_op_profile {
    int64_t calls[QHX_PROF_COUNT];
    int64_t ns[QHX_PROF_COUNT];
    int64_t weight_bytes[QHX_PROF_COUNT]; /* bytes of the weights the calls read (linear ops) */
    /* the linear ops again by weight format (a call over several weights: its first one's) */
    int64_t fmt_calls[QHX_W_COUNT], fmt_ns[QHX_W_COUNT], fmt_bytes[QHX_W_COUNT];
} qhx_op_profile;

const char *qhx_prof_op_name(qhx_prof_op op);

/* Bytes of a weight matrix as stored (data, scales, group parameters). */
int64_t qhx_weight_bytes(const qhx_weight *w);

/* Whether the environment asks for the profile (QHX_PROFILE set and not "0"). */
bool qhx_profile_wanted(void);

/* A device timing inner's ops (*out->op->destroy frees the wrapper, not inner). */
qhx_status qhx_profile_wrap(qhx_device *inner, qhx_device **out, qhx_error *err);

/* The counters so far; clear: start again from zero. NULL-safe on devices that are not wrappers:
 * false, *out zeroed. */
bool qhx_profile_read(qhx_device *d, qhx_op_profile *out, bool clear);

#endif
