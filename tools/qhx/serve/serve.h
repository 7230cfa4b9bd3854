/* serve.h: qhx serve, an OpenAI-compatible HTTP server over the public API (qhx.h).
 *   http.c     connections, limits, deadlines, routing, responses, streaming (SSE), errors
 *   http_parse.c HTTP/1.1 framing: the header section, the target, chunked bodies
 *   request.c  request bodies (JSON) -> jobs: validation, limits, the chat prompt
 *   engine.c   slots (one session each), the queue, prompt reuse, the decode loop
 *   output.c   generated text -> stop strings, reasoning, tool calls, response JSON
 * A job is shared by the connection that made it and the engine; both hold a reference. */
#ifndef QHX_SERVE_H
#define QHX_SERVE_H

#include "qhx.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- limits (docs/server.md lists each) ------------------------------------------------------ */
#define SRV_MAX_CHOICES 16 /* "n": answers per request */
#define SRV_MIN_ANSWER_ROOM 256 /* the context shift keeps at least this room (or ctx / 4) for an answer */
typedef struct srv_limits {
    size_t max_body;          /* request body bytes (413 beyond) */
    int64_t max_messages;     /* messages per chat request */
    int64_t max_images;       /* images per request */
    int64_t max_image_pixels; /* decoded pixels per image */
    int64_t max_image_tokens; /* tokens per encoded image */
    int64_t max_tokens;       /* most tokens one request may generate */
    int64_t max_stops;        /* stop strings per request */
    int64_t max_stop_len;     /* bytes per stop string */
    int64_t max_tools;        /* tool definitions per request */
    int64_t max_parts;        /* content parts over all the messages of a request */
    int64_t max_calls;        /* tool calls over all the messages of a request */
    int64_t max_args;         /* tool-call arguments over all the messages of a request */
    int64_t max_depth;        /* nesting of the body's JSON (objects and lists) */
    int64_t max_json_nodes;   /* JSON objects, lists and keys in the body (and in an arguments text) */
    int64_t max_top_logprobs; /* top_logprobs */
    int64_t max_prompt_ids;   /* token ids in a /v1/completions or /detokenize list */
    int conn_timeout_s;       /* idle seconds before a connection is closed */
    int head_timeout_s;       /* seconds the whole header section may take to arrive (408) */
    int body_timeout_s;       /* seconds the whole request body may take to arrive (408) */
    int max_connections;      /* open connections (each one thread) */
    int max_per_ip;           /* open connections per client address */
} srv_limits;

srv_limits srv_default_limits(void);

typedef struct srv_config {
    const char *model_path;
    const char *host;
    int port;
    int parallel;   /* slots */
    int queue;      /* requests waiting for a slot beyond which 503 */
    int64_t ctx;    /* context per slot: --ctx, else (0) set by qhx_cmd_serve from the library's
                       context policy before the engine starts */
    int threads;
    const char *api_key; /* NULL: no key */
    const char *alias;   /* the model id in responses */
    srv_limits lim;
    int spec_draft;      /* --spec mtp --draft N: speculative decoding's most drafts per step; 0 off */
    bool log_json;       /* --log-format json: the access log's lines are JSON objects */
    bool context_shift;  /* a chat past the context drops its oldest turns (--no-context-shift: 400) */
    qhx_pooling pooling; /* --pooling: how /v1/embeddings pools a text's rows (default last) */
} srv_config;

/* ---- jobs ------------------------------------------------------------------------------------ */
typedef enum srv_kind { SRV_CHAT = 1, SRV_COMPLETION = 2, SRV_EMBED = 3 } srv_kind;

typedef enum srv_finish { SRV_FINISH_NONE = 0, SRV_FINISH_STOP, SRV_FINISH_LENGTH, SRV_FINISH_TOOLS } srv_finish;

/* A growable byte buffer (qhx_malloc'd). */
typedef struct srv_buf {
    char *p;
    size_t n, cap;
} srv_buf;
int srv_buf_put(srv_buf *b, const void *p, size_t n); /* 0, or -1 out of memory */
int srv_buf_puts(srv_buf *b, const char *s);
void srv_buf_free(srv_buf *b);

typedef struct srv_job {
    /* --- what to do (set before submit, read-only after) --- */
    srv_kind kind;
    qhx_prompt *prompt;
    qhx_sample_params sampling;
    int64_t max_tokens;
    int n_choices;        /* "n": answers asked for (each its own job; this one is the first) */
    int choice_index;     /* this job's choice among them (choices[].index) */
    bool one_of_many;     /* streamed with others: the connection writes the usage and [DONE] */
    char **stops;
    size_t n_stops;
    qhx_token *stop_ids;  /* "stop_token_ids": more stop tokens, ignore_eos or not */
    size_t n_stop_ids;
    bool ignore_eos;
    int spec_draft;       /* "spec_draft": 0 the server's, 1 .. 8 at most that many, -1 off */
    bool stream, include_usage;
    bool logprobs;
    int top_logprobs;
    bool thinking;        /* the prompt opened a think block: text before its end is reasoning */
    bool tools;           /* tools were offered: tool-call blocks are parsed */
    char *answer_prefix;  /* tool_choice forced a call: the prompt ends with this start of it */
    qhx_grammar *grammar; /* response_format / grammar / json_schema: the answer follows it (owned) */
    bool echo;            /* completions: the answer begins with the prompt's text */
    srv_buf echo_text;    /* that text (the prompt's tokens detokenized) */
    bool llama;           /* POST /completion: llama-server's request and response shapes */
    int ollama;           /* SRV_OLLAMA_CHAT or _GENERATE: ollama's shapes (NDJSON when streamed) */
    char id[48];
    int64_t created;
    const char *model_name;
    /* SRV_EMBED: the texts' ids (one list per input) and where their embeddings go */
    qhx_token **embed_ids;
    size_t *embed_n, n_embed;
    qhx_embed_params embed;
    float *embd;          /* (n_embed, qhx_model_n_embd), written by the engine */

    /* --- shared state (mu) --- */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    srv_buf sse;          /* streaming: bytes ready for the client */
    size_t sse_sent;      /* bytes of sse already handed out */
    bool done;
    int http_status;      /* of a failed job: 4xx/5xx; 0 = ok */
    char error[QHX_ERROR_MSG_SIZE];
    int refs;
    atomic_int cancelled; /* the client went away: stop within one step */

    /* --- engine side (engine thread only until done) --- */
    srv_buf content, reasoning; /* non-streaming: the answer so far */
    json_t *token_logprobs;     /* array of per-token entries (or NULL) */
    json_t *tool_calls;         /* parsed tool calls (array) or NULL */
    int64_t n_prompt, n_cached, n_generated;
    srv_finish finish;
    bool stop_word;             /* the answer ended at a stop string */
    bool truncated;             /* the context shift dropped turns (usage "truncated") */
    int64_t dropped;            /* how many */
    qhx_prompt_video_stats video; /* the prompt's videos: fitted to the context (usage "video_fitted") */
    double t_submit, t_first, t_done;
} srv_job;

srv_job *srv_job_new(void);
void srv_job_ref(srv_job *j);
void srv_job_unref(srv_job *j);
/* Mark done with an error (status, message) or success (status 0); wakes the connection. */
void srv_job_finish(srv_job *j, int status, const char *msg);

/* ---- engine ---------------------------------------------------------------------------------- */
typedef struct srv_engine srv_engine;

typedef struct srv_stats {
    atomic_llong requests, errors, cancelled, rejected;
    atomic_llong prompt_tokens, cached_tokens, generated_tokens;
    atomic_llong decode_ns; /* time spent in decode steps */
    atomic_llong decode_tokens;
    atomic_llong spec_steps, spec_drafted, spec_accepted, spec_tokens; /* speculative decoding */
} srv_stats;

qhx_status srv_engine_start(const qhx_model *m, const srv_config *cfg, srv_stats *stats, srv_engine **out,
                            qhx_error *err);
/* Hand a job to the engine (it takes a reference). 0, or -1 when the queue is full. */
int srv_engine_submit(srv_engine *e, srv_job *j);
/* Finish the jobs in hand and the queue, then stop the thread; later submits are refused. */
void srv_engine_stop(srv_engine *e);
/* Stop (if running) and free; no connection may use e any more. NULL allowed. */
void srv_engine_free(srv_engine *e);
int srv_engine_queue_length(srv_engine *e);
int srv_engine_busy_slots(srv_engine *e);
/* Slot i: whether it has a job in hand, and the tokens its state held after its last job
 * (the prefix a like prompt reuses). 0, or -1 for no such slot. */
int srv_engine_slot_state(srv_engine *e, int i, bool *processing, int64_t *n_state);

/* ---- HTTP ------------------------------------------------------------------------------------ */
typedef struct srv_http srv_http;
/* Listen on cfg->host:cfg->port (0: a free port, written to *port_out) and serve. */
srv_http *srv_http_start(const qhx_model *m, const srv_config *cfg, srv_engine *e, srv_stats *stats, int *port_out,
                         qhx_error *err);
/* Stop accepting connections (open ones go on). */
void srv_http_quiesce(srv_http *h);
/* Wait (at most max_s seconds) until the requests in hand have sent their responses. */
void srv_http_drain(srv_http *h, int max_s);
/* Close every connection, wait for their threads, free. NULL allowed. */
void srv_http_stop(srv_http *h);

/* ---- HTTP/1.1 framing (http_parse.c) ------------------------------------------------------- */
#define SRV_HTTP_MAX_LINE 8192          /* request line bytes (414 beyond) */
#define SRV_HTTP_MAX_HEAD (64 * 1024)   /* header section bytes, request line included (431) */
#define SRV_HTTP_MAX_FIELDS 128         /* header fields (431 beyond) */

typedef struct srv_http_head {
    char method[16];
    char *target;           /* as sent (points into the parsed buffer) */
    int minor;              /* HTTP/1.minor */
    int64_t content_length; /* -1: none */
    bool has_te, chunked, other_coding;
    bool close, keep_alive, persistent, expect_continue;
    int n_host;
    int n_fields;
    struct {
        char *name, *value;
    } fields[SRV_HTTP_MAX_FIELDS];
} srv_http_head;

/* Where the header section in buf[0, n) ends: 0 with *end set, 1 for more bytes, or a status
 * (414, 431) with *why. */
int srv_http_head_end(const char *buf, size_t n, size_t *end, const char **why);
/* Parse a complete header section (modified in place; h points into it). 0, or the status to
 * answer (400, 413, 417, 501, 505) with *why; every error closes the connection. */
int srv_http_parse_head(char *buf, size_t n, srv_http_head *h, const char **why);
/* The first value of a header field (case-insensitive name), or NULL. */
const char *srv_http_field(const srv_http_head *h, const char *name);
/* The request target's path, percent-decoded into out. 0, or 400/414 with *why. */
int srv_http_decode_path(const char *target, char *out, size_t out_n, const char **why);

typedef struct srv_chunked {
    int state, digits;
    uint64_t left;
    size_t line, trailer;
} srv_chunked;
enum { SRV_CHUNK_MORE = 0, SRV_CHUNK_DONE = 1, SRV_CHUNK_BAD = -1, SRV_CHUNK_TOO_BIG = -2, SRV_CHUNK_NOMEM = -3 };
/* Feed bytes of a chunked body (start from a zeroed state); the data goes to out, at most max
 * bytes in all. *used: bytes taken (after DONE the rest belongs to the next request). */
int srv_chunked_feed(srv_chunked *c, const char *in, size_t n, size_t *used, srv_buf *out, size_t max);

/* ---- requests -------------------------------------------------------------------------------- */
/* Build a job from a request body. On failure returns NULL with *status (400, 413, ...) and a
 * message in err. */
srv_job *srv_request_chat(const qhx_model *m, const srv_config *cfg, const char *body, size_t len, int *status,
                          qhx_error *err);
/* response_format, grammar, json_schema (at most one) into j->grammar (constrain.c). 0, or -1
 * with *status (400, 503) and err set. */
int srv_request_constraint(json_t *root, srv_job *j, int *status, qhx_error *err);
/* tool_choice forced a call (required or named): j->grammar holds the rest of the call to the
 * functions' parameters schemas (constrain.c). 0, or -1 with *status and err set. */
int srv_request_tool_grammar(const qhx_model *m, json_t *root, const char *const *tools, size_t n_tools, srv_job *j,
                             int *status, qhx_error *err);
/* The request's body as a JSON object, within the limits (NULL with *status and err set). */
json_t *srv_request_body(const srv_config *cfg, const char *body, size_t len, int *status, qhx_error *err);

/* ---- embeddings (embed.c) ---------------------------------------------------------------------- */
typedef enum srv_embed_api {
    SRV_EMBED_OPENAI,     /* /v1/embeddings */
    SRV_EMBED_LLAMA,      /* /embedding */
    SRV_EMBED_OLLAMA,     /* /api/embed */
    SRV_EMBED_OLLAMA_OLD, /* /api/embeddings */
} srv_embed_api;
/* An SRV_EMBED job from a request body (b64: the answer wants base64), or NULL with *status. */
srv_job *srv_request_embed(const qhx_model *m, const srv_config *cfg, const char *body, size_t len, srv_embed_api api,
                           bool *b64, int *status, qhx_error *err);
/* The done job's answer text in the api's shape (malloc), or NULL out of memory. */
char *srv_embed_body(const qhx_model *m, const srv_job *j, srv_embed_api api, bool b64);

srv_job *srv_request_completion(const qhx_model *m, const srv_config *cfg, const char *body, size_t len,
                                int *status, qhx_error *err);

/* ---- output ---------------------------------------------------------------------------------- */
/* Per-job text pipeline run by the engine: each token's text goes in, stop strings are cut,
 * reasoning and tool calls split from the content, SSE chunks or the final body are made. */
typedef struct srv_output srv_output;
srv_output *srv_output_new(const qhx_model *m, srv_job *j);
void srv_output_free(srv_output *o);
/* A generated token and its final text (the decoder's: past its stop strings). logits: the row
 * it was sampled from (for logprobs). Returns 0, or -1 out of memory. */
int srv_output_token(srv_output *o, qhx_token t, const char *text, size_t len, const float *logits);
/* End of the answer (finish reason set on the job): flush held text, parse tool calls, write
 * the last chunks. -1 out of memory. */
int srv_output_end(srv_output *o);
/* The non-streaming response body (owned: free()), after end. */
char *srv_output_body(srv_job *j);
/* The OpenAI error JSON ({"error": {"message", "type", "param", "code"}}). Owned: free(). */
char *srv_error_json(int status, const char *msg);
/* The HTTP status of a library failure: the one mapping of docs/server.md, "Errors". What the
 * client's input can cause (QHX_E_ARG, _FORMAT, _UNSUPPORTED: 400; QHX_E_LIMIT: 413) is a 4xx,
 * out of memory 503, QHX_E_ABORTED 499 (the client left; nothing is sent), the rest (QHX_E_IO,
 * QHX_E_INTERNAL) 500. A caller whose failing call worked on the server's own input (a decode
 * step of tokens the engine chose) passes QHX_E_INTERNAL for what no client can cause. */
int srv_http_status(qhx_status rc);
/* A streamed answer that fails after its first bytes went out (a grammar's cap mid-answer): the
 * error event (data: {"error": ...}), a last chunk with finish_reason "error", then data: [DONE].
 * Does nothing (0) when no byte was streamed yet: the connection then answers with the status. -1
 * out of memory. */
int srv_output_fail(srv_output *o, int status, const char *msg);

/* v as the chat templates' tojson writes it (Python's json.dumps, ensure_ascii=False; a float
 * as repr() writes it); malloc'd, NULL out of memory. srv_py_float: repr() of a finite double. */
char *srv_tojson(json_t *v);
void srv_py_float(double d, char *out, size_t cap);

/* Tool-call text in the chat format of the build's first family (qhx_model_chat_markers of no
 * model: blocks of parameters or JSON objects between its call markers) to OpenAI tool_calls (a
 * new array), or NULL when it holds none. id_seed makes the call ids. */
json_t *srv_parse_tool_calls(const char *text, size_t len, const char *id_seed);

double srv_now(void);

/* ---- ollama's API (ollama.c) --------------------------------------------------------------- */
enum { SRV_OLLAMA_CHAT = 1, SRV_OLLAMA_GENERATE = 2 };
/* An /api/chat or /api/generate body in the OpenAI words (chat; /api/generate's raw prompt: a
 * completion), malloc'd; *stream: ollama's (default true). NULL with why set on a bad body.
 * n_ctx: a slot's context (num_ctx beyond it is refused). */
char *srv_ollama_chat_body(const char *body, size_t len, int64_t n_ctx, bool *stream, char *why, size_t why_n);
char *srv_ollama_generate_body(const char *body, size_t len, int64_t n_ctx, bool *stream, bool *raw, bool *load_only,
                               char *why, size_t why_n);
json_t *srv_ollama_tags(const qhx_model *m, const srv_config *cfg, double started);
json_t *srv_ollama_ps(const qhx_model *m, const srv_config *cfg);
json_t *srv_ollama_show(const qhx_model *m, const srv_config *cfg);
/* t (srv_now) as ollama writes times: RFC 3339, UTC, microseconds. */
void srv_ollama_time(double t, char *out, size_t n);

#endif
