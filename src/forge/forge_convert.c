/* forge_convert: Hugging Face checkpoint folder -> qhexrt bundle.
 *
 * Every source tensor gets a role (decoder, embed, lmhead, vision; mtp.* is dropped) and an
 * output format (docs/bundle.md):
 *   - 2-D ".weight" matrices (linear layers) of the decoder: the chosen precision; of the vision
 *     tower: the same, except q4 -> w8; Q4 falls back to Q8 when cols % 32 != 0;
 *   - the lm-head: its own precision, written as "lm_head.weight"; when the checkpoint ties it to
 *     the embedding, that one matrix is also the embedding table (the lookup dequantizes its
 *     rows); an untied checkpoint, or --embed, adds a separate f16/bf16 lookup table;
 *   - everything else (norms, conv1d, A_log, dt_bias, biases, vision pos/patch tables): f32.
 * One safetensors file per role, plus model.safetensors.index.json over all of them, so the
 * bundle folder opens as one tensor set. Data streams in chunks; the pages of the mapped input
 * are dropped as they are consumed, so the resident set stays a few MB whatever the size. */
#include "forge/forge_internal.h"

#include "core/alloc.h"
#include "core/file.h"
#include "core/fp16.h"
#include "core/pool.h"
#include "io/json.h"
#include "families/family.h"
#include "io/manifest.h"
#include "io/safetensors.h"
#include "ops/st_weight.h"
#include "io/st_write.h"
#include "kernels/quant.h"

#include <ctype.h>
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define CHUNK ((int64_t)1 << 18) /* elements per read/convert/write step */

/* "qhexrt.format" of the weight files and the index: 2 since Q4A (docs/bundle.md); files of
 * version 1 hold no Q4A matrix and load as before. */
#define QHX_BUNDLE_FORMAT "qhexrt/2"

typedef enum { ROLE_DECODER = 0, ROLE_EMBED, ROLE_LMHEAD, ROLE_VISION, ROLE_MTP, ROLE_COUNT } role_t;
static const char *const ROLE_NAME[ROLE_COUNT] = {"decoder", "embed", "lmhead", "vision", "mtp"};

typedef enum { OUT_F32 = 0, OUT_F16, OUT_BF16, OUT_Q8, OUT_Q4, OUT_Q6, OUT_Q4A } ofmt_t;
static const char *const OFMT_NAME[] = {"f32", "f16", "bf16", "w8", "q4", "q6", "q4a"};

/* What a name may stand for where it is read: plain dtypes only (the embedding), the
 * precisions of whole bundles, or those and q6 (the lm-head). */
enum { NAMES_PLAIN, NAMES_BUNDLE, NAMES_HEAD };

static int ofmt_from_name(const char *s, int which) {
    if (!strcmp(s, "f16")) return OUT_F16;
    if (!strcmp(s, "bf16")) return OUT_BF16;
    if (which != NAMES_PLAIN && !strcmp(s, "w8")) return OUT_Q8;
    if (which != NAMES_PLAIN && !strcmp(s, "q4")) return OUT_Q4;
    if (which != NAMES_PLAIN && !strcmp(s, "q4a")) return OUT_Q4A;
    if (which == NAMES_HEAD && !strcmp(s, "q6")) return OUT_Q6;
    return -1;
}

static int is_grouped(ofmt_t f) { return f == OUT_Q4 || f == OUT_Q6 || f == OUT_Q4A; }
static int is_quant(ofmt_t f) { return f == OUT_Q8 || is_grouped(f); }

/* The parts of a quantized matrix, each a tensor of its own (Q4A: PART_SCALES is ".qsuper",
 * PART_HIGH ".qsub"). */
typedef enum { PART_CODES = 0, PART_SCALES, PART_HIGH } part_t;

typedef struct tplan {
    const qhx_st_tensor *src;
    char *name;             /* output name (owned) */
    char *scale_name;       /* "<name>.qscale" for Q8/Q4/Q6, "<name>.qsuper" for Q4A (owned) */
    char *high_name;        /* "<name>.qhigh" for Q6, "<name>.qsub" for Q4A (owned) */
    role_t role;
    ofmt_t fmt;
    int64_t rows, cols;     /* the source viewed as [shape[0], rest] */
    /* Q4A: the scales its scale pass found for every row (cache_row slots each), kept until both
     * U8 passes (codes, sub bytes) have used them: the writer puts every F16 tensor before the U8
     * ones, so a single shared cache would only ever serve the last matrix. NULL: search again. */
    uint16_t *qcache;
    int qcache_uses;
    const float *imp;       /* --calibrate: per-column importance (cols) for Q4 / Q6 / Q4A, else NULL (borrowed) */
} tplan;

/* One rule of the precision policy: decoder matrices whose name matches `pattern` (fnmatch)
 * and whose rows fit `width` get `fmt`; the last matching rule wins. */
typedef enum { WIDTH_ANY = 0, WIDTH_NARROW, WIDTH_WIDE } width_t; /* narrow: rows shorter than a Q4A super-block */
typedef struct prule {
    char pattern[160];
    ofmt_t fmt;
    width_t width;
    bool user;       /* from --tensor-precision: it must match some matrix */
    int64_t matched; /* matrices it matched (whether or not a later rule won) */
} prule;
#define SUPER_COLS (QHX_Q4A_GROUP * QHX_Q4A_SUPER) /* 256 */
#define MAX_RULES 256

typedef struct convert {
    forge_job job;
    const qhx_forge_params *p;
    json_t *config;
    qhx_model_config cfg; /* parsed by the family */
    bool tied;            /* config: tie_word_embeddings */
    qhx_st_set *set;
    const qhx_family_desc *family;
    tplan *plans;
    int64_t n_plans;
    ofmt_t prec, lm, emb, vis;
    prule rules[MAX_RULES]; /* the default policy of prec, then --tensor-precision */
    int n_rules;
    qhx_stw *w[ROLE_COUNT];
    char fname[ROLE_COUNT][48];
    /* scratch (CHUNK elements or one row chunk) */
    float *f32;
    uint16_t *u16;
    uint8_t *q;
    float *scales;      /* Q8 row scales of one chunk of rows */
    uint16_t *gscales;  /* Q4 / Q6 group scales (f16), Q4A super-block scales, of one chunk of rows */
    uint8_t *qhigh;     /* Q6 high bits, Q4A (scale, zero point) bytes, of one chunk of rows */
    uint16_t *cache;    /* the scales of every row of cache_plan (its scale pass): cache_row each */
    size_t cache_cap;
    const tplan *cache_plan;
    int64_t row0;       /* first row of the chunk being quantized */
    qhx_pool *pool;     /* quantizes the rows of a chunk */
    float *rows_f32;    /* per pool thread: one source row (max_cols) */
    uint16_t *rows_u16;
    uint8_t *bad;       /* per row of a chunk */
    int64_t max_cols;
    char name[128];     /* manifest name prefix */
    uint64_t bytes_by_dtype[ROLE_COUNT][QHX_DTYPE_COUNT];
    int64_t n_tensors[ROLE_COUNT];
    int64_t ctx;        /* manifest max_context */
    forge_calib *calib; /* --calibrate: the statistics pass's importance, else NULL */
    char calib_note[160]; /* its "qhexrt.calibration" metadata: the text's name and tokens */
} convert;

static int has_prefix(const char *s, const char *pre) { return !strncmp(s, pre, strlen(pre)); }
static int has_suffix(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

// ---- reading source elements as f32 ------------------------------------------------------------

/* Elements [i0, i0 + n) of t as f32 (n <= CHUNK); u16: scratch of n. The source may be
 * unaligned: copied first. */
static void load_f32_with(const qhx_st_tensor *t, int64_t i0, int64_t n, float *out, uint16_t *u16) {
    size_t es = qhx_dtype_size(t->dtype);
    const uint8_t *src = t->data + (size_t)i0 * es;
    if (t->dtype == QHX_DTYPE_F32) {
        memcpy(out, src, (size_t)n * 4);
    } else {
        memcpy(u16, src, (size_t)n * 2);
        if (t->dtype == QHX_DTYPE_F16) qhx_f16_to_f32_row(u16, out, n);
        else qhx_bf16_to_f32_row(u16, out, n);
    }
}

static void load_f32(convert *c, const qhx_st_tensor *t, int64_t i0, int64_t n, float *out) {
    load_f32_with(t, i0, n, out, c->u16);
}

static void release(const qhx_st_tensor *t, int64_t i0, int64_t n) {
    size_t es = qhx_dtype_size(t->dtype);
    forge_release_pages(t->data + (size_t)i0 * es, (size_t)n * es);
}

// ---- writing one output tensor -----------------------------------------------------------------

static qhx_status put(convert *c, qhx_stw *w, const char *name, const void *data, size_t bytes, qhx_error *err) {
    qhx_status rc = qhx_stw_write(w, name, data, bytes, err);
    return rc != QHX_OK ? rc : forge_job_tick(&c->job, bytes, err);
}

/* f32 / f16 / bf16 output: same dtype is copied byte for byte; otherwise converted. */
static qhx_status write_plain(convert *c, qhx_stw *w, const tplan *pl, qhx_error *err) {
    const qhx_st_tensor *t = pl->src;
    qhx_dtype want = pl->fmt == OUT_F32 ? QHX_DTYPE_F32 : pl->fmt == OUT_F16 ? QHX_DTYPE_F16 : QHX_DTYPE_BF16;
    size_t oes = qhx_dtype_size(want);
    for (int64_t i0 = 0; i0 < t->n_elements; i0 += CHUNK) {
        int64_t n = t->n_elements - i0 < CHUNK ? t->n_elements - i0 : CHUNK;
        const void *out;
        if (t->dtype == want) {
            out = t->data + (size_t)i0 * oes;
        } else {
            load_f32(c, t, i0, n, c->f32);
            for (int64_t k = 0; k < n; k++)
                if (!isfinite(c->f32[k]) || (want == QHX_DTYPE_F16 && fabsf(c->f32[k]) > 65504.0f))
                    return qhx_fail(err, QHX_E_FORMAT, "%s: tensor '%s': element %lld (%g) %s",
                                    qhx_st_file_path(c->set, t->file_index), t->name, (long long)(i0 + k),
                                    (double)c->f32[k],
                                    isfinite(c->f32[k]) ? "does not fit f16; use bf16" : "is not finite");
            if (want == QHX_DTYPE_F32) out = c->f32;
            else if (want == QHX_DTYPE_F16) qhx_f32_to_f16_row(c->f32, c->u16, n), out = c->u16;
            else qhx_f32_to_bf16_row(c->f32, c->u16, n), out = c->u16;
        }
        qhx_status rc = put(c, w, pl->name, out, (size_t)n * oes, err);
        release(t, i0, n);
        if (rc != QHX_OK) return rc;
    }
    return QHX_OK;
}

/* u16 slots of the cache per row: Q4 / Q6 one f16 scale per group; Q4A its super-block scales,
 * then its (scale, zero point) bytes two to a slot. */
static int64_t cache_row(const tplan *pl) {
    return pl->fmt == OUT_Q4A ? qhx_q4a_row_supers(pl->cols) + qhx_q4a_row_sub_bytes(pl->cols) / 2
                              : pl->cols / QHX_Q4_GROUP;
}

/* Q4A: the scale pass searches and keeps (super, sub) in the chunk's buffers (and the cache);
 * the other passes take them from the cache when it holds them, and round the codes. */
static int quant_row_q4a(convert *c, const tplan *pl, int64_t r, int codes, const float *x) {
    const int64_t cols = pl->cols, ns = qhx_q4a_row_supers(cols), sb = qhx_q4a_row_sub_bytes(cols);
    uint16_t *sup = c->gscales + r * ns;
    uint8_t *sub = c->qhigh + r * sb;
    if (codes && pl->qcache) {
        const uint16_t *at = pl->qcache + (c->row0 + r) * cache_row(pl);
        memcpy(sup, at, (size_t)ns * 2);
        memcpy(sub, at + ns, (size_t)sb);
        qhx_quant_q4a_codes(x, cols, sup, sub, c->q + r * cols / 2);
        return 0;
    }
    return qhx_quant_q4a_row(x, pl->imp, cols, codes ? c->q + r * cols / 2 : NULL, sup, sub);
}

/* One row quantized into the chunk's buffers at row r: the codes (Q6: both planes), the scales.
 * codes 0: the scales only. Returns the quantizer's 0 or -1. */
static int quant_row(convert *c, const tplan *pl, int64_t r, int codes, const float *x) {
    const int64_t cols = pl->cols, ng = cols / QHX_Q4_GROUP;
    if (pl->fmt == OUT_Q4A) return quant_row_q4a(c, pl, r, codes, x);
    if (codes && c->cache_plan == pl && is_grouped(pl->fmt)) { /* the scale pass searched already */
        const uint16_t *d = c->cache + (c->row0 + r) * ng;
        if (pl->fmt == OUT_Q4) qhx_quant_q4_codes(x, cols, QHX_Q4_GROUP, d, c->q + r * cols / 2);
        else qhx_quant_q6_codes(x, cols, QHX_Q4_GROUP, d, c->q + r * cols / 2, c->qhigh + r * cols / 4);
        return 0;
    }
    switch (pl->fmt) {
    case OUT_Q8: return qhx_quant_q8_row(x, cols, codes ? (int8_t *)c->q + r * cols : NULL, c->scales + r);
    case OUT_Q4:
        return qhx_quant_q4_row_w(x, pl->imp, cols, QHX_Q4_GROUP, codes ? c->q + r * cols / 2 : NULL, c->gscales + r * ng);
    default:
        return qhx_quant_q6_row_w(x, pl->imp, cols, QHX_Q4_GROUP, codes ? c->q + r * cols / 2 : NULL,
                                  codes ? c->qhigh + r * cols / 4 : NULL, c->gscales + r * ng);
    }
}

/* The rows of one chunk, quantized on the pool: each thread loads a row into its own scratch and
 * writes that row's slots of the chunk buffers, so the bytes do not depend on the thread count. */
typedef struct quant_job {
    convert *c;
    const tplan *pl;
    int codes;
    uint8_t *bad; /* per row of the chunk: the quantizer refused it */
} quant_job;

static void quant_task(void *ctx, int64_t r, int thread) {
    quant_job *j = ctx;
    convert *c = j->c;
    const int64_t cols = j->pl->cols;
    float *x = c->rows_f32 + (size_t)thread * (size_t)c->max_cols;
    load_f32_with(j->pl->src, (c->row0 + r) * cols, cols, x, c->rows_u16 + (size_t)thread * (size_t)c->max_cols);
    j->bad[r] = quant_row(c, j->pl, r, j->codes, x) != 0;
}

/* Keep room for the scales of all of pl's rows (Q4 / Q6: 1/64 of the f32 source's bytes), so
 * the codes passes reuse the scale pass's search. Without the room the passes search again. */
static void cache_scales_for(convert *c, const tplan *pl) {
    c->cache_plan = NULL;
    size_t need = (size_t)pl->rows * (size_t)cache_row(pl);
    if (need > c->cache_cap) {
        uint16_t *p = qhx_realloc(c->cache, need * sizeof *p);
        if (!p) return;
        c->cache = p, c->cache_cap = need;
    }
    c->cache_plan = pl;
}

/* Q8 / Q4 / Q6: quantize row by row and write one part (codes, scales, Q6's high bits). The parts
 * are separate tensors, so the source is read once for each part; scales are written first (the
 * writer orders tensors by element size) and, for Q4 / Q6, kept for the codes passes, which then
 * only round. Nothing of matrix size is held in memory. */
static qhx_status write_quant(convert *c, qhx_stw *w, const tplan *pl, part_t part, qhx_error *err) {
    const qhx_st_tensor *t = pl->src;
    const int64_t cols = pl->cols, ng = pl->fmt == OUT_Q8 ? 1 : pl->fmt == OUT_Q4A ? qhx_q4a_row_supers(cols) : cols / QHX_Q4_GROUP;
    const int64_t row_bytes = pl->fmt == OUT_Q8 ? cols : cols / 2;
    const int64_t high_bytes = pl->fmt == OUT_Q4A ? qhx_q4a_row_sub_bytes(cols) : cols / 4; /* PART_HIGH per row */
    int64_t rows_per = CHUNK / cols;
    if (rows_per < 1) rows_per = 1;
    tplan *mpl = (tplan *)pl; /* the plan's own scale cache (Q4A) is written here */
    if (part == PART_SCALES && pl->fmt == OUT_Q4A && !pl->qcache) {
        mpl->qcache = qhx_malloc((size_t)pl->rows * (size_t)cache_row(pl) * sizeof *pl->qcache);
        mpl->qcache_uses = 2;
    } else if (part == PART_SCALES && is_grouped(pl->fmt)) {
        cache_scales_for(c, pl);
    }
    for (int64_t r0 = 0; r0 < pl->rows; r0 += rows_per) {
        int64_t nr = pl->rows - r0 < rows_per ? pl->rows - r0 : rows_per;
        c->row0 = r0;
        quant_job job = {c, pl, part != PART_SCALES, c->bad};
        qhx_pool_run(c->pool, quant_task, &job, nr);
        for (int64_t r = 0; r < nr; r++)
            if (c->bad[r])
                return qhx_fail(err, QHX_E_FORMAT, "%s: tensor '%s': row %lld holds a NaN, an infinity or a value too large to quantize",
                                qhx_st_file_path(c->set, t->file_index), t->name, (long long)(r0 + r));
        if (part == PART_SCALES && pl->fmt == OUT_Q4A && pl->qcache) {
            /* per row: the super-block scales, then the sub bytes */
            const int64_t cr = cache_row(pl), sb = qhx_q4a_row_sub_bytes(cols);
            for (int64_t r = 0; r < nr; r++) {
                memcpy(pl->qcache + (r0 + r) * cr, c->gscales + r * ng, (size_t)ng * 2);
                memcpy(pl->qcache + (r0 + r) * cr + ng, c->qhigh + r * sb, (size_t)sb);
            }
        } else if (part == PART_SCALES && c->cache_plan == pl) {
            memcpy(c->cache + r0 * ng, c->gscales, (size_t)(nr * ng) * sizeof *c->cache);
        }
        const void *sc = pl->fmt == OUT_Q8 ? (const void *)c->scales : (const void *)c->gscales;
        size_t sc_bytes = (size_t)(nr * ng) * (pl->fmt == OUT_Q8 ? 4 : 2);
        qhx_status rc = part == PART_SCALES ? put(c, w, pl->scale_name, sc, sc_bytes, err)
                        : part == PART_HIGH ? put(c, w, pl->high_name, c->qhigh, (size_t)(nr * high_bytes), err)
                                            : put(c, w, pl->name, c->q, (size_t)(nr * row_bytes), err);
        release(t, r0 * cols, nr * cols);
        if (rc != QHX_OK) return rc;
    }
    if (part != PART_SCALES && pl->qcache && --mpl->qcache_uses == 0) {
        qhx_free(mpl->qcache);
        mpl->qcache = NULL;
    }
    return QHX_OK;
}

// ---- planning ------------------------------------------------------------------------------------

/* "<name><suffix>", allocated (NULL when out of memory). */
static char *side_name(const char *name, const char *suffix) {
    size_t n = strlen(name) + strlen(suffix) + 1;
    char *s = qhx_malloc(n);
    if (s) snprintf(s, n, "%s%s", name, suffix);
    return s;
}

static qhx_status add_plan(convert *c, const qhx_st_tensor *src, const char *name, role_t role, ofmt_t fmt,
                           qhx_error *err) {
    tplan *pl = &c->plans[c->n_plans++]; /* counted now, so the cleanup frees what is set below */
    memset(pl, 0, sizeof *pl);
    pl->src = src;
    pl->role = role;
    pl->rows = src->n_dims ? src->shape[0] : 1;
    pl->cols = pl->rows ? src->n_elements / (pl->rows ? pl->rows : 1) : 0;
    if (is_grouped(fmt) && (pl->cols % QHX_Q4_GROUP)) {
        forge_job_log(&c->job, "%s: %lld columns are not a multiple of %d: stored as w8", name, (long long)pl->cols,
                      QHX_Q4_GROUP);
        fmt = OUT_Q8;
    }
    pl->fmt = fmt;
    /* W8's scale is the row's largest magnitude, no search to weigh: calibration leaves it be */
    if (is_grouped(fmt)) pl->imp = forge_calib_importance(c->calib, src->name, pl->cols);
    if (!(pl->name = qhx_strdup(name))) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    if (is_quant(fmt)) {
        if (!(pl->scale_name = side_name(name, fmt == OUT_Q4A ? QHX_QSUPER_SUFFIX : QHX_QSCALE_SUFFIX)))
            return qhx_fail(err, QHX_E_NOMEM, "out of memory");
        if (pl->cols > c->max_cols) c->max_cols = pl->cols;
    }
    if ((fmt == OUT_Q6 || fmt == OUT_Q4A) && !(pl->high_name = side_name(name, fmt == OUT_Q6 ? QHX_QHIGH_SUFFIX : QHX_QSUB_SUFFIX)))
        return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    return QHX_OK;
}

static int is_matrix_weight(const qhx_st_tensor *t) {
    return t->n_dims == 2 && has_suffix(t->name, ".weight") && !strstr(t->name, "pos_embed") &&
           !strstr(t->name, "embed_tokens");
}

/* The precision of decoder matrix `name`: the bundle's, unless a policy rule says otherwise. */
static ofmt_t decoder_fmt(convert *c, const char *name, int64_t cols) {
    ofmt_t f = c->prec;
    for (int i = 0; i < c->n_rules; i++) {
        prule *r = &c->rules[i];
        if (r->width == WIDTH_NARROW && cols >= SUPER_COLS) continue;
        if (r->width == WIDTH_WIDE && cols < SUPER_COLS) continue;
        if (!fnmatch(r->pattern, name, 0)) f = r->fmt, r->matched++;
    }
    return f;
}

/* A --tensor-precision rule that matched no matrix would change nothing: a typo in a glob must
 * not pass as a bundle forged as asked. example: a matrix name to show what names look like. */
static qhx_status check_rules_matched(const convert *c, const char *example, qhx_error *err) {
    for (int i = 0; i < c->n_rules; i++) {
        const prule *r = &c->rules[i];
        if (r->user && !r->matched)
            return qhx_fail(err, QHX_E_ARG, "--tensor-precision rule '%s=%s' matches no decoder matrix of the checkpoint "
                            "(names look like '%s')", r->pattern, OFMT_NAME[r->fmt], example ? example : "");
    }
    return QHX_OK;
}

static qhx_status add_rule_w(convert *c, const char *pattern, size_t n, ofmt_t fmt, width_t width, qhx_error *err) {
    if (c->n_rules == MAX_RULES) return qhx_fail(err, QHX_E_LIMIT, "more than %d tensor precision rules", MAX_RULES);
    if (n == 0 || n >= sizeof c->rules[0].pattern)
        return qhx_fail(err, QHX_E_ARG, "tensor precision rule: a pattern of %zu characters (1 to %zu)", n,
                        sizeof c->rules[0].pattern - 1);
    prule *r = &c->rules[c->n_rules++];
    memcpy(r->pattern, pattern, n);
    r->pattern[n] = 0;
    r->fmt = fmt;
    r->width = width;
    return QHX_OK;
}

static qhx_status add_rule(convert *c, const char *pattern, size_t n, ofmt_t fmt, qhx_error *err) {
    return add_rule_w(c, pattern, n, fmt, WIDTH_ANY, err);
}

/* "GLOB=PREC[,GLOB=PREC...]" (--tensor-precision) appended to the rules. */
static qhx_status parse_rules(convert *c, const char *spec, qhx_error *err) {
    for (const char *s = spec; *s;) {
        const char *end = strchr(s, ','), *eq;
        size_t len = end ? (size_t)(end - s) : strlen(s);
        char prec[8];
        eq = memchr(s, '=', len);
        size_t plen = eq ? len - (size_t)(eq + 1 - s) : 0;
        int f = -1;
        if (eq && plen < sizeof prec) {
            memcpy(prec, eq + 1, plen);
            prec[plen] = 0;
            f = ofmt_from_name(prec, NAMES_HEAD);
        }
        if (f < 0)
            return qhx_fail(err, QHX_E_ARG, "tensor precision rule '%.*s': expected GLOB=PREC with PREC one of f16, bf16, "
                            "w8, q4, q4a, q6", (int)len, s);
        qhx_status rc = add_rule(c, s, (size_t)(eq - s), (ofmt_t)f, err);
        if (rc != QHX_OK) return rc;
        c->rules[c->n_rules - 1].user = true;
        s += len + (end ? 1 : 0);
    }
    return QHX_OK;
}

/* Layers that keep more bits under q4a's default policy: the first and last eighth (at least
 * one each) and every third one between (docs/bundle.md, "Mixed precision by role"). */
static int q4a_more_bits(int64_t layer, int64_t n) {
    int64_t e = n / 8 > 0 ? n / 8 : 1;
    return layer < e || layer >= n - e || (layer - e) % 3 == 2;
}

/* Layer l's index among the layers of its own type (linear or full attention), and in *count how
 * many layers have that type: a role that only one type holds picks its more-bits layers within
 * that type's own sequence. */
static int64_t index_in_type(const qhx_model_config *cfg, int64_t l, int64_t *count) {
    int64_t idx = 0, n = 0;
    for (int64_t i = 0; i < cfg->num_hidden_layers; i++) {
        if (cfg->layer_types[i] != cfg->layer_types[l]) continue;
        if (i < l) idx++;
        n++;
    }
    *count = n;
    return idx;
}

/* Q6 for `role` in layer l (a WIDTH_WIDE rule) when l is a more-bits layer among the layers of
 * l's type. */
static qhx_status add_typed_rule(convert *c, int64_t l, const char *role, qhx_error *err) {
    int64_t count, idx = index_in_type(&c->cfg, l, &count);
    if (!q4a_more_bits(idx, count)) return QHX_OK;
    char pat[96];
    int len = snprintf(pat, sizeof pat, "*.layers.%lld.%s", (long long)l, role);
    return add_rule_w(c, pat, (size_t)len, OUT_Q6, WIDTH_WIDE, err);
}

/* q4a's default policy (docs/bundle.md, "Mixed precision by role"; BENCHMARKS.md has the
 * per-role measurements behind it): Q6 for the FFN-down matrices of the layers q4a_more_bits
 * picks; for rows of a super-block or more, also the attention V projections and the
 * linear-attention qkv projections of the more-bits layers among the layers of their type; for
 * narrower rows (where a super-block does not fill, and llama.cpp's K-quants fall back to 5.5-8
 * bit types), the linear-attention qkv, z and output projections and the FFN up matrices of
 * every layer. */
static qhx_status q4a_policy(convert *c, qhx_error *err) {
    static const char *const narrow[] = {"*.linear_attn.in_proj_qkv.weight", "*.linear_attn.in_proj_z.weight",
                                         "*.linear_attn.out_proj.weight", "*.mlp.up_proj.weight"};
    const int64_t n = c->cfg.num_hidden_layers;
    qhx_status rc = QHX_OK;
    for (int64_t l = 0; l < n && rc == QHX_OK; l++) {
        const bool linear = c->cfg.layer_types[l] == QHX_LAYER_LINEAR_ATTENTION;
        rc = add_typed_rule(c, l, linear ? "linear_attn.in_proj_qkv.weight" : "self_attn.v_proj.weight", err);
        if (rc != QHX_OK || !q4a_more_bits(l, n)) continue;
        char pat[64];
        int len = snprintf(pat, sizeof pat, "*.layers.%lld.mlp.down_proj.weight", (long long)l);
        rc = add_rule(c, pat, (size_t)len, OUT_Q6, err);
    }
    for (size_t i = 0; i < sizeof narrow / sizeof *narrow && rc == QHX_OK; i++)
        rc = add_rule_w(c, narrow[i], strlen(narrow[i]), OUT_Q6, WIDTH_NARROW, err);
    return rc;
}

/* The default policy of the bundle precision, then the user's rules. */
static qhx_status setup_policy(convert *c, qhx_error *err) {
    qhx_status rc = QHX_OK;
    if (c->prec == OUT_Q4A) rc = q4a_policy(c, err);
    if (rc == QHX_OK && c->p->tensor_precision) rc = parse_rules(c, c->p->tensor_precision, err);
    return rc;
}

/* The lm-head's precision: --lmhead, else the bundle's default; q4a's default head is Q6 but W8
 * when its rows are narrower than a super-block (measured: BENCHMARKS.md). */
static ofmt_t head_fmt(convert *c, const qhx_st_tensor *t) {
    if (c->prec == OUT_Q4A && !c->p->lmhead && t->n_dims == 2 && t->shape[1] < SUPER_COLS) c->lm = OUT_Q8;
    return c->lm;
}

static qhx_status plan_all(convert *c, qhx_error *err) {
    const int64_t n = qhx_st_n_tensors(c->set);
    c->plans = qhx_calloc((size_t)n + 1, sizeof *c->plans);
    if (!c->plans) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    const qhx_st_tensor *embed = NULL, *lm = NULL;
    const char *example = NULL; /* a decoder matrix's name, for a rule that matched nothing */
    int64_t dropped = 0, dropped_vision = 0;
    for (int64_t i = 0; i < n; i++) {
        const qhx_st_tensor *t = qhx_st_tensor_at(c->set, i);
        if (t->dtype != QHX_DTYPE_F32 && t->dtype != QHX_DTYPE_F16 && t->dtype != QHX_DTYPE_BF16)
            return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: tensor '%s': dtype %s (expected F32, F16 or BF16)",
                            qhx_st_file_path(c->set, t->file_index), t->name, qhx_dtype_name(t->dtype));
        if (has_prefix(t->name, "mtp.") && !c->p->mtp) {
            dropped++;
            continue;
        }
        if (!strcmp(t->name, "lm_head.weight")) {
            lm = t;
            continue;
        }
        const char *vp = c->family->vision_prefix;
        bool vision = vp && has_prefix(t->name, vp);
        if (has_suffix(t->name, "embed_tokens.weight") && !vision) {
            if (embed) return qhx_fail(err, QHX_E_FORMAT, "two embedding tables: '%s' and '%s'", embed->name, t->name);
            embed = t;
            continue; /* planned below, once it is known whether the head is tied to it */
        }
        role_t role = vision ? ROLE_VISION : has_prefix(t->name, "mtp.") ? ROLE_MTP : ROLE_DECODER;
        if (role == ROLE_VISION && (c->p->text_only || !qhx_family_takes_images(c->family))) {
            dropped_vision++;
            continue;
        }
        const int64_t cols = t->n_dims == 2 ? t->shape[1] : 0;
        ofmt_t f = !is_matrix_weight(t) ? OUT_F32 : role == ROLE_VISION ? c->vis : decoder_fmt(c, t->name, cols);
        if (!example && role == ROLE_DECODER && is_matrix_weight(t)) example = t->name;
        qhx_status rc = add_plan(c, t, t->name, role, f, err);
        if (rc != QHX_OK) return rc;
    }
    qhx_status rc = check_rules_matched(c, example, err);
    if (rc != QHX_OK) return rc;
    if (!embed && lm && c->tied) { /* a bundle of a tied checkpoint: the head is the table */
        if (c->p->embed)
            return qhx_fail(err, QHX_E_ARG, "%s: --embed: the input stores its tied embedding only as lm_head.weight",
                            qhx_st_file_path(c->set, 0));
        return add_plan(c, lm, "lm_head.weight", ROLE_LMHEAD, head_fmt(c, lm), err);
    }
    if (!embed) return qhx_fail(err, QHX_E_FORMAT, "%s: no embedding table (*embed_tokens.weight)", qhx_st_file_path(c->set, 0));
    if (embed->n_dims != 2)
        return qhx_fail(err, QHX_E_FORMAT, "tensor '%s': expected 2 dimensions, got %d", embed->name, embed->n_dims);
    if (lm && (lm->n_dims != 2 || lm->shape[0] != embed->shape[0] || lm->shape[1] != embed->shape[1]))
        return qhx_fail(err, QHX_E_FORMAT, "tensor 'lm_head.weight': shape differs from '%s'", embed->name);
    if (dropped) forge_job_log(&c->job, "dropped %lld mtp.* tensors (multi-token prediction is not used)", (long long)dropped);
    if (dropped_vision)
        forge_job_log(&c->job, "left out %lld %s* tensors (%s)", (long long)dropped_vision, c->family->vision_prefix,
                      !qhx_family_takes_images(c->family) ? "no run plan of this family reads the vision tower" : "--text-only");
    /* Tied: the matrix is stored once, as the head in the head's precision, and the embedding
     * lookup dequantizes its rows (the same bytes the head multiplies with). --embed asks for a
     * separate lookup table instead, as an untied checkpoint has. */
    if (lm || c->p->embed) {
        if ((rc = add_plan(c, embed, embed->name, ROLE_EMBED, c->emb, err))) return rc;
    }
    head_fmt(c, lm ? lm : embed); /* settles c->lm for the log line */
    if (!lm) forge_job_log(&c->job, "tied lm-head: %s stored once as lm_head.weight (%s)%s", embed->name, OFMT_NAME[c->lm],
                           c->p->embed ? ", plus a separate embedding table (--embed)" : ", the embedding lookup reads its rows");
    return add_plan(c, lm ? lm : embed, "lm_head.weight", ROLE_LMHEAD, head_fmt(c, lm ? lm : embed), err);
}

/* One log line when the decoder's matrices are not all of the bundle precision. */
static void log_policy(convert *c) {
    int64_t n[OUT_Q4A + 1] = {0}, other = 0;
    for (int64_t i = 0; i < c->n_plans; i++) {
        const tplan *pl = &c->plans[i];
        if (pl->role != ROLE_DECODER || pl->fmt == OUT_F32) continue;
        n[pl->fmt]++;
        other += pl->fmt != c->prec;
    }
    if (!other) return;
    char line[256];
    int at = 0;
    for (int f = OUT_F16; f <= OUT_Q4A && at < (int)sizeof line; f++)
        if (n[f]) at += snprintf(line + at, sizeof line - (size_t)at, "%s%lld %s", at ? ", " : "", (long long)n[f], OFMT_NAME[f]);
    forge_job_log(&c->job, "decoder matrices by precision (policy): %s", line);
}

/* --calibrate: how many matrices the statistics weigh (the Q4A / Q4 / Q6 ones the pass saw). */
static void log_weighted(convert *c) {
    int64_t n = 0, grouped = 0;
    for (int64_t i = 0; i < c->n_plans; i++) {
        grouped += is_grouped(c->plans[i].fmt);
        n += c->plans[i].imp != NULL;
    }
    forge_job_log(&c->job, "calibration: %lld of the %lld q4a / q4 / q6 matrices weighted by it%s", (long long)n,
                  (long long)grouped, grouped ? "" : " (w8, f16 and bf16 matrices are not weighted)");
}

static const char *role_precision(const convert *c, role_t r) {
    return OFMT_NAME[r == ROLE_DECODER || r == ROLE_MTP ? c->prec : r == ROLE_EMBED ? c->emb : r == ROLE_LMHEAD ? c->lm : c->vis];
}

static qhx_status declare_all(convert *c, qhx_error *err) {
    qhx_status rc;
    int used[ROLE_COUNT] = {0};
    for (int64_t i = 0; i < c->n_plans; i++) used[c->plans[i].role] = 1;
    for (int r = 0; r < ROLE_COUNT; r++) {
        if (!used[r]) continue;
        snprintf(c->fname[r], sizeof c->fname[r], "%s-%s.safetensors", ROLE_NAME[r], role_precision(c, (role_t)r));
        char *path = forge_job_path(&c->job, c->fname[r]);
        if (!path) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
        rc = qhx_stw_create(path, &c->w[r], err);
        qhx_free(path);
        if (rc != QHX_OK) return rc;
        if ((rc = qhx_stw_meta(c->w[r], "qhexrt.format", QHX_BUNDLE_FORMAT, err)) ||
            (rc = qhx_stw_meta(c->w[r], "qhexrt.precision", role_precision(c, (role_t)r), err)) ||
            (rc = qhx_stw_meta(c->w[r], "qhexrt.role", ROLE_NAME[r], err)))
            return rc;
        if (c->calib && (rc = qhx_stw_meta(c->w[r], "qhexrt.calibration", c->calib_note, err))) return rc;
    }
    for (int64_t i = 0; i < c->n_plans; i++) {
        const tplan *pl = &c->plans[i];
        qhx_stw *w = c->w[pl->role];
        const qhx_st_tensor *t = pl->src;
        uint64_t *by = c->bytes_by_dtype[pl->role];
        uint64_t n = (uint64_t)t->n_elements;
        switch (pl->fmt) {
        case OUT_F32:
        case OUT_F16:
        case OUT_BF16: {
            qhx_dtype dt = pl->fmt == OUT_F32 ? QHX_DTYPE_F32 : pl->fmt == OUT_F16 ? QHX_DTYPE_F16 : QHX_DTYPE_BF16;
            rc = qhx_stw_declare(w, pl->name, dt, t->n_dims, t->shape, err);
            by[dt] += n * qhx_dtype_size(dt);
            c->n_tensors[pl->role] += 1;
            break;
        }
        case OUT_Q8:
            rc = qhx_stw_declare(w, pl->name, QHX_DTYPE_I8, 2, (int64_t[]){pl->rows, pl->cols}, err);
            if (rc == QHX_OK) rc = qhx_stw_declare(w, pl->scale_name, QHX_DTYPE_F32, 1, (int64_t[]){pl->rows}, err);
            by[QHX_DTYPE_I8] += n;
            by[QHX_DTYPE_F32] += (uint64_t)pl->rows * 4;
            c->n_tensors[pl->role] += 2;
            break;
        case OUT_Q4:
            rc = qhx_stw_declare(w, pl->name, QHX_DTYPE_U8, 2, (int64_t[]){pl->rows, pl->cols / 2}, err);
            if (rc == QHX_OK)
                rc = qhx_stw_declare(w, pl->scale_name, QHX_DTYPE_F16, 2,
                                     (int64_t[]){pl->rows, pl->cols / QHX_Q4_GROUP}, err);
            by[QHX_DTYPE_U8] += n / 2;
            by[QHX_DTYPE_F16] += n / QHX_Q4_GROUP * 2;
            c->n_tensors[pl->role] += 2;
            break;
        case OUT_Q6: /* Q4's two tensors (the low 4 bits of each code) and the high 2 bits */
            rc = qhx_stw_declare(w, pl->name, QHX_DTYPE_U8, 2, (int64_t[]){pl->rows, pl->cols / 2}, err);
            if (rc == QHX_OK)
                rc = qhx_stw_declare(w, pl->scale_name, QHX_DTYPE_F16, 2,
                                     (int64_t[]){pl->rows, pl->cols / QHX_Q4_GROUP}, err);
            if (rc == QHX_OK)
                rc = qhx_stw_declare(w, pl->high_name, QHX_DTYPE_U8, 2, (int64_t[]){pl->rows, pl->cols / 4}, err);
            by[QHX_DTYPE_U8] += n / 2 + n / 4;
            by[QHX_DTYPE_F16] += n / QHX_Q4_GROUP * 2;
            c->n_tensors[pl->role] += 3;
            break;
        case OUT_Q4A: /* codes in Q4's layout, the f16 super-block scales, the (s, z) bytes */
            rc = qhx_stw_declare(w, pl->name, QHX_DTYPE_U8, 2, (int64_t[]){pl->rows, pl->cols / 2}, err);
            if (rc == QHX_OK)
                rc = qhx_stw_declare(w, pl->scale_name, QHX_DTYPE_F16, 2,
                                     (int64_t[]){pl->rows, qhx_q4a_row_supers(pl->cols)}, err);
            if (rc == QHX_OK)
                rc = qhx_stw_declare(w, pl->high_name, QHX_DTYPE_U8, 2,
                                     (int64_t[]){pl->rows, qhx_q4a_row_sub_bytes(pl->cols)}, err);
            by[QHX_DTYPE_U8] += n / 2 + (uint64_t)(pl->rows * qhx_q4a_row_sub_bytes(pl->cols));
            by[QHX_DTYPE_F16] += (uint64_t)(pl->rows * qhx_q4a_row_supers(pl->cols)) * 2;
            c->n_tensors[pl->role] += 3;
            break;
        }
        if (rc != QHX_OK) return rc;
    }
    return QHX_OK;
}

/* model.safetensors.index.json: every output tensor -> its file, as sharded HF checkpoints. */
static qhx_status write_index(convert *c, uint64_t total, qhx_error *err) {
    json_t *map = json_object();
    for (int64_t i = 0; map && i < c->n_plans; i++) {
        const tplan *pl = &c->plans[i];
        json_object_set_new(map, pl->name, json_string(c->fname[pl->role]));
        if (pl->scale_name) json_object_set_new(map, pl->scale_name, json_string(c->fname[pl->role]));
        if (pl->high_name) json_object_set_new(map, pl->high_name, json_string(c->fname[pl->role]));
    }
    /* set_new releases the map even when it fails; a failed pack would not say whether it did */
    json_t *doc = json_pack("{s:{s:I, s:s}}", "metadata", "total_size", (json_int_t)total, "qhexrt.format",
                            QHX_BUNDLE_FORMAT);
    if (!doc || json_object_set_new(doc, "weight_map", map)) {
        if (!doc) json_decref(map);
        json_decref(doc);
        doc = NULL;
    }
    return forge_write_json(&c->job, "model.safetensors.index.json", doc, err);
}

// ---- side files and manifests ------------------------------------------------------------------

static qhx_status copy_side_files(convert *c, const char *hf_dir, qhx_error *err) {
    static const char *const required[] = {"config.json", "tokenizer.json"};
    static const char *const optional[] = {"generation_config.json", "tokenizer_config.json", "preprocessor_config.json",
                                           "chat_template.json", "chat_template.jinja", "special_tokens_map.json",
                                           "video_preprocessor_config.json"};
    for (size_t i = 0; i < sizeof required / sizeof *required; i++) {
        char *src = qhx_path_join(hf_dir, required[i]);
        if (!src) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
        qhx_status rc = qhx_path_is_file(src) ? forge_copy_file(&c->job, src, required[i], err)
                                              : qhx_fail(err, QHX_E_IO, "%s: missing (a checkpoint folder needs it)", src);
        qhx_free(src);
        if (rc != QHX_OK) return rc;
    }
    for (size_t i = 0; i < sizeof optional / sizeof *optional; i++) {
        char *src = qhx_path_join(hf_dir, optional[i]);
        if (!src) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
        qhx_status rc = qhx_path_is_file(src) ? forge_copy_file(&c->job, src, optional[i], err) : QHX_OK;
        qhx_free(src);
        if (rc != QHX_OK) return rc;
    }
    return QHX_OK;
}

/* Manifest name (--name, else the input folder's name, lower-cased) and context length. */
static qhx_status resolve_name_ctx(convert *c, const char *hf_dir, qhx_error *err) {
    char *name = c->name;
    if (c->p->name) {
        snprintf(name, sizeof c->name, "%s", c->p->name);
    } else {
        size_t n = strlen(hf_dir);
        while (n > 1 && hf_dir[n - 1] == '/') n--;
        size_t b = n;
        while (b > 0 && hf_dir[b - 1] != '/') b--;
        snprintf(name, sizeof c->name, "%.*s", (int)(n - b), hf_dir + b);
        for (char *s = name; *s; s++) *s = (char)tolower((unsigned char)*s);
    }
    if (!name[0] || !strcmp(name, ".") || !strcmp(name, ".."))
        return qhx_fail(err, QHX_E_ARG, "cannot derive a bundle name from '%s'; pass --name", hf_dir);
    for (const char *s = name; *s; s++)
        if (!isalnum((unsigned char)*s) && !strchr("._-", *s))
            return qhx_fail(err, QHX_E_ARG, "bundle name '%s': only letters, digits, '.', '_' and '-' are allowed", name);
    /* a bundle keeps the checkpoint's trained context unless --max-context lowers it: the
       runtime sizes each run's KV cache within it by the memory free (qhx_model_choose_context),
       and the manifest's name says the context it holds */
    int64_t max_pos = c->cfg.max_position_embeddings;
    c->ctx = c->p->max_context ? c->p->max_context : max_pos > 0 ? max_pos : c->family->bundle_context;
    if (max_pos > 0 && c->ctx > max_pos)
        return qhx_fail(err, QHX_E_ARG, "max context %lld exceeds max_position_embeddings %lld", (long long)c->ctx,
                        (long long)max_pos);
    return QHX_OK;
}

static qhx_precision plan_precision(ofmt_t f) {
    switch (f) {
    case OUT_F16: return QHX_PREC_F16;
    case OUT_BF16: return QHX_PREC_BF16;
    case OUT_Q8: return QHX_PREC_W8;
    case OUT_Q4:
    case OUT_Q4A: return QHX_PREC_Q4; /* the manifest's "q4": 4-bit group-quantized */
    default: return QHX_PREC_F32;
    }
}

/* The manifest's precision: the one of the dtype holding most bytes of the decoder weights as
 * written, which is what qhx_plan_verify holds it to. --tensor-precision can make that another
 * than --precision ('--precision q4 --tensor-precision *=w8' writes w8 weights). */
static qhx_precision written_precision(const convert *c) {
    static const struct { qhx_dtype dtype; qhx_precision prec; } BY_DTYPE[] = {
        {QHX_DTYPE_F32, QHX_PREC_F32}, {QHX_DTYPE_BF16, QHX_PREC_BF16}, {QHX_DTYPE_F16, QHX_PREC_F16},
        {QHX_DTYPE_I8, QHX_PREC_W8}, {QHX_DTYPE_U8, QHX_PREC_Q4}};
    const uint64_t *bytes = c->bytes_by_dtype[ROLE_DECODER];
    int best = 0;
    for (int d = 1; d < QHX_DTYPE_COUNT; d++)
        if (bytes[d] > bytes[best]) best = d;
    for (size_t k = 0; bytes[best] && k < sizeof BY_DTYPE / sizeof BY_DTYPE[0]; k++)
        if (BY_DTYPE[k].dtype == (qhx_dtype)best) return BY_DTYPE[k].prec;
    return plan_precision(c->prec);
}

/* Point artifact `art` of the plan at the file written for `role`, with its dominant dtype,
 * tensor count and size, so qhx_plan_verify can check them. */
static qhx_status set_artifact(convert *c, qhx_plan *plan, qhx_art_role art, role_t role, qhx_error *err) {
    int best = 0;
    for (int d = 1; d < QHX_DTYPE_COUNT; d++)
        if (c->bytes_by_dtype[role][d] > c->bytes_by_dtype[role][best]) best = d;
    qhx_status rc = qhx_plan_set_artifact(plan, art, c->fname[role], QHX_ART_SAFETENSORS, true, (qhx_dtype)best, err);
    if (rc != QHX_OK) return rc;
    plan->artifacts[art].tensor_count = c->n_tensors[role];
    struct stat st;
    char *path = forge_job_path(&c->job, c->fname[role]);
    if (path && stat(path, &st) == 0) plan->artifacts[art].bytes = (int64_t)st.st_size;
    qhx_free(path);
    return QHX_OK;
}

/* One manifest per runnable configuration: the text one (NAME-CTX.json when the family's first
 * host-op is a text one, as Qwen3.5's; NAME-text-CTX.json when it takes images, as Qwen3-VL's)
 * and, when the checkpoint has the vision tower (and no --text-only), NAME-vlm-CTX.json. The run plan starts from the
 * source checkpoint folder (tokens, generation defaults, config), then gets the bundle's
 * artifacts, precision, context and name; each manifest is read back before it counts. */
static qhx_status write_manifests(convert *c, const char *hf_dir, qhx_error *err) {
    qhx_plan *plan = NULL, *check = NULL;
    qhx_status rc = qhx_plan_from_checkpoint(hf_dir, &plan, err);
    if (rc == QHX_OK) rc = qhx_plan_name_tokens(plan, c->family->special_names, err);
    if (rc != QHX_OK) {
        qhx_plan_free(plan);
        return rc;
    }
    qhx_free(plan->name);
    if (!(plan->name = qhx_strdup(c->name))) {
        rc = qhx_fail(err, QHX_E_NOMEM, "out of memory");
        goto done;
    }
    plan->precision = written_precision(c);
    plan->max_context = c->ctx;
    if ((rc = set_artifact(c, plan, QHX_ART_WEIGHTS, ROLE_DECODER, err)) ||
        (c->w[ROLE_EMBED] && (rc = set_artifact(c, plan, QHX_ART_EMBEDDING, ROLE_EMBED, err))) ||
        (rc = set_artifact(c, plan, QHX_ART_LM_HEAD, ROLE_LMHEAD, err)) ||
        (c->w[ROLE_MTP] && (rc = set_artifact(c, plan, QHX_ART_MTP, ROLE_MTP, err))))
        goto done;
    /* one manifest per host-op of the family: the text ones first, then (with a vision tower)
     * the image ones, which add the vision artifact */
    const bool images = qhx_family_takes_images(c->family);
    const bool text_first = !c->family->host_ops[0].loop->images; /* the text manifest keeps the plain name */
    if (images && !c->w[ROLE_VISION]) forge_job_log(&c->job, "no vision tensors: text manifest only");
    snprintf(plan->family, sizeof plan->family, "%s", c->family->name);
    for (int pass = 0; pass < 2; pass++)
    for (const qhx_family_host_op *op = c->family->host_ops; op->name; op++) {
        if (op->loop->images != (pass == 1)) continue;
        if (pass == 1 && !c->w[ROLE_VISION]) break;
        char file[200];
        snprintf(plan->host_op, sizeof plan->host_op, "%s", op->name);
        if (!images || (pass == 0 && text_first)) {
            snprintf(file, sizeof file, "%s-%lld.json", c->name, (long long)c->ctx);
        } else if (pass == 0) {
            snprintf(file, sizeof file, "%s-text-%lld.json", c->name, (long long)c->ctx);
        } else {
            snprintf(file, sizeof file, "%s-vlm-%lld.json", c->name, (long long)c->ctx);
            if ((rc = set_artifact(c, plan, QHX_ART_VISION, ROLE_VISION, err))) goto done;
        }
        char *path = forge_job_path(&c->job, file);
        if (!path) {
            rc = qhx_fail(err, QHX_E_NOMEM, "out of memory");
            goto done;
        }
        rc = qhx_plan_save(plan, path, err);
        if (rc == QHX_OK) rc = qhx_plan_open(path, &check, err);
        if (rc == QHX_OK) rc = qhx_plan_verify(check, QHX_PLAN_VERIFY_HEADERS, err);
        qhx_plan_free(check);
        check = NULL;
        qhx_free(path);
        if (rc != QHX_OK) goto done;
        forge_job_log(&c->job, "manifest %s", file);
    }
done:
    qhx_plan_free(plan);
    return rc;
}

// ---- the conversion ------------------------------------------------------------------------------

static qhx_status read_config(convert *c, const char *hf_dir, qhx_error *err) {
    char *path = qhx_path_join(hf_dir, "config.json");
    if (!path) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    c->config = qhx_json_load_file(path, err);
    qhx_status rc = c->config ? QHX_OK : err ? err->code : QHX_E_FORMAT;
    const char *mt = NULL;
    if (rc == QHX_OK) rc = qhx_json_get_str(c->config, "model_type", path, "", true, &mt, err);
    if (rc == QHX_OK && !(c->family = qhx_family_for_model_type(mt))) {
        char names[256];
        rc = qhx_fail(err, QHX_E_UNSUPPORTED, "%s: model_type '%s' is not read by any family of this build (%s)", path, mt,
                      qhx_family_names(names, sizeof names));
    }
    if (rc == QHX_OK) rc = c->family->parse_config(c->config, path, &c->cfg, err); /* the family's only parser */
    c->tied = c->cfg.tie_word_embeddings;
    qhx_free(path);
    return rc;
}

static qhx_status parse_precisions(convert *c, qhx_error *err) {
    const qhx_forge_params *p = c->p;
    int v = p->precision ? ofmt_from_name(p->precision, NAMES_BUNDLE) : -1;
    if (v < 0)
        return qhx_fail(err, QHX_E_ARG, "precision '%s' (expected f16, bf16, w8, q4 or q4a)", p->precision ? p->precision : "");
    c->prec = (ofmt_t)v;
    /* docs/formats.md, "Q6": the KL it costs */
    c->lm = c->prec == OUT_Q4 || c->prec == OUT_Q4A ? OUT_Q6 : c->prec;
    if (p->lmhead && (v = ofmt_from_name(p->lmhead, NAMES_HEAD)) < 0)
        return qhx_fail(err, QHX_E_ARG, "lm-head precision '%s' (expected f16, bf16, w8, q6, q4 or q4a)", p->lmhead);
    if (p->lmhead) c->lm = (ofmt_t)v;
    c->emb = c->prec == OUT_BF16 ? OUT_BF16 : OUT_F16;
    if (p->embed && (v = ofmt_from_name(p->embed, NAMES_PLAIN)) < 0)
        return qhx_fail(err, QHX_E_ARG, "embedding dtype '%s' (expected f16 or bf16)", p->embed);
    if (p->embed) c->emb = (ofmt_t)v;
    c->vis = c->prec == OUT_Q4 || c->prec == OUT_Q4A ? OUT_Q8 : c->prec;
    return QHX_OK;
}

/* --calibrate: the statistics pass (forge_calib.c), and the note the weight files carry of it
 * (the text's file name, without its folder, and the tokens run). */
static qhx_status calibrate(convert *c, const char *hf_dir, qhx_error *err) {
    qhx_status rc = forge_calib_run(hf_dir, &c->job, &c->calib, err);
    if (rc != QHX_OK) return rc;
    const char *base = strrchr(c->p->calibrate, '/');
    base = base ? base + 1 : c->p->calibrate;
    snprintf(c->calib_note, sizeof c->calib_note, "%.100s, %lld tokens, mean x^2 per input column", base,
             (long long)forge_calib_tokens(c->calib));
    return QHX_OK;
}

qhx_status qhx_forge_convert(const char *hf_dir, const char *out_dir, const qhx_forge_params *p, qhx_error *err) {
    convert cv;
    memset(&cv, 0, sizeof cv);
    convert *c = &cv;
    c->p = p;
    qhx_status rc;
    if ((rc = parse_precisions(c, err)) != QHX_OK) goto done;
    if (!qhx_path_is_dir(hf_dir)) {
        rc = qhx_fail(err, QHX_E_IO, "%s: not a folder", hf_dir);
        goto done;
    }
    if ((rc = read_config(c, hf_dir, err)) != QHX_OK) goto done;
    if ((rc = setup_policy(c, err)) != QHX_OK) goto done;
    if ((rc = resolve_name_ctx(c, hf_dir, err)) != QHX_OK) goto done;
    if ((rc = qhx_st_open(hf_dir, &c->set, err)) != QHX_OK) goto done;
    if ((rc = forge_job_begin(&c->job, out_dir, p, err)) != QHX_OK) goto done;
    if (p->calibrate && (rc = calibrate(c, hf_dir, err)) != QHX_OK) goto done;
    if ((rc = plan_all(c, err)) != QHX_OK) goto done;
    log_policy(c);
    if (c->calib) log_weighted(c);
    if ((rc = declare_all(c, err)) != QHX_OK) goto done;

    uint64_t total = 0;
    for (int r = 0; r < ROLE_COUNT; r++) {
        if (!c->w[r]) continue;
        if ((rc = qhx_stw_begin(c->w[r], err)) != QHX_OK) goto done;
        total += qhx_stw_file_bytes(c->w[r]);
    }
    c->job.total = total;
    uint64_t side = 0;
    {
        char *tok = qhx_path_join(hf_dir, "tokenizer.json");
        qhx_file_map m;
        if (tok && qhx_file_map_open(tok, &m, NULL) == QHX_OK) side = m.size, qhx_file_map_close(&m);
        qhx_free(tok);
    }
    if ((rc = forge_job_check_space(&c->job, total + side, err)) != QHX_OK) goto done;
    forge_job_log(&c->job, "%s -> %s: %.2f GB in %s%s%s%s", hf_dir, out_dir, (double)total / 1e9, c->fname[ROLE_DECODER],
                  c->w[ROLE_VISION] ? ", " : "", c->w[ROLE_VISION] ? c->fname[ROLE_VISION] : "",
                  ", embed, lm-head");
    if ((rc = copy_side_files(c, hf_dir, err)) != QHX_OK) goto done;
    if ((rc = write_index(c, total, err)) != QHX_OK) goto done;

    c->f32 = qhx_malloc((size_t)CHUNK * 4);
    c->u16 = qhx_malloc((size_t)CHUNK * 2);
    int64_t qcap = c->max_cols > CHUNK ? c->max_cols : CHUNK;
    c->q = qhx_malloc((size_t)qcap);
    c->scales = qhx_malloc((size_t)qcap * 4);
    c->gscales = qhx_malloc((size_t)qcap * 2);
    c->qhigh = qhx_malloc((size_t)qcap / 2);
    c->bad = qhx_malloc((size_t)CHUNK);
    if ((rc = qhx_pool_create(p->threads, &c->pool, err)) != QHX_OK) goto done;
    size_t per = (size_t)qhx_pool_n_threads(c->pool) * (size_t)(c->max_cols > 0 ? c->max_cols : 1);
    c->rows_f32 = qhx_malloc(per * sizeof(float));
    c->rows_u16 = qhx_malloc(per * sizeof(uint16_t));
    if (!c->f32 || !c->u16 || !c->q || !c->scales || !c->gscales || !c->qhigh || !c->bad || !c->rows_f32 || !c->rows_u16) {
        rc = qhx_fail(err, QHX_E_NOMEM, "out of memory");
        goto done;
    }
    if (c->max_cols > CHUNK) {
        rc = qhx_fail(err, QHX_E_LIMIT, "a matrix has %lld columns; the limit is %lld", (long long)c->max_cols,
                      (long long)CHUNK);
        goto done;
    }
    for (int r = 0; r < ROLE_COUNT; r++) {
        qhx_stw *w = c->w[r];
        if (!w) continue;
        const char *name;
        while ((name = qhx_stw_next(w))) {
            const tplan *pl = NULL;
            part_t part = PART_CODES;
            for (int64_t i = 0; i < c->n_plans && !pl; i++) {
                const tplan *q = &c->plans[i];
                if (q->role != (role_t)r) continue;
                if (!strcmp(q->name, name)) pl = q;
                else if (q->scale_name && !strcmp(q->scale_name, name)) pl = q, part = PART_SCALES;
                else if (q->high_name && !strcmp(q->high_name, name)) pl = q, part = PART_HIGH;
            }
            if (!pl) {
                rc = qhx_fail(err, QHX_E_INTERNAL, "no plan for tensor '%s'", name);
                goto done;
            }
            rc = is_quant(pl->fmt) ? write_quant(c, w, pl, part, err) : write_plain(c, w, pl, err);
            if (rc != QHX_OK) goto done;
        }
        if ((rc = qhx_stw_finish(w, err)) != QHX_OK) goto done;
    }
    if ((rc = write_manifests(c, hf_dir, err)) != QHX_OK) goto done;
    rc = forge_job_commit(&c->job, err);
done:
    for (int r = 0; r < ROLE_COUNT; r++) qhx_stw_free(c->w[r]);
    for (int64_t i = 0; i < c->n_plans; i++) {
        qhx_free(c->plans[i].name);
        qhx_free(c->plans[i].scale_name);
        qhx_free(c->plans[i].high_name);
        qhx_free(c->plans[i].qcache);
    }
    qhx_free(c->plans);
    qhx_free(c->f32);
    qhx_free(c->u16);
    qhx_free(c->q);
    qhx_free(c->scales);
    qhx_free(c->gscales);
    qhx_free(c->qhigh);
    qhx_free(c->cache);
    qhx_free(c->bad);
    qhx_free(c->rows_f32);
    qhx_free(c->rows_u16);
    qhx_pool_free(c->pool);
    qhx_st_free(c->set);
    forge_calib_free(c->calib);
    json_decref(c->config);
    forge_job_end(&c->job, err);
    return rc;
}
