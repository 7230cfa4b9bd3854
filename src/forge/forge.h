/* forge: make model folders. Two jobs:
 *   - qhx_forge_random: a random-weight Hugging Face checkpoint folder of a family (qwen3_5,
 *     qwen3_vl) at a preset size (tiny = the parity fixtures' shapes; 0.8b, 2b, 4b, 9b, 27b = the
 *     released models' shapes), for tests and demos;
 *   - qhx_forge_convert: a Hugging Face checkpoint folder -> a qhexrt bundle (weights in a
 *     chosen precision, tokenizer, configs, one manifest per runnable configuration).
 * Both stream tensor by tensor (memory stays far below the checkpoint size), check free disk
 * space first, build everything in OUT_DIR.tmp-XXXXXX and rename it to OUT_DIR only when
 * complete: a failure or a cancel leaves no OUT_DIR and no temporary folder.
 * Layouts: docs/bundle.md (bundle, manifest, dtype rules) and docs/formats.md (weights). */
#ifndef QHX_FORGE_H
#define QHX_FORGE_H

#include "core/status.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct qhx_forge_params {
    /* convert: precision of the linear weights: "f16", "bf16", "w8", "q4", "q4a" (required) */
    const char *precision;
    /* convert: per-tensor precision rules "GLOB=PREC[,GLOB=PREC...]" for decoder matrices (GLOB
     * an fnmatch pattern over the tensor name, PREC one of f16, bf16, w8, q4, q4a, q6), applied
     * after the precision's default policy (docs/bundle.md), the last matching rule winning;
     * NULL = none */
    const char *tensor_precision;
    /* convert: lm-head precision "f16", "bf16", "w8", "q6", "q4", "q4a"; NULL = the default (docs/bundle.md) */
    const char *lmhead;
    /* convert: embedding table dtype "f16", "bf16"; NULL = bf16 for precision bf16, else f16 */
    const char *embed;
    /* convert: context length written in the manifests; 0 = the family default */
    int64_t max_context;
    /* convert: manifest name prefix; NULL = the lower-cased name of the input folder */
    const char *name;
    /* convert: leave the vision tower out (text manifests only); otherwise a checkpoint with one
     * gets a -vlm- manifest beside the text one (both families). */
    bool text_only;
    /* convert: keep the multi-token-prediction block (mtp.*, speculative decoding) in the
     * bundle's precision, as the "mtp" artifact; otherwise it is dropped */
    bool mtp;
    /* convert: a text file to calibrate with (docs/bundle.md, "Calibration"): the checkpoint
     * runs over it first and the q4a / q4 / q6 matrices are quantized for the least error
     * weighted by the mean square of each input column; NULL = none (unweighted, as before) */
    const char *calibrate;
    /* convert, with calibrate: most tokens of the text run (0 = 16384) */
    int64_t calibrate_tokens;
    /* convert: threads that quantize (0 = one per physical core); the bytes do not depend on it */
    int threads;
    /* gguf: the GGUF file of the model's vision tower (llama.cpp's mmproj), or NULL */
    const char *mmproj;
    /* random, qwen3_5: also write the vision tower (model.visual.*, the released layout without
     * DeepStack), after the text tensors, whose values stay those of a checkpoint without it */
    bool vision;

    /* random: the preset (required; qwen3_5: "tiny", "demo", "0.8b", "2b", "4b", "9b", "27b";
     * qwen3_vl: "tiny", "2b"), seed, storage dtype ("f32", "bf16"; NULL = f32 for tiny, bf16
     * otherwise), tokenizer.json to copy (NULL = write a minimal byte-level BPE one) */
    const char *preset;
    /* random: decoder layers (0 = the preset's); fewer (or more) than the preset's keep its
     * layer-type pattern (qwen3_5: every attn_interval-th layer full attention), so a big size
     * can be made at a depth that fits a small machine */
    int64_t layers;
    uint64_t seed;
    const char *dtype;
    const char *tokenizer;

    /* Optional callbacks (all may be NULL); `user` is passed back. progress: bytes written so
     * far of the total to write. cancel: polled between chunks; non-zero stops the job, which
     * then returns QHX_E_ABORTED after removing its temporary folder. log: one line, no newline.
     * staging: the staging folder once created, then NULL once it is renamed or removed; a
     * program that may die of a signal no callback sees (SIGBUS from a checkpoint truncated
     * under the mapping) removes it on its way out. */
    void (*progress)(void *user, uint64_t done, uint64_t total);
    int (*cancel)(void *user);
    void (*log)(void *user, const char *line);
    void (*staging)(void *user, const char *dir);
    void *user;
} qhx_forge_params;

/* Write a random checkpoint of `family` ("qwen3_5" | "qwen3_vl") into out_dir (must not exist).
 * Deterministic: the same family, preset, seed and dtype give byte-identical files. */
qhx_status qhx_forge_random(const char *family, const char *out_dir, const qhx_forge_params *p,
                            qhx_error *err);

/* A bundle in out_dir (must not exist) from the GGUF file gguf (and p->mmproj, its vision
 * tower's file, or NULL): the files as they are beside the config, tokenizer and run plans made
 * of their keys; p->name and p->max_context apply, nothing else. */
qhx_status qhx_forge_gguf(const char *gguf, const char *out_dir, const qhx_forge_params *p, qhx_error *err);

/* Convert the Hugging Face folder hf_dir into a bundle in out_dir (must not exist). */
qhx_status qhx_forge_convert(const char *hf_dir, const char *out_dir, const qhx_forge_params *p,
                             qhx_error *err);

#endif
