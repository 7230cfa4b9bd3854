/* output.c: what a job's generated tokens become. The text comes final from the job's decoder
 * (the library's generation step has matched the stop strings on it and held back what could
 * still start one) and goes through two stages:
 *   1. the router: before the end of the think block (when the prompt opened one) the text is
 *      reasoning_content; after it, content; from the start of a tool call on (when tools were
 *      offered) it is kept whole and parsed into tool_calls at the end (blocks of parameters or
 *      JSON objects; text with no call that parses goes out as content); the markers are the
 *      model's chat format's (qhx_model_chat_markers);
 *   2. the response: SSE chunks as text is routed (streaming) or one body at the end.
 * Also here: jobs and buffers, the error JSON. */
#include "serve.h"


#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ==== buffers, jobs ========================================================================== */

int srv_buf_put(srv_buf *b, const void *p, size_t n) {
    if (n == 0) return 0;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) return -1;
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = '\0';
    return 0;
}

int srv_buf_puts(srv_buf *b, const char *s) { return srv_buf_put(b, s, strlen(s)); }

void srv_buf_free(srv_buf *b) {
    free(b->p);
    *b = (srv_buf){0};
}

double srv_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* RFC 3339 with microseconds, as ollama writes its times. */
void srv_ollama_time(double t, char *out, size_t n) {
    time_t s = (time_t)t;
    struct tm tm;
    gmtime_r(&s, &tm);
    char day[32];
    strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, n, "%s.%06dZ", day, (int)((t - (double)s) * 1e6));
}

srv_job *srv_job_new(void) {
    srv_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    j->refs = 1;
    j->max_tokens = -1;
    atomic_init(&j->cancelled, 0);
    return j;
}

void srv_job_ref(srv_job *j) {
    pthread_mutex_lock(&j->mu);
    j->refs++;
    pthread_mutex_unlock(&j->mu);
}

void srv_job_unref(srv_job *j) {
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    int left = --j->refs;
    pthread_mutex_unlock(&j->mu);
    if (left) return;
    qhx_prompt_free(j->prompt);
    for (size_t i = 0; i < j->n_stops; i++) free(j->stops[i]);
    free(j->stops);
    free(j->stop_ids);
    free(j->answer_prefix);
    qhx_grammar_free(j->grammar);
    srv_buf_free(&j->sse);
    srv_buf_free(&j->echo_text);
    srv_buf_free(&j->content);
    srv_buf_free(&j->reasoning);
    json_decref(j->token_logprobs);
    json_decref(j->tool_calls);
    for (size_t i = 0; i < j->n_embed; i++) free(j->embed_ids[i]);
    free(j->embed_ids);
    free(j->embed_n);
    free(j->embd);
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

void srv_job_finish(srv_job *j, int status, const char *msg) {
    pthread_mutex_lock(&j->mu);
    j->http_status = status;
    if (msg) snprintf(j->error, sizeof j->error, "%s", msg);
    j->done = true;
    j->t_done = srv_now();
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

/* ==== errors ================================================================================= */

static const char *error_type(int status) {
    switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429:
    case 503: return "server_overloaded";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
    }
}

/* Text for a JSON string: invalid UTF-8 (a message quoting the input) becomes '?'. */
static json_t *safe_string(const char *s) {
    json_t *v = json_string(s);
    if (v) return v;
    size_t n = strlen(s);
    char *c = malloc(n + 1);
    if (!c) return json_string("");
    for (size_t i = 0; i <= n; i++) c[i] = (unsigned char)s[i] >= 0x80 ? '?' : s[i];
    v = json_string(c);
    free(c);
    return v ? v : json_string("");
}

char *srv_error_json(int status, const char *msg) {
    json_t *e = json_pack("{s:{s:o,s:s,s:n,s:i}}", "error", "message", safe_string(msg), "type", error_type(status),
                          "param", "code", status);
    char *t = e ? json_dumps(e, JSON_COMPACT) : NULL;
    json_decref(e);
    return t;
}

int srv_http_status(qhx_status rc) {
    switch (rc) {
    case QHX_OK: return 200;
    case QHX_E_ARG:
    case QHX_E_FORMAT:
    case QHX_E_UNSUPPORTED: return 400;
    case QHX_E_LIMIT: return 413;
    case QHX_E_NOMEM: return 503;
    case QHX_E_ABORTED: return 499;
    default: return 500; /* QHX_E_IO (the server's files), QHX_E_INTERNAL */
    }
}

/* ==== tool calls ============================================================================= */

static const char *find(const char *p, const char *end, const char *needle) {
    size_t n = strlen(needle);
    for (; p && p + n <= end; p++)
        if (*p == needle[0] && !memcmp(p, needle, n)) return p;
    return NULL;
}

/* A parameter value as the model wrote it: JSON when it reads as JSON (numbers, objects,
 * lists, true/false/null), Python's True/False/None as their JSON, else the text itself. */
static json_t *param_value(const char *p, size_t n) {
    if (n && p[0] == '\n') p++, n--;
    if (n && p[n - 1] == '\n') n--;
    if (n == 4 && !memcmp(p, "True", 4)) return json_true();
    if (n == 5 && !memcmp(p, "False", 5)) return json_false();
    if (n == 4 && !memcmp(p, "None", 4)) return json_null();
    json_error_t je;
    json_t *v = json_loadb(p, n, JSON_DECODE_ANY, &je);
    if (v && !json_is_string(v)) return v;
    json_decref(v);
    v = json_stringn(p, n);
    return v ? v : json_string("");
}

/* One block call (the format's tool_fn_open NAME '>', its parameter blocks) into {"name",
 * "arguments" (JSON text)}; NULL when the format writes no block calls. */
static json_t *parse_function(const qhx_chat_markers *mk, const char *p, const char *end) {
    if (!mk->tool_fn_open || !mk->tool_param_open || !mk->tool_param_close) return NULL;
    const size_t n_open = strlen(mk->tool_param_open), n_close = strlen(mk->tool_param_close);
    const char *f = find(p, end, mk->tool_fn_open);
    if (!f) return NULL;
    f += strlen(mk->tool_fn_open);
    const char *gt = memchr(f, '>', (size_t)(end - f));
    if (!gt || gt == f) return NULL;
    json_t *args = json_object();
    const char *q = gt + 1;
    for (;;) {
        const char *a = find(q, end, mk->tool_param_open);
        if (!a) break;
        a += n_open;
        const char *agt = memchr(a, '>', (size_t)(end - a));
        if (!agt) break;
        const char *close = find(agt + 1, end, mk->tool_param_close);
        const char *vend = close ? close : end;
        char *key = malloc((size_t)(agt - a) + 1);
        if (!key) break;
        memcpy(key, a, (size_t)(agt - a));
        key[agt - a] = '\0';
        json_object_set_new(args, key, param_value(agt + 1, (size_t)(vend - agt - 1)));
        free(key);
        if (!close) break;
        q = close + n_close;
    }
    char *text = json_dumps(args, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(args);
    json_t *fn = json_object(), *name = json_stringn(f, (size_t)(gt - f)); /* NULL: not UTF-8 */
    json_object_set_new(fn, "name", name ? name : json_string("?"));
    json_object_set_new(fn, "arguments", json_string(text ? text : "{}"));
    free(text);
    return fn;
}

/* A call written as a JSON object (Qwen3-VL): {"name": NAME, "arguments": {...}} with nothing
 * but whitespace around it, into {"name", "arguments" (JSON text)}; NULL when it is not one. */
static json_t *parse_json_call(const char *p, const char *end) {
    json_error_t je;
    json_t *obj = json_loadb(p, (size_t)(end - p), 0, &je); /* whitespace around it is allowed */
    json_t *name = json_object_get(obj, "name"), *args = json_object_get(obj, "arguments");
    json_t *fn = NULL;
    if (json_is_string(name) && json_string_length(name) &&
        (json_is_object(args) || json_is_string(args) || !args)) {
        /* arguments written as a JSON text (some models do) are passed on as that text */
        char *text = json_is_object(args) ? json_dumps(args, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        const char *a = text ? text : json_is_string(args) ? json_string_value(args) : "{}";
        fn = json_pack("{s:O,s:s}", "name", name, "arguments", a);
        free(text);
    }
    json_decref(obj);
    return fn;
}

/* The calls between the chat format's tool_open and tool_close markers. */
static json_t *parse_tool_calls(const qhx_chat_markers *mk, const char *text, size_t len, const char *id_seed) {
    const char *p = text, *end = text + len;
    if (!mk->tool_open || !mk->tool_close) return NULL;
    const size_t n_open = strlen(mk->tool_open), n_close = strlen(mk->tool_close);
    json_t *calls = json_array();
    int k = 0;
    while ((p = find(p, end, mk->tool_open))) {
        p += n_open;
        const char *close = find(p, end, mk->tool_close);
        const char *bend = close ? close : end;
        const char *q = p;
        while (q < bend && (*q == ' ' || *q == '\n' || *q == '\r' || *q == '\t')) q++;
        json_t *fn = q < bend && *q == '{' ? parse_json_call(q, bend) : parse_function(mk, p, bend);
        if (fn) {
            char id[96];
            snprintf(id, sizeof id, "call_%s_%d", id_seed, k++);
            json_array_append_new(calls, json_pack("{s:s,s:s,s:o}", "id", id, "type", "function", "function", fn));
        }
        if (!close) break;
        p = close + n_close;
    }
    if (json_array_size(calls) == 0) {
        json_decref(calls);
        return NULL;
    }
    return calls;
}

json_t *srv_parse_tool_calls(const char *text, size_t len, const char *id_seed) {
    qhx_chat_markers mk;
    qhx_model_chat_markers(NULL, &mk);
    return parse_tool_calls(&mk, text, len, id_seed);
}

/* ==== the pipeline =========================================================================== */

enum { MODE_REASONING, MODE_CONTENT, MODE_TOOLS };

struct srv_output {
    const qhx_model *m;
    qhx_chat_markers mk; /* the model's chat format: where reasoning ends, where a call starts */
    srv_job *j;
    int mode;
    bool strip_lead;   /* content right after the think block: its leading newlines are the template's */
    srv_buf pend;      /* routed text not yet given to a channel (could start a marker) */
    srv_buf tools;     /* MODE_TOOLS: the tool-call text */
    srv_buf d_content, d_reasoning; /* streaming: this chunk's deltas */
    json_t *lp_chunk;  /* streaming: logprob entries of this chunk */
    bool sent_role;
    int64_t text_offset; /* completions logprobs: offset of the next token's text */
};

srv_output *srv_output_new(const qhx_model *m, srv_job *j) {
    srv_output *o = calloc(1, sizeof *o);
    if (!o) return NULL;
    o->m = m;
    qhx_model_chat_markers(m, &o->mk);
    o->j = j;
    o->mode = j->kind == SRV_CHAT && j->thinking ? MODE_REASONING : MODE_CONTENT;
    if (j->logprobs && !j->stream) j->token_logprobs = json_array();
    /* echo: the prompt's text opens the answer (the first chunk of a stream), before and
       outside of the stop strings, which look at generated text only */
    if (j->echo_text.n && srv_buf_put(j->stream ? &o->d_content : &j->content, j->echo_text.p, j->echo_text.n)) {
        srv_output_free(o);
        return NULL;
    }
    /* a forced tool call: its start is in the prompt, and the answer is read as its rest */
    if (j->answer_prefix) {
        o->mode = MODE_TOOLS;
        if (srv_buf_puts(&o->tools, j->answer_prefix)) {
            srv_output_free(o);
            return NULL;
        }
    }
    return o;
}

void srv_output_free(srv_output *o) {
    if (!o) return;
    srv_buf_free(&o->pend);
    srv_buf_free(&o->tools);
    srv_buf_free(&o->d_content);
    srv_buf_free(&o->d_reasoning);
    json_decref(o->lp_chunk);
    free(o);
}

/* Text to a channel: the job's body (non-streaming) or this chunk's delta. */
static int give(srv_output *o, int mode, const char *p, size_t n) {
    if (!n) return 0;
    if (mode == MODE_REASONING) return srv_buf_put(o->j->stream ? &o->d_reasoning : &o->j->reasoning, p, n);
    return srv_buf_put(o->j->stream ? &o->d_content : &o->j->content, p, n);
}

/* Length of the longest suffix of s[0..n) that is a proper prefix of marker. */
static size_t partial_suffix(const char *s, size_t n, const char *marker) {
    size_t m = strlen(marker);
    for (size_t k = m - 1 < n ? m - 1 : n; k > 0; k--)
        if (!memcmp(s + n - k, marker, k)) return k;
    return 0;
}

static int drop_front(srv_buf *b, size_t k) {
    if (!k) return 0; /* also: an empty buffer may have no storage yet (memmove of NULL is UB) */
    memmove(b->p, b->p + k, b->n - k);
    b->n -= k;
    if (b->p) b->p[b->n] = '\0';
    return 0;
}

/* Route what pend holds; at_end: nothing more comes, give everything. */
static int route(srv_output *o, bool at_end) {
    srv_buf *b = &o->pend;
    for (;;) {
        if (o->mode == MODE_TOOLS) {
            if (srv_buf_put(&o->tools, b->p, b->n)) return -1;
            b->n = 0;
            return 0;
        }
        if (o->mode == MODE_CONTENT && o->strip_lead) {
            size_t k = 0;
            while (k < b->n && b->p[k] == '\n') k++;
            drop_front(b, k);
            if (b->n == 0 && !at_end) return 0;
            o->strip_lead = false;
        }
        const char *marker = o->mode == MODE_REASONING ? o->mk.think_close : o->j->tools ? o->mk.tool_open : NULL;
        if (!marker) {
            if (give(o, o->mode, b->p, b->n)) return -1;
            b->n = 0;
            return 0;
        }
        const char *at = b->n ? find(b->p, b->p + b->n, marker) : NULL;
        if (!at) {
            size_t keep = at_end ? 0 : partial_suffix(b->p, b->n, marker);
            if (give(o, o->mode, b->p, b->n - keep)) return -1;
            drop_front(b, b->n - keep);
            return 0;
        }
        size_t before = (size_t)(at - b->p);
        if (give(o, o->mode, b->p, before)) return -1;
        if (o->mode == MODE_REASONING) {
            drop_front(b, before + strlen(marker));
            o->mode = MODE_CONTENT;
            o->strip_lead = true;
        } else {
            drop_front(b, before);
            o->mode = MODE_TOOLS;
        }
    }
}

/* Final text (past the decoder's stop strings) into the router. */
static int pass_on(srv_output *o, const char *p, size_t n, bool at_end) {
    if (n && srv_buf_put(&o->pend, p, n)) return -1;
    return route(o, at_end);
}

/* ---- logprobs ---------------------------------------------------------------------------- */

static json_t *token_string(const qhx_model *m, qhx_token t) {
    char buf[256];
    size_t len = 0;
    if (qhx_detokenize(m, &t, 1, buf, sizeof buf, &len, NULL)) return json_string("");
    json_t *s = json_stringn(buf, len);
    return s ? s : json_string("\xef\xbf\xbd");
}

static json_t *bytes_of(json_t *s) {
    json_t *a = json_array();
    const unsigned char *p = (const unsigned char *)json_string_value(s);
    for (size_t i = 0; i < json_string_length(s); i++) json_array_append_new(a, json_integer(p[i]));
    return a;
}

/* {"token", "logprob", "bytes", "top_logprobs": [...]} for token t of the row logits: log-softmax
 * of the model's logits (before penalties and temperature, as the OpenAI API reports them). */
static json_t *logprob_entry(const qhx_model *m, const float *logits, qhx_token t, int top) {
    int64_t nv = qhx_model_n_vocab(m);
    float mx = -INFINITY;
    for (int64_t i = 0; i < nv; i++)
        if (logits[i] > mx) mx = logits[i];
    double sum = 0;
    for (int64_t i = 0; i < nv; i++) sum += exp((double)logits[i] - mx);
    double lse = mx + log(sum);
    json_t *tok = token_string(m, t);
    json_t *e = json_pack("{s:o,s:f,s:o}", "token", tok, "logprob", (double)logits[t] - lse, "bytes", bytes_of(tok));
    json_t *tops = json_array();
    int32_t best[64];
    int nb = 0;
    for (int k = 0; k < top && k < 64; k++) { /* k passes: top is at most a few tens */
        int32_t arg = -1;
        for (int64_t i = 0; i < nv; i++) {
            bool taken = false;
            for (int q = 0; q < nb && !taken; q++) taken = best[q] == i;
            if (!taken && (arg < 0 || logits[i] > logits[arg])) arg = (int32_t)i;
        }
        if (arg < 0) break;
        best[nb++] = arg;
        json_t *ts = token_string(m, arg);
        json_array_append_new(tops, json_pack("{s:o,s:f,s:o}", "token", ts, "logprob", (double)logits[arg] - lse,
                                              "bytes", bytes_of(ts)));
    }
    json_object_set_new(e, "top_logprobs", tops);
    return e;
}

/* The completions endpoint's logprobs shape from entries. */
static json_t *completion_logprobs(json_t *entries, int64_t *offset) {
    json_t *toks = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    size_t i;
    json_t *e;
    json_array_foreach(entries, i, e) {
        json_t *tok = json_object_get(e, "token");
        json_array_append(toks, tok);
        json_array_append(lps, json_object_get(e, "logprob"));
        json_t *d = json_object();
        size_t k;
        json_t *t;
        json_array_foreach(json_object_get(e, "top_logprobs"), k, t)
            json_object_set(d, json_string_value(json_object_get(t, "token")), json_object_get(t, "logprob"));
        json_array_append_new(tops, d);
        json_array_append_new(offs, json_integer(*offset));
        *offset += (int64_t)json_string_length(tok);
    }
    return json_pack("{s:o,s:o,s:o,s:o}", "tokens", toks, "token_logprobs", lps, "top_logprobs", tops, "text_offset", offs);
}

/* ---- streaming chunks -------------------------------------------------------------------- */

static json_t *usage_json(const srv_job *j) {
    json_t *u = json_pack("{s:I,s:I,s:I,s:{s:I}}", "prompt_tokens", (json_int_t)j->n_prompt, "completion_tokens",
                          (json_int_t)j->n_generated, "total_tokens", (json_int_t)(j->n_prompt + j->n_generated),
                          "prompt_tokens_details", "cached_tokens", (json_int_t)j->n_cached);
    if (u && j->truncated) { /* the context shift dropped the oldest turns */
        json_object_set_new(u, "truncated", json_true());
        json_object_set_new(u, "dropped_messages", json_integer(j->dropped));
    }
    if (u && j->video.fitted) { /* the videos were sampled with fewer frames (pixels) to fit */
        json_object_set_new(u, "video_fitted", json_true());
        json_object_set_new(u, "video_frames", json_integer(j->video.frames));
        json_object_set_new(u, "video_frames_asked", json_integer(j->video.frames_asked));
        if (j->video.max_pixels > 0) json_object_set_new(u, "video_max_pixels", json_integer(j->video.max_pixels));
    }
    return u;
}

/* ---- llama-server's /completion shapes ----------------------------------------------------- */

static const char *llama_stop_type(const srv_job *j) {
    return j->finish == SRV_FINISH_LENGTH ? "limit" : j->stop_word ? "word" : "eos";
}

/* The llama-server's closing object: the content (all of it, or "" at a stream's end), the
 * counts and the timings (prompt: from submission to the first token; predicted: the rest). */
static json_t *llama_final(const srv_job *j, const char *content, size_t n, double t_end) {
    double t_first = j->t_first > 0 ? j->t_first : t_end;
    double p_ms = (t_first - j->t_submit) * 1e3, g_ms = (t_end - t_first) * 1e3;
    int64_t pn = j->n_prompt - j->n_cached, gn = j->n_generated;
    json_t *timings = json_pack("{s:I,s:f,s:f,s:f,s:I,s:f,s:f,s:f}", "prompt_n", (json_int_t)pn, "prompt_ms", p_ms,
                                "prompt_per_token_ms", pn > 0 ? p_ms / (double)pn : 0.0, "prompt_per_second",
                                p_ms > 0 ? (double)pn * 1e3 / p_ms : 0.0, "predicted_n", (json_int_t)gn, "predicted_ms",
                                g_ms, "predicted_per_token_ms", gn > 0 ? g_ms / (double)gn : 0.0, "predicted_per_second",
                                g_ms > 0 ? (double)gn * 1e3 / g_ms : 0.0);
    return json_pack("{s:i,s:s%,s:[],s:i,s:b,s:s,s:I,s:I,s:I,s:b,s:b,s:s,s:s,s:o}", "index", 0, "content",
                     content ? content : "", n, "tokens", "id_slot", -1, "stop", 1, "model", j->model_name,
                     "tokens_predicted", (json_int_t)gn, "tokens_evaluated", (json_int_t)j->n_prompt, "tokens_cached",
                     (json_int_t)j->n_cached, "truncated", j->truncated, "has_new_line", content && memchr(content, '\n', n) != NULL,
                     "stop_type", llama_stop_type(j), "stopping_word", "", "timings", timings);
}

/* ---- ollama's shapes ------------------------------------------------------------------------ */

/* OpenAI tool_calls (arguments a JSON text) as ollama writes them (arguments an object). */
static json_t *ollama_calls(json_t *calls) {
    json_t *out = json_array();
    size_t i;
    json_t *tc;
    json_array_foreach(calls, i, tc) {
        json_t *fn = json_object_get(tc, "function");
        json_t *args = json_loads(json_string_value(json_object_get(fn, "arguments")) ? json_string_value(json_object_get(fn, "arguments")) : "{}", 0, NULL);
        json_array_append_new(out, json_pack("{s:{s:i,s:O,s:o}}", "function", "index", (int)i, "name",
                                             json_object_get(fn, "name"), "arguments", args ? args : json_object()));
    }
    return out;
}

/* One object of ollama's: the model, the time, the text (a message for /api/chat, a response
 * for /api/generate) and done: false; the last one (done) has the reason and the counts,
 * durations in nanoseconds (prompt: submission to the first token; eval: the rest). */
static json_t *ollama_object(const srv_job *j, const char *content, size_t n, const char *thinking, size_t tn,
                             json_t *calls, bool done, double t_end) {
    char when[48];
    srv_ollama_time(srv_now(), when, sizeof when);
    json_t *o = json_pack("{s:s,s:s}", "model", j->model_name, "created_at", when);
    if (j->ollama == SRV_OLLAMA_CHAT) {
        json_t *msg = json_pack("{s:s,s:s%}", "role", "assistant", "content", content ? content : "", n);
        if (tn) json_object_set_new(msg, "thinking", json_stringn(thinking, tn));
        if (calls && json_array_size(calls)) json_object_set_new(msg, "tool_calls", ollama_calls(calls));
        json_object_set_new(o, "message", msg);
    } else {
        json_object_set_new(o, "response", json_stringn(content ? content : "", n));
        if (tn) json_object_set_new(o, "thinking", json_stringn(thinking, tn));
    }
    json_object_set_new(o, "done", json_boolean(done));
    if (!done) return o;
    double t_first = j->t_first > 0 ? j->t_first : t_end;
    json_object_set_new(o, "done_reason", json_string(j->finish == SRV_FINISH_LENGTH ? "length" : "stop"));
    json_object_set_new(o, "total_duration", json_integer((json_int_t)((t_end - j->t_submit) * 1e9)));
    json_object_set_new(o, "load_duration", json_integer(0));
    json_object_set_new(o, "prompt_eval_count", json_integer(j->n_prompt));
    json_object_set_new(o, "prompt_eval_duration", json_integer((json_int_t)((t_first - j->t_submit) * 1e9)));
    json_object_set_new(o, "eval_count", json_integer(j->n_generated));
    json_object_set_new(o, "eval_duration", json_integer((json_int_t)((t_end - t_first) * 1e9)));
    return o;
}

/* An NDJSON line of ollama's stream. */
static int send_line(srv_job *j, json_t *v) {
    char *t = v ? json_dumps(v, JSON_COMPACT) : NULL;
    json_decref(v);
    if (!t) return -1;
    pthread_mutex_lock(&j->mu);
    int rc = srv_buf_puts(&j->sse, t) || srv_buf_puts(&j->sse, "\n");
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    free(t);
    return rc ? -1 : 0;
}

static const char *finish_name(srv_finish f) {
    return f == SRV_FINISH_LENGTH ? "length" : f == SRV_FINISH_TOOLS ? "tool_calls" : "stop";
}

/* Append "data: <chunk>\n\n" to the job's SSE bytes and wake the connection. */
static int send_chunk(srv_job *j, json_t *chunk) {
    char *t = chunk ? json_dumps(chunk, JSON_COMPACT) : NULL;
    json_decref(chunk);
    if (!t) return -1;
    pthread_mutex_lock(&j->mu);
    int rc = srv_buf_puts(&j->sse, "data: ") || srv_buf_puts(&j->sse, t) || srv_buf_puts(&j->sse, "\n\n");
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    free(t);
    return rc ? -1 : 0;
}

static json_t *chunk_base(const srv_job *j) {
    json_t *c = json_pack("{s:s,s:s,s:I,s:s}", "id", j->id, "object",
                          j->kind == SRV_CHAT ? "chat.completion.chunk" : "text_completion", "created",
                          (json_int_t)j->created, "model", j->model_name);
    if (c && j->include_usage) json_object_set_new(c, "usage", json_null());
    return c;
}

/* One chunk with this step's deltas (and logprobs), or none when there is nothing to say. */
static int flush_chunk(srv_output *o, const char *finish, json_t *tool_calls) {
    srv_job *j = o->j;
    bool lp = o->lp_chunk && json_array_size(o->lp_chunk);
    if (!o->d_content.n && !o->d_reasoning.n && !lp && !finish && !tool_calls && o->sent_role) return 0;
    if (j->ollama) { /* one NDJSON object per piece of text (and the calls, when parsed) */
        o->sent_role = true;
        if (!o->d_content.n && !o->d_reasoning.n && !tool_calls) return 0;
        json_t *v = ollama_object(j, o->d_content.p, o->d_content.n, o->d_reasoning.p, o->d_reasoning.n, tool_calls,
                                  false, 0);
        o->d_content.n = o->d_reasoning.n = 0;
        if (o->lp_chunk) json_array_clear(o->lp_chunk);
        return send_line(j, v);
    }
    if (j->llama) { /* data: {"content": ..., "stop": false} per piece of text */
        o->sent_role = true;
        if (!o->d_content.n) return 0;
        json_t *c = json_pack("{s:i,s:s%,s:[],s:b,s:i}", "index", 0, "content", o->d_content.p, o->d_content.n,
                              "tokens", "stop", 0, "id_slot", -1);
        o->d_content.n = 0;
        if (o->lp_chunk) json_array_clear(o->lp_chunk);
        return send_chunk(j, c);
    }
    json_t *c = chunk_base(j), *choice = json_object();
    json_object_set_new(choice, "index", json_integer(j->choice_index));
    if (j->kind == SRV_CHAT) {
        json_t *delta = json_object();
        if (!o->sent_role) {
            json_object_set_new(delta, "role", json_string("assistant"));
            if (!o->d_content.n) json_object_set_new(delta, "content", json_string(""));
            o->sent_role = true;
        }
        if (o->d_content.n) json_object_set_new(delta, "content", json_stringn(o->d_content.p, o->d_content.n));
        if (o->d_reasoning.n)
            json_object_set_new(delta, "reasoning_content", json_stringn(o->d_reasoning.p, o->d_reasoning.n));
        if (tool_calls) {
            size_t k;
            json_t *tc;
            json_array_foreach(tool_calls, k, tc) json_object_set_new(tc, "index", json_integer((json_int_t)k));
            json_object_set(delta, "tool_calls", tool_calls);
        }
        json_object_set_new(choice, "delta", delta);
        json_object_set_new(choice, "logprobs", lp ? json_pack("{s:O}", "content", o->lp_chunk) : json_null());
    } else {
        o->sent_role = true;
        json_object_set_new(choice, "text", json_stringn(o->d_content.p ? o->d_content.p : "", o->d_content.n));
        json_object_set_new(choice, "logprobs", lp ? completion_logprobs(o->lp_chunk, &o->text_offset) : json_null());
    }
    json_object_set_new(choice, "finish_reason", finish ? json_string(finish) : json_null());
    json_object_set_new(c, "choices", json_pack("[o]", choice));
    o->d_content.n = o->d_reasoning.n = 0;
    if (o->lp_chunk) json_array_clear(o->lp_chunk);
    return send_chunk(j, c);
}

/* ---- the calls the engine makes ---------------------------------------------------------- */

int srv_output_token(srv_output *o, qhx_token t, const char *text, size_t len, const float *logits) {
    srv_job *j = o->j;
    if (j->t_first <= 0) j->t_first = srv_now();
    if (j->logprobs && t >= 0 && logits) {
        json_t *e = logprob_entry(o->m, logits, t, j->top_logprobs);
        if (!e) return -1;
        if (j->stream) {
            if (!o->lp_chunk) o->lp_chunk = json_array();
            json_array_append_new(o->lp_chunk, e);
        } else json_array_append_new(j->token_logprobs, e);
    }
    if (pass_on(o, text, len, false)) return -1;
    if (j->stream && flush_chunk(o, NULL, NULL)) return -1;
    return 0;
}

/* The end of a stream: the last chunk with its finish reason, the usage chunk when asked for,
 * data: [DONE]. */
static int close_stream(srv_output *o, const char *finish) {
    srv_job *j = o->j;
    if (j->ollama) { /* the closing object, "done": true */
        int bad = flush_chunk(o, finish, NULL);
        return bad ? bad : send_line(j, ollama_object(j, "", 0, NULL, 0, NULL, true, srv_now()));
    }
    if (j->llama) { /* the closing object, "stop": true; llama-server sends no [DONE] */
        int bad = flush_chunk(o, finish, NULL);
        return bad ? bad : send_chunk(j, llama_final(j, "", 0, srv_now()));
    }
    int rc = flush_chunk(o, finish, NULL);
    if (j->one_of_many) return rc; /* the connection ends the stream of all the choices */
    if (!rc && j->include_usage) {
        json_t *u = json_pack("{s:s,s:s,s:I,s:s,s:[],s:o}", "id", j->id, "object",
                              j->kind == SRV_CHAT ? "chat.completion.chunk" : "text_completion", "created",
                              (json_int_t)j->created, "model", j->model_name, "choices", "usage", usage_json(j));
        rc = send_chunk(j, u);
    }
    if (!rc) {
        pthread_mutex_lock(&j->mu);
        rc = srv_buf_puts(&j->sse, "data: [DONE]\n\n");
        pthread_cond_broadcast(&j->cv);
        pthread_mutex_unlock(&j->mu);
    }
    return rc;
}

int srv_output_end(srv_output *o) {
    srv_job *j = o->j;
    if (route(o, true)) return -1;
    json_t *calls = o->tools.n ? parse_tool_calls(&o->mk, o->tools.p, o->tools.n, j->id) : NULL;
    if (o->tools.n && !calls && give(o, MODE_CONTENT, o->tools.p, o->tools.n)) return -1;
    if (calls && j->finish == SRV_FINISH_STOP) j->finish = SRV_FINISH_TOOLS;
    if (!j->stream) {
        j->tool_calls = calls;
        return 0;
    }
    int rc = 0;
    if (calls) rc = flush_chunk(o, NULL, calls);
    json_decref(calls);
    return rc ? rc : close_stream(o, finish_name(j->finish));
}

int srv_output_fail(srv_output *o, int status, const char *msg) {
    srv_job *j = o->j;
    pthread_mutex_lock(&j->mu);
    bool began = j->stream && j->sse.n > 0;
    pthread_mutex_unlock(&j->mu);
    if (!began) return 0;
    if (j->ollama) { /* ollama ends a failed stream with {"error": ...} */
        o->d_content.n = o->d_reasoning.n = 0;
        return send_line(j, json_pack("{s:s}", "error", msg));
    }
    char *e = srv_error_json(status, msg);
    if (!e) return -1;
    pthread_mutex_lock(&j->mu);
    int rc = srv_buf_puts(&j->sse, "data: ") || srv_buf_puts(&j->sse, e) || srv_buf_puts(&j->sse, "\n\n");
    pthread_mutex_unlock(&j->mu);
    free(e);
    o->d_content.n = o->d_reasoning.n = 0; /* text held back (a possible marker) is not sent */
    if (o->lp_chunk) json_array_clear(o->lp_chunk);
    return rc ? -1 : close_stream(o, "error");
}

/* Trailing whitespace before a tool call is the template's separator, not content. */
static json_t *content_value(const srv_job *j) {
    size_t n = j->content.n;
    if (j->tool_calls)
        while (n && (j->content.p[n - 1] == '\n' || j->content.p[n - 1] == ' ')) n--;
    if (j->tool_calls && n == 0) return json_null();
    return json_stringn(j->content.p ? j->content.p : "", n);
}

char *srv_output_body(srv_job *j) {
    if (j->ollama) {
        json_t *r = ollama_object(j, j->content.p, j->content.n, j->reasoning.p, j->reasoning.n, j->tool_calls, true,
                                  j->t_done > 0 ? j->t_done : srv_now());
        char *t = r ? json_dumps(r, JSON_COMPACT) : NULL;
        json_decref(r);
        return t;
    }
    if (j->llama) {
        json_t *r = llama_final(j, j->content.p, j->content.n, j->t_done > 0 ? j->t_done : srv_now());
        char *t = r ? json_dumps(r, JSON_COMPACT) : NULL;
        json_decref(r);
        return t;
    }
    json_t *choice = json_pack("{s:i}", "index", 0);
    const char *object;
    if (j->kind == SRV_CHAT) {
        object = "chat.completion";
        json_t *msg = json_pack("{s:s,s:o}", "role", "assistant", "content", content_value(j));
        if (j->reasoning.n) json_object_set_new(msg, "reasoning_content", json_stringn(j->reasoning.p, j->reasoning.n));
        if (j->tool_calls) json_object_set(msg, "tool_calls", j->tool_calls);
        json_object_set_new(choice, "message", msg);
        json_object_set_new(choice, "logprobs",
                            j->token_logprobs ? json_pack("{s:O}", "content", j->token_logprobs) : json_null());
    } else {
        object = "text_completion";
        json_object_set_new(choice, "text", json_stringn(j->content.p ? j->content.p : "", j->content.n));
        int64_t off = 0;
        json_object_set_new(choice, "logprobs", j->token_logprobs ? completion_logprobs(j->token_logprobs, &off) : json_null());
    }
    json_object_set_new(choice, "finish_reason", json_string(finish_name(j->finish)));
    json_t *r = json_pack("{s:s,s:s,s:I,s:s,s:[o],s:o}", "id", j->id, "object", object, "created", (json_int_t)j->created,
                          "model", j->model_name, "choices", choice, "usage", usage_json(j));
    char *t = r ? json_dumps(r, JSON_COMPACT) : NULL;
    json_decref(r);
    return t;
}
