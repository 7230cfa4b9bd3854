/* forge internals shared by forge_*.c: family shapes and tensor lists, the staging folder,
 * progress/cancel plumbing, and the counter-based random numbers of the random checkpoints. */
#ifndef QHX_FORGE_INTERNAL_H
#define QHX_FORGE_INTERNAL_H

#include "forge/forge.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// ---- families -----------------------------------------------------------------------------------

typedef enum forge_family { FORGE_QWEN3_5 = 0, FORGE_QWEN3_VL } forge_family;

/* Shapes of one model (the Hugging Face config fields, flattened) and the random-weight scales. */
typedef struct forge_dims {
    forge_family family;
    const char *preset;
    int64_t vocab, hidden, inter, layers, nh, nkv, hd;
    double rope_theta, eps;
    int64_t mrope[3];
    int64_t n_bpe; /* tokenizer BPE ids 0..n_bpe-1; the family's added tokens follow */
    /* qwen3_5 */
    int64_t nk, nv, dk, dv, conv_k, mtp_layers, attn_interval;
    double partial_rotary;
    /* tie_word_embeddings: 0 = the head is a matrix of its own (lm_head.weight) */
    int tied;
    /* vision tower (qwen3_vl; qwen3_5 with with_vision) */
    int with_vision;
    int64_t v_depth, v_hidden, v_heads, v_inter, v_patch, v_tp, v_merge, v_num_pos;
    int64_t n_deepstack, deepstack[4];
    /* random weights: std of matrices, embedding, DeltaNet in_proj_qkv, conv1d, vision pos
     * table; correlation of the DeltaNet k rows with the q rows */
    double w_std, emb_std, qkv_std, conv_std, pos_std, qk_corr;
} forge_dims;

/* The preset `preset` of `family` (qwen3_5: "tiny", "demo", or a released size "0.8b", "2b",
 * "4b", "9b", "27b"; qwen3_vl: "tiny", "2b"); QHX_E_ARG naming the choices otherwise. */
qhx_status forge_preset(forge_family family, const char *preset, forge_dims *out, qhx_error *err);

/* "qwen3_5" / "qwen3_vl" -> family; -1 if unknown. */
int forge_family_from_name(const char *name);
const char *forge_family_name(forge_family f);

/* How a random tensor is drawn. */
typedef enum forge_draw { DRAW_NORMAL = 0, DRAW_LOG_UNIFORM_1_16 } forge_draw;

typedef struct forge_tdesc {
    char name[160];
    int n_dims;
    int64_t shape[5];
    forge_draw draw;
    double mean, std;
    int keep_f32;        /* stays F32 in a bf16 checkpoint (A_log, linear_attn.norm.weight) */
    int64_t corr_rows;   /* >0: rows [corr_rows, 2*corr_rows) = corr * rows [0, corr_rows) + noise */
    double corr;
} forge_tdesc;

/* Every tensor of the family's Hugging Face checkpoint, in the order the parity fixtures'
 * generator draws them. *out is owned by the caller (qhx_free). */
qhx_status forge_tensor_list(const forge_dims *d, forge_tdesc **out /* OUT */, int64_t *n /* OUT */,
                             qhx_error *err);

/* config.json (torch_dtype: "float32" | "bfloat16") / generation_config.json /
 * tokenizer_config.json / preprocessor_config.json of a random checkpoint; new references. */
json_t *forge_hf_config(const forge_dims *d, const char *torch_dtype);
json_t *forge_generation_config(const forge_dims *d);
json_t *forge_tokenizer_config(const forge_dims *d);
json_t *forge_preprocessor_config(const forge_dims *d);
/* A minimal valid byte-level BPE tokenizer.json: the 256 byte tokens in GPT-2 order, filler
 * merges up to n_bpe ids, then the family's added tokens. */
json_t *forge_tokenizer_json(const forge_dims *d);

// ---- counter-based random numbers -----------------------------------------------------------------
/* Element i of a tensor is a pure function of (seed, tensor name, i), so a tensor can be drawn in
 * any chunking, and a k row can re-derive its q row. */
uint64_t forge_tensor_key(uint64_t seed, const char *name);
static inline uint64_t forge_bits(uint64_t key, uint64_t i) {
    uint64_t z = key + (i + 1) * 0x9e3779b97f4a7c15ull; /* splitmix64 at position i */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
/* Irwin-Hall sum of four 16-bit uniforms, scaled to mean 0, variance 1 (bounded by +-3.46):
 * Gaussian enough for weights, and exact integer arithmetic up to the final scaling. */
static inline double forge_gauss(uint64_t b) {
    double s = (double)(b & 0xffff) + (double)((b >> 16) & 0xffff) + (double)((b >> 32) & 0xffff) +
               (double)(b >> 48);
    return (s - 131070.0) * (1.0 / 37837.22692452065);
}
static inline double forge_uniform(uint64_t b) { return (double)(b >> 11) * (1.0 / 9007199254740992.0); }

// ---- staging, disk, progress -------------------------------------------------------------------

typedef struct forge_job {
    const qhx_forge_params *p;
    char *out_dir;   /* final path */
    char *tmp_dir;   /* OUT_DIR.tmp-XXXXXX while building */
    uint64_t done, total;
} forge_job;

/* Refuse an existing out_dir; create the staging folder beside it. */
qhx_status forge_job_begin(forge_job *j, const char *out_dir, const qhx_forge_params *p, qhx_error *err);
/* Rename the staging folder onto out_dir. */
qhx_status forge_job_commit(forge_job *j, qhx_error *err);
/* Remove the staging folder if still there (after a failure) and free the job; a failure's
 * message in err (NULL allowed) then names out_dir wherever it named the staging folder. */
void forge_job_end(forge_job *j, qhx_error *err);
/* Path of `name` inside the staging folder (owned: qhx_free); NULL on allocation failure. */
char *forge_job_path(const forge_job *j, const char *name);
/* Check free space for `need` more bytes on the staging folder's file system. */
qhx_status forge_job_check_space(const forge_job *j, uint64_t need, qhx_error *err);
/* Count `bytes` as written, report progress, poll cancel (QHX_E_ABORTED when set). */
qhx_status forge_job_tick(forge_job *j, uint64_t bytes, qhx_error *err);
void forge_job_log(const forge_job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Write a JSON document (2-space indent, trailing newline; takes over the reference to doc,
 * which may be NULL after a failed build: QHX_E_NOMEM) / copy a file, into the stage. */
qhx_status forge_write_json(const forge_job *j, const char *name, json_t *doc, qhx_error *err);
qhx_status forge_copy_file(const forge_job *j, const char *src, const char *name, qhx_error *err);

// ---- calibration (forge_calib.c) ---------------------------------------------------------------

#define FORGE_CALIB_WINDOW 512    /* tokens per window, each from an empty state */
#define FORGE_CALIB_TOKENS 16384  /* tokens run when qhx_forge_params.calibrate_tokens is 0 */

/* The per-column importance of the checkpoint's linear weights, from a pass over a text. */
typedef struct forge_calib forge_calib;

/* Open hf_dir as a model (f32 arithmetic, the CPU device, text only), run job->p->calibrate
 * through it and keep each linear weight's importance by tensor name. Logs its progress through
 * the job; polls p->cancel between layers (QHX_E_ABORTED). A missing, empty, non-UTF-8 file or a
 * folder: QHX_E_IO / QHX_E_FORMAT / QHX_E_ARG naming it. *out owned: forge_calib_free. */
qhx_status forge_calib_run(const char *hf_dir, const forge_job *job, forge_calib **out /* OUT */, qhx_error *err);
void forge_calib_free(forge_calib *c); /* NULL allowed */
/* The importance (cols) of tensor `name`, or NULL when the pass never saw it (or not with cols
 * columns): the quantizer then weighs every column alike. Borrowed: lives with c. */
const float *forge_calib_importance(const forge_calib *c, const char *name, int64_t cols);
int64_t forge_calib_tokens(const forge_calib *c);   /* tokens run */
int64_t forge_calib_matrices(const forge_calib *c); /* matrices with statistics */

/* Drop the resident pages of [p, p + n) of a read-only file mapping (they are re-read on the next
 * access), so streaming through a large mapped input does not grow the resident set. */
void forge_release_pages(const void *p, size_t n);

#endif
