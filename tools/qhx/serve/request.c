/* request.c: request bodies -> jobs. Every field is checked for its type and range; unknown
 * fields are ignored (as the OpenAI API does); a failure names the field and gives the HTTP
 * status (400 for bad input, 413 for a cap). The chat messages become a qhx_chat_spec, rendered
 * and tokenized by qhx_prompt_from_chat. */
#include "serve.h"


#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ARG_TEXT (1u << 20)

/* What a chat request owns while its spec is built (freed once the prompt exists). */
typedef struct chat_req {
    qhx_chat_turn *turns;
    qhx_chat_content *parts;
    qhx_chat_call *calls;
    qhx_chat_call_arg *args;
    const char **tools;
    char *forced; /* tool_choice "required" or a named function: the answer's forced start */
    char **owned; /* made here: tool JSON, argument text, decoded images */
    size_t n_parts, n_calls, n_args, n_tools, n_owned, cap_owned;
    const srv_limits *lim;
    qhx_chat_markers mk; /* the model's chat format: how it writes a tool call */
} chat_req;

static int fail(int *status, int code, qhx_error *err, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(int *status, int code, qhx_error *err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (err) {
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        err->code = QHX_E_ARG;
    }
    va_end(ap);
    *status = code;
    return -1;
}

static char *own(chat_req *c, char *p) {
    if (!p) return NULL;
    if (c->n_owned == c->cap_owned) {
        size_t cap = c->cap_owned ? 2 * c->cap_owned : 16;
        char **o = realloc(c->owned, cap * sizeof *o);
        if (!o) {
            free(p);
            return NULL;
        }
        c->owned = o;
        c->cap_owned = cap;
    }
    return c->owned[c->n_owned++] = p;
}

static void chat_req_free(chat_req *c) {
    for (size_t i = 0; i < c->n_owned; i++) free(c->owned[i]);
    free(c->owned);
    free(c->turns);
    free(c->parts);
    free(c->calls);
    free(c->args);
    free(c->tools);
}

/* ---- base64 (data: URLs) ------------------------------------------------------------------- */

static int b64_value(unsigned char ch) {
    if (ch >= 'A' && ch <= 'Z') return ch - 'A';
    if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9') return ch - '0' + 52;
    if (ch == '+' || ch == '-') return 62;
    if (ch == '/' || ch == '_') return 63;
    return -1;
}

/* Decode base64 (padding optional, whitespace skipped) into a new buffer (malloc). NULL on a
 * bad character. */
static unsigned char *b64_decode(const char *s, size_t n, size_t *out_n) {
    unsigned char *out = malloc(n / 4 * 3 + 3);
    if (!out) return NULL;
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '=') break;
        if (ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t') continue;
        int v = b64_value(ch);
        if (v < 0) {
            free(out);
            return NULL;
        }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)(acc >> bits);
        }
    }
    *out_n = o;
    return out;
}

/* ---- the shape of a JSON text, before it is parsed ---------------------------------------- */

/* Objects and lists opened and keys given (a ':' outside strings): the parser's work beyond the
 * bytes themselves (each object is a hash table), and how deep they nest. One pass over the
 * bytes, stopping once past a cap; a text that is not JSON is left to the parser to refuse. */
typedef struct json_shape {
    int64_t nodes, depth;
} json_shape;

static json_shape shape_of(const char *p, size_t n, const srv_limits *lim) {
    json_shape sh = {0, 0};
    int64_t depth = 0;
    bool in_string = false;
    for (size_t i = 0; i < n && sh.nodes <= lim->max_json_nodes && sh.depth <= lim->max_depth; i++) {
        char ch = p[i];
        if (in_string) {
            if (ch == '\\') i++;
            else if (ch == '"') in_string = false;
        } else if (ch == '"') in_string = true;
        else if (ch == '{' || ch == '[') {
            sh.nodes++;
            if (++depth > sh.depth) sh.depth = depth;
        } else if (ch == '}' || ch == ']') depth--;
        else if (ch == ':') sh.nodes++;
    }
    return sh;
}

/* A JSON text (what: the body, or a field holding one) within the caps on its shape, checked
 * before it is parsed: 0, or -1 with a 400 (nesting) or 413 (size). */
static int check_shape(const srv_limits *lim, const char *p, size_t n, const char *what, int *status, qhx_error *err) {
    json_shape sh = shape_of(p, n, lim);
    if (sh.depth > lim->max_depth)
        return fail(status, 400, err, "%s nests more than %lld levels deep (JSON objects and lists)", what,
                    (long long)lim->max_depth);
    if (sh.nodes > lim->max_json_nodes)
        return fail(status, 413, err, "%s holds more than %lld JSON objects, lists and keys", what,
                    (long long)lim->max_json_nodes);
    return 0;
}

/* ---- field helpers ------------------------------------------------------------------------- */

static bool present(json_t *v) { return v && !json_is_null(v); }

static int get_number(json_t *root, const char *key, double lo, double hi, float *out, int *status, qhx_error *err) {
    json_t *v = json_object_get(root, key);
    if (!present(v)) return 0;
    if (!json_is_number(v)) return fail(status, 400, err, "'%s' must be a number", key);
    double d = json_number_value(v);
    if (!isfinite(d) || d < lo || d > hi) return fail(status, 400, err, "'%s' = %g is outside [%g, %g]", key, d, lo, hi);
    *out = (float)d;
    return 0;
}

static int get_int(json_t *root, const char *key, int64_t lo, int64_t hi, int64_t *out, int *status, qhx_error *err) {
    json_t *v = json_object_get(root, key);
    if (!present(v)) return 0;
    if (!json_is_integer(v)) return fail(status, 400, err, "'%s' must be an integer", key);
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return fail(status, 400, err, "'%s' = %lld is outside [%lld, %lld]", key, (long long)x, (long long)lo,
                    (long long)hi);
    *out = (int64_t)x;
    return 0;
}

static int get_bool(json_t *root, const char *key, bool *out, int *status, qhx_error *err) {
    json_t *v = json_object_get(root, key);
    if (!present(v)) return 0;
    if (!json_is_boolean(v)) return fail(status, 400, err, "'%s' must be true or false", key);
    *out = json_is_true(v);
    return 0;
}

/* Sampling, max_tokens, stop, n, seed, stream, logprobs: shared by both endpoints. */
static int common_fields(const qhx_model *m, const srv_config *cfg, json_t *root, srv_job *j, int *status,
                         qhx_error *err) {
    const srv_limits *lim = &cfg->lim;
    qhx_sample_params *sp = &j->sampling;
    *sp = qhx_session_default_params(m).sampling;
    if (get_number(root, "temperature", 0, 100, &sp->temperature, status, err)) return -1;
    if (get_number(root, "top_p", 0, 1, &sp->top_p, status, err)) return -1;
    if (get_number(root, "min_p", 0, 0.999999, &sp->min_p, status, err)) return -1;
    if (get_number(root, "repeat_penalty", 0, 100, &sp->repeat_penalty, status, err)) return -1;
    if (get_number(root, "presence_penalty", -2, 2, &sp->presence_penalty, status, err)) return -1;
    if (get_number(root, "frequency_penalty", -2, 2, &sp->frequency_penalty, status, err)) return -1;
    int64_t top_k = sp->top_k, seed = 0, n = 1, rln = sp->repeat_last_n;
    if (get_int(root, "top_k", -1, 1 << 24, &top_k, status, err)) return -1;
    sp->top_k = top_k < 0 ? 0 : (int32_t)top_k;
    if (get_int(root, "repeat_last_n", 0, 1 << 20, &rln, status, err)) return -1;
    sp->repeat_last_n = (int32_t)rln;
    json_t *sv = json_object_get(root, "seed");
    if (present(sv) && !json_is_integer(sv)) return fail(status, 400, err, "'seed' must be an integer");
    if (present(sv)) seed = (int64_t)json_integer_value(sv);
    sp->seed = (uint64_t)seed;
    if (get_int(root, "n", 1, 1 << 20, &n, status, err)) return -1;
    if (n > SRV_MAX_CHOICES)
        return fail(status, 400, err, "'n' = %lld: at most %d choices per request", (long long)n, SRV_MAX_CHOICES);
    j->n_choices = (int)n;
    int64_t mt = -1;
    if (get_int(root, "max_tokens", 1, INT64_MAX, &mt, status, err)) return -1;
    if (get_int(root, "max_completion_tokens", 1, INT64_MAX, &mt, status, err)) return -1;
    if (mt > lim->max_tokens)
        return fail(status, 400, err, "'max_tokens' = %lld: the server's cap is %lld", (long long)mt,
                    (long long)lim->max_tokens);
    j->max_tokens = mt;
    if (get_bool(root, "stream", &j->stream, status, err)) return -1;
    json_t *so = json_object_get(root, "stream_options");
    if (present(so) && !json_is_object(so)) return fail(status, 400, err, "'stream_options' must be an object");
    if (present(so) && get_bool(so, "include_usage", &j->include_usage, status, err)) return -1;
    bool ignore_eos = false;
    if (get_bool(root, "ignore_eos", &ignore_eos, status, err)) return -1;
    j->ignore_eos = ignore_eos;
    int64_t spec = 0;
    if (get_int(root, "spec_draft", -1, 8, &spec, status, err)) return -1;
    j->spec_draft = (int)spec;
    if (srv_request_constraint(root, j, status, err)) return -1; /* constrain.c */
    json_t *stop = json_object_get(root, "stop");
    if (present(stop)) {
        if (!json_is_string(stop) && !json_is_array(stop))
            return fail(status, 400, err, "'stop' must be a string or a list of strings");
        size_t ns = json_is_string(stop) ? 1 : json_array_size(stop);
        if ((int64_t)ns > lim->max_stops)
            return fail(status, 400, err, "'stop': %zu strings, at most %lld", ns, (long long)lim->max_stops);
        j->stops = calloc(ns ? ns : 1, sizeof *j->stops);
        if (!j->stops) return fail(status, 503, err, "out of memory");
        for (size_t i = 0; i < ns; i++) {
            json_t *s = json_is_string(stop) ? stop : json_array_get(stop, i);
            if (!json_is_string(s)) return fail(status, 400, err, "'stop'[%zu] must be a string", i);
            size_t sl = json_string_length(s);
            if (sl == 0) continue;
            if ((int64_t)sl > lim->max_stop_len)
                return fail(status, 400, err, "'stop'[%zu]: %zu bytes, at most %lld", i, sl, (long long)lim->max_stop_len);
            if (memchr(json_string_value(s), 0, sl)) return fail(status, 400, err, "'stop'[%zu] holds a NUL", i);
            if (!(j->stops[j->n_stops++] = strdup(json_string_value(s)))) return fail(status, 503, err, "out of memory");
        }
    }
    /* vLLM's extension: token ids that end the answer (in the vocabulary: checked here, before
       the request queues or a stream starts, as the decoder would) */
    json_t *ids = json_object_get(root, "stop_token_ids");
    if (present(ids)) {
        if (!json_is_array(ids)) return fail(status, 400, err, "'stop_token_ids' must be a list of token ids");
        size_t ni = json_array_size(ids);
        if ((int64_t)ni > lim->max_stops)
            return fail(status, 400, err, "'stop_token_ids': %zu ids, at most %lld", ni, (long long)lim->max_stops);
        j->stop_ids = calloc(ni ? ni : 1, sizeof *j->stop_ids);
        if (!j->stop_ids) return fail(status, 503, err, "out of memory");
        for (size_t i = 0; i < ni; i++) {
            json_t *v = json_array_get(ids, i);
            if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= qhx_model_n_vocab(m))
                return fail(status, 400, err, "'stop_token_ids'[%zu] is not a token id in [0, %lld)", i,
                            (long long)qhx_model_n_vocab(m));
            j->stop_ids[j->n_stop_ids++] = (qhx_token)json_integer_value(v);
        }
    }
    return 0;
}

/* ---- chat messages ------------------------------------------------------------------------- */

/* JSON text of v as the templates' tojson writes it (floats as Python's repr: tojson.c). */
static char *dump_json(json_t *v) { return srv_tojson(v); }

/* A JSON value as the Qwen3.5 template prints a tool-call argument (str() of a scalar). */
static char *arg_text(json_t *v) {
    char buf[64];
    if (json_is_object(v) || json_is_array(v)) return dump_json(v);
    if (json_is_string(v)) return strdup(json_string_value(v));
    if (json_is_true(v)) return strdup("True");
    if (json_is_false(v)) return strdup("False");
    if (json_is_null(v)) return strdup("None");
    if (json_is_integer(v)) snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(v));
    else srv_py_float(json_real_value(v), buf, sizeof buf); /* Python's str() of a float */
    return strdup(buf);
}

/* ---- tool names ------------------------------------------------------------------------------ */

#define MAX_TOOL_NAME 128 /* bytes; OpenAI's own cap is 64 */

/* The byte of name that the model's chat format cannot write in a call, or -1 when it can write
 * all of it (docs/server.md, "Tool names"). Refused everywhere: a control byte, and '<', with
 * which every marker of a call starts (a name holding one could end the call early). Where calls
 * are blocks (tool_fn_open NAME '>'), also '>', at which the name ends; where they are JSON
 * objects, '"' and '\\', as the template writes the name between quotes as it is (and the tool-call
 * grammar refuses them). Names are refused, not escaped: the model reads and writes the name as
 * the template shows it, and an escaped name would be one it cannot call. */
static int unwritable_byte(const qhx_chat_markers *mk, const char *name, size_t len) {
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)name[i];
        bool bad = ch < 0x20 || ch == 0x7f || ch == '<';
        if (mk->tool_fn_open) bad = bad || ch == '>';
        else bad = bad || ch == '"' || ch == '\\';
        if (bad) return ch;
    }
    return -1;
}

/* A function or argument name (what: where it is, for the message) that the chat format can
 * write: 0, or -1 with a 400 naming it and the byte. */
static int check_name(const chat_req *c, const char *s, size_t len, const char *what, int *status, qhx_error *err) {
    if (len == 0) return fail(status, 400, err, "%s is empty", what);
    if (len > MAX_TOOL_NAME)
        return fail(status, 400, err, "%s '%.32s...': %zu bytes, at most %d", what, s, len, MAX_TOOL_NAME);
    int ch = unwritable_byte(&c->mk, s, len);
    if (ch < 0) return 0;
    if (ch < 0x20 || ch == 0x7f)
        return fail(status, 400, err, "%s holds the control byte \\x%02x, which this model's chat format cannot write in a tool call",
                    what, ch);
    return fail(status, 400, err, "%s '%s' holds '%c', which this model's chat format cannot write in a tool call", what, s, ch);
}

static int tool_calls_of(chat_req *c, json_t *list, size_t idx, qhx_chat_turn *t, int *status, qhx_error *err) {
    if (!json_is_array(list)) return fail(status, 400, err, "messages[%zu].tool_calls must be a list", idx);
    t->calls = &c->calls[c->n_calls];
    size_t k;
    json_t *call;
    json_array_foreach(list, k, call) {
        json_t *fn = json_is_object(call) ? json_object_get(call, "function") : NULL;
        if (!json_is_object(fn)) return fail(status, 400, err, "messages[%zu].tool_calls[%zu] has no 'function' object", idx, k);
        json_t *name = json_object_get(fn, "name");
        if (!json_is_string(name)) return fail(status, 400, err, "messages[%zu].tool_calls[%zu].function.name must be a string", idx, k);
        char what[96];
        snprintf(what, sizeof what, "messages[%zu].tool_calls[%zu].function.name", idx, k);
        if (check_name(c, json_string_value(name), json_string_length(name), what, status, err)) return -1;
        json_t *args = json_object_get(fn, "arguments"), *parsed = NULL;
        if (json_is_string(args) && json_string_length(args)) { /* the OpenAI shape: a JSON text ("": none) */
            snprintf(what, sizeof what, "messages[%zu].tool_calls[%zu].function.arguments", idx, k);
            if (check_shape(c->lim, json_string_value(args), json_string_length(args), what, status, err)) return -1;
            json_error_t je;
            parsed = json_loadb(json_string_value(args), json_string_length(args), JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
            if (!parsed)
                return fail(status, 400, err, "messages[%zu].tool_calls[%zu].function.arguments is not valid JSON (column %d: %s)",
                            idx, k, je.column, je.text);
            args = parsed;
        } else if (json_is_string(args)) args = NULL;
        else if (present(args)) json_incref(args);
        if (present(args) && !json_is_object(args)) {
            json_decref(args);
            return fail(status, 400, err, "messages[%zu].tool_calls[%zu].function.arguments must be a JSON object", idx, k);
        }
        if ((int64_t)(c->n_args + json_object_size(args)) > c->lim->max_args) {
            json_decref(args);
            return fail(status, 413, err, "messages[%zu].tool_calls[%zu]: more than %lld tool-call arguments in all", idx, k,
                        (long long)c->lim->max_args);
        }
        qhx_chat_call *tc = &c->calls[c->n_calls++];
        *tc = (qhx_chat_call){.name = json_string_value(name), .args = &c->args[c->n_args]};
        /* the whole object too, for a format that prints it as tojson (Qwen3-VL) */
        if (present(args) && !(tc->arguments = own(c, dump_json(args)))) {
            json_decref(args);
            return fail(status, 503, err, "out of memory");
        }
        const char *key;
        json_t *v;
        int bad = 0;
        json_object_foreach(args, key, v) {
            /* a format of blocks writes each argument's name as it writes the function's */
            snprintf(what, sizeof what, "messages[%zu].tool_calls[%zu].function.arguments key", idx, k);
            if (c->mk.tool_fn_open && check_name(c, key, strlen(key), what, status, err)) {
                json_decref(args);
                return -1;
            }
            char *text = own(c, arg_text(v));
            char *kname = own(c, strdup(key));
            if (!text || !kname) {
                bad = 1;
                break;
            }
            c->args[c->n_args++] = (qhx_chat_call_arg){.name = kname, .value = text};
            tc->n_args++;
        }
        json_decref(args);
        if (bad) return fail(status, 503, err, "out of memory");
        t->n_calls++;
    }
    return 0;
}

/* An image part: a data: URL with base64 PNG or JPEG. Remote URLs are refused. */
static int image_part(chat_req *c, json_t *item, size_t idx, size_t k, qhx_chat_content *p, int *status, qhx_error *err) {
    json_t *iu = json_object_get(item, "image_url");
    json_t *url = json_is_object(iu) ? json_object_get(iu, "url") : iu;
    if (!json_is_string(url)) return fail(status, 400, err, "messages[%zu].content[%zu].image_url.url must be a string", idx, k);
    const char *u = json_string_value(url);
    size_t n = json_string_length(url);
    if (strncmp(u, "data:", 5))
        return fail(status, 400, err, "messages[%zu].content[%zu]: only data: URLs (base64 PNG or JPEG) are taken; remote image URLs are not fetched", idx, k);
    const char *comma = memchr(u, ',', n);
    if (!comma || !strstr(u, ";base64") || strstr(u, ";base64") > comma)
        return fail(status, 400, err, "messages[%zu].content[%zu]: the data: URL must be base64 (data:image/png;base64,...)", idx, k);
    size_t bytes = 0;
    unsigned char *img = b64_decode(comma + 1, n - (size_t)(comma + 1 - u), &bytes);
    if (!img) return fail(status, 400, err, "messages[%zu].content[%zu]: the data: URL is not valid base64", idx, k);
    if (!own(c, (char *)img)) return fail(status, 503, err, "out of memory");
    *p = (qhx_chat_content){.text = NULL, .image = img, .image_size = bytes};
    return 0;
}

/* A video part ({"type": "video_url", "video_url": {"url": "data:video/mp4;base64,..."}}): the
 * bytes of the file, decoded by the library; remote URLs are refused as for images. */
static int video_part(chat_req *c, json_t *item, size_t idx, size_t k, qhx_chat_content *p, int *status, qhx_error *err) {
    json_t *vu = json_object_get(item, "video_url");
    json_t *url = json_is_object(vu) ? json_object_get(vu, "url") : vu;
    if (!json_is_string(url)) return fail(status, 400, err, "messages[%zu].content[%zu].video_url.url must be a string", idx, k);
    const char *u = json_string_value(url);
    size_t n = json_string_length(url);
    if (strncmp(u, "data:", 5))
        return fail(status, 400, err, "messages[%zu].content[%zu]: only data: URLs (base64 video files) are taken; remote video URLs are not fetched", idx, k);
    const char *comma = memchr(u, ',', n);
    if (!comma || !strstr(u, ";base64") || strstr(u, ";base64") > comma)
        return fail(status, 400, err, "messages[%zu].content[%zu]: the data: URL must be base64 (data:video/mp4;base64,...)", idx, k);
    size_t bytes = 0;
    unsigned char *vid = b64_decode(comma + 1, n - (size_t)(comma + 1 - u), &bytes);
    if (!vid) return fail(status, 400, err, "messages[%zu].content[%zu]: the data: URL is not valid base64", idx, k);
    if (!own(c, (char *)vid)) return fail(status, 503, err, "out of memory");
    *p = (qhx_chat_content){.text = NULL, .video = vid, .video_size = bytes};
    return 0;
}

static int parts_of(chat_req *c, json_t *list, size_t idx, qhx_chat_turn *t, int *status, qhx_error *err) {
    /* images only in user messages: the API's tool result is text (a tool message's parts are
     * text parts), so an image there is a client's mistake, not something to render */
    const bool takes_images = !strcmp(t->role, "user");
    t->parts = &c->parts[c->n_parts];
    size_t k;
    json_t *item;
    json_array_foreach(list, k, item) {
        if (!json_is_object(item)) return fail(status, 400, err, "messages[%zu].content[%zu] must be an object", idx, k);
        const char *type = json_string_value(json_object_get(item, "type"));
        qhx_chat_content *p = &c->parts[c->n_parts];
        if (type && !strcmp(type, "text")) {
            json_t *text = json_object_get(item, "text");
            if (!json_is_string(text)) return fail(status, 400, err, "messages[%zu].content[%zu].text must be a string", idx, k);
            *p = (qhx_chat_content){.text = json_string_value(text), .text_len = json_string_length(text)};
        } else if (type && !strcmp(type, "image_url")) {
            if (!takes_images)
                return fail(status, 400, err,
                            "messages[%zu].content[%zu]: an image in a '%s' message is not taken (images go in user messages)",
                            idx, k, t->role);
            if (image_part(c, item, idx, k, p, status, err)) return -1;
        } else if (type && !strcmp(type, "video_url")) {
            if (!takes_images)
                return fail(status, 400, err,
                            "messages[%zu].content[%zu]: a video in a '%s' message is not taken (videos go in user messages)",
                            idx, k, t->role);
            if (video_part(c, item, idx, k, p, status, err)) return -1;
        } else
            return fail(status, 400, err, "messages[%zu].content[%zu]: type '%s' is not 'text', 'image_url' or 'video_url'", idx, k,
                        type ? type : "(none)");
        c->n_parts++;
        t->n_parts++;
    }
    return 0;
}

static int count_items(json_t *msgs, size_t *parts, size_t *calls, size_t *args) {
    size_t i;
    json_t *m;
    *parts = *calls = *args = 0;
    json_array_foreach(msgs, i, m) {
        json_t *content = json_object_get(m, "content");
        if (json_is_array(content)) *parts += json_array_size(content);
        json_t *tc = json_object_get(m, "tool_calls");
        if (json_is_array(tc)) {
            *calls += json_array_size(tc);
            size_t k;
            json_t *call;
            json_array_foreach(tc, k, call) {
                json_t *a = json_object_get(json_object_get(call, "function"), "arguments");
                /* a JSON text: at most one argument per ':' it holds */
                if (json_is_string(a)) {
                    const char *s = json_string_value(a);
                    for (size_t q = 0; q < json_string_length(a); q++) *args += s[q] == ':';
                } else if (json_is_object(a)) *args += json_object_size(a);
            }
        }
    }
    return 0;
}

static int messages_of(chat_req *c, const srv_config *cfg, json_t *msgs, int *status, qhx_error *err) {
    if (!json_is_array(msgs) || json_array_size(msgs) == 0)
        return fail(status, 400, err, "'messages' must be a non-empty list");
    size_t n = json_array_size(msgs);
    if ((int64_t)n > cfg->lim.max_messages)
        return fail(status, 413, err, "'messages': %zu messages, at most %lld", n, (long long)cfg->lim.max_messages);
    size_t np, nc, na;
    count_items(msgs, &np, &nc, &na);
    /* structural caps, before anything is built: a body under the byte cap can still hold a
       million empty parts or calls, each a piece of work for the renderer */
    if ((int64_t)np > cfg->lim.max_parts)
        return fail(status, 413, err, "'messages': %zu content parts in all, at most %lld", np, (long long)cfg->lim.max_parts);
    if ((int64_t)nc > cfg->lim.max_calls)
        return fail(status, 413, err, "'messages': %zu tool calls in all, at most %lld", nc, (long long)cfg->lim.max_calls);
    c->turns = calloc(n, sizeof *c->turns);
    c->parts = calloc(np + 1, sizeof *c->parts);
    c->calls = calloc(nc + 1, sizeof *c->calls);
    c->args = calloc(na + 1, sizeof *c->args);
    if (!c->turns || !c->parts || !c->calls || !c->args) return fail(status, 503, err, "out of memory");
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        if (!json_is_object(m)) return fail(status, 400, err, "messages[%zu] must be an object", i);
        qhx_chat_turn *t = &c->turns[i];
        json_t *role = json_object_get(m, "role");
        if (!json_is_string(role)) return fail(status, 400, err, "messages[%zu].role must be a string", i);
        const char *r = json_string_value(role);
        if (!strcmp(r, "developer")) r = "system";
        if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant") && strcmp(r, "tool"))
            return fail(status, 400, err, "messages[%zu].role '%s' is not system, user, assistant or tool", i, r);
        t->role = r;
        json_t *content = json_object_get(m, "content");
        if (json_is_string(content)) {
            if (memchr(json_string_value(content), 0, json_string_length(content)))
                return fail(status, 400, err, "messages[%zu].content holds a NUL character", i);
            t->content = json_string_value(content);
        } else if (json_is_array(content)) {
            if (parts_of(c, content, i, t, status, err)) return -1;
        } else if (present(content))
            return fail(status, 400, err, "messages[%zu].content must be a string or a list of parts", i);
        json_t *rc = json_object_get(m, "reasoning_content");
        if (present(rc) && !json_is_string(rc)) return fail(status, 400, err, "messages[%zu].reasoning_content must be a string", i);
        if (json_is_string(rc) && !strcmp(r, "assistant") && json_string_length(rc)) t->reasoning = json_string_value(rc);
        json_t *calls = json_object_get(m, "tool_calls");
        if (present(calls) && tool_calls_of(c, calls, i, t, status, err)) return -1;
    }
    return 0;
}

/* tool_choice: "none" (the tools are not rendered: the model cannot know them), "auto",
 * "required" or {"type": "function", "function": {"name": NAME}}. The last two force the answer
 * to start a tool call (*prefix: the text it starts with, owned by c), as there is no grammar
 * to hold the model to one: the chat format's tool_prefix, or tool_prefix NAME tool_named. */
static int tool_choice_of(chat_req *c, json_t *choice, const qhx_chat_markers *mk, bool *none, char **prefix,
                          int *status, qhx_error *err) {
    *none = false;
    *prefix = NULL;
    if (!present(choice)) return 0;
    if (json_is_string(choice)) {
        const char *v = json_string_value(choice);
        if (strcmp(v, "none") && strcmp(v, "auto") && strcmp(v, "required"))
            return fail(status, 400, err, "'tool_choice' '%s' is not none, auto or required", v);
        *none = !strcmp(v, "none");
        if (strcmp(v, "required")) return 0;
        if (!mk->tool_prefix) return fail(status, 400, err, "'tool_choice' 'required': this model's chat format has no tool calls");
        if (!(*prefix = own(c, strdup(mk->tool_prefix)))) return fail(status, 503, err, "out of memory");
        return 0;
    }
    if (!json_is_object(choice)) return fail(status, 400, err, "'tool_choice' must be a string or an object");
    json_t *type = json_object_get(choice, "type"), *fn = json_object_get(choice, "function");
    json_t *name = json_is_object(fn) ? json_object_get(fn, "name") : NULL;
    if (!json_is_string(type) || strcmp(json_string_value(type), "function") || !json_is_string(name))
        return fail(status, 400, err, "'tool_choice' must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    /* the name goes into the answer's forced start as it is: it must be one the format can write
       (the offered tool of that name is checked as well, below) */
    if (check_name(c, json_string_value(name), json_string_length(name), "'tool_choice'.function.name", status, err))
        return -1;
    if (!mk->tool_prefix || !mk->tool_named)
        return fail(status, 400, err, "'tool_choice': this model's chat format has no tool calls");
    size_t n = strlen(mk->tool_prefix) + json_string_length(name) + strlen(mk->tool_named) + 1;
    char *p = malloc(n);
    if (!p) return fail(status, 503, err, "out of memory");
    snprintf(p, n, "%s%s%s", mk->tool_prefix, json_string_value(name), mk->tool_named);
    if (!(*prefix = own(c, p))) return fail(status, 503, err, "out of memory");
    return 0;
}

/* Is name one of the request's tools' function names? */
static bool offers_tool(json_t *tools, const char *name, size_t len) {
    size_t k;
    json_t *tool;
    json_array_foreach(tools, k, tool) {
        json_t *n = json_object_get(json_object_get(tool, "function"), "name");
        if (json_string_length(n) == len && !memcmp(json_string_value(n), name, len)) return true;
    }
    return false;
}

/* tools[k]'s function fn: a name the chat format can write, not offered before, and (where
 * calls are blocks, which write each argument's name as the function's) parameter names that
 * can be written too. */
static int check_tool(const chat_req *c, json_t *tools, size_t k, json_t *fn, int *status, qhx_error *err) {
    json_t *name = json_object_get(fn, "name");
    char what[96];
    snprintf(what, sizeof what, "tools[%zu].function.name", k);
    if (check_name(c, json_string_value(name), json_string_length(name), what, status, err)) return -1;
    for (size_t i = 0; i < k; i++) {
        json_t *other = json_object_get(json_object_get(json_array_get(tools, i), "function"), "name");
        if (json_equal(name, other))
            return fail(status, 400, err, "tools[%zu].function.name '%s' is offered twice (tools[%zu] too)", k,
                        json_string_value(name), i);
    }
    json_t *params = json_object_get(fn, "parameters");
    if (present(params) && !json_is_object(params))
        return fail(status, 400, err, "tools[%zu].function.parameters must be a JSON Schema (an object)", k);
    json_t *props = json_object_get(params, "properties");
    if (!c->mk.tool_fn_open || !json_is_object(props)) return 0;
    const char *key;
    json_t *v;
    json_object_foreach(props, key, v) {
        snprintf(what, sizeof what, "tools[%zu].function.parameters.properties key", k);
        if (check_name(c, key, strlen(key), what, status, err)) return -1;
    }
    return 0;
}

static int tools_of(chat_req *c, const qhx_model *m, const srv_config *cfg, json_t *root, int *status, qhx_error *err) {
    json_t *tools = json_object_get(root, "tools");
    json_t *choice = json_object_get(root, "tool_choice");
    bool none;
    (void)m;
    if (tool_choice_of(c, choice, &c->mk, &none, &c->forced, status, err)) return -1;
    if (!present(tools) || (json_is_array(tools) && json_array_size(tools) == 0)) {
        if (c->forced) return fail(status, 400, err, "'tool_choice' forces a tool call but 'tools' is empty");
        if (!present(tools)) return 0;
    }
    if (!json_is_array(tools)) return fail(status, 400, err, "'tools' must be a list");
    size_t n = json_array_size(tools);
    if ((int64_t)n > cfg->lim.max_tools) return fail(status, 413, err, "'tools': %zu, at most %lld", n, (long long)cfg->lim.max_tools);
    c->tools = calloc(n + 1, sizeof *c->tools);
    if (!c->tools) return fail(status, 503, err, "out of memory");
    size_t k;
    json_t *tool;
    json_array_foreach(tools, k, tool) {
        json_t *fn = json_is_object(tool) ? json_object_get(tool, "function") : NULL;
        if (!json_is_object(fn) || !json_is_string(json_object_get(fn, "name")))
            return fail(status, 400, err, "tools[%zu] must be {\"type\": \"function\", \"function\": {\"name\": ...}}", k);
        if (check_tool(c, tools, k, fn, status, err)) return -1;
        if (none) continue; /* checked as any other, not offered */
        /* the template's tojson: ", " and ": " separators, keys in the given order, UTF-8 as is */
        char *text = own(c, dump_json(tool));
        if (!text) return fail(status, 503, err, "out of memory");
        c->tools[c->n_tools++] = text;
    }
    json_t *named = json_is_object(choice) ? json_object_get(json_object_get(choice, "function"), "name") : NULL;
    if (named && !offers_tool(tools, json_string_value(named), json_string_length(named)))
        return fail(status, 400, err, "'tool_choice' names the function '%s', which is not one of 'tools'", json_string_value(named));
    return 0;
}

static json_t *parse_body(const srv_config *cfg, const char *body, size_t len, int *status, qhx_error *err) {
    if (check_shape(&cfg->lim, body, len, "the body", status, err)) return NULL;
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        fail(status, 400, err, "the body is not valid JSON (line %d, column %d: %s)", je.line, je.column, je.text);
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        fail(status, 400, err, "the body must be a JSON object");
        return NULL;
    }
    return root;
}

json_t *srv_request_body(const srv_config *cfg, const char *body, size_t len, int *status, qhx_error *err) {
    return parse_body(cfg, body, len, status, err);
}

static void job_id(srv_job *j, const char *prefix) {
    static atomic_ullong counter;
    unsigned long long k = atomic_fetch_add(&counter, 1) + 1;
    snprintf(j->id, sizeof j->id, "%s-%llx%08llx", prefix, (unsigned long long)j->created, k);
}

static int prompt_status(qhx_status rc) { return srv_http_status(rc); }

/* The prompt and max_tokens against a slot's context (cfg->ctx; 0: not known here), as the engine
 * would check them, so that a request past it is refused before it queues and before a stream's
 * headers go out. */
static int fits_context(const srv_config *cfg, srv_job *j, int *status, qhx_error *err) {
    size_t n;
    qhx_prompt_ids(j->prompt, &n);
    if (cfg->ctx <= 0) return 0;
    if ((int64_t)n >= cfg->ctx)
        return fail(status, 400, err, "the prompt has %zu tokens; the context is %lld tokens", n, (long long)cfg->ctx);
    if (j->max_tokens > cfg->ctx - (int64_t)n)
        return fail(status, 400, err, "the prompt (%zu tokens) + max_tokens (%lld) exceed the context of %lld tokens", n,
                    (long long)j->max_tokens, (long long)cfg->ctx);
    return 0;
}

/* The room an answer needs beside the prompt: max_tokens when given, else a quarter of the
 * context, at most SRV_MIN_ANSWER_ROOM tokens (a prompt that fills all but a few tokens would
 * leave the answer no room to say anything). */
static int64_t answer_room(const srv_config *cfg, const srv_job *j) {
    if (j->max_tokens > 0) return j->max_tokens;
    int64_t q = cfg->ctx / 4;
    return q < SRV_MIN_ANSWER_ROOM ? q : SRV_MIN_ANSWER_ROOM;
}

/* The context shift: a conversation whose prompt and answer room exceed a slot's context drops
 * its oldest turns after the system prompt, a round at a time (up to the next user turn, so
 * that no tool result or answer is kept without the turn it answers), until it fits, and is
 * prefilled again (the engine reuses the longest prefix a slot holds: the system prompt). The
 * last user turn and what follows it are never dropped: a conversation that does not fit even
 * then is refused by fits_context. Sets j->truncated and j->dropped. 0, or -1 with *status. */
static int shift_context(const qhx_model *m, const srv_config *cfg, qhx_chat_spec *spec, srv_job *j, int *status,
                         qhx_error *err) {
    if (cfg->ctx <= 0) return 0;
    size_t n = 0;
    qhx_prompt_ids(j->prompt, &n);
    int64_t room = answer_room(cfg, j);
    if ((int64_t)n + room <= cfg->ctx) return 0;
    const qhx_chat_turn *all = spec->turns;
    size_t n_all = spec->n_turns, head = n_all && !strcmp(all[0].role, "system") ? 1 : 0, last_user = n_all;
    for (size_t i = n_all; i-- > head;)
        if (!strcmp(all[i].role, "user")) {
            last_user = i;
            break;
        }
    if (last_user == n_all) return 0; /* no user turn: nothing to drop that would leave a question */
    qhx_chat_turn *kept = malloc(n_all * sizeof *kept);
    if (!kept) return fail(status, 503, err, "out of memory");
    size_t from = head;
    while ((int64_t)n + room > cfg->ctx && from < last_user) {
        from++; /* one round: up to the next user turn */
        while (from < last_user && strcmp(all[from].role, "user")) from++;
        memcpy(kept, all, head * sizeof *kept);
        memcpy(kept + head, all + from, (n_all - from) * sizeof *kept);
        qhx_chat_spec shorter = *spec;
        shorter.turns = kept;
        shorter.n_turns = head + n_all - from;
        qhx_prompt *p = NULL;
        qhx_status rc = qhx_prompt_from_chat(m, &shorter, &p, err);
        if (rc) {
            free(kept);
            *status = prompt_status(rc);
            return -1;
        }
        qhx_prompt_free(j->prompt);
        j->prompt = p;
        qhx_prompt_ids(p, &n);
        j->truncated = true;
        j->dropped = (int64_t)(from - head);
    }
    free(kept);
    return 0;
}

srv_job *srv_request_chat(const qhx_model *m, const srv_config *cfg, const char *body, size_t len, int *status,
                          qhx_error *err) {
    json_t *root = parse_body(cfg, body, len, status, err);
    if (!root) return NULL;
    srv_job *j = srv_job_new();
    chat_req c = {0};
    if (!j) {
        fail(status, 503, err, "out of memory");
        goto bad;
    }
    j->kind = SRV_CHAT;
    c.lim = &cfg->lim;
    qhx_model_chat_markers(m, &c.mk);
    if (common_fields(m, cfg, root, j, status, err)) goto bad;
    bool lp = false;
    int64_t top = 0;
    if (get_bool(root, "logprobs", &lp, status, err)) goto bad;
    if (get_int(root, "top_logprobs", 0, cfg->lim.max_top_logprobs, &top, status, err)) goto bad;
    j->logprobs = lp;
    j->top_logprobs = (int)top;
    bool thinking = false;
    json_t *kw = json_object_get(root, "chat_template_kwargs");
    if (present(kw) && !json_is_object(kw)) {
        fail(status, 400, err, "'chat_template_kwargs' must be an object");
        goto bad;
    }
    if (present(kw) && get_bool(kw, "enable_thinking", &thinking, status, err)) goto bad;
    bool vision_id = false; /* the templates' add_vision_id: "Picture N: " before each image */
    if (present(kw) && get_bool(kw, "add_vision_id", &vision_id, status, err)) goto bad;
    if (!qhx_model_has_thinking(m)) thinking = false; /* Qwen3-VL Instruct: no thinking mode */
    if (messages_of(&c, cfg, json_object_get(root, "messages"), status, err)) goto bad;
    if (tools_of(&c, m, cfg, root, status, err)) goto bad;
    if (c.forced) thinking = false; /* the answer starts with the call, not a think block */
    if (c.forced && j->grammar) {
        fail(status, 400, err, "'tool_choice' forces a tool call: 'response_format'/'grammar'/'json_schema' cannot apply too");
        goto bad;
    }
    if (c.forced && srv_request_tool_grammar(m, root, c.tools, c.n_tools, j, status, err)) goto bad; /* constrain.c */
    if (j->grammar) thinking = false; /* the grammar holds from the answer's first byte */
    if (c.forced && !(j->answer_prefix = strdup(c.forced))) {
        fail(status, 503, err, "out of memory");
        goto bad;
    }
    qhx_chat_spec spec = {.turns = c.turns, .n_turns = json_array_size(json_object_get(root, "messages")),
                          .tools = c.tools, .n_tools = c.n_tools, .thinking = thinking,
                          .max_images = cfg->lim.max_images, .max_image_pixels = cfg->lim.max_image_pixels,
                          .max_image_tokens = cfg->lim.max_image_tokens, .answer_prefix = c.forced,
                          .add_vision_id = vision_id};
    /* A video is sampled with fewer frames (then pixels) until the prompt leaves the answer its
     * room (usage "video_fitted"); when even its fewest do not, the context shift may still make
     * room by dropping older turns, with the video as asked. */
    qhx_chat_spec fitted = spec;
    if (cfg->ctx > 0) fitted.max_tokens = cfg->ctx - answer_room(cfg, j) > 1 ? cfg->ctx - answer_room(cfg, j) : 1;
    qhx_status rc = qhx_prompt_from_chat(m, &fitted, &j->prompt, err);
    if (rc == QHX_E_LIMIT && cfg->context_shift && spec.n_turns > 1) rc = qhx_prompt_from_chat(m, &spec, &j->prompt, err);
    if (rc) {
        *status = prompt_status(rc);
        goto bad;
    }
    qhx_prompt_video_stats_get(j->prompt, &j->video);
    if (cfg->context_shift && shift_context(m, cfg, &spec, j, status, err)) goto bad;
    if (fits_context(cfg, j, status, err)) goto bad;
    j->thinking = thinking;
    j->tools = c.n_tools > 0;
    j->created = (int64_t)srv_now();
    job_id(j, "chatcmpl");
    chat_req_free(&c);
    json_decref(root);
    return j;
bad:
    chat_req_free(&c);
    json_decref(root);
    srv_job_unref(j);
    return NULL;
}

/* prompt: a string, a list of token ids, or a list holding one of those. */
static int completion_prompt(const qhx_model *m, const srv_config *cfg, json_t *p, srv_job *j, int *status, qhx_error *err) {
    if (json_is_array(p) && json_array_size(p) == 1 && !json_is_integer(json_array_get(p, 0))) p = json_array_get(p, 0);
    qhx_status rc;
    if (json_is_string(p)) {
        size_t n = 0;
        const char *s = json_string_value(p);
        size_t len = json_string_length(p);
        rc = qhx_tokenize(m, s, len, NULL, 0, &n, err);
        if (rc && rc != QHX_E_LIMIT) return fail(status, 400, err, "'prompt': %s", err->msg);
        if (n == 0) return fail(status, 400, err, "'prompt' is empty");
        qhx_token *ids = malloc(n * sizeof *ids);
        if (!ids) return fail(status, 503, err, "out of memory");
        rc = qhx_tokenize(m, s, len, ids, n, &n, err);
        if (!rc) rc = qhx_prompt_from_ids(m, ids, n, &j->prompt, err);
        free(ids);
        if (rc) return fail(status, prompt_status(rc), err, "'prompt': %s", err->msg);
        return 0;
    }
    if (!json_is_array(p) || json_array_size(p) == 0)
        return fail(status, 400, err, "'prompt' must be a string or a non-empty list of token ids (one prompt per request)");
    size_t n = json_array_size(p);
    if (n > 1 && (json_is_string(json_array_get(p, 0)) || json_is_array(json_array_get(p, 0))))
        return fail(status, 400, err, "'prompt' holds %zu prompts: one prompt per request is served", n);
    if ((int64_t)n > cfg->lim.max_prompt_ids) return fail(status, 413, err, "'prompt': %zu ids, at most %lld", n, (long long)cfg->lim.max_prompt_ids);
    qhx_token *ids = malloc(n * sizeof *ids);
    if (!ids) return fail(status, 503, err, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(p, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= qhx_model_n_vocab(m)) {
            free(ids);
            return fail(status, 400, err, "'prompt'[%zu] is not a token id in [0, %lld)", i, (long long)qhx_model_n_vocab(m));
        }
        ids[i] = (qhx_token)json_integer_value(v);
    }
    rc = qhx_prompt_from_ids(m, ids, n, &j->prompt, err);
    free(ids);
    return rc ? fail(status, prompt_status(rc), err, "'prompt': %s", err->msg) : 0;
}

/* echo's text: the prompt's tokens as text (a string prompt comes back as the tokenizer reads
 * it; a list of ids as their text). */
static int echo_text(const qhx_model *m, srv_job *j, int *status, qhx_error *err) {
    size_t n = 0, len = 0;
    const qhx_token *ids = qhx_prompt_ids(j->prompt, &n);
    qhx_status rc = qhx_detokenize(m, ids, n, NULL, 0, &len, err);
    if (rc && rc != QHX_E_LIMIT) return fail(status, 400, err, "'prompt': %s", err->msg);
    char *text = malloc(len + 1);
    if (!text) return fail(status, 503, err, "out of memory");
    rc = qhx_detokenize(m, ids, n, text, len + 1, &len, err);
    int bad = rc ? fail(status, 400, err, "'prompt': %s", err->msg)
                 : srv_buf_put(&j->echo_text, text, len) ? fail(status, 503, err, "out of memory") : 0;
    free(text);
    return bad;
}

srv_job *srv_request_completion(const qhx_model *m, const srv_config *cfg, const char *body, size_t len, int *status,
                                qhx_error *err) {
    json_t *root = parse_body(cfg, body, len, status, err);
    if (!root) return NULL;
    srv_job *j = srv_job_new();
    if (!j) {
        fail(status, 503, err, "out of memory");
        goto bad;
    }
    j->kind = SRV_COMPLETION;
    if (common_fields(m, cfg, root, j, status, err)) goto bad;
    if (j->max_tokens < 0) j->max_tokens = 16; /* the OpenAI default for completions */
    json_t *lp = json_object_get(root, "logprobs");
    if (present(lp)) {
        int64_t top = 0;
        if (!json_is_integer(lp)) {
            fail(status, 400, err, "'logprobs' must be an integer (the number of top tokens) for completions");
            goto bad;
        }
        if (get_int(root, "logprobs", 0, cfg->lim.max_top_logprobs, &top, status, err)) goto bad;
        j->logprobs = true;
        j->top_logprobs = (int)top;
    }
    if (get_bool(root, "echo", &j->echo, status, err)) goto bad;
    if (j->echo && j->logprobs) {
        fail(status, 400, err, "'echo' with 'logprobs': the prompt's log-probabilities are not computed; ask for one of them");
        goto bad;
    }
    json_t *p = json_object_get(root, "prompt");
    if (!present(p)) {
        fail(status, 400, err, "'prompt' is required");
        goto bad;
    }
    if (completion_prompt(m, cfg, p, j, status, err) || fits_context(cfg, j, status, err)) goto bad;
    if (j->echo && echo_text(m, j, status, err)) goto bad;
    j->created = (int64_t)srv_now();
    job_id(j, "cmpl");
    json_decref(root);
    return j;
bad:
    json_decref(root);
    srv_job_unref(j);
    return NULL;
}
