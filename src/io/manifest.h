/* io/manifest: the run plan. One in-memory qhx_plan says what to run (model family, host-op,
 * precision, context length), from which files (weights, tokenizer, optional separate embedding,
 * lm-head and vision files), with which special tokens and generation defaults, and the Hugging
 * Face config.json (kept as JSON: the family parses it).
 *
 * A plan comes from either
 *   - a manifest: a JSON file `"format": "qhexrt/1"` documented in docs/manifest.md, whose
 *     file names are relative to the manifest's folder (the bundle); several manifests may
 *     share one bundle;
 *   - a Hugging Face checkpoint folder: config.json + *.safetensors + tokenizer.json
 *     (+ generation_config.json, tokenizer_config.json, preprocessor_config.json).
 * qhx_plan_open accepts a manifest file, a bundle folder holding exactly one manifest, or a
 * checkpoint folder. Parsing is strict: a missing, mistyped or unknown field is refused with a
 * message naming the file and the JSON path ("m.json: artifacts.weights.file: missing").
 *
 * This layer reads no tensors: it checks that files exist (and their sizes, when the manifest
 * gives them); qhx_plan_verify checks headers and hashes on request. */
#ifndef QHX_IO_MANIFEST_H
#define QHX_IO_MANIFEST_H

#include "core/dtype.h"
#include "core/status.h"
#include "io/json.h"
#include "io/safetensors.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define QHX_PLAN_FORMAT "qhexrt/1"             /* the version this build reads and writes */
#define QHX_PLAN_MAX_BYTES ((size_t)4 << 20)   /* a manifest file */
#define QHX_PLAN_MAX_NAME 128                  /* bytes in `name` */
#define QHX_PLAN_MAX_PATH 1024                 /* bytes in a relative file name */
#define QHX_PLAN_MAX_STOP_IDS 16
#define QHX_PLAN_MAX_CONTEXT ((int64_t)1 << 20)
#define QHX_PLAN_DEFAULT_CONTEXT 4096          /* checkpoint folders (capped by the config) */
#define QHX_PLAN_MAX_SCAN 256                  /* .json files looked at in a bundle folder */
#define QHX_PLAN_MAX_IDENT 64                  /* bytes in family / host_op, with the NUL */

typedef enum qhx_precision {
    QHX_PREC_F32 = 0, /* "f32": weights used as stored (f32), f32 compute */
    QHX_PREC_BF16,    /* "bf16": bf16 weights, f32 accumulation */
    QHX_PREC_F16,     /* "f16": f16 weights, f32 accumulation */
    QHX_PREC_W8,      /* "w8": int8 per-output-channel weights, weight-only */
    QHX_PREC_Q4,      /* "q4": 4-bit group-quantized weights */
    QHX_PREC_COUNT
} qhx_precision;

/* The named artifacts a plan may carry (the keys of the manifest's "artifacts" object). */
typedef enum qhx_art_role {
    QHX_ART_WEIGHTS = 0, /* "weights": the decoder (and, unless split out, everything else) */
    QHX_ART_EMBEDDING,   /* "embedding": token embedding table */
    QHX_ART_LM_HEAD,     /* "lm_head": output projection */
    QHX_ART_VISION,      /* "vision": vision tower */
    QHX_ART_MTP,         /* "mtp": the multi-token-prediction block (read only when asked for) */
    QHX_ART_ROLE_COUNT
} qhx_art_role;

typedef enum qhx_art_format {
    QHX_ART_SAFETENSORS = 0, /* "safetensors": a .safetensors file or a *.safetensors.index.json */
    QHX_ART_RAW,             /* "raw": one headerless row-major tensor, dtype + shape given */
    QHX_ART_GGUF,            /* "gguf": a GGUF file as llama.cpp writes it (weights: the decoder; vision:
                                an mmproj file), the family's names by its GGUF table */
    QHX_ART_FORMAT_COUNT
} qhx_art_format;

/* One file of the plan: an artifact, the tokenizer, the preprocessor config or the model config. */
typedef struct qhx_plan_file {
    bool present;
    char *file;            /* as written in the manifest: relative, '/'-separated (owned) */
    char *path;            /* base_dir/file; NULL when parsed without a base_dir (owned) */
    qhx_art_format format; /* artifacts only */
    bool has_dtype;
    qhx_dtype dtype;       /* safetensors: the dtype holding most bytes; raw: the element type */
    int n_dims;            /* raw only */
    int64_t shape[QHX_ST_MAX_RANK];
    int64_t tensor_count;  /* safetensors: expected tensor count, -1 if not given */
    int64_t bytes;         /* expected file size, -1 if not given */
    char sha256[65];       /* expected SHA-256, lower-case hex, "" if not given */
} qhx_plan_file;

/* Special token ids; -1 where absent. */
typedef struct qhx_plan_tokens {
    int32_t stop_ids[QHX_PLAN_MAX_STOP_IDS]; /* generation stops after emitting any of these */
    int n_stop_ids;                          /* >= 1 */
    int32_t bos, eos, pad;
    int32_t im_start, im_end;
    int32_t vision_start, vision_end, image_pad, video_pad;
    int32_t think_start, think_end;
} qhx_plan_tokens;

/* The single ids of qhx_plan_tokens by index (bos .. think_end), with their manifest keys. */
#define QHX_PLAN_N_TOKEN_IDS 11
int32_t qhx_plan_token_id(const qhx_plan_tokens *t, int i);
const char *qhx_plan_token_key(int i);

/* Sampling defaults (a request may override them). temperature 0 means greedy. */
typedef struct qhx_plan_generation {
    double temperature;        /* [0, 100] */
    int64_t top_k;             /* 0 = off */
    double top_p;              /* (0, 1]; 1 = off */
    double min_p;              /* [0, 1]; 0 = off */
    double repetition_penalty; /* (0, 100]; 1 = off */
    int64_t max_new_tokens;    /* >= 1 */
    bool thinking;             /* open the assistant turn in thinking mode */
} qhx_plan_generation;

typedef enum qhx_plan_source {
    QHX_PLAN_FROM_MANIFEST = 0,
    QHX_PLAN_FROM_CHECKPOINT,
} qhx_plan_source;

typedef struct qhx_plan {
    qhx_plan_source source;
    char *label;     /* manifest path or checkpoint folder, for messages (owned) */
    char *base_dir;  /* folder the files are relative to; NULL if parsed without one (owned) */
    char *name;      /* (owned) */
    char *description; /* optional, NULL if absent (owned) */
    /* The plug points by name (docs/manifest.md): the runtime resolves them against its family
     * registry. A checkpoint folder leaves both empty: the family is the one that reads
     * model_type, the host-op that family's default. */
    char family[QHX_PLAN_MAX_IDENT];
    char host_op[QHX_PLAN_MAX_IDENT];
    qhx_precision precision;
    int64_t max_context;
    qhx_kv_type kv_cache; /* "kv_cache": QHX_KV_DEFAULT when absent (the runtime's default) */
    qhx_plan_file artifacts[QHX_ART_ROLE_COUNT]; /* indexed by role; weights always present */
    qhx_plan_file tokenizer;                     /* tokenizer.json (always present) */
    qhx_plan_file preprocessor;                  /* preprocessor_config.json (optional) */
    qhx_plan_file model_config;                  /* present when dims come from a file */
    qhx_plan_tokens special;
    qhx_plan_generation generation;
    /* The Hugging Face config (owned reference; NULL only when parsed without base_dir from a
     * manifest that points to a config file). text_config is borrowed from it: the object
     * under "text_config" when there is one, else the config itself. */
    json_t *config;
    const json_t *text_config;
    char model_type[64];     /* config.json model_type; "" while config is NULL */
    bool has_vision_config;  /* config.json has a vision_config */
    bool vision_tensors;     /* a checkpoint folder: its weights hold a vision tower */
    /* A checkpoint folder: its tokenizer's added tokens, {text: id} (the first id of a text
     * wins), for qhx_plan_name_tokens; NULL for a manifest (owned reference). */
    json_t *added_tokens;
} qhx_plan;

/* ---- building a plan ---------------------------------------------------------------- */

/* Open a manifest file, a bundle folder with exactly one manifest (several: QHX_E_ARG listing
 * them), or a Hugging Face checkpoint folder (a folder with no manifest but a config.json).
 * Checks that every named file exists (and its size when given). *out NULL on failure. */
qhx_status qhx_plan_open(const char *path, qhx_plan **out /* OUT, owned: qhx_plan_free */,
                         qhx_error *err);

/* Parse manifest text buf[0..len) (need not be NUL-terminated). `label` names it in messages.
 * With base_dir != NULL, file names resolve against it, a model config file is loaded and
 * every file's existence (and size, when given) is checked. With base_dir == NULL nothing
 * outside buf is touched: paths stay unresolved and a `{"config": FILE}` model leaves
 * plan->config NULL (the checks that need it are skipped). */
qhx_status qhx_plan_parse(const char *buf, size_t len, const char *base_dir, const char *label,
                          qhx_plan **out /* OUT, owned: qhx_plan_free */, qhx_error *err);

/* Build a plan from a Hugging Face checkpoint folder (see docs/manifest.md, "Checkpoint
 * folders"): family and host-op left to the runtime (model_type and vision_tensors say what it
 * needs), precision from the dtype holding most tensor bytes, max_context 4096 (the runtime
 * caps it by max_position_embeddings), stop ids from generation_config.json and
 * config.json eos_token_id, the vision ids config.json names; the added tokens of
 * tokenizer_config.json / tokenizer.json are kept for qhx_plan_name_tokens, which the family
 * that reads the folder's model_type calls with its names of them. */
qhx_status qhx_plan_from_checkpoint(const char *dir, qhx_plan **out /* OUT, owned */,
                                    qhx_error *err);

/* Build a plan from a GGUF file g opened from path (and its vision tower's file mmproj, or
 * NULL: then the plan's vision artifact; docs/manifest.md, "GGUF files"), with
 * config the family made of its keys (a Hugging Face config.json equivalent; the plan takes the
 * reference, also on failure). Like a checkpoint folder: source QHX_PLAN_FROM_CHECKPOINT,
 * family and host-op left to the runtime, max_context 4096 capped by the trained length. The
 * weights artifact and the tokenizer are the file itself (format QHX_ART_GGUF); stop and special
 * ids from tokenizer.ggml.*, the added tokens (control and user-defined types) kept for
 * qhx_plan_name_tokens. */
struct qhx_gguf;
qhx_status qhx_plan_from_gguf(const char *path, const char *mmproj, const struct qhx_gguf *g, json_t *config,
                              qhx_plan **out /* OUT, owned */, qhx_error *err);

/* Which added token fills which single special id: its text, and the manifest key of the id
 * ("im_start", "think_end", ... as qhx_plan_token_key names them). A family's table; this layer
 * knows no token text of its own. */
typedef struct qhx_plan_token_name {
    const char *text;
    const char *key;
} qhx_plan_token_name;

/* A checkpoint folder's special ids by names (text NULL ends; NULL: none): each id still unset
 * whose key a name gives takes the id of that added token; then, with no stop id from the
 * configs, the "im_end" token stops generation, and without one either QHX_E_FORMAT ("no stop
 * tokens"). A manifest's plan is left as it is. Calling it again changes nothing. */
qhx_status qhx_plan_name_tokens(qhx_plan *plan, const qhx_plan_token_name *names, qhx_error *err);

void qhx_plan_free(qhx_plan *plan); /* NULL allowed */

/* Replace an artifact (or add one): file relative to plan->base_dir, format, optional dtype
 * (has_dtype false: none). Sizes, counts and hashes are cleared. Used by forge. */
/* Set a plain file entry of plan (tokenizer, preprocessor, model_config) to `file`, relative to
 * the plan's base_dir, as a manifest names it. */
qhx_status qhx_plan_set_file(qhx_plan *plan, qhx_plan_file *f, const char *file, qhx_error *err);
qhx_status qhx_plan_set_artifact(qhx_plan *plan, qhx_art_role role, const char *file,
                                 qhx_art_format format, bool has_dtype, qhx_dtype dtype,
                                 qhx_error *err);

/* ---- checking ------------------------------------------------------------------------ */

#define QHX_PLAN_VERIFY_HEADERS 1u /* open safetensors headers: tensor_count, dtype; raw sizes */
#define QHX_PLAN_VERIFY_SHA256 2u  /* hash every file that has a sha256 (reads all bytes) */

/* Check the plan's files beyond existence. Needs a plan with a base_dir. */
qhx_status qhx_plan_verify(const qhx_plan *plan, unsigned flags, qhx_error *err);

/* ---- writing ------------------------------------------------------------------------- */

/* The manifest for this plan as a JSON object (new reference: json_decref), in the canonical
 * key order of docs/manifest.md. A plan from a checkpoint folder gets {"config": "config.json"}
 * as its model; a plan parsed with an inline model writes it back inline. NULL on failure. */
json_t *qhx_plan_to_json(const qhx_plan *plan, qhx_error *err);

/* The manifest as text (2-space indent, trailing newline), owned by the caller: qhx_free.
 * Parsing it again yields an equal plan. */
qhx_status qhx_plan_write_json(const qhx_plan *plan, char **out /* OUT, owned */,
                               size_t *out_len /* OUT */, qhx_error *err);

/* Write the manifest text to `path` (qhx_out_open: whole or not at all, a non-regular target
 * written in place, never replaced). */
qhx_status qhx_plan_save(const qhx_plan *plan, const char *path, qhx_error *err);

/* ---- names --------------------------------------------------------------------------- */

/* Manifest spellings ("w8", "lm_head", "safetensors"); "?" for out-of-range values. The
 * _from_name parsers return 0 and set *out, or -1 if unknown. */
const char *qhx_precision_name(qhx_precision p);
const char *qhx_art_role_name(qhx_art_role r);
const char *qhx_art_format_name(qhx_art_format f);
int qhx_precision_from_name(const char *name, qhx_precision *out);

#endif
