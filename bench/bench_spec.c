/* bench_spec: what speculative decoding with the MTP block costs and gives (BENCHMARKS.md).
 *
 *   qhx_bench_spec verify MODEL [--ctx P] [--reps R] [--threads N]
 *     after a prompt of P tokens (default 64): one decode step (forward of 1 token), a verify
 *     of n = 1 .. 9 tokens, one chained MTP draft step, interleaved R times (default 15); the
 *     medians in ms, verify(n) / decode, and the speedup predicted at acceptance a = 0.5 .. 0.9
 *     for N = n - 1 drafts: tokens per step E = (1 - a^(N+1)) / (1 - a) (each draft kept with
 *     probability a independently) over the step's cost (verify(N+1) + N draft steps) in decode
 *     steps. Also the copy of the recurrent state one snapshot costs (per-position snapshots)
 *     against re-running the kept tokens (checkpoint and re-run).
 *   qhx_bench_spec gen MODEL [--n T] [--reps R] [--threads N]
 *     T tokens (default 128) after a fixed prompt, greedy and temperature 0.7 (seeded), without
 *     speculation and with N = 1 .. 4 drafts (fixed) and adaptive (at most 3), each round running
 *     every configuration once (interleaved); medians over R rounds (default 5) of tok/s, the
 *     speedup of the median of per-round ratios, acceptance per draft position, tokens per
 *     verify step.
 *   qhx_bench_spec shared MODEL [--sessions S] [--n T] [--reps R] [--threads N]
 *     S sessions (default 4, at most 16) with prompts of their own, T greedy tokens each (default
 *     128), N = 3 drafts (fixed) and adaptive (at most 3): stepped one session after the other
 *     (qhx_session_spec_step each, one verify pass per session) and together
 *     (qhx_sessions_spec_step, one verify pass for all), interleaved; medians over R rounds
 *     (default 5) of the aggregate tok/s. */
#include "core/time.h"
#include "runtime/model.h"
#include "runtime/session_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double ms_since(uint64_t t0) { return (double)(qhx_time_ns() - t0) / 1e6; }

#define NMAX 9
#define RMAX 101

static int bench_verify(const char *path, int64_t P, int reps, int threads) {
    qhx_error err = {0};
    qhx_model_params mp = qhx_model_default_params();
    mp.mtp = 1;
    mp.n_threads = threads;
    qhx_model *m = NULL;
    if (qhx_model_open(path, &mp, &m, &err)) return fprintf(stderr, "bench_spec: %s\n", err.msg), 1;
    const qhx_model_config *c = qhx_model_get_config(m);
    const int64_t V = c->vocab_size, H = c->hidden_size;
    qhx_seq *st = NULL;
    if (qhx_model_state_create(m, &(qhx_seq_params){.n_ctx = P + 64}, &st, &err))
        return fprintf(stderr, "bench_spec: %s\n", err.msg), 1;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(P + NMAX));
    float *logits = malloc(sizeof(float) * (size_t)(NMAX * V)), *hid = malloc(sizeof(float) * (size_t)(NMAX * H));
    for (int64_t i = 0; i < P + NMAX; i++) ids[i] = (int32_t)((i * 7919 + 13) % V);
    if (qhx_model_forward(m, st, ids, P, NULL, &err)) return fprintf(stderr, "bench_spec: %s\n", err.msg), 1;
    const bool mtp = qhx_model_has_mtp(m);
    float *rows = calloc((size_t)(P * H), sizeof(float)); /* the block's cache rows (values do not matter here) */
    if (mtp && qhx_model_mtp_ex(m, st, 0, rows, false, ids + 1, P, NULL, NULL, &err))
        return fprintf(stderr, "bench_spec: %s\n", err.msg), 1;
    free(rows);
    memset(hid, 0, sizeof(float) * (size_t)(NMAX * H));
    static double dec[RMAX], ver[NMAX + 1][RMAX], drf[RMAX];
    if (reps > RMAX) reps = RMAX;
    for (int r = 0; r < reps; r++) {
        /* the position goes back to P after each call: the costs are those of context P */
        uint64_t t0 = qhx_time_ns();
        qhx_model_forward(m, st, ids + P, 1, &(qhx_forward_opts){.logits = logits}, &err);
        dec[r] = ms_since(t0);
        qhx_model_state_set_n_past(st, P);
        for (int n = 1; n <= NMAX; n++) {
            t0 = qhx_time_ns();
            if (qhx_model_verify(m, st, ids + P, n, logits, hid, &err)) return fprintf(stderr, "bench_spec: %s\n", err.msg), 1;
            ver[n][r] = ms_since(t0);
            qhx_model_verify_keep(m, st, 1, &err);
            qhx_model_state_set_n_past(st, P);
        }
        if (mtp) {
            t0 = qhx_time_ns();
            qhx_model_mtp_ex(m, st, P, hid, true, ids + P, 1, logits, hid, &err);
            drf[r] = ms_since(t0);
        }
    }
    /* the recurrent state: what one snapshot copies */
    qhx_state_region reg[64];
    const int nr = qhx_model_state_regions(st, reg, 64);
    size_t rec = 0;
    for (int i = 0; i < nr; i++)
        if (i >= nr - 2) rec += reg[i].row_bytes * (size_t)reg[i].n_rows; /* conv FIFO, delta-rule state: the last two */
    double cp[RMAX];
    char *a = malloc(rec), *b = malloc(rec);
    memset(a, 1, rec), memset(b, 2, rec);
    for (int r = 0; r < reps; r++) {
        uint64_t t0 = qhx_time_ns();
        memcpy(b, a, rec);
        cp[r] = ms_since(t0);
    }
    const double d = median(dec, reps), dr = mtp ? median(drf, reps) : 0, cpm = median(cp, reps);
    printf("model %s, context %lld, %d reps (medians)\n", path, (long long)P, reps);
    printf("decode step %.3f ms; MTP draft step %.3f ms (%.2f decode steps)\n", d, dr, dr / d);
    printf("recurrent state %.2f MB: one snapshot copy %.3f ms (%.3f decode steps)\n", (double)rec / 1e6, cpm, cpm / d);
    printf("| tokens verified | verify ms | / decode step | predicted speedup at acceptance 0.5 | 0.6 | 0.7 | 0.8 | 0.9 |\n");
    printf("|---|---|---|---|---|---|---|---|\n");
    for (int n = 1; n <= NMAX; n++) {
        const double v = median(ver[n], reps);
        printf("| %d | %.3f | %.2f |", n, v, v / d);
        const int N = n - 1;
        for (int k = 5; k <= 9; k++) {
            const double acc = k / 10.0;
            double e = 0, p = 1;
            for (int j = 0; j <= N; j++) e += p, p *= acc;
            printf(" %.2f |", e / ((v + N * dr) / d));
        }
        printf("\n");
    }
    free(a), free(b), free(ids), free(logits), free(hid);
    qhx_model_state_free(st);
    qhx_model_free(m);
    return 0;
}

typedef struct gen_res {
    double tps;
    int64_t steps, emitted, pos_d[QHX_SPEC_MAX_DRAFT], pos_a[QHX_SPEC_MAX_DRAFT];
} gen_res;

static int on_tok(void *u, qhx_token t, const char *x, size_t l) {
    (void)u, (void)t, (void)x, (void)l;
    return 0;
}

static int gen_once(const qhx_model *m, const int32_t *prompt, size_t np, int T, float temp, int draft, bool fixed,
                    gen_res *out) {
    qhx_error err = {0};
    qhx_session_params sp = qhx_session_default_params(m);
    sp.n_ctx = (int64_t)np + T + 16;
    sp.sampling = (qhx_sample_params){.temperature = temp, .top_p = 1.0f, .repeat_penalty = 1.0f, .repeat_last_n = 64,
                                      .seed = 7};
    sp.spec_draft = draft;
    sp.spec_fixed = fixed;
    qhx_session *s = NULL;
    if (qhx_session_create(m, &sp, &s, &err)) return fprintf(stderr, "bench_spec: %s\n", err.msg), 1;
    qhx_generate_params gp = {.max_tokens = T, .ignore_stop = 1, .on_token = on_tok};
    qhx_generate_stats st;
    if (qhx_session_feed(s, prompt, np, &err) || qhx_session_generate(s, &gp, &st, &err))
        return fprintf(stderr, "bench_spec: %s\n", err.msg), 1;
    memset(out, 0, sizeof *out);
    out->tps = st.decode_ms > 0 ? (double)st.n_generated * 1000.0 / st.decode_ms : 0;
    if (s->spec) {
        qhx_spec_stats ss;
        qhx_spec_get_stats(s->spec, &ss);
        out->steps = ss.steps, out->emitted = ss.emitted;
        memcpy(out->pos_d, ss.pos_drafted, sizeof out->pos_d);
        memcpy(out->pos_a, ss.pos_accepted, sizeof out->pos_a);
    }
    qhx_session_free(s);
    return 0;
}

static int bench_gen(const char *path, int T, int reps, int threads) {
    qhx_error err = {0};
    qhx_model_params mp = qhx_model_default_params();
    mp.mtp = 1;
    mp.n_threads = threads;
    qhx_model *m = NULL;
    if (qhx_model_open(path, &mp, &m, &err)) return fprintf(stderr, "bench_spec: %s\n", err.msg), 1;
    int32_t prompt[128];
    size_t np = 0;
    const char *text = "KING HENRY:\nNow, lords, for France; the enterprise whereof\nShall be to you, as us, like glorious.\n";
    if (qhx_tokenize(m, text, strlen(text), prompt, 128, &np, &err)) return fprintf(stderr, "bench_spec: %s\n", err.msg), 1;
    enum { NC = 6 }; /* plain, N = 1 .. 4 fixed, adaptive (at most 3) */
    if (reps > RMAX) reps = RMAX;
    printf("model %s, %d tokens after a %zu-token prompt, %d interleaved rounds (medians)\n", path, T, np, reps);
    for (int g = 0; g < 2; g++) {
        const float temp = g ? 0.7f : 0.0f;
        static double tps[NC][RMAX], ratio[NC][RMAX];
        gen_res agg[NC];
        memset(agg, 0, sizeof agg);
        for (int r = 0; r < reps; r++)
            for (int k = 0; k < NC; k++) {
                gen_res res;
                const int draft = k == 0 ? 0 : k < 5 ? k : 3;
                if (gen_once(m, prompt, np, T, temp, draft, k < 5, &res)) return 1;
                tps[k][r] = res.tps;
                agg[k].steps += res.steps, agg[k].emitted += res.emitted;
                for (int i = 0; i < QHX_SPEC_MAX_DRAFT; i++) agg[k].pos_d[i] += res.pos_d[i], agg[k].pos_a[i] += res.pos_a[i];
            }
        for (int k = 0; k < NC; k++)
            for (int r = 0; r < reps; r++) ratio[k][r] = tps[k][r] / tps[0][r];
        printf("\n%s\n| drafts | tok/s | speedup | tokens per verify step | acceptance per draft position |\n|---|---|---|---|---|\n",
               g ? "temperature 0.7 (seed 7)" : "greedy");
        for (int k = 0; k < NC; k++) {
            char pos[256] = "";
            int at = 0;
            for (int i = 0; i < QHX_SPEC_MAX_DRAFT && agg[k].pos_d[i]; i++)
                at += snprintf(pos + at, sizeof pos - (size_t)at, "%s%.2f", i ? " / " : "",
                               (double)agg[k].pos_a[i] / (double)agg[k].pos_d[i]);
            char name[32], per[32];
            if (k == 0) snprintf(name, sizeof name, "none");
            else if (k < 5) snprintf(name, sizeof name, "%d", k);
            else snprintf(name, sizeof name, "adaptive (<= 3)");
            snprintf(per, sizeof per, "%.2f", agg[k].steps ? (double)agg[k].emitted / (double)agg[k].steps : 1.0);
            printf("| %s | %.0f | %.2f | %s | %s |\n", name, median(tps[k], reps), median(ratio[k], reps), per,
                   k ? pos : "-");
        }
    }
    qhx_model_free(m);
    return 0;
}

#define SMAX 16

/* S sessions generate T greedy tokens each with speculation (draft at most, fixed or adaptive),
 * stepped together or one after the other; returns the aggregate tok/s, or < 0 on failure. */
static double shared_once(const qhx_model *m, int S, int T, int draft, int fixed, int together) {
    qhx_error err = {0};
    qhx_session *s[SMAX] = {0};
    qhx_sampler_handle *smp[SMAX] = {0};
    qhx_token t[SMAX], out[SMAX][QHX_SPEC_MAX_DRAFT + 1];
    int n[SMAX];
    double tps = -1;
    qhx_session_params sp = qhx_session_default_params(m);
    sp.n_ctx = 64 + T + QHX_SPEC_MAX_DRAFT + 1;
    sp.sampling = qhx_sample_default_params();
    sp.spec_draft = draft;
    sp.spec_fixed = fixed;
    for (int i = 0; i < S; i++) {
        char text[64];
        int32_t prompt[64];
        size_t np = 0;
        static const char *const who[4] = {"KING HENRY", "HAMLET", "ROMEO", "GLOUCESTER"};
        snprintf(text, sizeof text, "%s:\nNow, lords, %d", who[i % 4], i);
        if (qhx_session_create(m, &sp, &s[i], &err) || qhx_sampler_create(m, &sp.sampling, &smp[i], &err) ||
            qhx_tokenize(m, text, strlen(text), prompt, 64, &np, &err) || qhx_session_feed(s[i], prompt, np, &err))
            goto done;
        for (size_t j = 0; j < np; j++) qhx_sampler_push(smp[i], prompt[j]);
        t[i] = qhx_sampler_pick(smp[i], qhx_session_logits(s[i]));
        n[i] = 1;
    }
    const uint64_t t0 = qhx_time_ns();
    for (int left = S; left > 0;) {
        qhx_spec_step_item it[SMAX];
        int who[SMAX], k = 0;
        for (int i = 0; i < S; i++)
            if (n[i] < T) {
                it[k] = (qhx_spec_step_item){.session = s[i], .sampler = smp[i], .turn_end = -1, .ignore_stop = 1,
                                             .token = t[i], .room = T - n[i], .out = out[i]};
                who[k++] = i;
            }
        if (together) {
            if (qhx_sessions_spec_step(it, (size_t)k)) goto done;
        } else {
            for (int j = 0; j < k; j++)
                if (qhx_session_spec_step(s[who[j]], smp[who[j]], it[j].token, it[j].room, 0, -1, 1, out[who[j]],
                                          &it[j].n_out, &err))
                    goto done;
        }
        for (int j = 0; j < k; j++) {
            const int i = who[j];
            n[i] += it[j].n_out;
            t[i] = out[i][it[j].n_out - 1];
            if (n[i] >= T) left--;
        }
    }
    tps = (double)S * T / (ms_since(t0) / 1e3);
done:
    if (tps < 0) fprintf(stderr, "bench_spec: %s\n", err.msg);
    for (int i = 0; i < S; i++) qhx_sampler_free(smp[i]), qhx_session_free(s[i]);
    return tps;
}

static int bench_shared(const char *path, int S, int T, int reps, int threads) {
    qhx_error err = {0};
    qhx_model_params mp = qhx_model_default_params();
    mp.mtp = 1;
    mp.n_threads = threads;
    qhx_model *m = NULL;
    if (qhx_model_open(path, &mp, &m, &err)) return fprintf(stderr, "bench_spec: %s\n", err.msg), 1;
    if (reps > RMAX) reps = RMAX;
    enum { NC = 4 }; /* fixed 3 alone, fixed 3 together, adaptive alone, adaptive together */
    static double tps[NC][RMAX];
    for (int r = 0; r < reps; r++)
        for (int k = 0; k < NC; k++)
            if ((tps[k][r] = shared_once(m, S, T, 3, k < 2, k % 2)) < 0) return qhx_model_free(m), 1;
    printf("model %s, %d sessions x %d greedy tokens, %d interleaved rounds (medians of aggregate tok/s)\n", path, S,
           T, reps);
    printf("| drafts | one verify per session | one verify for all | ratio |\n|---|---|---|---|\n");
    for (int k = 0; k < NC; k += 2) {
        const double a = median(tps[k], reps), b = median(tps[k + 1], reps);
        printf("| %s | %.0f | %.0f | %.2f |\n", k ? "adaptive (<= 3)" : "3 (fixed)", a, b, b / a);
    }
    qhx_model_free(m);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3 || (strcmp(argv[1], "verify") && strcmp(argv[1], "gen") && strcmp(argv[1], "shared"))) {
        fprintf(stderr, "usage: qhx_bench_spec verify|gen|shared MODEL [--ctx P] [--n T] [--sessions S] [--reps R] "
                        "[--threads N]\n");
        return 2;
    }
    int64_t P = 64;
    int T = 128, reps = -1, threads = 0, S = 4;
    for (int i = 3; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--ctx")) P = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--sessions")) S = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--n")) T = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else return fprintf(stderr, "bench_spec: unknown option %s\n", argv[i]), 2;
    }
    if (P < 1 || P > 1 << 20 || T < 1 || T > 1 << 16) return fprintf(stderr, "bench_spec: bad --ctx or --n\n"), 2;
    if (S < 1 || S > SMAX) return fprintf(stderr, "bench_spec: --sessions is not in [1, %d]\n", SMAX), 2;
    if (!strcmp(argv[1], "verify")) return bench_verify(argv[2], P, reps > 0 ? reps : 15, threads);
    if (!strcmp(argv[1], "shared")) return bench_shared(argv[2], S, T, reps > 0 ? reps : 5, threads);
    return bench_gen(argv[2], T, reps > 0 ? reps : 5, threads);
}
