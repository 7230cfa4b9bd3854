/* engine.c: N slots, each one session, fed by one engine thread from a bounded queue.
 *
 * A step of the loop: admit waiting jobs into free slots (the slot with the longest reusable
 * prefix of the job's prompt), prefill what each new job's prompt adds to its slot, then take
 * one step of every active job's decoder (the library's generation loop: sampling, the
 * constraint, stop tokens, stop strings, the streaming text, max_tokens, cancellation;
 * qhx_decoder_next) and feed all the tokens that go on with one qhx_sessions_decode call (the
 * batched decode step); speculative slots take one qhx_sessions_spec_step together (their
 * verifies in one pass).
 * The engine schedules; it neither samples nor decides where an answer stops.
 *
 * Prompt reuse. A slot remembers the ids its state holds (hist). A prompt that starts with all
 * of hist continues from there. Otherwise the state has to go back to an earlier position:
 * the KV cache could be cut anywhere, but Qwen3.5's recurrent state (conv FIFO, delta-rule
 * state) cannot be undone, so the slot keeps checkpoints of that state at the end of each prompt
 * it prefilled (the turn boundaries of a chat) and rolls back to the longest one the new prompt
 * shares. A prompt must leave at least one id to feed (its logits start the answer) unless a
 * checkpoint sits exactly at its end. */
#include "serve.h"

#include "cli.h"


#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_CKPT 4
#define MAX_SLOTS QHX_MAX_BATCH /* --parallel at most: one batched step takes every slot */

typedef struct ckpt {
    qhx_checkpoint *cp;
    int64_t n;
    uint64_t used; /* engine step when last made or used */
} ckpt;

typedef struct slot {
    struct srv_engine *e;
    int index;
    qhx_session *s;
    qhx_token *hist; /* ids the state holds, in order */
    size_t n_hist, cap_hist;
    ckpt ck[MAX_CKPT];
    int n_ck;
    uint64_t last_used;
    atomic_int processing;  /* a job in hand (read by /slots) */
    atomic_llong n_state;   /* tokens its state holds (read by /slots) */
    /* the job in hand */
    srv_job *job;
    qhx_decoder *dec;    /* the job's answer, step by step */
    qhx_constraint *con; /* the job's grammar, followed by dec (NULL: none) */
    srv_output *out;
    int64_t n_gen, max_gen;
    /* speculative decoding (the job's, when the server has it): a step's tokens, q[0 .. qn - 1)
       fed, q[qn - 1] not; qi the next to hand out; totals at the job's start */
    bool spec;
    int draft, qn, qi;
    qhx_token q[9];
    int64_t spec_base[4];
} slot;

struct srv_engine {
    const qhx_model *m;
    const srv_config *cfg;
    srv_stats *stats;
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    srv_job **queue; /* ring */
    int q_head, q_len, q_cap;
    bool stopping;
    slot *slots;
    int n_slots;
    atomic_int busy;
    uint64_t step;
    qhx_token turn_start;
};

/* ---- slots --------------------------------------------------------------------------------- */

static int slot_abort(void *user) {
    slot *sl = user;
    return sl->job && atomic_load(&sl->job->cancelled);
}

static void drop_ckpts_above(slot *sl, int64_t n) {
    int k = 0;
    for (int i = 0; i < sl->n_ck; i++) {
        if (sl->ck[i].n > n) qhx_checkpoint_free(sl->ck[i].cp);
        else sl->ck[k++] = sl->ck[i];
    }
    sl->n_ck = k;
}

static void slot_forget(slot *sl) {
    qhx_session_reset(sl->s);
    sl->n_hist = 0;
    drop_ckpts_above(sl, -1);
}

static size_t common_prefix(const qhx_token *a, size_t na, const qhx_token *b, size_t nb) {
    size_t n = na < nb ? na : nb, i = 0;
    while (i < n && a[i] == b[i]) i++;
    return i;
}

/* Where a prompt would start in this slot: the position to continue from (hist length, a
 * checkpoint's, or 0) and the checkpoint to roll back to (-1: none). */
static int64_t reuse_point(const slot *sl, const qhx_prompt *p, int *ck_out) {
    size_t n;
    const qhx_token *ids = qhx_prompt_ids(p, &n);
    size_t shared = common_prefix(sl->hist, sl->n_hist, ids, qhx_prompt_reusable(p));
    *ck_out = -1;
    int64_t best = 0;
    /* continuing needs one id left to feed (its logits start the answer) */
    if (sl->n_hist == shared && shared < n) best = (int64_t)shared;
    for (int i = 0; i < sl->n_ck; i++) {
        int64_t c = sl->ck[i].n; /* at most n: a checkpoint at the prompt's end has its logits */
        if (c <= (int64_t)shared && c > best) {
            best = c;
            *ck_out = i;
        }
    }
    if (*ck_out >= 0 && best == (int64_t)sl->n_hist && (int64_t)sl->n_hist < (int64_t)n) *ck_out = -1; /* no need */
    return best;
}

/* hist <- the first n ids of p. From its first image on, the ids say nothing of the pixels (two
 * images have the same pad ids), so they are kept as -1, which no prompt id equals: a state
 * holding an image is never reused past it. */
static int hist_set(slot *sl, const qhx_prompt *p, size_t n) {
    if (n > sl->cap_hist) {
        qhx_token *h = realloc(sl->hist, n * sizeof *h);
        if (!h) return -1;
        sl->hist = h;
        sl->cap_hist = n;
    }
    size_t total, keep = qhx_prompt_reusable(p);
    const qhx_token *ids = qhx_prompt_ids(p, &total);
    for (size_t i = 0; i < n; i++) sl->hist[i] = i < keep ? ids[i] : -1;
    sl->n_hist = n;
    return 0;
}

static int hist_push(slot *sl, qhx_token t) {
    if (sl->n_hist == sl->cap_hist) {
        size_t cap = sl->cap_hist ? 2 * sl->cap_hist : 256;
        qhx_token *h = realloc(sl->hist, cap * sizeof *h);
        if (!h) return -1;
        sl->hist = h;
        sl->cap_hist = cap;
    }
    sl->hist[sl->n_hist++] = t;
    return 0;
}

/* A checkpoint at the slot's current position (the end of a prompt), the least recently used
 * one making room. Failure only costs reuse later. */
static void take_ckpt(slot *sl) {
    int64_t n = (int64_t)sl->n_hist;
    for (int i = 0; i < sl->n_ck; i++)
        if (sl->ck[i].n == n) {
            sl->ck[i].used = sl->e->step;
            return;
        }
    qhx_checkpoint *cp = NULL;
    if (qhx_session_checkpoint(sl->s, &cp, NULL)) return;
    if (sl->n_ck == MAX_CKPT) {
        int old = 0;
        for (int i = 1; i < sl->n_ck; i++)
            if (sl->ck[i].used < sl->ck[old].used) old = i;
        qhx_checkpoint_free(sl->ck[old].cp);
        sl->ck[old] = sl->ck[--sl->n_ck];
    }
    sl->ck[sl->n_ck++] = (ckpt){.cp = cp, .n = n, .used = sl->e->step};
}

/* ---- a job's life in a slot -------------------------------------------------------------- */

static void release(slot *sl) {
    srv_output_free(sl->out);
    qhx_decoder_free(sl->dec);
    qhx_constraint_free(sl->con);
    sl->out = NULL;
    sl->dec = NULL;
    sl->con = NULL;
    srv_job_unref(sl->job);
    sl->job = NULL;
    atomic_store(&sl->processing, 0);
    atomic_store(&sl->n_state, (long long)sl->n_hist);
    atomic_fetch_sub(&sl->e->busy, 1);
}

/* A speculative job's end: what the last step fed beyond the tokens handed out is cut back (the
 * last one handed out is not fed, as without speculation), and its counters go to the stats. */
static void spec_finish(slot *sl) {
    if (!sl->spec) return;
    const int keep = sl->qi > 0 ? sl->qi - 1 : 0;
    if (sl->qn > 0 && keep < sl->qn - 1 && qhx_decoder_spec_cut(sl->dec, sl->s, keep, NULL)) slot_forget(sl);
    sl->qn = sl->qi = 0;
    int64_t t[4];
    qhx_session_spec_totals(sl->s, t);
    srv_stats *st = sl->e->stats;
    atomic_fetch_add(&st->spec_steps, t[0] - sl->spec_base[0]);
    atomic_fetch_add(&st->spec_drafted, t[1] - sl->spec_base[1]);
    atomic_fetch_add(&st->spec_accepted, t[2] - sl->spec_base[2]);
    atomic_fetch_add(&st->spec_tokens, t[3] - sl->spec_base[3]);
    sl->spec = false;
}

/* A job that failed: a status and message for the connection to answer with, or, when its stream
 * has begun, the stream's error event and end (srv_output_fail). */
static void fail_job(slot *sl, int status, const char *msg) {
    spec_finish(sl);
    if (sl->out) {
        sl->job->n_generated = sl->n_gen;
        srv_output_fail(sl->out, status, msg);
    }
    srv_job_finish(sl->job, status, msg);
    release(sl);
}

static void cancel_job(slot *sl) {
    spec_finish(sl);
    atomic_fetch_add(&sl->e->stats->cancelled, 1);
    srv_job_finish(sl->job, 499, "the client closed the connection");
    release(sl);
}

static void end_job(slot *sl, srv_finish why) {
    srv_job *j = sl->job;
    const char *text;
    size_t len = 0;
    if (qhx_decoder_finish(sl->dec, &text, &len, NULL) == QHX_OK && len)
        srv_output_token(sl->out, -1, text, len, NULL);
    spec_finish(sl);
    j->finish = why;
    j->n_generated = sl->n_gen;
    if (srv_output_end(sl->out)) {
        fail_job(sl, 503, "out of memory");
        return;
    }
    atomic_fetch_add(&sl->e->stats->generated_tokens, sl->n_gen);
    srv_job_finish(j, 0, NULL);
    release(sl);
}

/* Put the job's prompt into the slot: roll back or reset as reuse_point says, prefill the rest,
 * checkpoint the end of the prompt. 0 when the job can start sampling, -1 when it ended here. */
static int start_job(slot *sl) {
    srv_engine *e = sl->e;
    srv_job *j = sl->job;
    qhx_error err = {0};
    size_t n;
    const qhx_token *ids = qhx_prompt_ids(j->prompt, &n);
    int64_t ctx = qhx_session_n_ctx(sl->s);
    char msg[256];
    j->n_prompt = (int64_t)n;
    if ((int64_t)n >= ctx) {
        snprintf(msg, sizeof msg, "the prompt has %zu tokens; the context is %lld tokens", n, (long long)ctx);
        fail_job(sl, 400, msg);
        return -1;
    }
    int64_t room = ctx - (int64_t)n;
    if (j->max_tokens > room) {
        snprintf(msg, sizeof msg, "the prompt (%zu tokens) + max_tokens (%lld) exceed the context of %lld tokens", n,
                 (long long)j->max_tokens, (long long)ctx);
        fail_job(sl, 400, msg);
        return -1;
    }
    int64_t max_gen = j->max_tokens > 0 ? j->max_tokens : room < e->cfg->lim.max_tokens ? room : e->cfg->lim.max_tokens;
    int ck;
    int64_t from = reuse_point(sl, j->prompt, &ck);
    if (ck >= 0 && qhx_session_spec_enabled(sl->s)) { /* a rollback would leave the MTP block's cache behind */
        slot_forget(sl);
        from = 0;
        ck = -1;
    }
    if (ck >= 0) {
        if (qhx_session_rollback(sl->s, sl->ck[ck].cp, &err)) {
            slot_forget(sl);
            from = 0;
        } else {
            sl->n_hist = (size_t)from;
            sl->ck[ck].used = e->step;
            drop_ckpts_above(sl, from);
        }
    } else if (from == 0 && sl->n_hist) slot_forget(sl);
    /* a chat prompt goes in two pieces with a checkpoint between: up to its last turn start
       (the assistant header the answer follows), where the next turn's prompt
       parts from this one (the template renders an earlier answer without the think block the
       generation prompt opened) */
    size_t cut = n;
    if (j->kind == SRV_CHAT && e->turn_start >= 0)
        for (size_t i = n; i-- > (size_t)from + 1;)
            if (ids[i] == e->turn_start) {
                cut = i;
                break;
            }
    for (size_t a = (size_t)from; a < n;) {
        size_t b = a < cut ? cut : n;
        qhx_status rc = qhx_session_feed_prompt(sl->s, j->prompt, a, b, &err);
        if (rc) {
            slot_forget(sl);
            if (rc == QHX_E_ABORTED) cancel_job(sl);
            else fail_job(sl, srv_http_status(rc), err.msg);
            return -1;
        }
        if (b < n) {
            if (hist_set(sl, j->prompt, b)) {
                slot_forget(sl);
                fail_job(sl, 503, "out of memory");
                return -1;
            }
            take_ckpt(sl);
        }
        a = b;
    }
    if (hist_set(sl, j->prompt, n)) {
        slot_forget(sl);
        fail_job(sl, 503, "out of memory");
        return -1;
    }
    take_ckpt(sl);
    j->n_cached = from;
    atomic_fetch_add(&e->stats->prompt_tokens, (long long)n);
    atomic_fetch_add(&e->stats->cached_tokens, (long long)from);
    qhx_status rc = j->grammar ? qhx_constraint_new(e->m, j->grammar, &sl->con, &err) : QHX_OK;
    if (rc) {
        fail_job(sl, srv_http_status(rc), err.msg);
        return -1;
    }
    /* speculative decoding: the server's, unless the request turns it off, has a grammar or stop
       token ids (the step knows the model's stop ids only) or asks for logprobs (a speculative
       step keeps only the logits after its last fed token) */
    sl->spec = qhx_session_spec_enabled(sl->s) && j->spec_draft >= 0 && !sl->con && !j->logprobs && !j->n_stop_ids;
    sl->draft = j->spec_draft > 0 && j->spec_draft < e->cfg->spec_draft ? j->spec_draft : e->cfg->spec_draft;
    sl->qn = sl->qi = 0;
    sl->max_gen = max_gen;
    qhx_session_spec_totals(sl->s, sl->spec_base);
    /* the decoder ends the answer at a stop token or one of the job's stop strings */
    qhx_decoder_params dp = {.sampling = j->sampling, .max_tokens = max_gen, .ignore_stop = j->ignore_eos,
                             .stop_at_turn_end = 1, .stops = (const char *const *)j->stops, .n_stops = j->n_stops,
                             .stop_ids = j->stop_ids, .n_stop_ids = j->n_stop_ids,
                             .constraint = sl->con, .abort_cb = slot_abort, .abort_user = sl,
                             .speculative = sl->spec};
    if ((rc = qhx_decoder_create(e->m, &dp, &sl->dec, &err))) {
        fail_job(sl, srv_http_status(rc), err.msg);
        return -1;
    }
    qhx_decoder_push(sl->dec, ids, n);
    if (!(sl->out = srv_output_new(e->m, j))) {
        fail_job(sl, 503, "out of memory");
        return -1;
    }
    sl->n_gen = 0;
    return 0;
}

/* An embeddings job, whole: each input's embedding through the slot's session (reset before
 * and after each: the slot's cache is given up), then the job is done. */
static void run_embed(slot *sl) {
    srv_job *j = sl->job;
    const int64_t H = qhx_model_n_embd(sl->e->m);
    qhx_error err = {0};
    slot_forget(sl);
    j->n_prompt = 0;
    for (size_t i = 0; i < j->n_embed; i++) {
        if (atomic_load(&j->cancelled)) {
            cancel_job(sl);
            return;
        }
        qhx_status rc = qhx_session_embed(sl->s, j->embed_ids[i], j->embed_n[i], &j->embed, j->embd + (size_t)H * i,
                                          (size_t)H, &err);
        if (rc == QHX_E_ABORTED) {
            cancel_job(sl);
            return;
        }
        if (rc) {
            char msg[QHX_ERROR_MSG_SIZE + 32];
            snprintf(msg, sizeof msg, "input %zu: %s", i, err.msg);
            fail_job(sl, srv_http_status(rc), msg);
            return;
        }
        j->n_prompt += (int64_t)j->embed_n[i];
    }
    atomic_fetch_add(&sl->e->stats->prompt_tokens, (long long)j->n_prompt);
    srv_job_finish(j, 0, NULL);
    release(sl);
}

/* One step of the slot's decoder; its token and text passed on. Returns 1 when the token is to be
 * fed (the answer goes on), 0 when the job ended. */
static int next_token(slot *sl, qhx_token *out) {
    const float *lg = qhx_session_logits(sl->s);
    qhx_error err = {0};
    qhx_decoder_step st;
    /* a speculative step's queued tokens were chosen there (all but the last are fed) */
    qhx_status rc = sl->spec && sl->qi < sl->qn ? qhx_decoder_accept(sl->dec, sl->q[sl->qi++], &st, &err)
                                                : qhx_decoder_next(sl->dec, lg, &st, &err);
    if (rc == QHX_E_ABORTED) {
        cancel_job(sl);
        return 0;
    }
    if (rc) {
        /* the request's grammar past a cap of the matcher (too ambiguous: QHX_E_LIMIT) is the
           client's; QHX_E_FORMAT is the model's logits (NaN or Inf), no input of the client's */
        if (rc == QHX_E_FORMAT) rc = QHX_E_INTERNAL;
        if (rc != QHX_E_NOMEM) slot_forget(sl);
        fail_job(sl, srv_http_status(rc), err.msg[0] ? err.msg : "the logits are not finite (NaN or Inf)");
        return 0;
    }
    if (!st.report) { /* a stop token, or the grammar's answer is complete */
        end_job(sl, SRV_FINISH_STOP);
        return 0;
    }
    if (srv_output_token(sl->out, st.token, st.text, st.len, lg)) {
        fail_job(sl, 503, "out of memory");
        return 0;
    }
    sl->n_gen++;
    if (!st.feed) { /* a stop string (its text and what follows never given), or max_tokens */
        sl->job->stop_word = st.stop == QHX_STOP_STRING;
        end_job(sl, st.stop != QHX_STOP_LENGTH ? SRV_FINISH_STOP : SRV_FINISH_LENGTH);
        return 0;
    }
    *out = st.token;
    return 1;
}

/* A session that failed its decode step: aborted by its client, out of memory, or broken (the
 * step feeds tokens the engine chose, within the context the request was checked against: no
 * input of the client's). */
static void decode_failed(slot *sl, qhx_status rc, const char *msg) {
    slot_forget(sl);
    if (rc == QHX_E_ABORTED) cancel_job(sl);
    else fail_job(sl, srv_http_status(rc == QHX_E_NOMEM ? rc : QHX_E_INTERNAL), msg);
}

/* A speculative slot's token t that the last step fed already (not the step's last token). */
static void spec_fed(slot *sl, qhx_token t) {
    if (hist_push(sl, t)) decode_failed(sl, QHX_E_NOMEM, "out of memory");
}

static long long elapsed_ns(const struct timespec *a, const struct timespec *b) {
    return (long long)((b->tv_sec - a->tv_sec) * 1000000000LL + (b->tv_nsec - a->tv_nsec));
}

/* The speculative slots whose tokens t[i] need a new step: one step for all of them (each
 * drafts, one verify pass covers every slot's drafts, each accepts; qhx_sessions_spec_step),
 * whose tokens the next engine step hands out. */
static void spec_steps(srv_engine *e, slot *const *who, const qhx_token *t, size_t n) {
    if (!n) return;
    qhx_spec_step_item it[MAX_SLOTS];
    for (size_t i = 0; i < n; i++) {
        slot *sl = who[i];
        const int64_t left = sl->max_gen - sl->n_gen;
        const int room = left < 9 ? (int)left : 9;
        it[i] = (qhx_spec_step_item){.session = sl->s, .decoder = sl->dec, .token = t[i], .room = room < 1 ? 1 : room,
                                     .draft = sl->draft, .out = sl->q};
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    qhx_sessions_spec_step(it, n);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    atomic_fetch_add(&e->stats->decode_ns, elapsed_ns(&t0, &t1));
    for (size_t i = 0; i < n; i++) {
        slot *sl = who[i];
        sl->qi = 0;
        sl->qn = it[i].status ? 0 : it[i].n_out;
        if (it[i].status) {
            decode_failed(sl, it[i].status, it[i].error.msg);
            continue;
        }
        atomic_fetch_add(&e->stats->decode_tokens, (long long)sl->qn);
        if (hist_push(sl, t[i])) decode_failed(sl, QHX_E_NOMEM, "out of memory");
    }
}

/* One token for every active job (a speculative slot: every token of its last step), then one
 * speculative step for all the speculative slots (their verifies in one pass) and one decode
 * step for all the others that go on (a speculative slot whose adaptive rule retired joins
 * those). Two passes over the weights when
 * both kinds are active: the decode step's logits need no cut-back, and it takes the plain
 * slots' tokens while the speculative step drafts its own. */
static void engine_step(srv_engine *e) {
    qhx_session *ss[MAX_SLOTS];
    qhx_token tk[MAX_SLOTS], sp_tk[MAX_SLOTS];
    slot *who[MAX_SLOTS], *sp_who[MAX_SLOTS];
    size_t nb = 0, ns = 0;
    for (int i = 0; i < e->n_slots; i++) {
        slot *sl = &e->slots[i];
        bool more = sl->job && next_token(sl, &tk[nb]);
        /* a speculative step's tokens all go out now (all but its last are in the state), so
           that every speculative slot needs its next step in the same engine step */
        while (more && sl->spec && sl->qi < sl->qn) {
            spec_fed(sl, tk[nb]);
            more = sl->job && next_token(sl, &tk[nb]);
        }
        if (more) {
            if (sl->spec) {
                if (!qhx_session_spec_retired(sl->s)) {
                    sp_who[ns] = sl;
                    sp_tk[ns++] = tk[nb];
                    continue;
                }
                /* drafting did not pay: the slot decodes in the batch; its decoder's window gets t
                   as a speculative step would have added it */
                qhx_decoder_push(sl->dec, &tk[nb], 1);
            }
            ss[nb] = sl->s;
            who[nb++] = sl;
        }
    }
    spec_steps(e, sp_who, sp_tk, ns);
    if (!nb) return;
    qhx_error err = {0};
    size_t done = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    qhx_status rc = qhx_sessions_decode(ss, tk, nb, &done, &err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    atomic_fetch_add(&e->stats->decode_ns, elapsed_ns(&t0, &t1));
    atomic_fetch_add(&e->stats->decode_tokens, (long long)done);
    for (size_t i = 0; i < done; i++)
        if (hist_push(who[i], tk[i])) decode_failed(who[i], QHX_E_NOMEM, "out of memory");
    if (rc == QHX_OK) return;
    decode_failed(who[done], rc, err.msg);
    for (size_t i = done + 1; i < nb; i++) { /* the rest of the batch, one by one */
        rc = qhx_sessions_decode(&ss[i], &tk[i], 1, NULL, &err);
        if (rc) decode_failed(who[i], rc, err.msg);
        else if (hist_push(who[i], tk[i])) decode_failed(who[i], QHX_E_NOMEM, "out of memory");
    }
}

/* ---- the queue and the thread ------------------------------------------------------------ */

/* The free slot for p: the longest reusable prefix, then the least recently used. With no
 * prompt (embeddings, which reset the slot): the one holding the least, so that a chat's cached
 * prefix survives where another slot is free. */
static slot *pick_slot(srv_engine *e, const qhx_prompt *p) {
    slot *best = NULL;
    int64_t best_n = p ? -1 : INT64_MIN; /* without a prompt every free slot is a candidate */
    for (int i = 0; i < e->n_slots; i++) {
        slot *sl = &e->slots[i];
        if (sl->job) continue;
        int ck;
        int64_t n = p ? reuse_point(sl, p, &ck) : -(int64_t)sl->n_hist;
        if (n > best_n || (n == best_n && sl->last_used < best->last_used)) {
            best = sl;
            best_n = n;
        }
    }
    return best;
}

static void *engine_main(void *arg) {
    srv_engine *e = arg;
    for (;;) {
        slot *fresh[MAX_SLOTS];
        int n_fresh = 0;
        pthread_mutex_lock(&e->mu);
        while (!e->stopping && e->q_len == 0 && atomic_load(&e->busy) == 0) pthread_cond_wait(&e->cv, &e->mu);
        if (e->stopping && e->q_len == 0 && atomic_load(&e->busy) == 0) {
            pthread_mutex_unlock(&e->mu);
            break;
        }
        while (e->q_len > 0) {
            srv_job *j = e->queue[e->q_head];
            slot *sl = atomic_load(&j->cancelled) ? NULL : pick_slot(e, j->prompt);
            if (!sl && !atomic_load(&j->cancelled)) break;
            e->q_head = (e->q_head + 1) % e->q_cap;
            e->q_len--;
            if (!sl) { /* went away while waiting */
                atomic_fetch_add(&e->stats->cancelled, 1);
                srv_job_finish(j, 499, "the client closed the connection");
                srv_job_unref(j);
                continue;
            }
            sl->job = j;
            sl->last_used = e->step;
            atomic_store(&sl->processing, 1);
            atomic_fetch_add(&e->busy, 1);
            fresh[n_fresh++] = sl;
        }
        pthread_mutex_unlock(&e->mu);
        e->step++;
        for (int i = 0; i < n_fresh; i++) {
            if (fresh[i]->job->kind == SRV_EMBED) run_embed(fresh[i]);
            else start_job(fresh[i]);
        }
        engine_step(e);
    }
    return NULL;
}

int srv_engine_submit(srv_engine *e, srv_job *j) {
    pthread_mutex_lock(&e->mu);
    if (e->stopping || e->q_len == e->q_cap) {
        pthread_mutex_unlock(&e->mu);
        atomic_fetch_add(&e->stats->rejected, 1);
        return -1;
    }
    srv_job_ref(j);
    j->t_submit = srv_now();
    e->queue[(e->q_head + e->q_len) % e->q_cap] = j;
    e->q_len++;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    return 0;
}

int srv_engine_queue_length(srv_engine *e) {
    pthread_mutex_lock(&e->mu);
    int n = e->q_len;
    pthread_mutex_unlock(&e->mu);
    return n;
}

int srv_engine_busy_slots(srv_engine *e) { return atomic_load(&e->busy); }

int srv_engine_slot_state(srv_engine *e, int i, bool *processing, int64_t *n_state) {
    if (i < 0 || i >= e->n_slots) return -1;
    *processing = atomic_load(&e->slots[i].processing) != 0;
    *n_state = (int64_t)atomic_load(&e->slots[i].n_state);
    return 0;
}

static void free_engine(srv_engine *e) {
    for (int i = 0; e->slots && i < e->n_slots; i++) {
        slot *sl = &e->slots[i];
        drop_ckpts_above(sl, -1);
        qhx_session_free(sl->s);
        free(sl->hist);
    }
    free(e->slots);
    free(e->queue);
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

void srv_engine_stop(srv_engine *e) {
    if (!e) return;
    pthread_mutex_lock(&e->mu);
    e->stopping = true;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    if (e->thread_started) pthread_join(e->thread, NULL);
    e->thread_started = false;
}

void srv_engine_free(srv_engine *e) {
    if (!e) return;
    srv_engine_stop(e);
    free_engine(e);
}

qhx_status srv_engine_start(const qhx_model *m, const srv_config *cfg, srv_stats *stats, srv_engine **out,
                            qhx_error *err) {
    *out = NULL;
    srv_engine *e = calloc(1, sizeof *e);
    if (!e) return qhx_cli_fail(err, QHX_E_NOMEM, "serve: out of memory");
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    atomic_init(&e->busy, 0);
    e->m = m;
    e->cfg = cfg;
    e->stats = stats;
    e->n_slots = cfg->parallel < 1 ? 1 : cfg->parallel > MAX_SLOTS ? MAX_SLOTS : cfg->parallel;
    e->q_cap = cfg->queue > 0 ? cfg->queue : 1;
    qhx_chat_markers mk;
    qhx_model_chat_markers(m, &mk);
    e->turn_start = qhx_model_token_id(m, mk.turn_start);
    e->slots = calloc((size_t)e->n_slots, sizeof *e->slots);
    e->queue = calloc((size_t)e->q_cap, sizeof *e->queue);
    qhx_status rc = QHX_OK;
    if (!e->slots || !e->queue) rc = qhx_cli_fail(err, QHX_E_NOMEM, "serve: out of memory");
    for (int i = 0; !rc && i < e->n_slots; i++) {
        slot *sl = &e->slots[i];
        sl->e = e;
        sl->index = i;
        qhx_session_params sp = qhx_session_default_params(m);
        sp.n_ctx = cfg->ctx;
        sp.abort_cb = slot_abort;
        sp.abort_user = sl;
        sp.spec_draft = cfg->spec_draft;
        rc = qhx_session_create(m, &sp, &sl->s, err);
    }
    if (!rc && pthread_create(&e->thread, NULL, engine_main, e)) rc = qhx_cli_fail(err, QHX_E_NOMEM, "serve: no engine thread");
    if (rc) {
        free_engine(e);
        return rc;
    }
    e->thread_started = true;
    *out = e;
    return QHX_OK;
}
