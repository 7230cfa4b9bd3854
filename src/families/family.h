/* families/family.h: what a model family is to the rest of the runtime.
 *
 * A family is one folder under src/families/ (qwen35/, qwen3vl/) exported as one descriptor,
 * qhx_family_desc: the manifest's family name, the config.json model_type values it reads, the
 * only parser of its Hugging Face config, the binder of its weights (which yields a qhx_net: the
 * family's graphs over bound weights), the chat style of its prompts and the host-ops it offers.
 * families/registry.c lists the descriptors; nothing outside the family folders and the
 * registries tests which family a model is.
 *
 * A qhx_net is immutable after binding and may be shared by several sequences; a qhx_seq
 * holds everything one sequence mutates (KV cache, conv FIFO, recurrent state, positions,
 * scratch) in buffers of the net's device. The op-level backend (backends/cpu.c) drives nets
 * through the qhx_net_* calls below: a prompt is a call with many tokens (batched projections,
 * chunked delta rule), decode a call with one token (recurrent form). Every op of a net runs
 * on m->dev (devices/device.h), which decides where and on how many threads. A net knows
 * nothing of tokenizers, sampling, run plans, kernels or threads.
 *
 * Threads: a net may be used by several threads, each with its own state; one state is not
 * re-entrant. */
#ifndef QHX_FAMILIES_FAMILY_H
#define QHX_FAMILIES_FAMILY_H

#include "core/status.h"
#include "image/image.h"
#include "io/gguf.h"
#include "io/json.h"
#include "io/manifest.h"
#include "io/safetensors.h"
#include "devices/device.h"
#include "ops/state.h"
#include "ops/vit.h"
#include "text/tokenizer.h"

#include <stdbool.h>
#include <stdint.h>

#define QHX_MODEL_MAX_LAYERS 1024

typedef enum qhx_layer_type {
    QHX_LAYER_LINEAR_ATTENTION = 0, /* Gated DeltaNet mixer */
    QHX_LAYER_FULL_ATTENTION = 1,   /* gated softmax attention mixer */
} qhx_layer_type;

/* Model hyperparameters under their Hugging Face config.json names (text_config of a composite
 * config; the vision tower's under vision). Derived values are marked. */
typedef struct qhx_model_config {
    int64_t vocab_size;
    int64_t hidden_size;
    int64_t intermediate_size;
    int64_t num_hidden_layers;
    int64_t num_attention_heads;
    int64_t num_key_value_heads;
    int64_t head_dim;
    int64_t linear_num_key_heads;
    int64_t linear_num_value_heads;
    int64_t linear_key_head_dim;
    int64_t linear_value_head_dim;
    int64_t linear_conv_kernel_dim;
    int64_t full_attention_interval;     /* 0 when layer_types was given explicitly */
    int64_t max_position_embeddings;     /* 0 when absent */
    int64_t mtp_num_hidden_layers;
    int64_t eos_token_id;                /* -1 when absent */
    int64_t image_token_id;              /* -1 when the family takes no images */
    double rms_norm_eps;
    double rope_theta;
    double partial_rotary_factor;
    int64_t mrope_section[3];            /* T, H, W frequency counts; zeros when absent */
    bool mrope_interleaved;
    bool tie_word_embeddings;
    bool attn_output_gate;
    qhx_layer_type layer_types[QHX_MODEL_MAX_LAYERS]; /* [num_hidden_layers] */
    int64_t rotary_dim;                  /* derived: int(head_dim * partial_rotary_factor) */
    bool has_vision;                     /* config.json has a vision_config (vision below) */
    qhx_vit_config vision;
    int64_t image_row_width;             /* derived: floats per image token out of the vision
                                            graph (merger row, then one row per DeepStack tap) */
    /* The weights are laid out as llama.cpp's converter writes them (a GGUF file, under the
     * family's names by its GGUF table): Qwen3.5's RMSNorm weights hold 1 + w, linear_attn.A
     * holds -exp(A_log), and the Gated DeltaNet value heads are in tiled order (value head j
     * uses key head j % nk). Set by the runtime for GGUF plans, never by a config parser. */
    bool llama_cpp_layout;
} qhx_model_config;

/* ---- images at the net boundary --------------------------------------------------------- */

/* One encoded image: its patch grid and the embedding rows of its tokens. */
typedef struct qhx_image_embed {
    int64_t grid_h, grid_w; /* patches per axis, before merging */
    int64_t n_tokens;       /* (grid_h / merge) * (grid_w / merge) */
    int64_t row_width;      /* qhx_model_config.image_row_width */
    float *embd;            /* owned, (n_tokens, row_width) */
    int32_t pad_id;         /* the id of its pad run: 0 for the model's image pad; a video's
                               temporal groups take the video pad (one embed per group) */
} qhx_image_embed;

void qhx_image_embed_deinit(qhx_image_embed *im); /* NULL / zeroed allowed */

/* ---- forward ---------------------------------------------------------------------------- */

/* Called after every decoder layer with the residual stream of the tokens just processed:
 * x (n, hidden_size) for positions pos0 .. pos0 + n - 1; first with layer = -1 for the input
 * rows (the embedding lookup, image rows merged). For tests and debugging. */
typedef void (*qhx_layer_cb)(void *user, int64_t layer, int64_t pos0, const float *x, int64_t n);

enum {
    QHX_FWD_LOGITS_ALL = 1u << 0,  /* logits for every token (else only the last) */
    QHX_FWD_SEQUENTIAL = 1u << 1,  /* run the tokens one at a time through the decode path */
};

typedef struct qhx_forward_opts {
    unsigned flags;          /* QHX_FWD_* */
    float *logits;           /* OUT or NULL: (n, vocab) with LOGITS_ALL, else (vocab) */
    qhx_layer_cb layer_cb;   /* optional */
    void *layer_cb_user;
    int (*abort_cb)(void *user); /* optional: non-zero between layers -> QHX_E_ABORTED */
    void *abort_cb_user;
} qhx_forward_opts;

/* ---- nets ------------------------------------------------------------------------------- */

typedef struct qhx_net qhx_net;
typedef struct qhx_seq qhx_seq;

/* What a family implements for its net. Optional entries may be NULL. */
typedef struct qhx_net_vt {
    void (*free_impl)(void *impl);
    qhx_status (*state_create)(qhx_seq *st, qhx_error *err); /* fills st->impl */
    void (*state_free)(void *impl);
    void (*state_reset)(qhx_seq *st);
    qhx_status (*forward)(const qhx_net *m, qhx_seq *st, const int32_t *ids, int64_t n,
                          const qhx_forward_opts *opts, qhx_error *err);
    /* Describe the persistent state (caches, recurrent state) as regions; returns the count
     * written (at most cap). Everything else in a state is scratch. */
    int (*state_regions)(const qhx_seq *st, qhx_state_region *out, int cap);
    /* hidden (n, H) after the last decoder layer -> logits (n, V): final norm + lm-head */
    qhx_status (*lm_head)(const qhx_net *m, const float *hidden, int64_t n, float *logits, qhx_error *err);
    /* optional: hidden (n, H) after the last decoder layer -> out (n, H), the final norm alone
       (the rows the lm-head reads: what an embedding pools) */
    qhx_status (*final_norm)(const qhx_net *m, const float *hidden, int64_t n, float *out, qhx_error *err);
    /* optional, families with a vision tower: patches -> out->embd (out's grid, n_tokens and
     * row_width set by the caller, embd allocated by it) */
    qhx_status (*encode_image)(const qhx_net *m, const qhx_image_patches *p, qhx_image_embed *out, qhx_error *err);
    /* optional: announce the images of the next n tokens (qhx_net_attach) */
    qhx_status (*attach)(qhx_seq *st, const qhx_image_embed *images, int n_images, const int32_t *ids,
                         int64_t n, qhx_error *err);
    /* optional, for tests: the (t, h, w) positions of the announced tokens */
    int64_t (*attached_positions)(const qhx_seq *st, const int64_t **pos);
    /* optional: one decode step of n distinct sequences of m at once, ids[i] fed to sts[i] and
     * its logits (vocab,) written to logits[i]; each sequence's result has the bits of the
     * one-token forward alone. Positions and ids are checked by the caller. */
    qhx_status (*decode_multi)(const qhx_net *m, qhx_seq *const *sts, const int32_t *ids, int64_t n,
                               float *const *logits, qhx_error *err);
    /* optional: the multi-token-prediction block (Qwen3.5 mtp.*). has_mtp: whether it is bound
     * (states are then created with its cache). mtp: hidden (n, H), the residual stream after
     * the last decoder layer at positions pos0 .. pos0 + n - 1 (what layer_cb and lm_head see),
     * and next_ids (n,), the token after each of those positions -> logits (n, V), the block's
     * prediction of the token after next_ids[i]. The block keeps its own KV cache in st: rows
     * before pos0 must have been filled by earlier calls (pos0 at most the rows filled so far;
     * rows from pos0 + n on are forgotten, which is how a caller rewinds it). */
    bool (*has_mtp)(const qhx_net *m);
    qhx_status (*mtp)(const qhx_net *m, qhx_seq *st, int64_t pos0, const float *hidden,
                      const int32_t *next_ids, int64_t n, float *logits, qhx_error *err);
    /* optional: mtp for chained drafts. normed: hidden rows are already normed (the block's own
     * output of the step before, as the reference feeds its later draft steps), so the main
     * model's final norm is not applied to them; hidden_out (n, H) or NULL: the block's normed
     * output rows (what its head reads), the hidden input of the next draft step; logits NULL:
     * no head (the block's KV rows and hidden_out only). */
    qhx_status (*mtp_ex)(const qhx_net *m, qhx_seq *st, int64_t pos0, const float *hidden, bool normed,
                         const int32_t *next_ids, int64_t n, float *logits, float *hidden_out, qhx_error *err);
    /* optional, speculative decoding: verify_multi feeds n[b] tokens ids[b] (1 .. min(QHX_VERIFY_MAX,
     * n_batch)) to each of ns distinct sequences sts[b] at positions n_past .. (at most
     * QHX_DEV_MULTI_MAX rows in all), with each weight read once for all the rows, every row
     * with the bits the one-token forward gives when the tokens are fed one by one: logits[b]
     * (n[b], V) of every row, hidden[b] (n[b], H) or NULL (hidden itself may be NULL) the
     * residual after the last layer (what mtp takes). Every sequence is checked before any
     * runs: a refusal leaves them all as they were. The recurrent state after each token is
     * kept so that verify_keep(st, k), before any other call on st, cuts the sequence back to
     * the first k (1 <= k <= n[b]) of those tokens: position, KV rows and recurrent state as if
     * only they had been fed. */
    qhx_status (*verify_multi)(const qhx_net *m, qhx_seq *const *sts, const int32_t *const *ids, const int64_t *n,
                               int64_t ns, float *const *logits, float *const *hidden, qhx_error *err);
    qhx_status (*verify_keep)(qhx_seq *st, int64_t k, qhx_error *err);
} qhx_net_vt;

#define QHX_VERIFY_MAX 16 /* most tokens of one verify call */

struct qhx_net {
    const struct qhx_family_desc *family;
    const qhx_net_vt *vt;
    qhx_model_config cfg;
    const qhx_device *dev;     /* where its ops run and its state lives (owned by the backend) */
    const qhx_st_set *weights; /* the checkpoint's tensors; owned by impl */
    void *impl;                /* family-owned: bound weights */
};

/* One sequence: everything it mutates (KV cache, conv FIFO, recurrent state, positions,
 * scratch), the one sequence type of every layer: a family keeps its caches under impl, a
 * backend hands it out (backends/backend.h), the runtime's sessions hold it (runtime/model.h). */
struct qhx_seq {
    const qhx_net *m;              /* the net it runs on (NULL for a whole-graph backend's) */
    const struct qhx_model *model; /* the model that made it (runtime/model.c sets it) */
    int64_t n_ctx, n_batch;
    int64_t n_past;                /* tokens consumed */
    qhx_kv_type kv_type;           /* QHX_KV_F32, _F16 or _Q8 (never DEFAULT) */
    void *impl;                    /* family-owned (or backend-owned): caches, recurrent state, scratch */
};

/* The shape of a sequence, the one parameter struct of every layer. */
typedef struct qhx_seq_params {
    int64_t n_ctx;        /* most tokens the sequence may hold (KV cache rows), in [1, 2^24] */
    int64_t n_batch;      /* most tokens per internal prefill step; 0: min(n_ctx, 512) */
    qhx_kv_type kv_cache; /* DEFAULT only at the runtime (the model's); below it, never */
} qhx_seq_params;

/* net.c: the checks every family shares, then the family's entry. */
qhx_status qhx_net_state_create(const qhx_net *m, const qhx_seq_params *p,
                                qhx_seq **out /* OUT, owned: qhx_net_state_free */, qhx_error *err);
void qhx_net_state_free(qhx_seq *st); /* NULL allowed */
void qhx_net_state_reset(qhx_seq *st);
/* Feed n >= 1 tokens ids at positions n_past ..: QHX_E_LIMIT past n_ctx, QHX_E_ARG for an id
 * outside the vocabulary (st unchanged in both cases); QHX_E_ABORTED leaves st unusable until
 * reset. */
qhx_status qhx_net_forward(const qhx_net *m, qhx_seq *st, const int32_t *ids, int64_t n,
                           const qhx_forward_opts *opts, qhx_error *err);
int qhx_net_state_regions(const qhx_seq *st, qhx_state_region *out, int cap);
/* rc when it is a failure, else the device's (devices/device.h, "Errors"): where a call that
 * ran ops completes. The forward, state and attach calls here check it themselves; the backend
 * checks it after the family's other graphs (lm-head, vision, MTP, verify, batched decode). */
qhx_status qhx_net_sync(const qhx_net *m, qhx_status rc, qhx_error *err);
/* Announce the next n tokens of st: ids (n,) with the pads of images[0..n_images) in order, one
 * contiguous run of images[i].n_tokens pad ids per image. The images must stay alive until those
 * tokens have been fed; forward refuses ids that differ from the announced ones. n_images 0 (or
 * images NULL): no pad id may appear. Replaces an earlier announcement; reset drops it. A family
 * without images gives QHX_E_UNSUPPORTED. */
qhx_status qhx_net_attach(qhx_seq *st, const qhx_image_embed *images, int n_images, const int32_t *ids,
                          int64_t n, qhx_error *err);
void qhx_net_free(qhx_net *m); /* NULL allowed; every state of m freed first */

/* ---- family descriptors ----------------------------------------------------------------- */

/* A generate loop, the vtable a host-op runs: a small interface over the session calls
 * (runtime/session.h; it writes no session field itself). runtime/hostop.c defines this
 * build's loops; a family names the loop of each host-op it offers. */
typedef struct qhx_hostop {
    const char *name; /* the loop: "text", "image_text" */
    bool images;      /* it feeds images (its plans load the vision tower); else images are refused */
    qhx_status (*generate)(qhx_session *s, const qhx_generate_params *p, qhx_generate_stats *stats,
                           qhx_error *err);
} qhx_hostop;

/* The loops of this build (runtime/hostop.c). */
extern const qhx_hostop qhx_hostop_text;       /* text -> text; vision weights never loaded */
extern const qhx_hostop qhx_hostop_image_text; /* image + text -> text */

typedef struct qhx_family_host_op {
    const char *name;        /* the manifest's host_op, e.g. "qwen3_vl_generate" */
    const qhx_hostop *loop;  /* the loop it runs */
} qhx_family_host_op;

typedef struct qhx_net_bind_args {
    const char *label;   /* names the checkpoint in messages */
    bool vision;         /* bind the vision tower too (the plan feeds images) */
    bool mtp;            /* bind the multi-token-prediction block too, when the set holds it */
} qhx_net_bind_args;

/* One added token of a family's released tokenizers: its text, and whether the tokenizer marks
 * it special (decode's skip_special_tokens leaves it out). */
typedef struct qhx_family_token {
    const char *text;
    bool special;
} qhx_family_token;

/* ---- GGUF files ------------------------------------------------------------------------ */

/* One tensor name of llama.cpp's GGUF files and the name the family's bind reads. */
enum { QHX_GGUF_MAP_UNSQUEEZE1 = 1u << 0 }; /* shape [a, b] read as [a, 1, b] (conv taps) */
typedef struct qhx_gguf_name {
    const char *gguf; /* per block: after "blk.N."; else the whole name */
    const char *name; /* per block: after the layer prefix; else the whole name */
    unsigned flags;   /* QHX_GGUF_MAP_* */
} qhx_gguf_name;

/* How a family reads GGUF files written by llama.cpp's converter (docs/formats.md, "GGUF"):
 * blk.N.* tensors become layer_prefix N . name, or for N >= num_hidden_layers (the MTP block)
 * mtp_prefix (N - num_hidden_layers) . name, or a whole name of mtp_names; other tensors by
 * globals. A tensor the tables do not name is not used. */
typedef struct qhx_family_gguf {
    const char *const *archs;       /* general.architecture values it reads; NULL ends */
    const qhx_gguf_name *globals;   /* gguf NULL ends */
    const qhx_gguf_name *block;
    const qhx_gguf_name *mtp_names; /* blk.N.<gguf> of the MTP block -> a whole name; may be NULL */
    const char *layer_prefix;       /* "model.layers." */
    const char *mtp_prefix;         /* "mtp.layers.", or NULL */
    const char *const *projectors;  /* clip.projector_type values of the towers it reads; NULL ends */
    const char *model_type;         /* the config's model_type (its text_config the one below) */
    /* Fill text_config tc, the Hugging Face equivalent of the file's <arch>.* keys (what
     * parse_config then reads under the family's model_type; qhx_family_gguf_config). */
    qhx_status (*text_config)(const qhx_gguf *g, const char *arch, json_t *tc, qhx_error *err);
} qhx_family_gguf;

typedef struct qhx_family_desc {
    const char *name;                     /* the manifest's family, e.g. "qwen3_5" */
    const char *title;                    /* as people write it, e.g. "Qwen3.5" */
    const char *const *model_types;       /* config.json model_type values it reads; NULL ends */
    qhx_chat_family chat;                 /* how its prompts are written: turns, thinking, tools,
                                             images (text/tokenizer.h qhx_chat_style; defined in
                                             the family's chat.c) */
    const qhx_family_host_op *host_ops;   /* the host-ops it offers; name NULL ends. A checkpoint
                                             folder runs the first whose loop takes images when
                                             it has a vision tower and opens for images
                                             (folder_images below), else the first text one */
    const char *vision_prefix;            /* tensor-name prefix of the vision tower, or NULL */
    /* A checkpoint folder with a vision tower runs the image host-op by default (true), or only
     * when the caller asks for images (false: qhx_model_params.vision > 0), so that a folder
     * opened for text leaves the tower unread. */
    bool folder_images;
    int64_t bundle_context;               /* max_context of a bundle forged without one from a config
                                             without max_position_embeddings */
    /* The added tokens of its released tokenizers in id order, from the first one after the
     * byte-level BPE ids (which ends a text: the pad id) on; text NULL ends. A random
     * checkpoint (forge) writes these. */
    const qhx_family_token *added_tokens;
    /* Which added tokens a checkpoint folder's special ids are (io/manifest.h
     * qhx_plan_name_tokens); text NULL ends. */
    const qhx_plan_token_name *special_names;
    /* The pre-tokenizer's Split pattern of its released tokenizer.json (a random checkpoint's
     * filler tokenizer splits text as the released one does). */
    const char *split_pattern;
    /* The only parser of the family's config.json: root is the whole file (composite or bare
     * text config), label names it in messages. Unsupported values are refused by field. */
    qhx_status (*parse_config)(const json_t *root, const char *label, qhx_model_config *cfg, qhx_error *err);
    /* Bind the tensors of set (owned by m from the call on, also on failure) for m->cfg (already
     * parsed) into m->impl and set m->vt. */
    qhx_status (*bind)(qhx_net *m, qhx_st_set *set, const qhx_net_bind_args *a, qhx_error *err);
    const qhx_family_gguf *gguf;          /* NULL: the family reads no GGUF file */
} qhx_family_desc;

/* registry.c: the families of this build. */
const qhx_family_desc *qhx_family_find(const char *name);              /* NULL if unknown */
const qhx_family_desc *qhx_family_first(void);                         /* the first listed */
const qhx_family_desc *qhx_family_for_model_type(const char *model_type); /* NULL if unknown */
const qhx_family_host_op *qhx_family_host_op_find(const qhx_family_desc *f, const char *name);
/* The host-op a checkpoint folder runs (see host_ops above). */
const qhx_family_host_op *qhx_family_default_host_op(const qhx_family_desc *f, bool has_vision);
/* A checkpoint folder's special ids as the family that reads its model_type names them
 * (qhx_plan_name_tokens); without such a family, only the stop-id check. A manifest: nothing. */
qhx_status qhx_family_name_plan_tokens(qhx_plan *plan, qhx_error *err);
/* Whether the family offers a host-op that feeds images (its bundles then keep the tower). */
bool qhx_family_takes_images(const qhx_family_desc *f);
/* "qwen3_5, qwen3_vl": every family name, for messages, into buf (cap bytes); returns buf. */
const char *qhx_family_names(char *buf, size_t cap);

/* gguf.c: GGUF files as models. The family whose GGUF table reads general.architecture
 * `arch`, or NULL. */
const qhx_family_desc *qhx_family_for_gguf_arch(const char *arch);
/* The Hugging Face config.json equivalent of g's keys for family f (a new object:
 * {model_type, text_config, tie_word_embeddings}). */
qhx_status qhx_family_gguf_config(const qhx_family_desc *f, const qhx_gguf *g, const char *arch, json_t **out /* OUT */,
                                  qhx_error *err);
/* The tokenizer of the GGUF file at path (its tokenizer.ggml.* keys through io/gguf_tok.h; the
 * file mapped for the call only). */
qhx_status qhx_family_gguf_tokenizer(const char *path, qhx_tok **out /* OUT */, qhx_error *err);
/* A run plan for the GGUF file at path (io/manifest.h qhx_plan_from_gguf): the family's
 * config from the file's keys, the tokenizer and special ids from tokenizer.ggml.*; with
 * mmproj (or NULL) the vision tower's file too: its clip.* keys as vision_config, the file as
 * the plan's vision artifact. */
qhx_status qhx_family_gguf_plan(const char *path, const char *mmproj, qhx_plan **out /* OUT, owned */,
                                qhx_error *err);
/* The tensors of the GGUF file at path (and of the vision tower's file mmproj, or NULL) under
 * the names f's bind reads (cfg: the parsed config, for the MTP block's layer numbers and the
 * tower's DeepStack taps), brought into memory as mode says; names starting with a skip prefix
 * (NULL-terminated list, or NULL) are left out and never read. */
qhx_status qhx_family_gguf_weights(const qhx_family_desc *f, const qhx_model_config *cfg, const char *path,
                                   const char *mmproj, qhx_file_mode mode, const char *const *skip,
                                   qhx_st_set **out /* OUT */, qhx_error *err);

#endif
