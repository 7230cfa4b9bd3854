/* qhx chat-format: a developer command printing a conversation as the model will read it, in
 * the built-in chat format, so that tests can compare it with the released chat templates
 * rendered by Jinja (tests/cli/chat_templates.sh).
 *   qhx chat-format -m MODEL [CONVERSATION.json]     (stdin without a file)
 * The conversation is what apply_chat_template takes:
 *   {"messages": [{"role": "system"|"user"|"assistant", "content": "text" or
 *                  [{"type": "text", "text": "..."}, {"type": "image"}], "reasoning_content": "..."}],
 *    "add_generation_prompt": true, "enable_thinking": false, "add_vision_id": false}
 * enable_thinking absent: the run plan's default. "tools" (a list of definitions), an assistant's
 * "tool_calls" ([{"function": {"name", "arguments": {...}}}]) and the "tool" role are rendered
 * as each family's template does (tools as the template's tojson; Qwen3.5: each argument as it
 * prints it; Qwen3-VL: the arguments object as tojson, or a string of them as it is). */
#include "cli_dev.h"

#include "core/alloc.h"
#include "io/manifest.h"
#include "runtime/model.h"
#include "serve/serve.h"
#include "text/tokenizer.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *CMD = "chat-format";

#define MAX_MESSAGES 256
#define MAX_PARTS 1024
#define MAX_TOOLS 64
#define MAX_CALLS 256
#define MAX_ARGS 1024

static void usage(FILE *f) {
    fprintf(f,
            "usage: qhx chat-format -m MODEL [CONVERSATION.json]\n"
            "  Prints the conversation (a JSON file, or stdin) in the model's built-in chat format:\n"
            "  {\"messages\": [{\"role\": ..., \"content\": \"...\" or [{\"type\": \"text\", \"text\": ...},\n"
            "  {\"type\": \"image\"}], \"reasoning_content\": ...}], \"add_generation_prompt\": true,\n"
            "  \"enable_thinking\": false, \"add_vision_id\": false}. A developer command: the tests\n"
            "  compare it with the released chat templates.\n");
}

typedef struct conv {
    qhx_chat_message msgs[MAX_MESSAGES];
    qhx_chat_part parts[MAX_PARTS];
    qhx_chat_tool_call calls[MAX_CALLS];
    qhx_chat_tool_arg args[MAX_ARGS];
    const char *tools[MAX_TOOLS];
    char *owned[MAX_MESSAGES + MAX_TOOLS + MAX_CALLS + MAX_ARGS]; /* text made here (free) */
    size_t n_msgs, n_parts, n_calls, n_args, n_tools, n_owned;
    qhx_plan_resolved res; /* the model's family (its chat format) */
} conv;

static char *keep(conv *c, char *t) {
    if (t) c->owned[c->n_owned++] = t;
    return t;
}

/* JSON text as the template's tojson writes it (json.dumps: ", " and ": ", UTF-8 as is, floats
 * as repr()): the server's writer, so both render the same prompt. */
static char *tojson(json_t *v) { return srv_tojson(v); }

/* A value as the template prints an argument: tojson for objects and lists, str() otherwise. */
static char *arg_text(json_t *v) {
    char buf[64];
    if (json_is_object(v) || json_is_array(v)) return tojson(v);
    if (json_is_string(v)) return strdup(json_string_value(v));
    if (json_is_true(v)) return strdup("True");
    if (json_is_false(v)) return strdup("False");
    if (json_is_null(v)) return strdup("None");
    if (json_is_integer(v)) snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(v));
    else srv_py_float(json_real_value(v), buf, sizeof buf); /* Python's str() of a float */
    return strdup(buf);
}

static qhx_status tool_calls_of(conv *c, json_t *list, size_t idx, qhx_chat_message *m, qhx_error *err) {
    if (!json_is_array(list)) return qhx_fail(err, QHX_E_FORMAT, "message %zu: tool_calls is not a list", idx);
    m->tool_calls = &c->calls[c->n_calls];
    size_t j;
    json_t *call;
    json_array_foreach(list, j, call) {
        if (c->n_calls == MAX_CALLS) return qhx_fail(err, QHX_E_LIMIT, "more than %d tool calls", MAX_CALLS);
        json_t *fn = json_object_get(call, "function");
        if (!json_is_object(fn)) fn = call;
        qhx_chat_tool_call *tc = &c->calls[c->n_calls++];
        memset(tc, 0, sizeof *tc);
        tc->name = json_string_value(json_object_get(fn, "name"));
        if (!tc->name) return qhx_fail(err, QHX_E_FORMAT, "message %zu: tool call %zu has no name", idx, j);
        json_t *args = json_object_get(fn, "arguments");
        bool vl = c->res.family->chat->tool_json;
        /* a JSON-form format (Qwen3-VL) prints a string of arguments as it is; Qwen3.5's takes an object */
        if (vl && json_is_string(args)) {
            tc->arguments = json_string_value(args);
            m->n_tool_calls++;
            continue;
        }
        if (args && !json_is_object(args))
            return qhx_fail(err, QHX_E_UNSUPPORTED, "message %zu: tool call %zu: arguments must be an object", idx, j);
        if (vl && args && !(tc->arguments = keep(c, tojson(args)))) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
        tc->args = &c->args[c->n_args];
        const char *key;
        json_t *v;
        json_object_foreach(args, key, v) {
            if (c->n_args == MAX_ARGS) return qhx_fail(err, QHX_E_LIMIT, "more than %d tool arguments", MAX_ARGS);
            char *text = keep(c, arg_text(v));
            if (!text) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
            c->args[c->n_args++] = (qhx_chat_tool_arg){.name = key, .value = text};
            tc->n_args++;
        }
        m->n_tool_calls++;
    }
    return QHX_OK;
}

static qhx_status tools_of(conv *c, json_t *list, qhx_error *err) {
    if (!list || json_is_null(list)) return QHX_OK;
    if (!json_is_array(list)) return qhx_fail(err, QHX_E_FORMAT, "\"tools\" is not a list");
    size_t k;
    json_t *tool;
    json_array_foreach(list, k, tool) {
        if (c->n_tools == MAX_TOOLS) return qhx_fail(err, QHX_E_LIMIT, "more than %d tools", MAX_TOOLS);
        if (!(c->tools[c->n_tools++] = keep(c, tojson(tool)))) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    }
    return QHX_OK;
}

/* A content list: text parts and image placeholders. */
static qhx_status parts_of(conv *c, json_t *list, size_t idx, qhx_chat_message *m, qhx_error *err) {
    m->parts = &c->parts[c->n_parts];
    size_t k;
    json_t *item;
    json_array_foreach(list, k, item) {
        if (c->n_parts == MAX_PARTS) return qhx_fail(err, QHX_E_LIMIT, "more than %d content parts", MAX_PARTS);
        const char *type = json_string_value(json_object_get(item, "type"));
        qhx_chat_part *p = &c->parts[c->n_parts++];
        memset(p, 0, sizeof *p);
        if (type && !strcmp(type, "image")) continue; /* text NULL: one image pad, as the template */
        json_t *text = json_object_get(item, "text");
        if (!json_is_string(text))
            return qhx_fail(err, QHX_E_UNSUPPORTED, "message %zu: part %zu is neither text nor an image", idx, k);
        p->text = json_string_value(text);
        p->text_len = json_string_length(text);
    }
    m->n_parts = json_array_size(list);
    return QHX_OK;
}

/* reasoning_content goes back into the content as the template reads it there. */
static qhx_status with_reasoning(conv *c, const char *reasoning, qhx_chat_message *m, qhx_error *err) {
    const char *content = m->content ? m->content : "";
    const qhx_chat_style *f = c->res.family->chat;
    size_t n = strlen(f->reasoning_open) + strlen(reasoning) + strlen(f->reasoning_close) + strlen(content) + 1;
    char *t = malloc(n);
    if (!t) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    snprintf(t, n, "%s%s%s%s", f->reasoning_open, reasoning, f->reasoning_close, content);
    m->content = keep(c, t);
    return QHX_OK;
}

static qhx_status messages_of(conv *c, json_t *root, qhx_error *err) {
    qhx_status trc = tools_of(c, json_object_get(root, "tools"), err);
    if (trc) return trc;
    json_t *list = json_object_get(root, "messages");
    if (!json_is_array(list) || !json_array_size(list)) return qhx_fail(err, QHX_E_FORMAT, "no \"messages\" list");
    size_t i;
    json_t *msg;
    json_array_foreach(list, i, msg) {
        if (i == MAX_MESSAGES) return qhx_fail(err, QHX_E_LIMIT, "more than %d messages", MAX_MESSAGES);
        qhx_chat_message *m = &c->msgs[c->n_msgs++];
        memset(m, 0, sizeof *m);
        qhx_status rc0;
        m->role = json_string_value(json_object_get(msg, "role"));
        json_t *calls = json_object_get(msg, "tool_calls");
        if (calls && !json_is_null(calls) && (rc0 = tool_calls_of(c, calls, i, m, err))) return rc0;
        json_t *content = json_object_get(msg, "content");
        qhx_status rc = QHX_OK;
        if (json_is_array(content)) rc = parts_of(c, content, i, m, err);
        else if (json_is_string(content)) m->content = json_string_value(content);
        else if (content && !json_is_null(content)) rc = qhx_fail(err, QHX_E_FORMAT, "message %zu: content is neither text nor a list", i);
        const char *reasoning = json_string_value(json_object_get(msg, "reasoning_content"));
        if (!rc && reasoning && m->parts) rc = qhx_fail(err, QHX_E_UNSUPPORTED, "message %zu: reasoning_content with a content list", i);
        /* reasoning_content: read by the Qwen3.5 template, not by Qwen3-VL's */
        if (!rc && reasoning && c->res.family->chat->reasoning_open) rc = with_reasoning(c, reasoning, m, err);
        if (rc) return rc;
    }
    return QHX_OK;
}

static int flag(json_t *root, const char *key, int dflt) {
    json_t *v = json_object_get(root, key);
    return json_is_boolean(v) ? json_is_true(v) : dflt;
}

static int format_conversation(const char *model, const char *file) {
    qhx_error err = {0};
    char *text = NULL;
    size_t len;
    if (qhx_cli_read_text(file ? file : "-", &text, &len, &err)) return qhx_cli_runtime_error(CMD, &err);
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    free(text);
    if (!json_is_object(root)) {
        json_decref(root);
        qhx_fail(&err, QHX_E_FORMAT, "%s: not a JSON object (line %d: %s)", file ? file : "stdin", je.line, je.text);
        return qhx_cli_runtime_error(CMD, &err);
    }
    qhx_plan *plan = NULL;
    conv *c = calloc(1, sizeof *c);
    char *out = NULL;
    int rc = QHX_EXIT_RUNTIME;
    if (!c) qhx_fail(&err, QHX_E_NOMEM, "out of memory");
    else if (!qhx_plan_open(model, &plan, &err) && !qhx_plan_resolve(plan, &c->res, &err) && !messages_of(c, root, &err)) {
        qhx_chat_options opt = {.add_generation_prompt = flag(root, "add_generation_prompt", 0),
                                .enable_thinking = flag(root, "enable_thinking", plan->generation.thinking),
                                .add_vision_id = flag(root, "add_vision_id", 0),
                                .tools = c->tools, .n_tools = c->n_tools};
        qhx_chat_family fam = c->res.family->chat;
        if (!qhx_tok_chat_format(fam, c->msgs, c->n_msgs, &opt, &out, &len, &err)) {
            fwrite(out, 1, len, stdout);
            rc = fflush(stdout) ? QHX_EXIT_RUNTIME : QHX_EXIT_OK;
        }
    }
    if (rc && err.msg[0]) rc = qhx_cli_runtime_error(CMD, &err);
    for (size_t k = 0; c && k < c->n_owned; k++) free(c->owned[k]);
    free(c);
    qhx_free(out);
    qhx_plan_free(plan);
    json_decref(root);
    return rc;
}

int qhx_cmd_chat_format(int argc, char **argv) {
    const char *model = NULL, *file = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return QHX_EXIT_OK;
        }
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (i + 1 >= argc) return qhx_cli_usage_error(CMD, "%s needs a value", a);
            model = argv[++i];
        } else if (a[0] == '-' && a[1]) {
            static const char *const names[] = {"-m", "--model", "--help"};
            return qhx_cli_unknown_option(CMD, a, names, 3);
        } else if (file) return qhx_cli_usage_error(CMD, "one conversation file at most");
        else file = a;
    }
    if (!model) return qhx_cli_usage_error(CMD, "missing -m MODEL");
    return format_conversation(model, file);
}
