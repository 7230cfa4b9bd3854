/* qhx chat: interactive multi-turn chat on a terminal (line editing and history by libedit), or
 * over a pipe (one user turn per line). The session keeps its state between turns and feeds only
 * the new turn: the closing of the previous answer, the user turn and the assistant header.
 * Lines starting with '/' are commands (/help lists them). Ctrl-C stops the answer being
 * written and returns to the prompt; Ctrl-C twice at the prompt, Ctrl-D or /bye quits. */
#include "cli.h"
#include "cli_args.h"
#include "cli_run.h"

#include <errno.h>
#include <fcntl.h>
#include <histedit.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *CMD = "chat";

static const char COMMANDS_HELP[] =
    "  /help, /?           this list\n"
    "  /bye, /exit, /quit  leave (also Ctrl-D, or Ctrl-C twice at the prompt)\n"
    "  /clear, /reset      start a new conversation\n"
    "  /save FILE          save the conversation (the session state) to FILE\n"
    "  /load FILE          go on from a conversation saved with /save\n"
    "  /system TEXT        the system message (a new conversation starts with it; /system alone\n"
    "                      shows it, /system - removes it)\n"
    "  /set NAME VALUE     sampling from the next answer on: temperature, top_k, top_p, min_p,\n"
    "                      repeat_penalty, presence_penalty, frequency_penalty, seed; /set\n"
    "                      alone shows them\n"
    "  /stats              the speed of the last answer (every answer's with --verbose)\n"
    "  /image FILE         put an image (PNG or JPEG) into the next message (a model that takes\n"
    "                      images: Qwen3-VL, Qwen3.5 with its tower); repeat it for several\n"
    "  /video FILE         put a video into the next message (after its images; one per\n"
    "                      message; sampled at 2 frames per second as Qwen3-VL's processor does)\n"
    "  \"\"\" ... \"\"\"         a message of several lines; a line ending in \\ goes on as well;\n"
    "                      text pasted on a terminal is one message, newlines and all\n"
    "  Ctrl-C stops the answer being written and returns to the prompt.\n";

static void usage(FILE *f) {
    fprintf(f,
            "usage: qhx chat -m MODEL [--system TEXT] [--think|--no-think] [options]\n"
            "  Reads one user turn per line from stdin and prints each answer; on a terminal with\n"
            "  line editing and history. Commands:\n%s"
            "  -m, --model PATH     manifest, bundle folder or Hugging Face checkpoint folder;\n"
            "                       ORG/NAME: that repository in the Hugging Face cache;\n"
            "                       ollama:NAME[:TAG]: a model in ollama's store (docs/hub.md)\n"
            "  -hf REPO[:QUANT]     a Hugging Face repository (ORG/NAME[:QUANT][@REVISION]):\n"
            "                       fetched into its cache when missing (qhx pull), then run\n"
            "  --system TEXT        system message\n"
            "  --think, --no-think  Qwen3.5 thinking mode (default: the run plan's)\n"
            "%s"
            "  --no-context-shift   refuse a message that does not fit in the context (default: the\n"
            "                       oldest turns after the system prompt are dropped, the rest read\n"
            "                       again, with a one-line notice)\n"
            "  (--ctx is the whole conversation's context)\n",
            COMMANDS_HELP, qhx_run_opts_help());
}

typedef struct chat {
    qhx_run_opts run;
    qhx_model *m;
    qhx_session *s;
    qhx_run_context ctx;
    double load_s;
    bool first;               /* nothing fed yet */
    bool feeding;             /* Ctrl-C now aborts the prompt (otherwise it ends the answer) */
    char *images[QHX_CLI_MAX_IMAGES]; /* /image FILE (repeatable) for the next turn, in order (owned) */
    int n_images;
    char *video;                      /* /video FILE for the next turn (owned), or NULL */
    EditLine *el;             /* NULL when stdin is not a terminal */
    History *hist;
    /* the conversation's text turns, for the context shift: user message and answer of each
     * finished turn since the last /clear (owned); a /load'ed conversation has none */
    char **said;              /* 2 per turn: user, answer */
    int n_turns, cap_turns;
    bool no_shift;            /* --no-context-shift: a message that does not fit is refused */
    char *system;             /* /system TEXT (owned), else NULL: run.system holds the system message */
    qhx_sample_params sampling; /* what the session samples with (/set changes it) */
    qhx_generate_stats last;  /* the last answer's figures, for /stats */
    char last_stop[32];
    bool has_last;
    char history_path[1024];  /* where the line history is kept between runs, or "" */
} chat;

/* ---- one turn ------------------------------------------------------------------------------ */

/* What the context can still take after this turn's text: room for the answer. */
static void context_full_message(const chat *c, const char *what) {
    char advice[160];
    qhx_run_context_advice(&c->ctx, advice, sizeof advice);
    fprintf(stderr, "qhx chat: %s: the conversation fills the context of %lld tokens; /clear starts a new one%s\n", what,
            (long long)c->ctx.limit, c->ctx.limit < c->ctx.trained && !c->ctx.by_memory ? advice : "");
}

/* Tokens kept free for the answer when deciding whether a message fits: -n, at most a quarter
 * of the context (an answer that needs more stops at the context's end, stop "context"). */
static int64_t answer_room(const chat *c) {
    int64_t quarter = c->ctx.limit / 4 > 1 ? c->ctx.limit / 4 : 1;
    return c->run.n_new > 0 && c->run.n_new < quarter ? c->run.n_new : quarter;
}

/* The next turn as the session takes it (qhx_prompt_for_session: the closing of the previous
 * answer first, when there is one), with the /image files (if any) encoded within the room the
 * context has left, shared over them (--image-max-tokens bounds their sum). */
static qhx_status turn_prompt(chat *c, const char *user, qhx_prompt **out, qhx_error *err) {
    qhx_chat_turn turns[2];
    qhx_chat_content parts[QHX_CLI_MAX_IMAGES + 2];
    size_t nt = 0;
    int np = 0;
    if (c->first && c->run.system) turns[nt++] = (qhx_chat_turn){.role = "system", .content = c->run.system};
    for (int k = 0; k < c->n_images; k++) parts[np++] = (qhx_chat_content){.image_path = c->images[k]};
    if (c->video) parts[np++] = (qhx_chat_content){.video_path = c->video};
    parts[np] = (qhx_chat_content){.text = user, .text_len = strlen(user)};
    turns[nt++] = (qhx_chat_turn){.role = "user", .content = user, .parts = np ? parts : NULL,
                                  .n_parts = np ? (size_t)np + 1 : 0};
    int think = c->run.think >= 0 ? c->run.think : qhx_model_thinking_default(c->m);
    qhx_chat_spec spec = {.turns = turns, .n_turns = nt, .thinking = think, .max_images = c->n_images,
                          .image_budget = c->run.image_max_tokens};
    /* a video is sampled with fewer frames (then pixels) until the turn leaves the answer room */
    const int64_t room = c->ctx.limit - qhx_session_n_past(c->s) - answer_room(c);
    if (c->video) spec.max_tokens = room > 1 ? room : 1;
    qhx_status rc = qhx_prompt_for_session(c->s, &spec, out, err);
    if (!rc) qhx_run_report_video(*out, false, c->run.verbose);
    return rc;
}

/* Feed the turn (the pending stop token first, so an image's announcement covers these ids). */
static qhx_status feed_turn(chat *c, const qhx_prompt *p, qhx_error *err) {
    size_t n;
    qhx_prompt_ids(p, &n);
    c->feeding = true;
    qhx_status rc = qhx_session_feed_prompt(c->s, p, 0, n, err);
    c->feeding = false;
    return rc;
}

/* Ctrl-C while the answer is written: stop after this token, cleanly (the state stays whole). */
static int on_token(void *user, qhx_token t, const char *text, size_t len) {
    int stop = qhx_run_on_token(user, t, text, len);
    return stop || qhx_run_interrupted(NULL);
}

/* The abort callback: only a prompt being read is cut (between layers); an answer ends at a
 * token boundary in on_token instead, so the conversation goes on after it. */
static int abort_feed(void *user) {
    const chat *c = user;
    return c->feeding && qhx_run_interrupted(NULL);
}

/* ---- the context shift ----------------------------------------------------------------------
 * When a message and room for its answer no longer fit, the oldest turns after the system
 * prompt are dropped and the kept ones, with the message, are prefilled again into the reset
 * session (the recurrent layers hold no positions that could be shifted: truncation plus a new
 * prefill is the honest form of llama.cpp's context shift). One line says what was dropped. */

static void forget_turns(chat *c) {
    for (int k = 0; k < 2 * c->n_turns; k++) free(c->said[k]);
    c->n_turns = 0;
}

static void remember_turn(chat *c, const char *user, const char *answer, size_t n_answer) {
    if (c->n_turns == c->cap_turns) {
        int cap = c->cap_turns ? 2 * c->cap_turns : 16;
        char **q = realloc(c->said, (size_t)cap * 2 * sizeof *q);
        if (!q) return; /* out of memory: this turn is not kept for a later shift */
        c->said = q, c->cap_turns = cap;
    }
    char *u = strdup(user), *a = malloc(n_answer + 1);
    if (!u || !a) {
        free(u), free(a);
        return;
    }
    memcpy(a, answer ? answer : "", n_answer);
    a[n_answer] = '\0';
    c->said[2 * c->n_turns] = u, c->said[2 * c->n_turns + 1] = a;
    c->n_turns++;
}

/* The system prompt, the remembered turns from `from` on and the message, as one prompt for
 * the reset session. */
static qhx_status shifted_prompt(chat *c, int from, const char *user, qhx_prompt **out, qhx_error *err) {
    const size_t n = (size_t)(2 * (c->n_turns - from) + 2);
    qhx_chat_turn *turns = calloc(n, sizeof *turns);
    if (!turns) return qhx_cli_fail(err, QHX_E_NOMEM, "out of memory");
    size_t nt = 0;
    if (c->run.system) turns[nt++] = (qhx_chat_turn){.role = "system", .content = c->run.system};
    for (int k = from; k < c->n_turns; k++) {
        turns[nt++] = (qhx_chat_turn){.role = "user", .content = c->said[2 * k]};
        turns[nt++] = (qhx_chat_turn){.role = "assistant", .content = c->said[2 * k + 1]};
    }
    turns[nt++] = (qhx_chat_turn){.role = "user", .content = user};
    int think = c->run.think >= 0 ? c->run.think : qhx_model_thinking_default(c->m);
    qhx_chat_spec spec = {.turns = turns, .n_turns = nt, .thinking = think};
    qhx_status rc = qhx_prompt_for_session(c->s, &spec, out, err);
    free(turns);
    return rc;
}

/* Reset the session and feed the longest tail of the conversation that leaves answer_room.
 * Returns QHX_OK with the turn fed, or QHX_E_LIMIT when even the message alone does not fit. */
static qhx_status shift_context(chat *c, const char *user, qhx_error *err) {
    for (int from = c->n_turns ? 1 : 0; from <= c->n_turns; from++) { /* none remembered (/load): all goes */
        qhx_session_reset(c->s);
        qhx_prompt *p = NULL;
        qhx_status rc = shifted_prompt(c, from, user, &p, err);
        size_t n = 0;
        if (!rc) qhx_prompt_ids(p, &n);
        if (!rc && (int64_t)n + answer_room(c) <= c->ctx.limit) {
            rc = feed_turn(c, p, err);
            qhx_prompt_free(p);
            if (rc) return rc;
            if (from)
                fprintf(stderr, "(the conversation outgrew the context of %lld tokens: its oldest %d turn%s dropped%s; "
                                "%lld tokens read again)\n", (long long)c->ctx.limit, from, from == 1 ? " was" : "s were",
                        c->run.system ? ", the system prompt kept" : "", (long long)n);
            else
                fprintf(stderr, "(the conversation outgrew the context of %lld tokens: it goes on from this message%s)\n",
                        (long long)c->ctx.limit, c->run.system ? " and the system prompt" : "");
            for (int k = 0; k < 2 * from; k++) free(c->said[k]);
            memmove(c->said, c->said + 2 * from, (size_t)(2 * (c->n_turns - from)) * sizeof *c->said);
            c->n_turns -= from;
            return QHX_OK;
        }
        qhx_prompt_free(p);
        if (rc && rc != QHX_E_LIMIT) return rc;
    }
    qhx_session_reset(c->s);
    c->first = true;
    forget_turns(c);
    return qhx_cli_fail(err, QHX_E_LIMIT, "the message alone and room for its answer (%lld tokens) exceed the context",
                        (long long)answer_room(c));
}

/* Whether the turn's prompt (n ids) and room for the answer fit after what the session holds. */
static bool turn_fits(const chat *c, size_t n) {
    return qhx_session_n_past(c->s) + (int64_t)n + answer_room(c) <= c->ctx.limit;
}

/* One user turn: feed it, stream the answer. Returns an exit code >= 0 to stop, -1 to go on. */
static int turn(chat *c, const char *user, qhx_error *err) {
    qhx_prompt *p = NULL;
    qhx_run_out out;
    qhx_run_out_init(&out, &c->run, false, false);
    out.collect = true; /* printed and kept: the answer is part of the conversation's text */
    const bool had_images = c->n_images > 0 || c->video;
    qhx_status rc = turn_prompt(c, user, &p, err);
    for (int k = 0; k < c->n_images; k++) free(c->images[k]);
    c->n_images = 0;
    free(c->video);
    c->video = NULL;
    size_t n_turn = 0;
    if (!rc) qhx_prompt_ids(p, &n_turn);
    /* a message that would not fit: the context shift (not for images: the kept turns are text) */
    const bool shift = !c->no_shift && !had_images && !c->first && (rc == QHX_E_LIMIT || (!rc && !turn_fits(c, n_turn)));
    if (shift) {
        rc = shift_context(c, user, err);
    } else {
        if (!rc && !turn_fits(c, n_turn) && c->first) rc = QHX_OK; /* a first message: as much as fits */
        if (!rc) rc = feed_turn(c, p, err);
    }
    qhx_prompt_free(p);
    if (rc == QHX_E_ABORTED) { /* cut in the middle of a layer: the state cannot go on */
        qhx_session_reset(c->s);
        c->first = true;
        qhx_run_clear_interrupt();
        fprintf(stderr, "\nqhx chat: interrupted while reading the message; the conversation starts over\n");
        goto next;
    }
    if (rc == QHX_E_LIMIT) {
        context_full_message(c, err->msg);
        goto next;
    }
    if (rc) { /* a bad message (invalid UTF-8, a broken image): say so, the chat goes on */
        qhx_cli_runtime_error(CMD, err);
        goto next;
    }
    c->first = false;
    qhx_generate_stats st = {0};
    qhx_generate_params gp = {.max_tokens = c->run.n_new, .ignore_stop = c->run.ignore_eos,
                              .stop_at_turn_end = !c->run.ignore_eos, .on_token = on_token, .user = &out,
                              .stops = out.stops, .n_stops = (size_t)out.n_stops, .stop_ids = c->run.stop_ids,
                              .n_stop_ids = (size_t)c->run.n_stop_ids};
    int64_t room = qhx_session_n_ctx(c->s) - qhx_session_n_past(c->s) - 1;
    bool until_full = c->run.n_new < 0 || gp.max_tokens > room;
    if (until_full) gp.max_tokens = room;
    if (gp.max_tokens < 1) {
        context_full_message(c, "no room for an answer");
        goto next;
    }
    rc = qhx_session_generate(c->s, &gp, &st, err);
    printf("\n");
    if (!rc && !out.failed) remember_turn(c, user, out.text, out.n_text);
    if (out.lost || qhx_cli_stdout_flush()) { /* nobody reads the answers */
        qhx_run_out_free(&out);
        return qhx_cli_stdout_error(CMD);
    }
    bool stopped = qhx_run_interrupted(NULL);
    qhx_run_clear_interrupt();
    if (rc && rc != QHX_E_ABORTED) {
        qhx_cli_runtime_error(CMD, err);
        goto next;
    }
    const char *stop = qhx_run_stop_name(&st, &out, until_full, stopped);
    if (c->run.verbose || stopped) qhx_run_print_speed(CMD, c->load_s, &st, &out, stop, false);
    c->last = st;
    snprintf(c->last_stop, sizeof c->last_stop, "%s", stop);
    c->has_last = true;
    c->load_s = -1; /* said once, with the first answer */
next:
    qhx_run_out_free(&out);
    return -1;
}

/* ---- commands ------------------------------------------------------------------------------ */

static const char *const COMMAND_NAMES[] = {"/help", "/?", "/bye", "/exit", "/quit", "/clear", "/reset",
                                            "/save", "/load", "/image", "/video", "/system", "/set", "/stats"};

/* The argument of "/cmd ARG" (spaces around it dropped), or NULL when there is none. */
static const char *argument_of(char *line) {
    char *p = line + strcspn(line, " \t");
    while (*p == ' ' || *p == '\t') p++;
    if (!*p) return NULL;
    char *end = p + strlen(p);
    while (end > p && (end[-1] == ' ' || end[-1] == '\t')) *--end = '\0';
    return p;
}

static void save_or_load(chat *c, bool save, const char *path, qhx_error *err) {
    qhx_status rc = save ? qhx_session_save(c->s, path, err) : qhx_session_restore(c->s, path, err);
    if (rc) {
        qhx_cli_runtime_error(CMD, err);
        return;
    }
    if (!save) {
        c->first = qhx_session_n_past(c->s) == 0;
        forget_turns(c); /* the loaded state has no text turns: a shift then starts from the message */
    }
    fprintf(stderr, "(%s %s: %lld tokens)\n", save ? "saved" : "loaded", path, (long long)qhx_session_n_past(c->s));
}

static void set_image(chat *c, const char *path) {
    if (!qhx_model_takes_images(c->m)) {
        fprintf(stderr, "qhx chat: /image needs a model whose run plan takes images (host-op %s takes none)\n",
                qhx_model_host_op(c->m));
        return;
    }
    if (c->n_images == QHX_CLI_MAX_IMAGES) {
        fprintf(stderr, "qhx chat: /image: the next message already has %d images\n", QHX_CLI_MAX_IMAGES);
        return;
    }
    if (access(path, R_OK) != 0) {
        fprintf(stderr, "qhx chat: /image: %s: %s\n", path, strerror(errno));
        return;
    }
    char *copy = strdup(path);
    if (!copy) {
        fprintf(stderr, "qhx chat: /image: out of memory\n");
        return;
    }
    c->images[c->n_images++] = copy;
    if (c->n_images == 1) fprintf(stderr, "(the next message comes with %s)\n", path);
    else fprintf(stderr, "(the next message comes with %d images, %s last)\n", c->n_images, path);
}

static void set_video(chat *c, const char *path) {
    if (!qhx_model_takes_images(c->m)) {
        fprintf(stderr, "qhx chat: /video needs a model whose run plan takes images (host-op %s takes none)\n",
                qhx_model_host_op(c->m));
        return;
    }
    if (access(path, R_OK) != 0) {
        fprintf(stderr, "qhx chat: /video: %s: %s\n", path, strerror(errno));
        return;
    }
    char *copy = strdup(path);
    if (!copy) {
        fprintf(stderr, "qhx chat: /video: out of memory\n");
        return;
    }
    if (c->video) fprintf(stderr, "(one video per message: %s replaces %s)\n", path, c->video);
    else fprintf(stderr, "(the next message comes with the video %s)\n", path);
    free(c->video);
    c->video = copy;
}

/* A line starting with '/'. Returns 1 to quit, 0 to go on. */
/* /system [TEXT | -]: show, set or remove the system message; a new conversation starts with it. */
static void set_system(chat *c, const char *arg) {
    if (!arg) {
        fprintf(stderr, c->run.system ? "system: %s\n" : "(no system message)\n", c->run.system);
        return;
    }
    char *text = strcmp(arg, "-") ? strdup(arg) : NULL;
    if (strcmp(arg, "-") && !text) {
        fprintf(stderr, "qhx chat: out of memory\n");
        return;
    }
    free(c->system);
    c->system = text;
    c->run.system = text;
    qhx_session_reset(c->s);
    c->first = true;
    forget_turns(c);
    fprintf(stderr, text ? "(system message set; new conversation)\n" : "(system message removed; new conversation)\n");
}

/* /set NAME VALUE: one sampling parameter, from the next answer on; /set alone lists them. */
static void set_sampling(chat *c, const char *arg, qhx_error *err) {
    qhx_sample_params p = c->sampling;
    if (!arg) {
        fprintf(stderr, "temperature %g, top_k %d, top_p %g, min_p %g, repeat_penalty %g, presence_penalty %g, "
                        "frequency_penalty %g, seed %llu\n", p.temperature, p.top_k, p.top_p, p.min_p, p.repeat_penalty,
                p.presence_penalty, p.frequency_penalty, (unsigned long long)p.seed);
        return;
    }
    char name[32];
    snprintf(name, sizeof name, "%.*s", (int)strcspn(arg, " \t"), arg);
    const char *v = arg + strcspn(arg, " \t");
    while (*v == ' ' || *v == '\t') v++;
    static const struct { const char *name; double lo, hi; } R[] = {
        {"temperature", 0, 100}, {"top_k", 0, 1e9}, {"top_p", 0, 1}, {"min_p", 0, 1}, {"repeat_penalty", 0, 100},
        {"presence_penalty", -100, 100}, {"frequency_penalty", -100, 100}, {"seed", 0, 1.8e19},
    };
    size_t k = 0;
    while (k < sizeof R / sizeof R[0] && strcmp(R[k].name, name)) k++;
    double d;
    if (k == sizeof R / sizeof R[0]) {
        fprintf(stderr, "qhx chat: /set: '%s' is not one of temperature, top_k, top_p, min_p, repeat_penalty, "
                        "presence_penalty, frequency_penalty, seed\n", name);
        return;
    }
    if (!*v || qhx_cli_parse_f64(v, R[k].lo, R[k].hi, &d)) {
        fprintf(stderr, "qhx chat: /set %s: '%s' is not a number in [%g, %g]\n", name, v, R[k].lo, R[k].hi);
        return;
    }
    switch (k) {
    case 0: p.temperature = (float)d; break;
    case 1: p.top_k = (int32_t)d; break;
    case 2: p.top_p = (float)d; break;
    case 3: p.min_p = (float)d; break;
    case 4: p.repeat_penalty = (float)d; break;
    case 5: p.presence_penalty = (float)d; break;
    case 6: p.frequency_penalty = (float)d; break;
    default: p.seed = (uint64_t)d; break;
    }
    if (qhx_session_set_sampling(c->s, &p, err)) {
        qhx_cli_runtime_error(CMD, err);
        return;
    }
    c->sampling = p;
    fprintf(stderr, "(%s %s from the next answer on)\n", name, v);
}

/* /stats: the last answer's figures. */
static void print_stats(const chat *c) {
    if (!c->has_last) {
        fprintf(stderr, "(no answer yet)\n");
        return;
    }
    const qhx_generate_stats *s = &c->last;
    fprintf(stderr, "qhx chat: last answer: prompt %lld tokens (%.1f tok/s), generated %lld tokens (%.1f tok/s), stop: %s\n",
            (long long)s->n_prompt, s->prefill_ms > 0 ? 1e3 * (double)s->n_prompt / s->prefill_ms : 0.0,
            (long long)s->n_generated, s->decode_ms > 0 ? 1e3 * (double)s->n_generated / s->decode_ms : 0.0, c->last_stop);
}

static int command(chat *c, char *line, qhx_error *err) {
    char name[32];
    snprintf(name, sizeof name, "%.*s", (int)strcspn(line, " \t"), line);
    const char *arg = argument_of(line);
    if (!strcmp(name, "/bye") || !strcmp(name, "/exit") || !strcmp(name, "/quit")) return 1;
    if (!strcmp(name, "/help") || !strcmp(name, "/?")) fputs(COMMANDS_HELP, stderr);
    else if (!strcmp(name, "/clear") || !strcmp(name, "/reset")) {
        qhx_session_reset(c->s);
        c->first = true;
        forget_turns(c);
        fprintf(stderr, "(new conversation)\n");
    } else if (!strcmp(name, "/system")) {
        set_system(c, arg);
    } else if (!strcmp(name, "/set")) {
        set_sampling(c, arg, err);
    } else if (!strcmp(name, "/stats")) {
        print_stats(c);
    } else if (!strcmp(name, "/save") || !strcmp(name, "/load") || !strcmp(name, "/image") || !strcmp(name, "/video")) {
        if (!arg) fprintf(stderr, "qhx chat: usage: %s FILE\n", name);
        else if (!strcmp(name, "/image")) set_image(c, arg);
        else if (!strcmp(name, "/video")) set_video(c, arg);
        else save_or_load(c, name[1] == 's', arg, err);
    } else {
        const char *near = qhx_cli_closest(name, COMMAND_NAMES, sizeof COMMAND_NAMES / sizeof COMMAND_NAMES[0]);
        if (near) fprintf(stderr, "qhx chat: unknown command '%s' (did you mean %s? /help lists them)\n", name, near);
        else fprintf(stderr, "qhx chat: unknown command '%s' (/help lists them)\n", name);
    }
    return 0;
}

/* ---- reading lines ------------------------------------------------------------------------- */

static const char *prompt_of(EditLine *el) {
    (void)el;
    return "> ";
}

/* One byte of stdin within `ms` milliseconds: 1, 0 at the end of input or when none came, -1 on
 * an error or Ctrl-C. */
static int read_byte(char *ch, int ms) {
    for (;;) {
        if (qhx_run_interrupted(NULL)) return -1;
        struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
        int r = poll(&p, 1, ms < 0 || ms > 100 ? 100 : ms);
        if (r < 0 && errno != EINTR) return -1;
        if (r <= 0) {
            if (ms >= 0 && (ms -= 100) < 0) return 0;
            continue;
        }
        ssize_t n = read(STDIN_FILENO, ch, 1);
        if (n == 1 || n == 0) return (int)n;
        if (errno != EINTR && errno != EAGAIN) return -1;
    }
}

/* Bracketed paste (the terminal wraps pasted text in ESC[200~ ... ESC[201~ once asked to with
 * ESC[?2004h): the pasted text is gathered here, shown, and ends the line as one message
 * (read_line appends it), so a pasted block of lines is one turn, not one turn per line. The
 * terminal's own text is one reader's: these are the process's one chat. */
static char *pasted;      /* the text of a paste that ended the line being read (malloc), or NULL */
static size_t n_pasted;
static char pending[8];   /* bytes read ahead that were not a paste mark, handed out first */
static int n_pending, at_pending;

static bool paste_add(char ch, size_t *cap) {
    if (n_pasted + 2 > *cap) {
        size_t nc = *cap ? 2 * *cap : 256;
        char *p = realloc(pasted, nc);
        if (!p) return false;
        pasted = p, *cap = nc;
    }
    pasted[n_pasted++] = ch == '\r' ? '\n' : ch;
    pasted[n_pasted] = '\0';
    return true;
}

/* After ESC: "[200~" starts a paste (read to "ESC[201~" into `pasted`, 1 returned), anything
 * else is kept in `pending` (0 returned). */
static int take_paste(void) {
    static const char mark[] = "[200~", end[] = "\x1b[201~";
    n_pending = at_pending = 0;
    for (int i = 0; i < 5; i++) {
        char ch;
        if (read_byte(&ch, 50) != 1) return 0;
        pending[n_pending++] = ch;
        if (ch != mark[i]) return 0;
    }
    n_pending = 0;
    size_t cap = 0, matched = 0;
    n_pasted = 0;
    for (;;) {
        char ch;
        if (read_byte(&ch, -1) != 1) break;
        if (ch == end[matched]) {
            if (++matched == sizeof end - 1) break;
            continue;
        }
        for (size_t k = 0; k < matched; k++) paste_add(end[k], &cap);
        matched = ch == end[0];
        if (!matched) paste_add(ch, &cap);
    }
    if (pasted) {
        fputs(pasted, stdout); /* libedit did not see it: show it */
        fflush(stdout);
    }
    return 1;
}

/* libedit's character reader, so that Ctrl-C at the prompt ends the read instead of being
 * retried. The flag is checked before every wait and the wait is a poll of at most 0.1 s: a
 * Ctrl-C that lands just before the process blocks (no EINTR then) is still seen, within 0.1 s.
 * A paste ends the line (read_line adds its text). */
static int read_char(EditLine *el, wchar_t *out) {
    (void)el;
    if (at_pending < n_pending) {
        *out = (wchar_t)(unsigned char)pending[at_pending++];
        return 1;
    }
    for (;;) {
        if (qhx_run_interrupted(NULL)) return -1;
        struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
        int r = poll(&p, 1, 100);
        if (r < 0 && errno != EINTR) return -1;
        if (r <= 0) continue;
        char ch;
        ssize_t n = read(STDIN_FILENO, &ch, 1);
        if (n == 1) {
            if (ch == '\x1b' && take_paste()) ch = '\n'; /* the paste is the rest of the line */
            else if (ch == '\x1b' && n_pending) at_pending = 0;
            *out = (wchar_t)(unsigned char)ch;
            return 1;
        }
        if (n == 0) return 0;
        if (errno != EINTR && errno != EAGAIN) return -1;
    }
}

/* The history file: $XDG_STATE_HOME/qhx/chat_history, else ~/.local/state/qhx/chat_history
 * (folders made 0700, the file 0600: it holds what was said); "" when there is no home. */
static void history_file(chat *c) {
    const char *state = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    char dir[900];
    c->history_path[0] = '\0';
    if (state && state[0] == '/') snprintf(dir, sizeof dir, "%s/qhx", state);
    else if (home && home[0] == '/') snprintf(dir, sizeof dir, "%s/.local/state/qhx", home);
    else return;
    for (char *p = dir + 1; *p; p++) /* mkdir -p */
        if (*p == '/') {
            *p = '\0';
            mkdir(dir, 0700);
            *p = '/';
        }
    if (mkdir(dir, 0700) && errno != EEXIST) return;
    snprintf(c->history_path, sizeof c->history_path, "%s/chat_history", dir);
    int fd = open(c->history_path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) c->history_path[0] = '\0';
    else close(fd);
}

static void editor_open(chat *c) {
    HistEvent ev;
    c->el = el_init("qhx", stdin, stdout, stderr);
    c->hist = history_init();
    if (!c->el || !c->hist) return;
    history(c->hist, &ev, H_SETSIZE, 1000);
    history_file(c);
    if (c->history_path[0]) history(c->hist, &ev, H_LOAD, c->history_path);
    fputs("\x1b[?2004h", stdout); /* bracketed paste on */
    fflush(stdout);
    el_set(c->el, EL_EDITOR, "emacs");
    el_set(c->el, EL_PROMPT, prompt_of);
    el_set(c->el, EL_HIST, history, c->hist);
    el_set(c->el, EL_GETCFN, read_char);
    el_source(c->el, NULL); /* ~/.editrc, as other libedit programs */
}

static void editor_close(chat *c) {
    if (c->el) {
        fputs("\x1b[?2004l", stdout); /* bracketed paste off */
        fflush(stdout);
        el_end(c->el);
    }
    if (c->hist) history_end(c->hist);
}

/* The next line, without its newline (owned: free). NULL at the end of input; *interrupted is
 * set when Ctrl-C ended the read. */
static char *read_line(chat *c, bool *was_interrupted) {
    *was_interrupted = false;
    if (c->el) {
        int count = 0;
        const char *l = el_gets(c->el, &count);
        if (!l || count <= 0) {
            *was_interrupted = qhx_run_interrupted(NULL);
            return NULL;
        }
        size_t n = strlen(l);
        while (n && (l[n - 1] == '\n' || l[n - 1] == '\r')) n--;
        char *s = strndup(l, n);
        if (s && pasted) { /* typed text, then the pasted block, as one line of the message */
            char *joined = malloc(n + n_pasted + 1);
            if (joined) {
                memcpy(joined, s, n);
                memcpy(joined + n, pasted, n_pasted + 1);
                size_t len = n + n_pasted;
                while (len > n && joined[len - 1] == '\n') joined[--len] = '\0'; /* the paste's last newline */
            }
            free(s);
            s = joined;
            n = s ? strlen(s) : 0;
        }
        free(pasted);
        pasted = NULL;
        n_pasted = 0;
        if (s && n) {
            HistEvent ev;
            history(c->hist, &ev, H_ENTER, s);
            if (c->history_path[0]) history(c->hist, &ev, H_SAVE, c->history_path);
        }
        return s;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, stdin);
    if (n < 0) {
        free(line);
        *was_interrupted = qhx_run_interrupted(NULL);
        return NULL;
    }
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
    return line;
}

/* Append a line to a message being gathered; false when out of memory. */
static bool append(char **msg, const char *line, size_t len) {
    size_t have = *msg ? strlen(*msg) : 0;
    char *m = realloc(*msg, have + len + 2);
    if (!m) return false;
    if (have) m[have++] = '\n';
    memcpy(m + have, line, len);
    m[have + len] = '\0';
    *msg = m;
    return true;
}

/* A whole message: one line, lines joined by a trailing '\', or """ ... """ (ollama's form).
 * NULL at the end of input or on Ctrl-C (*was_interrupted). */
static char *read_message(chat *c, bool *was_interrupted) {
    char *line = read_line(c, was_interrupted);
    if (!line) return NULL;
    char *msg = NULL;
    bool quoted = !strncmp(line, "\"\"\"", 3);
    const char *part = quoted ? line + 3 : line;
    for (;;) {
        size_t len = strlen(part);
        bool more;
        if (quoted) {
            bool closes = len >= 3 && !strcmp(part + len - 3, "\"\"\"");
            if (closes) len -= 3;
            more = !closes;
        } else {
            more = len && part[len - 1] == '\\';
            if (more) len--;
        }
        if (!append(&msg, part, len)) more = false;
        free(line);
        if (!more) return msg;
        if (!(line = read_line(c, was_interrupted))) return msg; /* the input ended inside it */
        part = line;
    }
}

/* ---- the chat ------------------------------------------------------------------------------ */

int qhx_chat_parse_args(int argc, char **argv, qhx_run_opts *o) {
    qhx_run_opts_init(o);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return QHX_EXIT_OK;
        }
        if (!strcmp(argv[i], "--no-context-shift")) { /* llama.cpp's spelling */
            o->no_context_shift = true;
            continue;
        }
        int r = qhx_run_parse_opt(CMD, argc, argv, &i, o);
        if (r > 1) return r;
        if (r == 0) return qhx_cli_unknown_option(CMD, argv[i], QHX_RUN_OPT_NAMES, QHX_RUN_N_OPT_NAMES);
    }
    if (!o->model) return qhx_cli_usage_error(CMD, "missing -m MODEL");
    int nr = qhx_run_check_needs(CMD, o, NULL, 0); /* chat formats every turn: --system, --think act */
    if (nr) return nr;
    if (o->n_new == 0) o->n_new = 512;
    return -1;
}

/* One line on stderr as the chat opens: the model, the context, the device, where help is. */
static void banner(const chat *c) {
    fprintf(stderr, "qhx chat: %s (%s), context %lld tokens, %s%s; /help for commands, /bye to leave\n",
            c->run.model, qhx_model_family_title(c->m), (long long)c->ctx.limit, c->run.device ? c->run.device : "cpu",
            qhx_model_takes_images(c->m) ? ", images with /image" : "");
}

static int open_chat(chat *c, qhx_error *err) {
    /* vision: a checkpoint folder with a tower opens for images, so /image works */
    int rc = qhx_run_open_model(CMD, &c->run, 1, &c->m, &c->load_s, err);
    if (rc >= 0) return rc;
    if (!qhx_model_has_tokenizer(c->m)) {
        qhx_cli_fail(err, QHX_E_ARG, "%s: the model has no tokenizer.json", c->run.model);
        return qhx_cli_runtime_error(CMD, err);
    }
    if (qhx_run_context_of(c->m, &c->run, &c->ctx, err)) return qhx_cli_runtime_error(CMD, err);
    if ((rc = qhx_run_chat_template_check(CMD, c->m)) >= 0) return rc;
    if (c->ctx.by_memory)
        fprintf(stderr, "qhx chat: context limited to %lld tokens by the free memory (the model was trained for %lld)\n",
                (long long)c->ctx.limit, (long long)c->ctx.trained);
    qhx_session_params sp = qhx_session_default_params(c->m);
    sp.n_ctx = c->ctx.limit;
    qhx_run_apply_sampling(&c->run, &sp);
    if (c->run.verbose)
        fprintf(stderr, "qhx: context %lld tokens (trained %lld), %s, seed %llu\n", (long long)c->ctx.limit,
                (long long)c->ctx.trained, qhx_run_samples(&sp) ? "sampling" : "greedy",
                (unsigned long long)sp.sampling.seed);
    qhx_run_catch_sigint();
    sp.abort_cb = abort_feed;
    sp.abort_user = c;
    if (qhx_session_create(c->m, &sp, &c->s, err)) return qhx_cli_runtime_error(CMD, err);
    c->sampling = sp.sampling;
    if (!c->run.quiet) banner(c);
    return -1;
}

static int loop(chat *c, qhx_error *err) {
    int ctrl_c = 0; /* Ctrl-C at the prompt in a row */
    for (;;) {
        bool was_interrupted;
        if (!c->el && isatty(STDIN_FILENO)) {
            fprintf(stderr, "> ");
            fflush(stderr);
        }
        char *msg = read_message(c, &was_interrupted);
        if (!msg && was_interrupted) {
            qhx_run_clear_interrupt();
            if (++ctrl_c >= 2) return QHX_EXIT_INTERRUPTED;
            fprintf(stderr, "\n(Ctrl-C again, Ctrl-D or /bye to quit)\n");
            continue;
        }
        if (!msg) return QHX_EXIT_OK;
        ctrl_c = 0;
        int quit = 0;
        int code = -1;
        if (msg[0] == '/') quit = command(c, msg, err);
        else if (msg[0]) code = turn(c, msg, err);
        free(msg);
        if (code >= 0) return code; /* stdout is gone */
        if (quit) return QHX_EXIT_OK;
    }
}

int qhx_cmd_chat(int argc, char **argv) {
    chat c;
    memset(&c, 0, sizeof c);
    int rc = qhx_chat_parse_args(argc, argv, &c.run);
    if (rc >= 0) return rc;
    qhx_error err = {0};
    rc = open_chat(&c, &err);
    if (rc < 0) {
        c.first = true;
        c.no_shift = c.run.no_context_shift;
        if (isatty(STDIN_FILENO)) editor_open(&c);
        rc = loop(&c, &err);
        editor_close(&c);
    }
    for (int k = 0; k < c.n_images; k++) free(c.images[k]);
    free(c.system);
    free(c.video);
    forget_turns(&c);
    free(c.said);
    qhx_session_free(c.s);
    qhx_model_free(c.m);
    return rc;
}
