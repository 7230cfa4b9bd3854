// ctest-labels: unit
/* runtime/parity: the two gates on hand-made rows (every way a prompt can pass or fail), the KL
 * and top-1 comparison, fixture reading (length checks, bad names and ids, logits file sizes,
 * failed allocations), and the qwen35-tiny-f32 fixture run through the library exactly. */
#include "core/alloc.h"
#include "core/file.h"
#include "parity.h"
#include "runtime/session.h"
#include "t.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char base[256];

/* ---- gates ------------------------------------------------------------------------------------ */

enum { NI = 2, NS = 3, NR = NI + NS - 1, NV = 4 };

/* Golden rows: row r has top-1 row_top1[r] with margin row_margins[r]. */
static int32_t ids_[NI] = {5, 6}, greedy_[NS] = {1, 2, 3}, top1_[NR] = {0, 1, 2, 3};
static double gmarg_[NS] = {0.5, 0.001, 0.5}, rmarg_[NR] = {0.5, 0.5, 0.001, 0.5};
static float golden_[NR * NV];

static qhx_parity_prompt make_prompt(void) {
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < NV; j++) golden_[r * NV + j] = j == top1_[r] ? 1.0f : 1.0f - (float)rmarg_[r] - 0.1f * (float)(j + 1);
    /* the runner-up of each row is exactly rmarg_ below */
    for (int r = 0; r < NR; r++) golden_[r * NV + (top1_[r] + 1) % NV] = 1.0f - (float)rmarg_[r];
    return (qhx_parity_prompt){.name = "syn", .ids = ids_, .n_ids = NI, .greedy = greedy_, .greedy_margins = gmarg_,
                               .n_steps = NS, .row_top1 = top1_, .row_margins = rmarg_, .n_rows = NR};
}

static void test_gates(void) {
    qhx_parity_prompt p = make_prompt();
    float rows[NR * NV];
    int32_t mine[NS];
    qhx_parity_result res;
    const qhx_parity_gate exact = {.kind = QHX_PARITY_GATE_EXACT, .tau = 1e-3, .tol = 2e-4, .check_rows = true};
    qhx_parity_gate tol = {.kind = QHX_PARITY_GATE_TOL, .tau = 1e-3, .tol = 2e-4, .check_rows = true};

    /* identical */
    memcpy(rows, golden_, sizeof rows);
    memcpy(mine, greedy_, sizeof mine);
    qhx_parity_judge(&p, mine, rows, golden_, NV, &exact, &res);
    CHECK(res.pass);
    CHECK_EQ(res.first_diff, NS);
    CHECK_EQ(res.flips, 0);
    CHECK(res.max_abs == 0);
    qhx_parity_judge(&p, mine, rows, golden_, NV, &tol, &res);
    CHECK(res.pass);

    /* greedy differs at step 1, golden margin 0.001: exact fails; tol passes only if 0.001 < tau */
    mine[1] = 0;
    mine[2] = 0; /* after the first mismatch nothing is compared */
    qhx_parity_judge(&p, mine, rows, golden_, NV, &exact, &res);
    CHECK(!res.pass);
    CHECK_EQ(res.first_diff, 1);
    CHECK_NEAR(res.first_diff_margin, 0.001, 0);
    qhx_parity_judge(&p, mine, rows, golden_, NV, &tol, &res);
    CHECK(!res.pass); /* 0.001 is not < 1e-3 */
    tol.tau = 0.02;
    qhx_parity_judge(&p, mine, rows, golden_, NV, &tol, &res);
    CHECK(res.pass);
    /* ... at step 0, margin 0.5: fails at any tau below it */
    memcpy(mine, greedy_, sizeof mine);
    mine[0] = 2;
    qhx_parity_judge(&p, mine, rows, golden_, NV, &tol, &res);
    CHECK(!res.pass);
    CHECK_EQ(res.first_diff, 0);
    memcpy(mine, greedy_, sizeof mine);

    /* logits off by 1e-3 everywhere: over tol 2e-4 unless the tolerance is not applied */
    for (int i = 0; i < NR * NV; i++) rows[i] = golden_[i] + 1e-3f;
    qhx_parity_judge(&p, mine, rows, golden_, NV, &tol, &res);
    CHECK(!res.pass);
    CHECK_EQ(res.rows_over_tol, NR);
    CHECK_NEAR(res.max_abs, 1e-3, 1e-6);
    tol.tol = -1;
    qhx_parity_judge(&p, mine, rows, golden_, NV, &tol, &res);
    CHECK(res.pass);
    CHECK_EQ(res.rows_over_tol, 0);
    qhx_parity_judge(&p, mine, rows, golden_, NV, &exact, &res); /* exact looks at greedy only */
    CHECK(res.pass);

    /* argmax flips: at a near-tie row (margin 0.001 < tau 0.02) excused, at a 0.5 row not */
    memcpy(rows, golden_, sizeof rows);
    rows[2 * NV + 3] = 2.0f; /* row 2: margin 0.001 */
    qhx_parity_judge(&p, mine, rows, golden_, NV, &tol, &res);
    CHECK(res.pass);
    CHECK_EQ(res.flips, 1);
    CHECK_EQ(res.hard_flips, 0);
    rows[0 * NV + 3] = 2.0f; /* row 0: margin 0.5 */
    qhx_parity_judge(&p, mine, rows, golden_, NV, &tol, &res);
    CHECK(!res.pass);
    CHECK_EQ(res.flips, 2);
    CHECK_EQ(res.hard_flips, 1);
    tol.check_rows = false; /* quantized models: flips are reported only */
    qhx_parity_judge(&p, mine, rows, golden_, NV, &tol, &res);
    CHECK(res.pass);
    CHECK_EQ(res.hard_flips, 1);

    /* a NaN logit is the largest deviation, and fails the logits tolerance */
    memcpy(rows, golden_, sizeof rows);
    rows[1 * NV + 2] = NAN;
    rows[3 * NV + 0] += 0.25f; /* a later, finite deviation must not hide it */
    tol.tol = 1.0;
    qhx_parity_judge(&p, mine, rows, golden_, NV, &tol, &res);
    CHECK(isnan(res.max_abs));
    CHECK(!res.pass);
    CHECK_EQ(res.rows_over_tol, 1);
}

static void test_compare(void) {
    const float p[2] = {0, 0}, q[2] = {(float)log(3.0), 0}, p_shift[2] = {7, 7};
    CHECK(qhx_parity_kl(p, p, 2) == 0);
    CHECK_NEAR(qhx_parity_kl(p, q, 2), 0.5 * log(4.0 / 3.0), 1e-7); /* (.5,.5) vs (.75,.25) */
    CHECK_NEAR(qhx_parity_kl(p_shift, q, 2), 0.5 * log(4.0 / 3.0), 1e-7);
    CHECK(qhx_parity_kl(q, p, 2) > 0);
    const float big[3] = {1000, 0, -1000}, big2[3] = {1000, 0, -1000};
    CHECK(qhx_parity_kl(big, big2, 3) == 0); /* no overflow */
    const float nanrow[2] = {NAN, 0};
    CHECK(isnan(qhx_parity_kl(p, nanrow, 2)));

    /* rows: ref argmax 0, 1, 0; test argmax 0, 0, 0 */
    const float ref[6] = {1, 0, 0, 1, 2, 1}, test[6] = {1, 0, 1, 0, 3, 1};
    qhx_parity_cmp c = {0};
    qhx_parity_compare(ref, test, 3, 2, &c);
    CHECK_EQ(c.n_rows, 3);
    CHECK_EQ(c.agree, 2);
    double kl1 = qhx_parity_kl(ref + 2, test + 2, 2), kl2 = qhx_parity_kl(ref + 4, test + 4, 2);
    CHECK(kl1 > 0 && kl2 > 0);
    CHECK_NEAR(c.kl_sum, kl1 + kl2, 1e-12); /* row 0 is identical */
    CHECK_NEAR(c.kl_max, fmax(kl1, kl2), 0);
    qhx_parity_compare(ref, test, 3, 2, &c); /* accumulates */
    CHECK_EQ(c.n_rows, 6);
    CHECK_EQ(c.agree, 4);

    /* quantiles from the log-spaced bins: the answer bounds the true quantile within one bin */
    qhx_parity_cmp h = {0};
    CHECK(qhx_parity_kl_quantile(&h, 0.999) == 0);
    const double kmax = fmax(kl1, kl2), kmin = fmin(kl1, kl2);
    double q1 = qhx_parity_kl_quantile(&c, 1.0), q0 = qhx_parity_kl_quantile(&c, 0.3); /* 2 of 6 rows are 0 */
    CHECK(q1 >= kmax && q1 <= kmax * 1.13);
    CHECK(q0 <= 1e-12);
    double qm = qhx_parity_kl_quantile(&c, 0.5); /* rows 3 of 6: the smaller KL */
    CHECK(qm >= kmin && qm <= kmin * 1.13);
    qhx_parity_cmp_merge(&h, &c);
    CHECK_EQ(h.n_rows, 6);
    CHECK(qhx_parity_kl_quantile(&h, 1.0) == q1);
    qhx_parity_compare(p, nanrow, 1, 2, &h); /* NaN: counted at the top, the max sticks */
    CHECK(isinf(qhx_parity_kl_quantile(&h, 1.0)) && isnan(h.kl_max));
}

/* ---- fixture files ---------------------------------------------------------------------------- */

static void write_file(const char *name, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", base, name);
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static void write_floats(const char *name, int64_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", base, name);
    FILE *f = fopen(path, "wb");
    if (!f) return;
    for (int64_t i = 0; i < n; i++) {
        float v = (float)i * 0.5f;
        fwrite(&v, sizeof v, 1, f);
    }
    fclose(f);
}

static const char *PROMPTS_OK =
    "[{\"name\": \"a\", \"ids\": [1, 2, 3]}, {\"name\": \"img\", \"ids\": [4, 5], \"image\": \"x.png\"}]";
/* a: 3 ids + 2 steps -> 4 rows; img: 2 ids + 2 steps -> 3 rows */
static const char *GOLDEN_OK =
    "{\"prompts\": {\"a\": {\"greedy\": [7, 8], \"greedy_margins\": [0.5, 0.25], \"row_top1\": [1, 2, 3, 4],"
    " \"row_margins\": [0.1, 0.2, 0.3, 0.4]},"
    " \"img\": {\"greedy\": [7, 8], \"greedy_margins\": [0.5, 0.25], \"row_top1\": [1, 2, 3],"
    " \"row_margins\": [0.1, 0.2, 0.3]}}}";

/* Open base with the given prompts/golden text; return the status, message in err. */
static qhx_status open_with(const char *prompts, const char *golden, qhx_error *err) {
    write_file("prompts.json", prompts);
    write_file("golden.json", golden);
    qhx_parity_fixture *fx = NULL;
    qhx_status rc = qhx_parity_fixture_open(base, &fx, err);
    CHECK((rc == QHX_OK) == (fx != NULL));
    qhx_parity_fixture_free(fx);
    return rc;
}

static void test_fixture_files(void) {
    qhx_error err = {0};
    qhx_parity_fixture *fx = NULL;
    char missing[300];
    snprintf(missing, sizeof missing, "%s/nope", base);
    CHECK_EQ(qhx_parity_fixture_open(missing, &fx, &err), QHX_E_IO);
    CHECK(fx == NULL);
    CHECK_CONTAINS(err.msg, "nope");
    CHECK_EQ(qhx_parity_fixture_open(base, &fx, &err), QHX_E_IO); /* no prompts.json */
    CHECK_CONTAINS(err.msg, "prompts.json");

    write_file("prompts.json", PROMPTS_OK);
    write_file("golden.json", GOLDEN_OK);
    CHECK_EQ(qhx_parity_fixture_open(base, &fx, &err), QHX_OK);
    if (fx) {
        CHECK_EQ(fx->n_prompts, 2);
        CHECK_STR(fx->prompts[0].name, "a");
        CHECK_EQ(fx->prompts[0].n_rows, 4);
        CHECK_EQ(fx->prompts[0].n_steps, 2);
        CHECK_EQ(fx->prompts[0].ids[2], 3);
        CHECK(!fx->prompts[0].has_image);
        CHECK(fx->prompts[1].has_image);
        CHECK_NEAR(fx->prompts[0].row_margins[3], 0.4, 0);

        float *rows = NULL;
        CHECK_EQ(qhx_parity_golden_logits(fx, 0, 5, &rows, &err), QHX_E_IO); /* no a.logits.f32 */
        CHECK_CONTAINS(err.msg, "a.logits.f32");
        write_floats("a.logits.f32", 4 * 5 - 1);
        CHECK_EQ(qhx_parity_golden_logits(fx, 0, 5, &rows, &err), QHX_E_FORMAT);
        CHECK_CONTAINS(err.msg, "76 bytes, expected 4 rows x 5 logits x 4 = 80");
        CHECK(rows == NULL);
        write_floats("a.logits.f32", 4 * 5);
        CHECK_EQ(qhx_parity_golden_logits(fx, 0, 5, &rows, &err), QHX_OK);
        if (rows) CHECK(rows[19] == 9.5f);
        qhx_free(rows);
        CHECK_EQ(qhx_parity_golden_logits(fx, 2, 5, &rows, &err), QHX_E_ARG);

        /* every allocation of an open can fail without a leak or a half-built fixture */
        qhx_parity_fixture_free(fx);
        fx = NULL;
        /* (jansson reports some of its failed allocations as syntax errors: any code will do) */
        qhx_status rc = QHX_E_NOMEM;
        for (int64_t n = 0; rc != QHX_OK && n < 100000; n++) {
            qhx_alloc_fail_after(n);
            rc = qhx_parity_fixture_open(base, &fx, &err);
            bool injected = qhx_alloc_failed();
            qhx_alloc_fail_after(-1);
            CHECK((rc == QHX_OK) == (fx != NULL));
            if (rc != QHX_OK) CHECK(injected);
            qhx_parity_fixture_free(fx);
            fx = NULL;
        }
        CHECK_EQ(rc, QHX_OK);
    }

    /* lengths that disagree, bad values, bad names */
    CHECK_EQ(open_with(PROMPTS_OK, "{\"prompts\": {\"a\": {\"greedy\": [7, 8], \"greedy_margins\": [0.5],"
                                   " \"row_top1\": [1, 2, 3, 4], \"row_margins\": [0.1, 0.2, 0.3, 0.4]}}}",
                       &err),
             QHX_E_FORMAT);
    CHECK_CONTAINS(err.msg, "prompts.a.greedy_margins: 1 entries, expected 2");
    CHECK_EQ(open_with(PROMPTS_OK, "{\"prompts\": {\"a\": {\"greedy\": [7, 8], \"greedy_margins\": [0.5, 0.2],"
                                   " \"row_top1\": [1, 2, 3], \"row_margins\": [0.1, 0.2, 0.3]}}}",
                       &err),
             QHX_E_FORMAT);
    CHECK_CONTAINS(err.msg, "row_top1: 3 entries, expected 4");
    CHECK_EQ(open_with(PROMPTS_OK, "{\"prompts\": {\"a\": {\"greedy\": [7, 8], \"greedy_margins\": [0.5, -1],"
                                   " \"row_top1\": [1, 2, 3, 4], \"row_margins\": [0.1, 0.2, 0.3, 0.4]}}}",
                       &err),
             QHX_E_FORMAT);
    CHECK_CONTAINS(err.msg, "greedy_margins[1]");
    CHECK_EQ(open_with(PROMPTS_OK, "{\"prompts\": {}}", &err), QHX_E_FORMAT);
    CHECK_CONTAINS(err.msg, "prompts.a: missing");
    CHECK_EQ(open_with(PROMPTS_OK, "{\"prompts\": {\"a\": {\"greedy\": [], \"greedy_margins\": [],"
                                   " \"row_top1\": [1, 2], \"row_margins\": [0.1, 0.2]}}}",
                       &err),
             QHX_E_FORMAT);
    CHECK_CONTAINS(err.msg, "greedy: empty");
    CHECK_EQ(open_with("[{\"name\": \"a\", \"ids\": [1, -2, 3]}]", GOLDEN_OK, &err), QHX_E_FORMAT);
    CHECK_CONTAINS(err.msg, "[0].ids[1]");
    CHECK_EQ(open_with("[{\"name\": \"../a\", \"ids\": [1]}]", GOLDEN_OK, &err), QHX_E_FORMAT);
    CHECK_CONTAINS(err.msg, "not a plain file name");
    CHECK_EQ(open_with("[{\"name\": \"a\", \"ids\": [1, 2, 3]}, {\"name\": \"a\", \"ids\": [1, 2, 3]}]", GOLDEN_OK,
                       &err),
             QHX_E_FORMAT);
    CHECK_CONTAINS(err.msg, "appears twice");
    CHECK_EQ(open_with("[]", GOLDEN_OK, &err), QHX_E_FORMAT);
    CHECK_EQ(open_with("{\"name\": 1}", GOLDEN_OK, &err), QHX_E_FORMAT);
    CHECK_EQ(open_with(PROMPTS_OK, "[1, 2]", &err), QHX_E_FORMAT);
    CHECK_EQ(open_with(PROMPTS_OK, "{\"prompts\": ", &err), QHX_E_FORMAT);
    CHECK_CONTAINS(err.msg, "golden.json");

    static const char *const files[] = {"prompts.json", "golden.json", "a.logits.f32"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", base, files[i]);
        unlink(path);
    }
}

/* Mutated fixture texts: every outcome is a clean status, and an accepted fixture keeps the length
 * invariants the runner relies on (run under ASan in CI). */
static void test_fixture_mutations(void) {
    static const char alphabet[] = "[]{}\",:-.0123456789eE ainmgrdyptopw_\\";
    char pbuf[512], gbuf[1024];
    uint64_t rng = 0x9e3779b97f4a7c15u;
    int accepted = 0;
    for (int it = 0; it < 3000; it++) {
        size_t plen = strlen(PROMPTS_OK), glen = strlen(GOLDEN_OK);
        memcpy(pbuf, PROMPTS_OK, plen);
        memcpy(gbuf, GOLDEN_OK, glen);
        int n_mut = 1 + it % 3;
        for (int k = 0; k < n_mut; k++) {
            rng = rng * 6364136223846793005u + 1442695040888963407u;
            uint64_t r = rng >> 24;
            bool on_golden = r & 1;
            char *b = on_golden ? gbuf : pbuf;
            size_t *len = on_golden ? &glen : &plen;
            size_t at = (size_t)(r >> 1) % *len;
            switch ((r >> 20) % 4) {
            case 0: b[at] = alphabet[(r >> 30) % (sizeof alphabet - 1)]; break; /* replace */
            case 1: *len = at; break;                                            /* truncate */
            case 2: memmove(b + at, b + at + 1, *len - at - 1); (*len)--; break; /* delete */
            default: b[at] = (char)('0' + (r >> 30) % 10); break;                /* a digit */
            }
            if (*len == 0) *len = 1;
        }
        qhx_error err = {0};
        qhx_parity_fixture *fx = NULL;
        qhx_status rc = qhx_parity_fixture_parse(base, pbuf, plen, gbuf, glen, &fx, &err);
        CHECK((rc == QHX_OK) == (fx != NULL));
        if (rc != QHX_OK) CHECK(err.msg[0] != '\0');
        if (!fx) continue;
        accepted++;
        for (int64_t i = 0; i < fx->n_prompts; i++) {
            const qhx_parity_prompt *q = &fx->prompts[i];
            CHECK(q->n_ids >= 1 && q->n_steps >= 1 && q->n_rows == q->n_ids + q->n_steps - 1);
            CHECK(q->ids && q->greedy && q->greedy_margins && q->row_top1 && q->row_margins);
        }
        qhx_parity_fixture_free(fx);
    }
    CHECK(accepted > 0); /* some mutations (a digit in an id) keep the fixture valid */
}

/* ---- a real fixture through the library -------------------------------------------------------- */

static void test_fixture_run(const char *dir) {
    qhx_error err = {0};
    qhx_parity_fixture *fx = NULL;
    qhx_model *m = NULL;
    qhx_session *s = NULL;
    if (qhx_parity_fixture_open(dir, &fx, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        CHECK(0);
        return;
    }
    CHECK_EQ(qhx_model_open(dir, NULL, &m, &err), QHX_OK);
    /* an f32 cache: the tolerant gate's 2e-4 is below the f16 cache's effect (~1e-3) */
    if (m) CHECK_EQ(qhx_session_create(m, &(qhx_session_params){.n_ctx = 512, .kv_cache = QHX_KV_F32}, &s, &err), QHX_OK);
    if (!s) goto done;
    qhx_parity_precision pr;
    qhx_parity_model_precision(m, &pr);
    CHECK_STR(pr.decoder, "f32");
    CHECK_STR(pr.lm_head, "f32");
    CHECK(!pr.quantized);
    const qhx_parity_gate exact = {.kind = QHX_PARITY_GATE_EXACT, .tau = 1e-3};
    const qhx_parity_gate tol = {.kind = QHX_PARITY_GATE_TOL, .tau = 1e-3, .tol = 2e-4, .check_rows = true};
    int64_t V = qhx_session_n_vocab(s);
    for (int64_t i = 0; i < fx->n_prompts && i < 3; i++) { /* p001, p007, p033: enough, and quick under ASan */
        const qhx_parity_prompt *p = &fx->prompts[i];
        int32_t *greedy = qhx_malloc((size_t)p->n_steps * sizeof *greedy);
        float *rows = qhx_malloc((size_t)(p->n_rows * V) * sizeof *rows), *golden = NULL;
        CHECK_EQ(qhx_parity_golden_logits(fx, i, V, &golden, &err), QHX_OK);
        if (greedy && rows && golden) {
            CHECK_EQ(qhx_parity_greedy(s, p->ids, p->n_ids, p->n_steps, greedy, &err), QHX_OK);
            CHECK_EQ(qhx_parity_forced(s, p->ids, p->n_ids, p->greedy, p->n_steps - 1, rows, &err), QHX_OK);
            qhx_parity_result res;
            qhx_parity_judge(p, greedy, rows, golden, V, &exact, &res);
            CHECK(res.pass);
            CHECK_EQ(res.flips, 0);
            CHECK(res.max_abs < 2e-4);
            qhx_parity_judge(p, greedy, rows, golden, V, &tol, &res);
            CHECK(res.pass);
            /* the model against itself: full agreement, KL 0 */
            qhx_parity_cmp c = {0};
            qhx_parity_compare(rows, rows, p->n_rows, V, &c);
            CHECK_EQ(c.agree, p->n_rows);
            CHECK(c.kl_max == 0);
        }
        qhx_free(golden);
        qhx_free(rows);
        qhx_free(greedy);
    }
done:
    qhx_session_free(s);
    qhx_model_free(m);
    qhx_parity_fixture_free(fx);
}

int main(void) {
    snprintf(base, sizeof base, "/tmp/qhx-test-parity-XXXXXX");
    if (!mkdtemp(base)) {
        perror("mkdtemp");
        return 1;
    }
    test_gates();
    test_compare();
    test_fixture_files();
    test_fixture_mutations();
    rmdir(base);
    const char *dir = QHX_DATA_DIR "/fixtures/parity/qwen35-tiny-f32";
    char probe[512];
    snprintf(probe, sizeof probe, "%s/golden.json", dir);
    CHECK(qhx_path_is_file(probe)); /* the fixture is in the tree: its absence is a failure */
    if (qhx_path_is_file(probe)) test_fixture_run(dir);
    return t_done("test_parity");
}
