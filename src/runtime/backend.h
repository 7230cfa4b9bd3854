/* runtime/backend.h: the backend boundary. A backend executes the graphs a run plan names on
 * buffers the host owns; host-ops and sessions see only this table, never a model's internals.
 *
 * Graphs (by name, as a manifest's artifacts would name QNN context binaries):
 *   "prefill"  ids (n >= 1) at positions n_past.. -> state updated; logits of the last (or all)
 *   "decode"   one id -> state updated; logits
 *   "lm_head"  hidden (H) -> logits (V); fused into prefill/decode on the CPU (has_graph = 0)
 *   "vision"   image -> embeddings; run through the family's image path on the CPU
 * Ownership: the backend owns its loaded graphs and weights (through the model); the session
 * owns each sequence's state, created by the backend (state_create) so its layout is the
 * backend's business; the host owns every input and output buffer. */
#ifndef QHX_RUNTIME_BACKEND_H
#define QHX_RUNTIME_BACKEND_H

#include "models/model.h"

#include <stdbool.h>

typedef enum qhx_graph {
    QHX_GRAPH_PREFILL = 0,
    QHX_GRAPH_DECODE,
    QHX_GRAPH_LM_HEAD,
    QHX_GRAPH_VISION,
    QHX_GRAPH_COUNT
} qhx_graph;

/* Inputs and outputs of one graph run. */
typedef struct qhx_graph_io {
    const int32_t *ids;      /* (n,) token ids */
    int64_t n;
    float *logits;           /* OUT: (vocab,) or, with logits_all, (n, vocab) */
    bool logits_all;
    bool sequential;         /* prefill: one token at a time through the decode graph */
    int (*abort_cb)(void *user);
    void *abort_user;
} qhx_graph_io;

typedef struct qhx_backend {
    const char *name;
    /* Whether the backend runs this graph itself (else the host-op must not call it). */
    bool (*has_graph)(const qhx_model *m, qhx_graph g);
    qhx_status (*run)(const qhx_model *m, qhx_model_state *st, qhx_graph g, const qhx_graph_io *io,
                      qhx_error *err);
} qhx_backend;

/* The backend named `name`: "cpu" (or "-", or NULL) is the CPU backend. A QNN library path
 * (libQnnHtp.so, ...) or "qnn" gives QHX_E_UNSUPPORTED: this build has no QNN backend. */
qhx_status qhx_backend_find(const char *name, const qhx_backend **out, qhx_error *err);

#endif
