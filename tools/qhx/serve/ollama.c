/* ollama.c: ollama's API on qhx serve (docs/server.md, "ollama's API"). A request of
 * /api/chat or /api/generate is said again in the OpenAI chat or completions words and goes
 * through the same validation, limits and engine as those endpoints; the answer is written in
 * ollama's shapes by output.c (the job's ollama field). The model-information endpoints
 * (/api/tags, /api/show, /api/ps, /api/version) are built here. */
#include "serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int why_fail(char *why, size_t n, const char *msg) {
    snprintf(why, n, "%s", msg);
    return -1;
}

/* options: ollama's sampling names onto the OpenAI fields of out. num_predict -1 (endless) and
 * -2 (fill the context) are both "until the context"; num_ctx cannot exceed the slot the server
 * allocated and is accepted only up to it; the options of ollama's runner that have no meaning
 * here (num_gpu, num_thread, mirostat, use_mmap ...) are ignored, as ollama ignores unknown ones. */
static int apply_options(json_t *opts, json_t *out, int64_t n_ctx, char *why, size_t why_n) {
    if (!opts || json_is_null(opts)) return 0;
    if (!json_is_object(opts)) return why_fail(why, why_n, "'options' must be an object");
    static const char *const same[][2] = {
        {"temperature", "temperature"},       {"top_k", "top_k"},
        {"top_p", "top_p"},                   {"min_p", "min_p"},
        {"seed", "seed"},                     {"stop", "stop"},
        {"repeat_penalty", "repeat_penalty"}, {"repeat_last_n", "repeat_last_n"},
        {"presence_penalty", "presence_penalty"}, {"frequency_penalty", "frequency_penalty"},
    };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        json_t *v = json_object_get(opts, same[i][0]);
        if (v && !json_is_null(v)) json_object_set(out, same[i][1], v);
    }
    json_t *np = json_object_get(opts, "num_predict");
    if (np && !json_is_null(np)) {
        if (!json_is_integer(np)) return why_fail(why, why_n, "'options.num_predict' must be an integer");
        if (json_integer_value(np) > 0) json_object_set(out, "max_tokens", np);
        else if (json_integer_value(np) == 0) return why_fail(why, why_n, "'options.num_predict' = 0: nothing to generate");
    }
    json_t *nc = json_object_get(opts, "num_ctx");
    if (nc && !json_is_null(nc)) {
        if (!json_is_integer(nc) || json_integer_value(nc) < 1)
            return why_fail(why, why_n, "'options.num_ctx' must be a positive integer");
        if (n_ctx > 0 && json_integer_value(nc) > n_ctx) {
            snprintf(why, why_n,
                     "'options.num_ctx' = %lld: the server's slots hold %lld tokens each (qhx serve -c sets it)",
                     (long long)json_integer_value(nc), (long long)n_ctx);
            return -1;
        }
    }
    return 0;
}

/* format: "json" is a JSON object answer, an object is a JSON schema the answer follows. */
static int apply_format(json_t *fmt, json_t *out, char *why, size_t why_n) {
    if (!fmt || json_is_null(fmt) || (json_is_string(fmt) && !json_string_length(fmt))) return 0;
    if (json_is_string(fmt) && !strcmp(json_string_value(fmt), "json"))
        return json_object_set_new(out, "response_format", json_pack("{s:s}", "type", "json_object"));
    if (json_is_object(fmt))
        return json_object_set_new(out, "response_format",
                                   json_pack("{s:s,s:{s:s,s:O}}", "type", "json_schema", "json_schema", "name", "format",
                                             "schema", fmt));
    return why_fail(why, why_n, "'format' must be \"json\" or a JSON schema object");
}

/* think: true opens the model's thinking (false or absent: the server's default, off); the
 * levels ollama takes for other families ("low", "medium", "high") turn it on. */
static int apply_think(json_t *think, json_t *out, char *why, size_t why_n) {
    if (!think || json_is_null(think)) return 0;
    bool on;
    if (json_is_boolean(think)) on = json_is_true(think);
    else if (json_is_string(think)) on = true;
    else return why_fail(why, why_n, "'think' must be true, false or a level");
    return json_object_set_new(out, "chat_template_kwargs", json_pack("{s:b}", "enable_thinking", on));
}

/* An image of ollama's list (base64, no data: prefix) as an OpenAI image part. */
static json_t *image_part(json_t *img) {
    if (!json_is_string(img)) return NULL;
    const char *b = json_string_value(img);
    const char *mime = !strncmp(b, "/9j/", 4) ? "image/jpeg" : "image/png"; /* the decoder reads either */
    size_t n = strlen(b) + 64;
    char *url = malloc(n);
    if (!url) return NULL;
    if (!strncmp(b, "data:", 5)) snprintf(url, n, "%s", b);
    else snprintf(url, n, "data:%s;base64,%s", mime, b);
    json_t *p = json_pack("{s:s,s:{s:s}}", "type", "image_url", "image_url", "url", url);
    free(url);
    return p;
}

/* content (a string) and images into OpenAI content: the string alone, or a list of parts. */
static json_t *content_with_images(json_t *content, json_t *images, char *why, size_t why_n) {
    if (content && !json_is_null(content) && !json_is_string(content)) {
        why_fail(why, why_n, "a message's 'content' must be a string");
        return NULL;
    }
    const char *text = json_is_string(content) ? json_string_value(content) : "";
    if (!images || json_is_null(images) || !json_array_size(images)) return json_string(text);
    if (!json_is_array(images)) {
        why_fail(why, why_n, "'images' must be a list of base64 strings");
        return NULL;
    }
    json_t *parts = json_array();
    size_t i;
    json_t *img;
    json_array_foreach(images, i, img) {
        json_t *p = image_part(img);
        if (!p) {
            snprintf(why, why_n, "'images'[%zu] must be a base64 string", i);
            json_decref(parts);
            return NULL;
        }
        json_array_append_new(parts, p);
    }
    if (*text) json_array_append_new(parts, json_pack("{s:s,s:s}", "type", "text", "text", text));
    return parts;
}

/* An assistant message's tool_calls as ollama writes them (arguments an object) in the OpenAI
 * form (arguments a JSON text, an id, a type). */
static json_t *openai_calls(json_t *calls, char *why, size_t why_n) {
    if (!json_is_array(calls)) {
        why_fail(why, why_n, "'tool_calls' must be a list");
        return NULL;
    }
    json_t *out = json_array();
    size_t i;
    json_t *tc;
    json_array_foreach(calls, i, tc) {
        json_t *fn = json_object_get(tc, "function");
        json_t *name = json_object_get(fn, "name"), *args = json_object_get(fn, "arguments");
        if (!json_is_string(name)) {
            snprintf(why, why_n, "'tool_calls'[%zu].function.name must be a string", i);
            json_decref(out);
            return NULL;
        }
        char *text = json_is_string(args) ? strdup(json_string_value(args))
                                          : json_dumps(args ? args : json_object(), JSON_COMPACT | JSON_ENCODE_ANY);
        char id[32];
        snprintf(id, sizeof id, "call_%zu", i);
        json_array_append_new(out, json_pack("{s:s,s:s,s:{s:O,s:s}}", "id", id, "type", "function", "function", "name",
                                             name, "arguments", text ? text : "{}"));
        free(text);
    }
    return out;
}

static json_t *openai_messages(json_t *msgs, char *why, size_t why_n) {
    if (!json_is_array(msgs)) {
        why_fail(why, why_n, "'messages' must be a list");
        return NULL;
    }
    json_t *out = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        if (!json_is_object(m)) {
            snprintf(why, why_n, "'messages'[%zu] must be an object", i);
            goto bad;
        }
        json_t *content = content_with_images(json_object_get(m, "content"), json_object_get(m, "images"), why, why_n);
        if (!content) goto bad;
        json_t *o = json_pack("{s:O,s:o}", "role", json_object_get(m, "role") ? json_object_get(m, "role") : json_null(),
                              "content", content);
        json_t *calls = json_object_get(m, "tool_calls");
        if (calls && !json_is_null(calls)) {
            json_t *oc = openai_calls(calls, why, why_n);
            if (!oc) {
                json_decref(o);
                goto bad;
            }
            json_object_set_new(o, "tool_calls", oc);
        }
        json_t *thinking = json_object_get(m, "thinking");
        if (json_is_string(thinking)) json_object_set(o, "reasoning_content", thinking);
        json_array_append_new(out, o);
    }
    return out;
bad:
    json_decref(out);
    return NULL;
}

/* stream: ollama's default is true. */
static int read_stream(json_t *root, bool *stream, char *why, size_t why_n) {
    json_t *s = json_object_get(root, "stream");
    if (s && !json_is_null(s) && !json_is_boolean(s)) return why_fail(why, why_n, "'stream' must be true or false");
    *stream = !s || json_is_null(s) || json_is_true(s);
    return 0;
}

/* keep_alive: accepted (a duration string or seconds); the model stays loaded for the server's
 * life, whatever it says. */
static int check_keep_alive(json_t *root, char *why, size_t why_n) {
    json_t *k = json_object_get(root, "keep_alive");
    if (k && !json_is_null(k) && !json_is_string(k) && !json_is_number(k))
        return why_fail(why, why_n, "'keep_alive' must be a duration (\"5m\") or a number of seconds");
    return 0;
}

static json_t *load(const char *body, size_t len, char *why, size_t why_n) {
    json_error_t je;
    json_t *v = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!v) snprintf(why, why_n, "the body is not valid JSON (line %d, column %d: %s)", je.line, je.column, je.text);
    else if (!json_is_object(v)) {
        why_fail(why, why_n, "the body must be a JSON object");
        json_decref(v);
        v = NULL;
    }
    return v;
}

static char *dump(json_t *out, char *why, size_t why_n) {
    json_object_set_new(out, "stream", json_false()); /* the job streams per *stream, set by the caller */
    char *t = json_dumps(out, JSON_COMPACT);
    json_decref(out);
    if (!t) why_fail(why, why_n, "out of memory");
    return t;
}

char *srv_ollama_chat_body(const char *body, size_t len, int64_t n_ctx, bool *stream, char *why, size_t why_n) {
    json_t *root = load(body, len, why, why_n), *out = NULL;
    if (!root) return NULL;
    out = json_object();
    json_t *msgs = openai_messages(json_object_get(root, "messages"), why, why_n);
    if (!msgs || read_stream(root, stream, why, why_n) || check_keep_alive(root, why, why_n) ||
        apply_options(json_object_get(root, "options"), out, n_ctx, why, why_n) ||
        apply_format(json_object_get(root, "format"), out, why, why_n) ||
        apply_think(json_object_get(root, "think"), out, why, why_n))
        goto bad;
    json_object_set_new(out, "messages", msgs);
    msgs = NULL;
    json_t *tools = json_object_get(root, "tools");
    if (tools && !json_is_null(tools)) json_object_set(out, "tools", tools);
    json_decref(root);
    return dump(out, why, why_n);
bad:
    json_decref(msgs);
    json_decref(out);
    json_decref(root);
    return NULL;
}

char *srv_ollama_generate_body(const char *body, size_t len, int64_t n_ctx, bool *stream, bool *raw, bool *load_only,
                               char *why, size_t why_n) {
    json_t *root = load(body, len, why, why_n), *out = NULL;
    if (!root) return NULL;
    out = json_object();
    json_t *prompt = json_object_get(root, "prompt"), *system = json_object_get(root, "system"),
           *r = json_object_get(root, "raw"), *ctx = json_object_get(root, "context"),
           *suffix = json_object_get(root, "suffix"), *tmpl = json_object_get(root, "template");
    if (prompt && !json_is_null(prompt) && !json_is_string(prompt)) {
        why_fail(why, why_n, "'prompt' must be a string");
        goto bad;
    }
    if (system && !json_is_null(system) && !json_is_string(system)) {
        why_fail(why, why_n, "'system' must be a string");
        goto bad;
    }
    if (r && !json_is_null(r) && !json_is_boolean(r)) {
        why_fail(why, why_n, "'raw' must be true or false");
        goto bad;
    }
    if (json_is_array(ctx) && json_array_size(ctx)) {
        why_fail(why, why_n, "'context' (the token ids of an earlier answer) is not taken: send the conversation to /api/chat");
        goto bad;
    }
    if (json_is_string(suffix) && json_string_length(suffix)) {
        why_fail(why, why_n, "'suffix': fill-in-the-middle is not supported by this model's format");
        goto bad;
    }
    if (json_is_string(tmpl) && json_string_length(tmpl)) {
        why_fail(why, why_n, "'template': the model's own chat format is used; a Go template is not taken");
        goto bad;
    }
    *raw = json_is_true(r);
    const char *text = json_is_string(prompt) ? json_string_value(prompt) : "";
    json_t *images = json_object_get(root, "images");
    *load_only = !*text && !(json_is_array(images) && json_array_size(images)); /* ollama: load the model, answer done */
    if (read_stream(root, stream, why, why_n) || check_keep_alive(root, why, why_n) ||
        apply_options(json_object_get(root, "options"), out, n_ctx, why, why_n) ||
        apply_format(json_object_get(root, "format"), out, why, why_n))
        goto bad;
    if (*raw) {
        if (json_is_array(images) && json_array_size(images)) {
            why_fail(why, why_n, "'images' with 'raw': images go through the chat format; leave raw out");
            goto bad;
        }
        json_object_set_new(out, "prompt", json_string(text));
    } else {
        if (apply_think(json_object_get(root, "think"), out, why, why_n)) goto bad;
        json_t *content = content_with_images(prompt, images, why, why_n);
        if (!content) goto bad;
        json_t *msgs = json_array();
        if (json_is_string(system) && json_string_length(system))
            json_array_append_new(msgs, json_pack("{s:s,s:O}", "role", "system", "content", system));
        json_array_append_new(msgs, json_pack("{s:s,s:o}", "role", "user", "content", content));
        json_object_set_new(out, "messages", msgs);
    }
    json_decref(root);
    return dump(out, why, why_n);
bad:
    json_decref(out);
    json_decref(root);
    return NULL;
}

/* ---- model information --------------------------------------------------------------------- */

static json_t *details(const qhx_model *m) {
    return json_pack("{s:s,s:s,s:s,s:[s],s:s,s:s}", "parent_model", "", "format", "qhexrt", "family",
                     qhx_model_family_name(m), "families", qhx_model_family_name(m), "parameter_size", "",
                     "quantization_level", "");
}

/* A stable digest for the one model: its alias and family hashed (FNV-1a, 64 bits, four
 * times over with different seeds: 64 hex digits as ollama's sha256 digests have). */
static void digest(const srv_config *cfg, const qhx_model *m, char out[65]) {
    for (int k = 0; k < 4; k++) {
        uint64_t h = 1469598103934665603ull ^ (uint64_t)k;
        for (const char *s = cfg->model_path; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
        for (const char *s = qhx_model_family_name(m); *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
        snprintf(out + 16 * k, 17, "%016llx", (unsigned long long)h);
    }
}

json_t *srv_ollama_tags(const qhx_model *m, const srv_config *cfg, double started) {
    char when[48], dg[65];
    srv_ollama_time(started, when, sizeof when);
    digest(cfg, m, dg);
    return json_pack("{s:[{s:s,s:s,s:s,s:I,s:s,s:o}]}", "models", "name", cfg->alias, "model", cfg->alias, "modified_at",
                     when, "size", (json_int_t)0, "digest", dg, "details", details(m));
}

json_t *srv_ollama_ps(const qhx_model *m, const srv_config *cfg) {
    char until[48], dg[65];
    srv_ollama_time(srv_now() + 365.0 * 24 * 3600, until, sizeof until); /* loaded for the server's life */
    digest(cfg, m, dg);
    return json_pack("{s:[{s:s,s:s,s:I,s:s,s:o,s:s,s:I,s:I}]}", "models", "name", cfg->alias, "model", cfg->alias, "size",
                     (json_int_t)0, "digest", dg, "details", details(m), "expires_at", until, "size_vram", (json_int_t)0,
                     "context_length", (json_int_t)cfg->ctx);
}

json_t *srv_ollama_show(const qhx_model *m, const srv_config *cfg) {
    char key[96];
    snprintf(key, sizeof key, "%s.context_length", qhx_model_family_name(m));
    json_t *info = json_pack("{s:s,s:I}", "general.architecture", qhx_model_family_name(m), key,
                             (json_int_t)qhx_model_trained_context(m));
    json_t *caps = json_pack("[s]", "completion");
    json_array_append_new(caps, json_string("tools"));
    if (qhx_model_has_thinking(m)) json_array_append_new(caps, json_string("thinking"));
    if (qhx_model_takes_images(m)) json_array_append_new(caps, json_string("vision"));
    char params[64];
    snprintf(params, sizeof params, "num_ctx %lld", (long long)cfg->ctx);
    char when[48];
    srv_ollama_time(srv_now(), when, sizeof when);
    return json_pack("{s:s,s:s,s:s,s:o,s:o,s:o,s:s}", "modelfile", "", "parameters", params, "template", "", "details",
                     details(m), "model_info", info, "capabilities", caps, "modified_at", when);
}
