/* backends/backend.h: the backend boundary. A backend loads the graphs a run plan names (their
 * weights included), creates and sizes each sequence's state, and runs its graphs on
 * buffers the host owns. Host-ops and sessions (src/runtime) see only this table; they never
 * reach a family's internals or a backend's memory.
 *
 * Graphs (by name, as a manifest's artifacts would name QNN context binaries):
 *   "prefill"  ids (n >= 1) at positions n_past.. -> state updated; logits of the last (or all)
 *   "decode"   one id -> state updated; logits
 *   "lm_head"  hidden rows after the last decoder layer (n, hidden) -> logits (n, vocab); with
 *              no logits and hidden_out: the final norm's rows (n, hidden) alone (embeddings)
 *   "vision"   image patches (image/image.h) -> one embedding row per image token
 *   "mtp"      the multi-token-prediction block: hidden rows after the last decoder layer at
 *              positions pos0.. and the token after each -> draft logits of the token after that
 *              (with hidden_normed: rows of the block's own output; hidden_out: that output)
 *   "verify"   speculative verification: ids (n) at positions n_past.. -> logits (n, vocab) and
 *              hidden (n, hidden) of every row, each with the bits of one-token decode steps;
 *              seq_keep then cuts the sequence back to the first k of them
 * A prefill may carry images: seq_attach announces, for the ids of the next prefill calls, which
 * image rows sit at the image-pad ids (the family turns them into rows and M-RoPE positions).
 * Ownership: the backend owns its loaded graphs and weights and every sequence state it created
 * (the session holds the handle); the host owns every input and output buffer.
 *
 * Adding a backend: one file implementing this table and one line in backends/registry.c
 * (docs/backends.md shows the QNN mapping graph by graph). */
#ifndef QHX_BACKENDS_BACKEND_H
#define QHX_BACKENDS_BACKEND_H

#include "devices/profile.h"
#include "families/family.h"
#include "io/manifest.h"

#include <stdbool.h>

typedef enum qhx_graph {
    QHX_GRAPH_PREFILL = 0,
    QHX_GRAPH_DECODE,
    QHX_GRAPH_LM_HEAD,
    QHX_GRAPH_VISION,
    QHX_GRAPH_MTP,
    QHX_GRAPH_VERIFY,
    QHX_GRAPH_COUNT
} qhx_graph;

typedef struct qhx_graphs qhx_graphs; /* a backend's loaded graphs and weights */
/* qhx_seq, qhx_seq_params: families/family.h (one sequence; its impl laid out as the backend likes) */

/* A wrapper an op-level backend puts around its device before the family binds to it (the
 * forge's calibration pass: devices/calib.h): fn gets the device and gives the one the net runs
 * on, freed by its own op->destroy before the inner one. */
typedef struct qhx_device_wrap {
    qhx_status (*fn)(void *user, qhx_device *inner, qhx_device **out /* OUT */, qhx_error *err);
    void *user;
} qhx_device_wrap;

typedef struct qhx_backend_load_args {
    const qhx_plan *plan;             /* the artifacts to load */
    const qhx_family_desc *family;
    const qhx_model_config *cfg;      /* parsed by the family from the plan's config */
    const qhx_model_params *params;   /* isa, threads, weights mode, arithmetic, progress */
    bool vision;                      /* the host-op feeds images: load the vision graph too */
    bool mtp;                         /* load the multi-token-prediction graph when there is one */
    const qhx_device_desc *device;    /* op-level backends: the device to run on (NULL: cpu) */
    const qhx_device_wrap *wrap;      /* op-level backends: wrap the device (NULL: none) */
} qhx_backend_load_args;


typedef struct qhx_seq_info {
    int64_t n_past, n_ctx;
    qhx_kv_type kv_type;
} qhx_seq_info;

/* Inputs and outputs of one graph run; each graph reads the fields under its name. */
typedef struct qhx_graph_io {
    /* prefill, decode */
    const int32_t *ids;      /* (n,) token ids */
    int64_t n;               /* also lm_head: rows of hidden */
    float *logits;           /* OUT: (vocab,) or, with logits_all, (n, vocab); lm_head: (n, vocab) */
    bool logits_all;
    bool sequential;         /* prefill: one token at a time through the decode graph */
    /* lm_head, mtp */
    const float *hidden;     /* (n, hidden_size) */
    int64_t pos0;            /* mtp: position of the first row (ids: the token after each row) */
    bool hidden_normed;      /* mtp: hidden rows are the block's own normed output (chained drafts) */
    float *hidden_out;       /* OUT or NULL: mtp: the block's normed output (n, hidden); verify:
                                the residual after the last layer (n, hidden); lm_head without
                                logits: the final norm's output (n, hidden) */
    /* vision */
    const qhx_image_patches *pixels;
    qhx_image_embed *image;  /* OUT: grid, n_tokens and row_width set and embd allocated by the host */
    /* every graph */
    int (*abort_cb)(void *user);
    void *abort_user;
    qhx_layer_cb layer_cb;   /* prefill, decode: residual stream after each layer (tests) */
    void *layer_cb_user;
} qhx_graph_io;

/* What a loaded backend runs on, for reports (bench, --verbose). */
typedef struct qhx_backend_info {
    int n_threads;    /* worker threads, the calling one included */
    const char *isa;  /* the instruction set of its kernels: "avx2", "avx512", "neon", "ref", ... */
} qhx_backend_info;

typedef struct qhx_backend {
    const char *name;
    void (*info)(const qhx_graphs *g, qhx_backend_info *out);
    qhx_status (*load)(const qhx_backend_load_args *a, qhx_graphs **out, qhx_error *err);
    void (*unload)(qhx_graphs *g); /* NULL allowed; every sequence freed first */
    bool (*has_graph)(const qhx_graphs *g, qhx_graph which);
    /* The loaded tensors under their checkpoint names (fingerprints, inspection, tests); NULL
     * for a backend that keeps none on the host. */
    const qhx_st_set *(*tensors)(const qhx_graphs *g);

    qhx_status (*seq_create)(const qhx_graphs *g, const qhx_seq_params *p, qhx_seq **out, qhx_error *err);
    void (*seq_free)(qhx_seq *s); /* NULL allowed */
    void (*seq_reset)(qhx_seq *s); /* position 0, caches and recurrent state forgotten */
    void (*seq_info)(const qhx_seq *s, qhx_seq_info *out);
    void (*seq_set_n_past)(qhx_seq *s, int64_t n); /* after restoring the regions; 0 <= n <= n_ctx */
    /* The persistent parts (for session files and checkpoints); the count written, at most cap. */
    int (*seq_regions)(const qhx_seq *s, qhx_state_region *out, int cap);
    qhx_status (*seq_attach)(qhx_seq *s, const qhx_image_embed *images, int n_images, const int32_t *ids, int64_t n,
                             qhx_error *err);
    /* For tests: the (t, h, w) positions of the announced tokens; 0 when none. */
    int64_t (*seq_positions)(const qhx_seq *s, const int64_t **pos);

    qhx_status (*run)(const qhx_graphs *g, qhx_seq *s, qhx_graph which, const qhx_graph_io *io, qhx_error *err);
    /* Optional: the "decode" graph for n distinct sequences at once (ids[i] into seqs[i], its
     * logits to logits[i]), each with the result it gets alone; NULL, or QHX_E_UNSUPPORTED for
     * a model it cannot batch: the caller runs them one by one. */
    qhx_status (*run_decode_multi)(const qhx_graphs *g, qhx_seq *const *seqs, const int32_t *ids, int64_t n,
                                   float *const *logits, qhx_error *err);
    /* Optional, with the "verify" graph: the verify of n distinct sequences at once (ids[i]
     * (n_ids[i],) fed to seqs[i], its logits (n_ids[i], vocab) to logits[i], its residual rows
     * to hidden[i] when hidden and hidden[i] are not NULL), each with the result it gets alone
     * and each then cut back by seq_keep as after its own verify; every sequence is checked
     * before any runs. */
    qhx_status (*run_verify_multi)(const qhx_graphs *g, qhx_seq *const *seqs, const int32_t *const *ids,
                                   const int64_t *n_ids, int64_t n, float *const *logits, float *const *hidden,
                                   qhx_error *err);
    /* Optional, with the "verify" graph: keep the first k tokens of the last verify run on s
     * (position, KV rows, recurrent state); QHX_E_ARG when another call came in between. */
    qhx_status (*seq_keep)(qhx_seq *s, int64_t k, qhx_error *err);
    /* Optional: the per-op profile so far (devices/profile.h; false when the backend was not
     * loaded with QHX_PROFILE set); clear: start again from zero. */
    bool (*profile)(const qhx_graphs *g, qhx_op_profile *out, bool clear);
} qhx_backend;

/* registry.c: the backend named `name`: "cpu" (or "-", or NULL) is the CPU backend on the CPU
 * device; the name of another device of the build (devices/registry.c) is the same backend
 * on that device (*device; NULL for a whole-graph backend). A QNN library path
 * (libQnnHtp.so, ...) or "qnn" gives QHX_E_UNSUPPORTED: this build has no QNN backend. */
qhx_status qhx_backend_find(const char *name, const qhx_backend **out, const qhx_device_desc **device,
                            qhx_error *err);

#endif
