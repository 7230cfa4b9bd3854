/* runtime/model.h: the model object behind qhx.h (run plan + family + host-op + backend + the
 * backend's loaded graphs + tokenizer + image preprocessing) and the internal calls on it that
 * host-ops, sessions, developer tools and tests use. Every call on a sequence goes through the
 * backend table (backends/backend.h); nothing here reaches a family's internals.
 *
 * Usage (internal):
 *   qhx_model *m; qhx_seq *st; qhx_error err;
 *   qhx_model_open("ckpt/", NULL, &m, &err);
 *   qhx_model_state_create(m, &(qhx_seq_params){.n_ctx = 4096}, &st, &err);
 *   qhx_model_forward(m, st, prompt, n_prompt, &(qhx_forward_opts){.logits = last}, &err);
 *   ... argmax(last) -> id; qhx_model_forward(m, st, &id, 1, &opts, &err); ...
 *   qhx_model_state_free(st); qhx_model_free(m);
 *
 * Threads: a model may be used by several threads, each with its own state; one state is not
 * re-entrant. */
#ifndef QHX_RUNTIME_MODEL_H
#define QHX_RUNTIME_MODEL_H

#include <stdatomic.h>
#include "backends/backend.h"
#include "image/image.h"
#include "video/video.h"
#include "io/manifest.h"
#include "text/tokenizer.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct qhx_model {
    qhx_model_params params;
    qhx_plan *plan;                     /* the run plan (owned) */
    const qhx_family_desc *family;      /* from the plan's family, or its config's model_type */
    const qhx_family_host_op *host_op;  /* from the plan's host_op, or the family's default */
    qhx_model_config cfg;               /* parsed once, by the family */
    const qhx_backend *backend;
    const qhx_device_desc *device;      /* the op-level backend's device (NULL: whole-graph backend) */
    char device_spec[32];               /* the name it was chosen by ("opencl:1"), for its create */
    qhx_device_wrap wrap;               /* qhx_model_open_wrapped's wrapper (fn NULL: none) */
    qhx_graphs *graphs;                 /* the backend's loaded graphs (owned) */
    qhx_tok *tok;                       /* the tokenizer (owned); NULL when the plan has none */
    bool images;                        /* the host-op feeds images and the vision graph exists */
    qhx_image_prep prep;                /* image preprocessing (images only) */
    qhx_video_prep vprep;               /* video preprocessing (video_preprocessor_config.json,
                                           else preprocessor_config.json read over the video
                                           processor's defaults, as transformers falls back) */
    /* the one owner of each: set at open, read everywhere else */
    int64_t max_context;                /* default context of sessions (plan's, or the caller's) */
    int64_t trained_context;            /* the most a session may hold */
    qhx_kv_type kv_cache;               /* sessions' KV element type: the caller's, the plan's or the default */
    atomic_int refs;                    /* the opener's reference + one per session, prompt, text stream */
    /* the vocabulary as byte strings for grammar masks: built on first use, under gm_lock (the
     * only part of a model that changes after open) */
    pthread_mutex_t gm_lock;
    struct qhx_gm_vocab *gm_vocab;
};

/* A model lives until its last reference goes: qhx_model_free drops the opener's, each object
 * that keeps a pointer to the model (session, prompt, text stream) takes one at creation and
 * drops it when freed, so one freed after the model still finds it (qhx.h). Thread-safe. */
const qhx_model *qhx_model_retain(const qhx_model *m);
void qhx_model_release(const qhx_model *m); /* NULL is a no-op */

/* ---- plans ------------------------------------------------------------------------------ */

/* What a run plan comes to: the family that runs it (the plan's family, or the one that reads
 * its config's model_type), the config parsed by that family, and the host-op (the plan's, or
 * for a checkpoint folder the family's default: images when it carries a vision tower). */
typedef struct qhx_plan_resolved {
    const qhx_family_desc *family;
    const qhx_family_host_op *host_op;
    qhx_model_config cfg;
} qhx_plan_resolved;

qhx_status qhx_plan_resolve(const qhx_plan *plan, qhx_plan_resolved *out /* OUT */, qhx_error *err);

/* ---- model ------------------------------------------------------------------------------ */

/* qhx_model_open with the op-level backend's device wrapped by wrap (copied; wrap->user must
 * outlive the model): how the forge's calibration pass watches the linear layers' inputs
 * (devices/calib.h). QHX_E_UNSUPPORTED for a whole-graph backend, which has no device. */
qhx_status qhx_model_open_wrapped(const char *path, const qhx_model_params *params, const qhx_device_wrap *wrap,
                                  qhx_model **out /* OUT, owned: qhx_model_free */, qhx_error *err);

const qhx_model_config *qhx_model_get_config(const qhx_model *m); /* borrowed, lives with m */
/* The loaded tensors (NULL for a backend that keeps none on the host), and one of them by exact
 * name, or NULL. Borrowed: live with m. */
const qhx_st_set *qhx_model_tensors(const qhx_model *m);
const qhx_st_tensor *qhx_model_find_tensor(const qhx_model *m, const char *name);
/* What the backend runs on (threads, instruction set). */
void qhx_model_backend_info(const qhx_model *m, qhx_backend_info *out);
/* The per-op profile of the model's device so far (devices/profile.h); false, *out zeroed, unless
 * the model was opened with QHX_PROFILE set in the environment. clear: start again from zero. */
bool qhx_model_op_profile(const qhx_model *m, qhx_op_profile *out, bool clear);
/* The chat style of the model's family (text/tokenizer.h). */
qhx_chat_family qhx_model_chat_style(const qhx_model *m);
/* The id of the chat format's end-of-turn token (qhx_chat_style.turn_end), or -1. */
qhx_token qhx_model_turn_end(const qhx_model *m);

/* ---- images ----------------------------------------------------------------------------- */

/* Decode, preprocess (the plan's preprocessor_config.json) and encode an image file through the
 * vision graph, with at most max_tokens image tokens (0: no cap; the image is then scaled down by
 * smart_resize before the tower; QHX_E_LIMIT when even the smallest size the preprocessor allows
 * takes more). QHX_E_UNSUPPORTED when the model's host-op takes no images. Thread-safe for one
 * model. */
qhx_status qhx_model_image_load(const qhx_model *m, const char *path, int64_t max_tokens,
                                qhx_image_embed *out /* OUT, owned: qhx_image_embed_deinit */, qhx_error *err);
/* Several images (paths (n,), in order) into out (n,) (OUT, each owned: qhx_image_embed_deinit;
 * all zeroed on failure): every file decoded first, then budget > 0 bounds their tokens together
 * (ops/mrope.h qhx_image_budget_split: an image needing less than an equal share keeps its size,
 * the others share the rest and are scaled down before the tower); 0: no bound. QHX_E_LIMIT
 * (naming the counts) when the budget cannot hold the smallest sizes. */
qhx_status qhx_model_images_load(const qhx_model *m, const char *const *paths, int n, int64_t budget,
                                 qhx_image_embed *out /* OUT (n,) */, qhx_error *err);
/* A video file decoded, sampled and preprocessed (video/video.h with the model's vprep; fps > 0
 * and max_frames > 0 override its sampling rate and frame cap), then encoded group by group: a
 * video of grid (T, h, w) gives T embeds in out->frames, each of pad_id video_token_id, as
 * Qwen3-VL's model splits it; out->text is the processor's expansion of the template's video pad
 * (per group "<t seconds>", the image start, its pads, the image end). QHX_E_UNSUPPORTED for a
 * model without images or a build without FFmpeg. */
typedef struct qhx_video_embed {
    qhx_image_embed *frames; /* owned, (n_frames) */
    int n_frames;
    char *text;              /* owned: the placeholder expansion */
    int64_t n_tokens;        /* pads over all groups */
    int64_t n_sampled;       /* frames sampled */
    int64_t grid_t, grid_h, grid_w;
    double decode_ms, preprocess_ms, vision_ms; /* the file decoded; the frames made patches; the tower */
} qhx_video_embed;
qhx_status qhx_model_video_load(const qhx_model *m, const char *path, double fps, int64_t max_frames,
                                qhx_video_embed *out /* OUT, owned: qhx_video_embed_deinit */, qhx_error *err);
/* The same from a file or from bytes in memory (video/video.h qhx_video_src). */
qhx_status qhx_model_video_load_src(const qhx_model *m, const qhx_video_src *src, double fps, int64_t max_frames,
                                    qhx_video_embed *out /* OUT, owned: qhx_video_embed_deinit */, qhx_error *err);
/* The model's video preprocessing with fps > 0 and max_frames > 0 overriding its sampling rate
 * and frame cap (what qhx_model_video_load uses). */
qhx_video_prep qhx_model_video_prep(const qhx_model *m, double fps, int64_t max_frames);
/* The prompt text a planned video (video/video.h qhx_video_plan) expands to (*text owned:
 * qhx_free) and its pads per temporal group. */
qhx_status qhx_model_video_text(const qhx_model *m, const qhx_video_patches *plan, const qhx_video_prep *prep,
                                char **text /* OUT */, int64_t *per_group /* OUT */, qhx_error *err);
/* What every video load checks first: the model takes images and has a video pad token. */
qhx_status qhx_model_video_check(const qhx_model *m, const qhx_video_src *src, qhx_error *err);
/* qhx_model_video_load_src with the preprocessing given and the source already probed (meta;
 * probe_ms: the probe's time, counted as decoding). */
qhx_status qhx_model_video_load_probed(const qhx_model *m, const qhx_video_src *src, const qhx_video_meta *meta,
                                       double probe_ms, const qhx_video_prep *prep,
                                       qhx_video_embed *out /* OUT, owned: qhx_video_embed_deinit */, qhx_error *err);
void qhx_video_embed_deinit(qhx_video_embed *v); /* NULL / zeroed allowed */
/* The id of the family's video pad token in the model's vocabulary, or -1. */
int32_t qhx_model_video_pad(const qhx_model *m);

/* The same from a decoded image, uncapped. */
qhx_status qhx_model_image_encode(const qhx_model *m, const qhx_image *img,
                                  qhx_image_embed *out /* OUT, owned */, qhx_error *err);

/* ---- sequences -------------------------------------------------------------------------- */

/* qhx_seq (one sequence: the backend's state, its model) and qhx_seq_params (kv_cache DEFAULT:
 * the model's): families/family.h. */

/* Allocate a state: KV cache for n_ctx tokens, conv FIFOs, recurrent states and every scratch
 * buffer, so forward allocates nothing. */
qhx_status qhx_model_state_create(const qhx_model *m, const qhx_seq_params *params,
                                  qhx_seq **out /* OUT, owned: qhx_model_state_free */,
                                  qhx_error *err);
void qhx_model_state_free(qhx_seq *st); /* NULL allowed */
void qhx_model_state_reset(qhx_seq *st); /* position 0, zero conv/recurrent state */
int64_t qhx_model_state_n_past(const qhx_seq *st);
int64_t qhx_model_state_n_ctx(const qhx_seq *st);
qhx_kv_type qhx_model_state_kv_type(const qhx_seq *st);
/* Set the position after restoring the persistent regions (session files). 0 <= n <= n_ctx. */
void qhx_model_state_set_n_past(qhx_seq *st, int64_t n);
/* The persistent parts of st (for save/restore); returns the count written, at most cap. */
int qhx_model_state_regions(const qhx_seq *st, qhx_state_region *out, int cap);

/* Feed n >= 1 tokens ids (n,) at positions n_past .. n_past + n - 1 through the backend's
 * prefill graph (n > 1, unless QHX_FWD_SEQUENTIAL) or decode graph (n == 1). opts may be NULL
 * (no logits). QHX_E_LIMIT when n_past + n > n_ctx and QHX_E_ARG for an id outside the
 * vocabulary (st unchanged in both cases); QHX_E_ABORTED leaves st unusable until reset. */
qhx_status qhx_model_forward(const qhx_model *m, qhx_seq *st, const int32_t *ids, int64_t n,
                             const qhx_forward_opts *opts, qhx_error *err);
/* One decode step of n (1 to QHX_MAX_BATCH) distinct states through the backend's batched decode: ids[i]
 * fed to sts[i], its logits (vocab,) to logits[i], each state getting the bits it gets alone.
 * QHX_E_UNSUPPORTED when the backend or the family has no batched form (the caller feeds them
 * one by one), QHX_E_LIMIT for a full state, QHX_E_ARG for a bad id or a repeated state: all
 * before anything is fed. */
qhx_status qhx_model_decode_multi(const qhx_model *m, qhx_seq *const *sts, const int32_t *ids, int64_t n,
                                  float *const *logits, qhx_error *err);
/* The lm-head graph alone: hidden (n, hidden_size) -> logits (n, vocab). */
qhx_status qhx_model_lm_head(const qhx_model *m, const float *hidden, int64_t n, float *logits, qhx_error *err);
/* The final norm alone: hidden (n, hidden_size) rows after the last decoder layer -> out (n,
 * hidden_size), the rows the lm-head reads. QHX_E_UNSUPPORTED where the family has no such graph. */
qhx_status qhx_model_final_norm(const qhx_model *m, const float *hidden, int64_t n, float *out, qhx_error *err);
/* Whether the model was opened with a multi-token-prediction block (qhx_model_params.mtp and a
 * checkpoint that has one). */
bool qhx_model_has_mtp(const qhx_model *m);
/* The multi-token-prediction graph on st: hidden (n, hidden_size), the residual stream after
 * the last decoder layer at positions pos0 .. pos0 + n - 1 (as qhx_forward_opts.layer_cb gives
 * it for the last layer), next_ids (n,) the token after each of those positions -> logits
 * (n, vocab), the draft of the token after next_ids[i]. The block's own KV cache lives in st:
 * pos0 may be at most the rows it holds (it is rewound to pos0 + n). QHX_E_UNSUPPORTED without
 * a block; QHX_E_LIMIT past n_ctx; QHX_E_ARG for a bad id or a gap. */
qhx_status qhx_model_mtp(const qhx_model *m, qhx_seq *st, int64_t pos0, const float *hidden,
                         const int32_t *next_ids, int64_t n, float *logits, qhx_error *err);

/* The same for chained drafts: normed says the hidden rows are the block's own normed output
 * of the step before (the main model's final norm is then not applied); hidden_out (n,
 * hidden_size) or NULL gets the block's normed output rows, the hidden input of the next step. */
qhx_status qhx_model_mtp_ex(const qhx_model *m, qhx_seq *st, int64_t pos0, const float *hidden, bool normed,
                            const int32_t *next_ids, int64_t n, float *logits, float *hidden_out, qhx_error *err);
/* Speculative verification (the backend's "verify" graph): ids (n, 1 .. min(QHX_VERIFY_MAX,
 * n_batch)) fed at n_past.. with each weight read once, every row's logits (n, vocab) and hidden
 * row (n, hidden_size; NULL: not wanted) with the bits of feeding the tokens one by one through
 * the decode graph. verify_keep(k) right after cuts st back to the first k of them. */
bool qhx_model_can_verify(const qhx_model *m);
qhx_status qhx_model_verify(const qhx_model *m, qhx_seq *st, const int32_t *ids, int64_t n, float *logits,
                            float *hidden, qhx_error *err);
/* The verify of ns (1 .. QHX_MAX_BATCH) distinct states of m at once: ids[i] (n[i],) into
 * sts[i], its logits (n[i], vocab) to logits[i] and its hidden rows to hidden[i] (hidden or
 * hidden[i] NULL: not wanted); at most QHX_MAX_BATCH rows in all, so that every linear layer
 * runs once for all of them. Each state gets the bits of its own qhx_model_verify and may be
 * cut back by verify_keep as after it. QHX_E_ARG (a state twice, or not m's, no tokens, an id
 * outside the vocabulary, too many rows), QHX_E_LIMIT (a state without room for its tokens):
 * checked for every state before any runs, so a refusal leaves every state as it was.
 * qhx_model_verify is the call with one state. */
qhx_status qhx_model_verify_multi(const qhx_model *m, qhx_seq *const *sts, const int32_t *const *ids, const int64_t *n,
                                  int64_t ns, float *const *logits, float *const *hidden, qhx_error *err);
qhx_status qhx_model_verify_keep(const qhx_model *m, qhx_seq *st, int64_t k, qhx_error *err);

/* Announce the next n tokens of st (from its current position): ids (n,) with the pads of
 * images[0..n_images) in order, one run of images[i].n_tokens pad ids each. Their M-RoPE
 * positions follow HF get_rope_index; forward then puts each image's rows at its pads. The
 * images must stay alive until those tokens have been fed; forward refuses ids that differ from
 * the announced ones. n_images 0: no pad id may appear. Errors (QHX_E_ARG) name the counts.
 * Replaces an earlier announcement; reset drops it. */
qhx_status qhx_model_state_attach(qhx_seq *st, const qhx_image_embed *images, int n_images,
                                  const int32_t *ids, int64_t n, qhx_error *err);
/* Positions of the announced tokens: pos (n, 3) as t, h, w; for tests. Returns the count
 * announced, or 0 when nothing is attached. Borrowed, lives until the next attach/reset. */
int64_t qhx_model_state_positions(const qhx_seq *st, const int64_t **pos);

#endif
