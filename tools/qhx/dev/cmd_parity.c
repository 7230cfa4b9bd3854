/* qhx parity: run every prompt of a parity fixture through a model and judge it against the
 * fixture's goldens (greedy-exact or tolerant gate), or compare it with a second model.
 *   qhx parity -m MODEL --golden FIXTURE_DIR [--gate exact|tol] [--tau X] [--tol X]
 *              [--against MODEL2 [--min-agree X]] [--threads N] [--prefill-math M] [--decode-math M] [--kv T]
 * One line per prompt, then "N passed, N failed". Exit 0 when every prompt passed, 1 otherwise
 * or on a runtime error (one stderr line), 2 on a usage error. Gates: runtime/parity.h and
 * docs/bundle.md "Checking a bundle: qhx parity". */
#include "cli_dev.h"

#include "core/alloc.h"
#include "core/file.h"
#include "runtime/model.h"
#include "parity.h"
#include "runtime/session.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static const char *CMD = "parity";

/* Defaults (fixtures README §5; docs/bundle.md for the quantized ones). */
#define TAU_FLOAT 1e-3  /* f32/bf16/f16 weights: at most one golden step per case is this close */
#define TAU_QUANT 0.02  /* w8/q4 weights: the seed's tolerant greedy gate for quantized bundles */
#define TOL_FLOAT 2e-4  /* max |logit - golden| for float weights */
#define MIN_AGREE 0.9   /* --against: teacher-forced top-1 agreement a prompt needs */
/* Image prompts (fixtures README §5): the goldens' vision tower departs from HF by ~1e-3 */
#define TAU_IMAGE 5e-3
#define TOL_IMAGE 5e-3
#define TOL_EMBD 3e-3   /* max |image embedding - golden| */

typedef struct parity_args {
    const char *model, *golden, *against, *mmproj;
    qhx_parity_gate_kind gate;
    double tau, tol, min_agree, tol_embd; /* < 0: default */
    bool gate_given;
    int64_t threads;
    qhx_prefill_math prefill_math; /* both models */
    qhx_prefill_math decode_math;  /* both models */
    qhx_kv_type kv;                /* MODEL only (default f32); MODEL2 of --against keeps an f32 cache */
    const char *device;            /* MODEL only; MODEL2 of --against runs on the CPU */
} parity_args;

static void usage(FILE *f) {
    fprintf(f,
            "usage: qhx parity -m MODEL --golden FIXTURE_DIR [--gate exact|tol] [--tau X] [--tol X]\n"
            "                  [--against MODEL2 [--min-agree X]] [--threads N] [--device D]\n"
            "                  [--prefill-math default|f32|int8] [--decode-math default|f32|int8] [--kv f32|f16|q8]\n"
            "  -m, --model PATH    checkpoint folder, bundle folder, manifest or GGUF file\n"
            "  --mmproj FILE       a GGUF model's vision tower (llama.cpp's mmproj file)\n"
            "  --golden DIR        parity fixture: prompts.json, golden.json, <name>.logits.f32\n"
            "  --gate exact|tol    exact: free-running greedy identical at every step;\n"
            "                      tol (default): a first greedy mismatch is excused where the golden\n"
            "                      top-2 margin < tau; float models also need every teacher-forced row\n"
            "                      within --tol of the golden and its argmax = the golden's (unless the\n"
            "                      golden margin < tau)\n"
            "  --tau X             near-tie margin (default 1e-3; 0.02 for w8/q4 models)\n"
            "  --tol X             max |logit - golden| per row (default 2e-4; w8/q4 models: not\n"
            "                      applied unless given)\n"
            "  --against MODEL2    compare MODEL with MODEL2 instead of the golden: teacher-forced on\n"
            "                      MODEL2's own greedy continuation, top-1 agreement and\n"
            "                      KL(P_MODEL2 || P_MODEL) per row\n"
            "  --min-agree X       --against: top-1 agreement a prompt needs to pass (default 0.9)\n"
            "  --threads N         worker threads\n"
            "  --device D          %s\n"
            "  --kv f32|f16|q8     KV cache element type of MODEL (default f32, as the goldens: the\n"
            "                      f16 cache moves logits by ~1e-3, past --tol); MODEL2 of --against\n"
            "                      always runs with an f32 cache\n"
            "  --prefill-math M    w8/q4 prompt matmul with f32 or int8 activations, both models\n"
            "                      (default: int8 for q4, f32 for w8)\n"
            "  --decode-math M     q4 decode matvec with int8 activations or not, both models\n"
            "                      (default: int8)\n"
            "  --tol-embd X        image prompts: max |image embedding - golden| (default 3e-3)\n"
            "Image prompts run with their image when MODEL has a vision tower (a checkpoint folder\n"
            "is opened with it; a bundle needs its -vlm- manifest), gated with tau 5e-3 and tol 5e-3\n"
            "unless --tau / --tol say otherwise, and their image embeddings compared with the\n"
            "golden; otherwise, and with --against, they are skipped.\n"
            "Last line: 'N passed, N failed'; exit 0 if none failed.\n", qhx_cli_device_help());
}

/* Fill a from argv. Returns -1 to continue, else an exit code (help or usage error). */
static int parse_args(int argc, char **argv, parity_args *a) {
    memset(a, 0, sizeof *a);
    a->gate = QHX_PARITY_GATE_TOL;
    a->tau = a->tol = a->min_agree = a->tol_embd = -1;
    a->threads = 1;
    a->kv = QHX_KV_F32; /* the reference's: a run plan's f16 cache is gated with --kv f16 */
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            usage(stdout);
            return QHX_EXIT_OK;
        }
        if (i + 1 >= argc) return qhx_cli_usage_error(CMD, "unknown option or missing value: '%s'", o);
        const char *v = argv[++i];
        if (!strcmp(o, "-m") || !strcmp(o, "--model")) a->model = v;
        else if (!strcmp(o, "--golden")) a->golden = v;
        else if (!strcmp(o, "--mmproj")) a->mmproj = v;
        else if (!strcmp(o, "--against")) a->against = v;
        else if (!strcmp(o, "--gate")) {
            a->gate_given = true;
            if (!strcmp(v, "exact")) a->gate = QHX_PARITY_GATE_EXACT;
            else if (!strcmp(v, "tol")) a->gate = QHX_PARITY_GATE_TOL;
            else return qhx_cli_usage_error(CMD, "--gate: '%s' is not exact or tol", v);
        } else if (!strcmp(o, "--tau")) {
            if (qhx_cli_parse_f64(v, 0, 1e9, &a->tau)) return qhx_cli_usage_error(CMD, "--tau: '%s' is not a number >= 0", v);
        } else if (!strcmp(o, "--tol")) {
            if (qhx_cli_parse_f64(v, 0, 1e9, &a->tol)) return qhx_cli_usage_error(CMD, "--tol: '%s' is not a number >= 0", v);
        } else if (!strcmp(o, "--tol-embd")) {
            if (qhx_cli_parse_f64(v, 0, 1e9, &a->tol_embd)) return qhx_cli_usage_error(CMD, "--tol-embd: '%s' is not a number >= 0", v);
        } else if (!strcmp(o, "--min-agree")) {
            if (qhx_cli_parse_f64(v, 0, 1, &a->min_agree))
                return qhx_cli_usage_error(CMD, "--min-agree: '%s' is not a number in [0, 1]", v);
        } else if (!strcmp(o, "--prefill-math")) {
            if (qhx_cli_parse_prefill_math(v, &a->prefill_math))
                return qhx_cli_usage_error(CMD, "--prefill-math: '%s' is not default, f32 or int8", v);
        } else if (!strcmp(o, "--decode-math")) {
            if (qhx_cli_parse_prefill_math(v, &a->decode_math))
                return qhx_cli_usage_error(CMD, "--decode-math: '%s' is not default, f32 or int8", v);
        } else if (!strcmp(o, "--kv")) {
            if (qhx_cli_parse_kv(v, &a->kv)) return qhx_cli_usage_error(CMD, "--kv: '%s' is not f32, f16 or q8", v);
        } else if (!strcmp(o, "--threads")) {
            if (qhx_cli_parse_i64(v, 1, 4096, &a->threads)) return qhx_cli_usage_error(CMD, "--threads: '%s' is not in [1, 4096]", v);
        } else if (!strcmp(o, "--device")) {
            if (qhx_cli_check_device(CMD, v)) return QHX_EXIT_USAGE;
            a->device = v;
        } else
            return qhx_cli_usage_error(CMD, "unknown option '%s'", o);
    }
    if (!a->model) return qhx_cli_usage_error(CMD, "missing -m MODEL");
    if (!a->golden) return qhx_cli_usage_error(CMD, "missing --golden FIXTURE_DIR");
    if (a->min_agree >= 0 && !a->against) return qhx_cli_usage_error(CMD, "--min-agree needs --against");
    if (a->against && (a->tol >= 0 || a->tau >= 0 || a->gate_given || a->tol_embd >= 0))
        return qhx_cli_usage_error(CMD, "--gate, --tau and --tol apply to the golden gate, not to --against");
    return -1;
}

/* Everything one run holds; freed by run_free. */
typedef struct parity_run {
    qhx_parity_fixture *fx;
    qhx_model *m, *m2;
    qhx_session *s, *s2;
    int32_t *greedy, *greedy2;
    float *rows, *rows2;
    int64_t V;
} parity_run;

static void run_free(parity_run *r) {
    qhx_free(r->rows2);
    qhx_free(r->rows);
    qhx_free(r->greedy2);
    qhx_free(r->greedy);
    qhx_session_free(r->s2);
    qhx_session_free(r->s);
    qhx_model_free(r->m2);
    qhx_model_free(r->m);
    qhx_parity_fixture_free(r->fx);
}

/* Open a model (a checkpoint folder with its vision tower when the fixture has image prompts)
 * and a session holding n_ctx tokens. */
static qhx_status open_model(const char *path, const parity_args *a, qhx_kv_type kv, int64_t n_ctx, bool vision,
                             qhx_model **m, qhx_session **s, qhx_error *err) {
    qhx_model_params mp = qhx_model_default_params();
    mp.vision = vision ? 1 : 0;
    mp.kv_cache = kv;
    mp.n_threads = (int)a->threads;
    mp.prefill_math = a->prefill_math;
    mp.decode_math = a->decode_math;
    if (path == a->model) mp.backend = a->device, mp.mmproj = a->mmproj;
    qhx_status rc = qhx_model_open(path, &mp, m, err);
    if (rc) return rc;
    return qhx_session_create(*m, &(qhx_session_params){.n_ctx = n_ctx}, s, err);
}

/* Buffers for the largest text prompt. */
static qhx_status alloc_buffers(parity_run *r, int64_t max_steps, int64_t max_rows, bool two, qhx_error *err) {
    size_t row_bytes;
    if (!qhx_size_mul((size_t)max_rows, (size_t)r->V * sizeof(float), &row_bytes))
        return qhx_fail(err, QHX_E_LIMIT, "%lld rows of %lld logits do not fit in memory", (long long)max_rows,
                        (long long)r->V);
    r->greedy = qhx_malloc((size_t)max_steps * sizeof(int32_t));
    r->rows = qhx_malloc(row_bytes);
    if (two) {
        r->greedy2 = qhx_malloc((size_t)max_steps * sizeof(int32_t));
        r->rows2 = qhx_malloc(row_bytes);
    }
    if (!r->greedy || !r->rows || (two && (!r->greedy2 || !r->rows2)))
        return qhx_fail(err, QHX_E_NOMEM, "out of memory for %lld x %lld logits", (long long)max_rows, (long long)r->V);
    return QHX_OK;
}

static void print_greedy(const char *who, int64_t first_diff, int64_t n_steps) {
    if (first_diff == n_steps) printf("greedy %lld/%lld match", (long long)n_steps, (long long)n_steps);
    else printf("greedy first differs %sat step %lld", who, (long long)first_diff);
}

/* ---- golden gate ----------------------------------------------------------------------------- */

/* An image prompt's image, encoded, and its embeddings against the golden: max |diff| into
 * *embd_diff. */
static qhx_status prompt_image(parity_run *r, int64_t i, qhx_image_embed *im, double *embd_diff, qhx_error *err) {
    const qhx_parity_prompt *p = &r->fx->prompts[i];
    char *path = qhx_path_join(r->fx->dir, p->image);
    if (!path) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    qhx_status rc = qhx_model_images_load(r->m, (const char *const *)&path, 1, 0, im, err);
    qhx_free(path);
    float *golden = NULL;
    if (!rc) rc = qhx_parity_golden_embd(r->fx, i, im->n_tokens * im->row_width, &golden, err);
    double d = 0;
    for (int64_t k = 0; !rc && k < im->n_tokens * im->row_width; k++) {
        double e = fabs((double)im->embd[k] - (double)golden[k]);
        if (isnan(e) || e > d) d = isnan(e) ? INFINITY : e;
    }
    qhx_free(golden);
    *embd_diff = d;
    return rc;
}

static qhx_status golden_prompt(parity_run *r, int64_t i, const qhx_parity_gate *gate, double tol_embd, bool *pass,
                                qhx_error *err) {
    const qhx_parity_prompt *p = &r->fx->prompts[i];
    float *golden = NULL;
    qhx_image_embed im = {0};
    double embd_diff = 0;
    qhx_status rc = qhx_parity_golden_logits(r->fx, i, r->V, &golden, err);
    if (rc) return rc;
    if ((p->image && (rc = prompt_image(r, i, &im, &embd_diff, err))) ||
        (rc = qhx_parity_greedy_images(r->s, &im, p->image ? 1 : 0, p->ids, p->n_ids, p->n_steps, r->greedy, err)) ||
        (rc = qhx_parity_forced_images(r->s, &im, p->image ? 1 : 0, p->ids, p->n_ids, p->greedy, p->n_steps - 1,
                                       r->rows, err))) {
        qhx_fail_prefix(err, "prompt %s", p->name);
        qhx_free(golden);
        qhx_image_embed_deinit(&im);
        return rc;
    }
    qhx_image_embed_deinit(&im);
    qhx_parity_result res;
    qhx_parity_judge(p, r->greedy, r->rows, golden, r->V, gate, &res);
    qhx_free(golden);

    printf("%-10s ", p->name);
    print_greedy("", res.first_diff, p->n_steps);
    if (res.first_diff < p->n_steps)
        printf(" (golden margin %.2e %s tau)", res.first_diff_margin, res.first_diff_margin < gate->tau ? "<" : ">=");
    printf("; teacher-forced %lld rows: max|dlogit| %.2e", (long long)p->n_rows, res.max_abs);
    if (gate->kind == QHX_PARITY_GATE_TOL && gate->tol >= 0) printf(", %lld over tol", (long long)res.rows_over_tol);
    printf(", argmax flips %lld (%lld at margin >= tau)", (long long)res.flips, (long long)res.hard_flips);
    bool embd_ok = !p->image || embd_diff <= tol_embd;
    if (p->image) printf("; image_embd max|d| %.2e (tol %g)", embd_diff, tol_embd);
    printf("  %s\n", res.pass && embd_ok ? "PASS" : "FAIL");
    *pass = res.pass && embd_ok;
    return QHX_OK;
}

/* ---- two models ------------------------------------------------------------------------------ */

typedef struct against_totals {
    qhx_parity_cmp all;              /* pooled over every row of every prompt */
    double agree_sum, kl_sum;        /* sums of the per-prompt means */
    int64_t n_prompts;
} against_totals;

static qhx_status against_prompt(parity_run *r, int64_t i, double min_agree, against_totals *t, bool *pass,
                                 qhx_error *err) {
    const qhx_parity_prompt *p = &r->fx->prompts[i];
    int64_t n = p->n_steps;
    qhx_status rc;
    /* MODEL2 is the reference: its own greedy continuation is the teacher-forced path */
    if ((rc = qhx_parity_greedy(r->s2, p->ids, p->n_ids, n, r->greedy2, err)) ||
        (rc = qhx_parity_forced(r->s2, p->ids, p->n_ids, r->greedy2, n - 1, r->rows2, err)) ||
        (rc = qhx_parity_greedy(r->s, p->ids, p->n_ids, n, r->greedy, err)) ||
        (rc = qhx_parity_forced(r->s, p->ids, p->n_ids, r->greedy2, n - 1, r->rows, err)))
        return qhx_fail_prefix(err, "prompt %s", p->name);
    qhx_parity_cmp c = {0};
    qhx_parity_compare(r->rows2, r->rows, p->n_rows, r->V, &c);
    int64_t k = 0;
    while (k < n && r->greedy[k] == r->greedy2[k]) k++;
    double agree = (double)c.agree / (double)c.n_rows, kl = c.kl_sum / (double)c.n_rows;

    qhx_parity_cmp_merge(&t->all, &c);
    t->agree_sum += agree;
    t->kl_sum += kl;
    t->n_prompts++;

    *pass = agree >= min_agree && !isnan(kl); /* a NaN logit must not pass on its argmax alone */
    printf("%-10s top-1 agreement %lld/%lld (%.3f); KL mean %.2e max %.2e nats; ", p->name, (long long)c.agree,
           (long long)c.n_rows, agree, kl, c.kl_max);
    print_greedy("from MODEL2's ", k, n);
    printf("  %s\n", *pass ? "PASS" : "FAIL");
    return QHX_OK;
}

/* ---- command --------------------------------------------------------------------------------- */

static void print_model(const char *role, const char *path, const qhx_model *m) {
    qhx_parity_precision pr;
    qhx_parity_model_precision(m, &pr);
    printf("%s %s: decoder %s, lm-head %s%s\n", role, path, pr.decoder, pr.lm_head, pr.quantized ? " (quantized)" : "");
}

int qhx_cmd_parity(int argc, char **argv) {
    parity_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;

    qhx_error err = {0};
    parity_run r = {0};
    int64_t n_passed = 0, n_failed = 0, n_skipped = 0;
    if (qhx_parity_fixture_open(a.golden, &r.fx, &err)) goto fail;

    int64_t n_ctx = 1, max_steps = 1, max_rows = 1;
    bool images = false;
    for (int64_t i = 0; i < r.fx->n_prompts; i++) images |= r.fx->prompts[i].image != NULL;
    for (int64_t i = 0; i < r.fx->n_prompts; i++) {
        const qhx_parity_prompt *p = &r.fx->prompts[i];
        if (p->has_image && (!images || a.against)) continue;
        if (p->n_ids + p->n_steps > n_ctx) n_ctx = p->n_ids + p->n_steps;
        if (p->n_steps > max_steps) max_steps = p->n_steps;
        if (p->n_rows > max_rows) max_rows = p->n_rows;
    }
    if (open_model(a.model, &a, a.kv, n_ctx, images && !a.against, &r.m, &r.s, &err)) goto fail;
    const bool run_images = images && !a.against && qhx_model_takes_images(r.m);
    r.V = qhx_session_n_vocab(r.s);
    if (a.against) {
        if (open_model(a.against, &a, QHX_KV_F32, n_ctx, false, &r.m2, &r.s2, &err)) goto fail;
        if (qhx_session_n_vocab(r.s2) != r.V) {
            qhx_fail(&err, QHX_E_ARG, "%s has %lld logits per row, %s has %lld", a.model, (long long)r.V, a.against,
                     (long long)qhx_session_n_vocab(r.s2));
            goto fail;
        }
    }
    if (alloc_buffers(&r, max_steps, max_rows, a.against != NULL, &err)) goto fail;

    qhx_parity_precision pr;
    qhx_parity_model_precision(r.m, &pr);
    qhx_parity_gate gate = {
        .kind = a.gate,
        .tau = a.tau >= 0 ? a.tau : pr.quantized ? TAU_QUANT : TAU_FLOAT,
        .tol = a.tol >= 0 ? a.tol : pr.quantized ? -1 : TOL_FLOAT,
        .check_rows = !pr.quantized,
    };
    double min_agree = a.min_agree >= 0 ? a.min_agree : MIN_AGREE;
    qhx_parity_gate gate_img = gate; /* image prompts: the wider defaults, unless given */
    if (a.tau < 0) gate_img.tau = pr.quantized ? TAU_QUANT : TAU_IMAGE;
    if (a.tol < 0) gate_img.tol = pr.quantized ? -1 : TOL_IMAGE;
    const double tol_embd = a.tol_embd >= 0 ? a.tol_embd : TOL_EMBD;
    print_model("model", a.model, r.m);
    if (a.against) {
        print_model("against", a.against, r.m2);
        printf("prompts of %s, teacher-forced on MODEL2's greedy continuation; pass: top-1 agreement >= %g\n",
               a.golden, min_agree);
    } else if (gate.kind == QHX_PARITY_GATE_EXACT) {
        printf("golden %s, gate exact: free-running greedy identical at every step\n", a.golden);
    } else {
        printf("golden %s, gate tol: tau %g", a.golden, gate.tau);
        if (gate.tol >= 0) printf(", logits tol %g", gate.tol);
        else printf(", logits tol not applied (quantized model)");
        printf(gate.check_rows ? ", row argmax checked\n" : ", row argmax reported only\n");
    }

    if (run_images) {
        printf("image prompts: tau %g, ", gate_img.tau);
        if (gate_img.tol >= 0) printf("logits tol %g, ", gate_img.tol);
        else printf("logits tol not applied, ");
        printf("image_embd tol %g\n", tol_embd);
    }
    against_totals tot = {0};
    for (int64_t i = 0; i < r.fx->n_prompts; i++) {
        const qhx_parity_prompt *p = &r.fx->prompts[i];
        if (p->has_image && (!run_images || !p->image)) {
            printf("%-10s skipped (image prompt%s)\n", p->name,
                   a.against ? "" : "; the model has no vision tower");
            n_skipped++;
            continue;
        }
        bool pass = false;
        qhx_status st = a.against ? against_prompt(&r, i, min_agree, &tot, &pass, &err)
                                  : golden_prompt(&r, i, p->image ? &gate_img : &gate, tol_embd, &pass, &err);
        if (st) goto fail;
        if (pass) n_passed++;
        else n_failed++;
        fflush(stdout);
    }
    if (a.against && tot.n_prompts > 0)
        printf("mean over %lld prompts: top-1 agreement %.4f, KL %.3e nats; over all %lld rows: top-1 agreement "
               "%.4f, KL mean %.3e p99 <= %.2e p99.9 <= %.2e max %.3e nats\n",
               (long long)tot.n_prompts, tot.agree_sum / (double)tot.n_prompts, tot.kl_sum / (double)tot.n_prompts,
               (long long)tot.all.n_rows, (double)tot.all.agree / (double)tot.all.n_rows,
               tot.all.kl_sum / (double)tot.all.n_rows, qhx_parity_kl_quantile(&tot.all, 0.99),
               qhx_parity_kl_quantile(&tot.all, 0.999), tot.all.kl_max);
    if (n_skipped) printf("%lld image prompt%s skipped\n", (long long)n_skipped, n_skipped == 1 ? "" : "s");
    printf("%lld passed, %lld failed\n", (long long)n_passed, (long long)n_failed);
    if (fflush(stdout)) {
        qhx_fail(&err, QHX_E_IO, "stdout: write failed");
        goto fail;
    }
    run_free(&r);
    return n_failed ? QHX_EXIT_RUNTIME : QHX_EXIT_OK;
fail:
    fflush(stdout);
    rc = qhx_cli_runtime_error(CMD, &err);
    run_free(&r);
    return rc;
}
