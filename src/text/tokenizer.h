/* text/tokenizer: byte-level BPE tokenizer loaded from a Hugging Face tokenizer.json.
 *
 * Reproduces the ids of the Hugging Face `tokenizers` library for the files the Qwen3 /
 * Qwen3-VL / Qwen3.5 models ship (encode with add_special_tokens=false, decode with
 * skip_special_tokens as asked). Pipeline, limits and deviations: docs/tokenizer.md.
 *
 * Usage:
 *     qhx_tok *tok;
 *     if (qhx_tok_load("model_dir", &tok, &err) != QHX_OK) ...;
 *     int32_t *ids; size_t n;
 *     qhx_tok_encode_alloc(tok, text, strlen(text), &ids, &n, &err);
 *     char *s; size_t len;
 *     qhx_tok_decode_alloc(tok, ids, n, 0, &s, &len, &err);
 *     qhx_free(ids); qhx_free(s); qhx_tok_free(tok);
 *
 * Threads: a loaded tokenizer is immutable except for its word cache, which is guarded by a
 * mutex. Any number of threads may call encode/decode on one tokenizer at once; the cache
 * serves one encode call at a time and the others run uncached (same ids, a little slower).
 * A qhx_tok_stream belongs to one thread.
 */
#ifndef QHX_TEXT_TOKENIZER_H
#define QHX_TEXT_TOKENIZER_H

#include "core/status.h"

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct qhx_tok qhx_tok;

/* ---- loading ------------------------------------------------------------------------- */

/* Hard caps on what a tokenizer file may declare (hostile input is refused with QHX_E_LIMIT). */
#define QHX_TOK_MAX_FILE_BYTES ((size_t)256 << 20) /* tokenizer.json size */
#define QHX_TOK_MAX_IDS (1 << 22)                  /* largest id + 1 */
#define QHX_TOK_MAX_MERGES (1 << 22)
#define QHX_TOK_MAX_TOKEN_BYTES 1024               /* one vocab entry, UTF-8 bytes */
#define QHX_TOK_MAX_ADDED 65536
#define QHX_TOK_MAX_ADDED_BYTES 256                /* one added token's content */
#define QHX_TOK_MAX_PATTERN_BYTES 16384            /* one Split regex */
#define QHX_TOK_MAX_SPLITS 8                       /* Split stages in the pre-tokenizer */
/* Regex work per input (PCRE2's match limit counts one call only): a match may take
 * QHX_TOK_MATCH_FREE steps uncharged; beyond that, its attempts are charged to a budget of
 * QHX_TOK_MATCH_BUDGET + QHX_TOK_MATCH_PER_BYTE steps per input byte, shared by every match
 * of the input; one match never takes more than QHX_TOK_MATCH_MAX. Past either: QHX_E_LIMIT. */
#define QHX_TOK_MATCH_FREE 4096u
#define QHX_TOK_MATCH_BUDGET 10000000u
#define QHX_TOK_MATCH_PER_BYTE 256u
#define QHX_TOK_MATCH_MAX 10000000u

/* Load a tokenizer. `path` is a tokenizer.json file or a folder holding one (a model
 * folder). `name` (may be NULL) is used in error messages instead of the path.
 * On success *out is an owned tokenizer (qhx_tok_free); on failure *out = NULL and err names
 * the file, the JSON member and what is wrong. Unsupported components (normalizers,
 * pre-tokenizers, models, decoders, flags) are refused by name with QHX_E_UNSUPPORTED.
 * A manifest loader resolves its tokenizer artifact to a path and calls this function. */
qhx_status qhx_tok_load(const char *path, qhx_tok **out /* OUT */, qhx_error *err);

/* Parse tokenizer.json bytes from memory (the fuzzable entry). `name` labels error messages
 * (NULL: "tokenizer.json"). The buffer is only read during the call. */
qhx_status qhx_tok_load_buffer(const void *data, size_t size, const char *name,
                               qhx_tok **out /* OUT */, qhx_error *err);

/* The binary form (".qhxtok"): the same tokenizer, laid out to be mapped and used in place;
 * versioned, checksummed and fully validated on load. qhx_tok_load picks X.qhxtok over
 * X.json when both exist and the binary records the size and hash of exactly that JSON file;
 * a folder with only tokenizer.qhxtok loads it. Little-endian hosts only. */

/* Write tok to `path` (atomically: a temporary file, then rename). The binary records the
 * size and hash of the tokenizer.json tok was loaded from. */
qhx_status qhx_tok_save(const qhx_tok *tok, const char *path, qhx_error *err);
/* Load a binary form from a file (mapped; the map lives as long as the tokenizer). */
qhx_status qhx_tok_load_binary(const char *path, qhx_tok **out /* OUT */, qhx_error *err);
/* Load a binary form from memory (copied; the fuzzable entry). */
qhx_status qhx_tok_load_binary_buffer(const void *data, size_t size, const char *name,
                                      qhx_tok **out /* OUT */, qhx_error *err);

/* Free a tokenizer; NULL allowed. No encode/decode may be running on it. */
void qhx_tok_free(qhx_tok *tok);

/* ---- vocabulary ---------------------------------------------------------------------- */

/* Number of ids: the largest id of the vocab and the added tokens, plus one. Some ids below
 * it may be unused (they decode to nothing). Model embedding tables may be larger. */
int32_t qhx_tok_n_vocab(const qhx_tok *tok);
/* A hash of what the tokenizer maps (every token's string and id, its decoded bytes, the added
 * tokens and the merge count): equal for the JSON and binary forms of one tokenizer, different
 * when any token differs. For session files. 0 for NULL. */
uint64_t qhx_tok_identity(const qhx_tok *tok);

/* Id of a token given as the library names it: an added token's content (a chat format's turn_end) or a
 * vocab key in the byte-level alphabet ("Ġworld"). Added tokens win. -1 if absent. */
int32_t qhx_tok_token_to_id(const qhx_tok *tok, const char *token);

/* The library's name for `id` (see above) as a NUL-terminated string borrowed from tok, or
 * NULL for an unused / out-of-range id. */
const char *qhx_tok_id_to_token(const qhx_tok *tok, int32_t id);

/* Whether id is an added token flagged special (skipped by QHX_TOK_SKIP_SPECIAL). */
int qhx_tok_is_special(const qhx_tok *tok, int32_t id);
/* The bytes id decodes to (borrowed from tok; *len set), before any UTF-8 repair: half a
 * character stays half. NULL (with *len 0) for an unused or out-of-range id. Added tokens: 1
 * in *added (their text), else 0. For grammar masks. */
const uint8_t *qhx_tok_id_bytes(const qhx_tok *tok, int32_t id, size_t *len, int *added);

/* ---- encoding ------------------------------------------------------------------------ */

/* Encode `len` bytes of UTF-8 text (NUL bytes are ordinary characters) into ids, as the
 * library's encode(text, add_special_tokens=false): added tokens are matched first (special
 * or not), the rest is normalized, pre-tokenized and BPE-merged.
 * Invalid UTF-8 is refused with QHX_E_FORMAT and a message naming the byte offset.
 * Buffer convention (llama_tokenize): ids[0..cap) receives the ids and *n_out the number of
 * ids the text has. If that exceeds cap, the first cap ids are written and QHX_E_LIMIT is
 * returned with *n_out still the full count, so the caller can retry with a larger buffer.
 * ids may be NULL when cap == 0 (a size query). */
qhx_status qhx_tok_encode(qhx_tok *tok, const char *text, size_t len, int32_t *ids, size_t cap,
                          size_t *n_out /* OUT */, qhx_error *err);

/* As qhx_tok_encode, into a new array (owned: qhx_free; NULL with *n_out = 0 for no ids). */
qhx_status qhx_tok_encode_alloc(qhx_tok *tok, const char *text, size_t len,
                                int32_t **ids_out /* OUT */, size_t *n_out /* OUT */,
                                qhx_error *err);
/* As qhx_tok_encode_alloc, polling abort(user) while it works (every few thousand regex
 * matches): non-zero stops it with QHX_E_ABORTED. abort may be NULL. */
qhx_status qhx_tok_encode_alloc_abortable(qhx_tok *tok, const char *text, size_t len, int (*abort)(void *),
                                          void *user, int32_t **ids_out /* OUT, owned */,
                                          size_t *n_out /* OUT */, qhx_error *err);

/* The pre-tokenizer's pieces of `text` (after added-token matching and normalization), for
 * tests and tools. For each piece, `fn(ctx, piece, piece_len, added_id)` is called in order;
 * added_id is the id of a matched added token (the piece is then its text) or -1 for a piece
 * that goes to BPE. The piece pointer is valid during the call only. A non-zero return from
 * fn stops the walk with QHX_E_ABORTED. */
typedef int (*qhx_tok_piece_fn)(void *ctx, const char *piece, size_t piece_len, int32_t added_id);
qhx_status qhx_tok_pretokenize(qhx_tok *tok, const char *text, size_t len, qhx_tok_piece_fn fn,
                               void *ctx, qhx_error *err);

/* ---- decoding ------------------------------------------------------------------------ */

enum { QHX_TOK_SKIP_SPECIAL = 1u << 0 };

/* Decode ids to UTF-8 text as the library's decode(ids, skip_special_tokens): token bytes are
 * concatenated and invalid UTF-8 is replaced by U+FFFD per maximal ill-formed subsequence
 * (Rust's String::from_utf8_lossy). Unused or out-of-range ids are skipped, as the library
 * does. flags: QHX_TOK_SKIP_SPECIAL. Buffer convention as qhx_tok_encode: *len_out gets the
 * full length; if > cap the text is cut at cap bytes and QHX_E_LIMIT is returned. The output
 * is not NUL-terminated. */
qhx_status qhx_tok_decode(const qhx_tok *tok, const int32_t *ids, size_t n_ids, unsigned flags,
                          char *text, size_t cap, size_t *len_out /* OUT */, qhx_error *err);

/* As qhx_tok_decode into a new NUL-terminated string (owned: qhx_free). */
qhx_status qhx_tok_decode_alloc(const qhx_tok *tok, const int32_t *ids, size_t n_ids,
                                unsigned flags, char **text_out /* OUT */,
                                size_t *len_out /* OUT */, qhx_error *err);

/* Streaming decoder for printing tokens as they are generated: push ids one at a time and
 * get the text that became complete. It never returns half a UTF-8 sequence: an incomplete
 * tail is held back until the next id completes it (or proves it invalid, giving U+FFFD).
 * The concatenation of all pushes plus the final flush equals qhx_tok_decode of all ids. */
typedef struct qhx_tok_stream qhx_tok_stream;

/* Create a stream over tok (which must outlive it). Owned: qhx_tok_stream_free. */
qhx_status qhx_tok_stream_create(const qhx_tok *tok, unsigned flags,
                                 qhx_tok_stream **out /* OUT */, qhx_error *err);
/* Push one id. *text / *len get the newly completed text, borrowed from the stream until its
 * next call (len may be 0). */
qhx_status qhx_tok_stream_push(qhx_tok_stream *st, int32_t id, const char **text /* OUT */,
                               size_t *len /* OUT */, qhx_error *err);
/* End of stream: returns what is held back, an incomplete tail as U+FFFD. The stream is then
 * empty and may be reused. */
qhx_status qhx_tok_stream_flush(qhx_tok_stream *st, const char **text /* OUT */,
                                size_t *len /* OUT */, qhx_error *err);
void qhx_tok_stream_free(qhx_tok_stream *st); /* NULL allowed */

/* ---- chat formatting ----------------------------------------------------------------- */

/* A chat format: how one family writes turns, thinking, tools and images, as data and one
 * render function. The formats themselves live with their families (src/families/<name>/chat.c);
 * this layer holds the checks every format shares and the rendering helpers (text/chat.h). */
typedef struct qhx_chat_render qhx_chat_render;
typedef struct qhx_chat_message qhx_chat_message;
typedef struct qhx_chat_style {
    const char *name;        /* for messages, e.g. "qwen3_5" */
    /* Write msgs (roles, parts and UTF-8 already checked) into r->out with the text/chat.h
     * helpers. */
    qhx_status (*render)(qhx_chat_render *r, const qhx_chat_message *msgs, size_t n);
    const char *turn_start;  /* the token that opens a turn (its role follows) */
    const char *turn_end;    /* the token that ends a turn: an answer stops there */
    const char *turn_sep;    /* what follows turn_end before the next turn opens */
    const char *image_start, *image_pad, *image_end; /* an image's run: start, pads, end */
    const char *video_pad;                           /* a video's pad token (its run: image start, pads, image end) */
    const char *image_label, *image_label_end;       /* add_vision_id: label N label_end */
    const char *think_open, *think_close;            /* a thinking block's markers, or NULL */
    /* an answer's reasoning written back into its content: open REASONING close CONTENT
     * (NULL when the format drops reasoning) */
    const char *reasoning_open, *reasoning_close;
    const char *tool_open, *tool_close; /* the markers around one tool call in an answer */
    /* A forced tool call: the answer starts with tool_prefix (any function), or with
     * tool_prefix NAME tool_named (that one). */
    const char *tool_prefix, *tool_named;
    bool tool_json;          /* calls are one JSON object {"name", "arguments"}, not blocks */
    /* A call as blocks (!tool_json): tool_fn_open NAME '>', then per argument tool_param_open KEY
     * tool_param_open_end VALUE '\n' tool_param_close '\n'; every call (either form) ends with
     * tool_call_end. */
    const char *tool_fn_open, *tool_param_open, *tool_param_open_end, *tool_param_close;
    const char *tool_call_end;
} qhx_chat_style;

/* What a renderer is picked by: a family's format. */
typedef const qhx_chat_style *qhx_chat_family;

/* One part of a message: text, or an image placeholder. */
typedef struct qhx_chat_part {
    const char *text;       /* text part (UTF-8, text_len bytes), or NULL for an image */
    size_t text_len;
    int32_t image_tokens;   /* image part: number of image pads (0 = one, as the template
                               renders it before the processor expands it) */
    const char *video;      /* text NULL and this set: a video part, rendered as the templates
                               do ("Video N: " with add_vision_id, the image start, the video,
                               the image end) with this text in place of the template's one
                               video pad (the processor's expansion; "" keeps the pad) */
} qhx_chat_part;

/* A tool call's argument: its name, and its value as the template prints it (JSON text for an
 * object or a list, Python's str() of anything else: a string as it is, True, None, 3, 0.5). */
typedef struct qhx_chat_tool_arg {
    const char *name;
    const char *value;
} qhx_chat_tool_arg;

typedef struct qhx_chat_tool_call {
    const char *name;
    const qhx_chat_tool_arg *args; /* Qwen3.5: each argument as its template prints it */
    size_t n_args;
    const char *arguments;         /* Qwen3-VL: the arguments as one JSON text, printed as it is
                                      (the template's tojson of an object, or the string the
                                      caller gave); NULL = "{}" */
} qhx_chat_tool_call;

struct qhx_chat_message {
    const char *role;            /* "system" (first message only), "user", "assistant" or
                                    "tool" (a tool's response) */
    const char *content;         /* NUL-terminated text, used when parts == NULL */
    const qhx_chat_part *parts;  /* or a list of parts, in order */
    size_t n_parts;
    const qhx_chat_tool_call *tool_calls; /* assistant: the calls after its content */
    size_t n_tool_calls;
};

typedef struct qhx_chat_options {
    int add_generation_prompt; /* end with the assistant's turn opened (+ think preamble) */
    int enable_thinking;       /* a format with thinking: open the think block (1) or write it
                                  closed and empty (0) */
    int add_vision_id;         /* "Picture N: " before each image */
    const char *const *tools;  /* the tool definitions, each as JSON text (the templates'
                                  tojson: ", " and ": " separators, UTF-8 as is) */
    size_t n_tools;
} qhx_chat_options;

/* Render messages in format family into a prompt string (owned: qhx_free; NUL-terminated,
 * *len_out bytes). Errors (QHX_E_ARG): unknown role, a system message not first, an image in a
 * system message, and what the format itself refuses (Qwen3.5: a conversation without a user
 * message, as its template raises). */
qhx_status qhx_tok_chat_format(qhx_chat_family family, const qhx_chat_message *msgs,
                               size_t n_msgs, const qhx_chat_options *opt, char **out /* OUT */,
                               size_t *len_out /* OUT */, qhx_error *err);

#endif
