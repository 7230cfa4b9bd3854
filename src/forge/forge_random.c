/* forge_random: write a random-weight Hugging Face checkpoint folder (config.json,
 * generation_config.json, tokenizer.json, tokenizer_config.json, [preprocessor_config.json],
 * model.safetensors), streaming the weights in chunks. Distributions: forge_family.c and the
 * header of tests/data/oracle/make_tiny.py (matrices N(0, w_std^2), zero-centred norms N(0, 0.1^2),
 * plain norms 1 + N(0, 0.1^2), biases N(0, 0.02^2), A_log = log U(1, 16), dt_bias N(0, 0.5^2),
 * DeltaNet k rows correlated with q rows). */
#include "forge/forge_internal.h"

#include "core/alloc.h"
#include "core/fp16.h"
#include "io/st_write.h"

#include <math.h>
#include <string.h>

#define CHUNK ((int64_t)1 << 18) /* elements drawn per write */

static int64_t n_elements(const forge_tdesc *t) {
    int64_t n = 1;
    for (int i = 0; i < t->n_dims; i++) n *= t->shape[i];
    return n;
}

/* Draw elements [i0, i0 + n) of tensor t into out. */
static void draw(const forge_tdesc *t, uint64_t key, int64_t i0, int64_t n, float *out) {
    if (t->draw == DRAW_LOG_UNIFORM_1_16) {
        for (int64_t k = 0; k < n; k++) out[k] = (float)log(1.0 + 15.0 * forge_uniform(forge_bits(key, (uint64_t)(i0 + k))));
        return;
    }
    int64_t row_len = t->n_dims ? n_elements(t) / t->shape[0] : 1;
    for (int64_t k = 0; k < n; k++) {
        int64_t i = i0 + k;
        double z = forge_gauss(forge_bits(key, (uint64_t)i));
        if (t->corr_rows) {
            int64_t row = i / row_len;
            if (row >= t->corr_rows && row < 2 * t->corr_rows) {
                double zq = forge_gauss(forge_bits(key, (uint64_t)(i - t->corr_rows * row_len)));
                z = t->corr * zq + sqrt(1.0 - t->corr * t->corr) * z;
            }
        }
        out[k] = (float)(t->mean + t->std * z);
    }
}

qhx_status qhx_forge_random(const char *family, const char *out_dir, const qhx_forge_params *p, qhx_error *err) {
    int fam = forge_family_from_name(family);
    if (fam < 0) return qhx_fail(err, QHX_E_ARG, "unknown family '%s' (expected qwen3_5 or qwen3_vl)", family);
    if (!p->preset) return qhx_fail(err, QHX_E_ARG, "a preset is required (tiny, demo, 0.8b, 2b, 4b, 9b or 27b)");
    forge_dims d;
    qhx_status rc = forge_preset((forge_family)fam, p->preset, &d, err);
    if (rc != QHX_OK) return rc;
    if (p->layers < 0 || p->layers > 1024)
        return qhx_fail(err, QHX_E_ARG, "layers: %lld is not in [1, 1024]", (long long)p->layers);
    if (p->layers) d.layers = p->layers;
    if (p->vision && fam != FORGE_QWEN3_5)
        return qhx_fail(err, QHX_E_ARG, "--vision is for qwen3_5 (a qwen3_vl checkpoint always has its tower)");
    if (p->vision && !strcmp(d.preset, "demo")) return qhx_fail(err, QHX_E_ARG, "--vision: the demo preset has no tower");
    d.with_vision = fam == FORGE_QWEN3_VL || p->vision;
    const char *dtype = p->dtype ? p->dtype : (!strcmp(d.preset, "tiny") ? "f32" : "bf16");
    int bf16 = !strcmp(dtype, "bf16");
    if (!bf16 && strcmp(dtype, "f32")) return qhx_fail(err, QHX_E_ARG, "unknown dtype '%s' (expected f32 or bf16)", dtype);

    forge_tdesc *list = NULL;
    int64_t n = 0;
    if ((rc = forge_tensor_list(&d, &list, &n, err)) != QHX_OK) return rc;
    forge_job job;
    qhx_stw *w = NULL;
    float *buf = NULL;
    uint16_t *half = NULL;
    char *path = NULL;
    if ((rc = forge_job_begin(&job, out_dir, p, err)) != QHX_OK) goto done;

    if (!(path = forge_job_path(&job, "model.safetensors"))) { rc = qhx_fail(err, QHX_E_NOMEM, "out of memory"); goto done; }
    if ((rc = qhx_stw_create(path, &w, err)) != QHX_OK) goto done;
    if ((rc = qhx_stw_meta(w, "format", "pt", err)) != QHX_OK) goto done;
    for (int64_t i = 0; i < n; i++) {
        qhx_dtype dt = bf16 && !list[i].keep_f32 ? QHX_DTYPE_BF16 : QHX_DTYPE_F32;
        if ((rc = qhx_stw_declare(w, list[i].name, dt, list[i].n_dims, list[i].shape, err)) != QHX_OK) goto done;
    }
    if ((rc = qhx_stw_begin(w, err)) != QHX_OK) goto done;
    job.total = qhx_stw_file_bytes(w);
    /* the byte-level tokenizer of the 2b preset is ~15 MB */
    if ((rc = forge_job_check_space(&job, job.total + ((uint64_t)64 << 20), err)) != QHX_OK) goto done;
    forge_job_log(&job, "%s %s: %lld layers, %lld tensors, %.2f GB (%s)", family, d.preset, (long long)d.layers,
                  (long long)n, (double)job.total / 1e9, dtype);

    /* side files first: they are small and fail fast */
    if ((rc = forge_write_json(&job, "config.json", forge_hf_config(&d, bf16 ? "bfloat16" : "float32"), err)) ||
        (rc = forge_write_json(&job, "generation_config.json", forge_generation_config(&d), err)) ||
        (rc = forge_write_json(&job, "tokenizer_config.json", forge_tokenizer_config(&d), err)))
        goto done;
    if (d.with_vision && (rc = forge_write_json(&job, "preprocessor_config.json", forge_preprocessor_config(&d), err)))
        goto done;
    rc = p->tokenizer ? forge_copy_file(&job, p->tokenizer, "tokenizer.json", err)
                      : forge_write_json(&job, "tokenizer.json", forge_tokenizer_json(&d), err);
    if (rc != QHX_OK) goto done;

    buf = qhx_malloc((size_t)CHUNK * sizeof *buf);
    half = qhx_malloc((size_t)CHUNK * sizeof *half);
    if (!buf || !half) { rc = qhx_fail(err, QHX_E_NOMEM, "out of memory"); goto done; }
    const char *name;
    while ((name = qhx_stw_next(w))) {
        const forge_tdesc *t = NULL;
        for (int64_t i = 0; i < n && !t; i++)
            if (!strcmp(list[i].name, name)) t = &list[i];
        if (!t) { rc = qhx_fail(err, QHX_E_INTERNAL, "tensor '%s' has no description", name); goto done; }
        uint64_t key = forge_tensor_key(p->seed ^ (uint64_t)(d.family + 1) * 0x632be59bd9b4e019ull, t->name);
        int to_bf16 = bf16 && !t->keep_f32;
        int64_t total = n_elements(t);
        for (int64_t off = 0; off < total; off += CHUNK) {
            int64_t m = total - off < CHUNK ? total - off : CHUNK;
            draw(t, key, off, m, buf);
            const void *src = buf;
            size_t bytes = (size_t)m * 4;
            if (to_bf16) {
                qhx_f32_to_bf16_row(buf, half, m);
                src = half;
                bytes = (size_t)m * 2;
            }
            if ((rc = qhx_stw_write(w, name, src, bytes, err)) != QHX_OK) goto done;
            if ((rc = forge_job_tick(&job, bytes, err)) != QHX_OK) goto done;
        }
    }
    if ((rc = qhx_stw_finish(w, err)) != QHX_OK) goto done;
    rc = forge_job_commit(&job, err);
done:
    qhx_stw_free(w);
    qhx_free(path);
    qhx_free(buf);
    qhx_free(half);
    qhx_free(list);
    forge_job_end(&job, err);
    return rc;
}
