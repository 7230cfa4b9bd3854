/* constrain.c: the request fields that constrain an answer to a grammar (docs/server.md,
 * "Structured output"): OpenAI's response_format (json_object, json_schema) and llama-server's
 * grammar (GBNF) and json_schema. The grammar is compiled here, so a schema outside the subset
 * is a 400 naming the keyword before the request queues. */
#include "serve.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int bad(int *status, qhx_error *err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(int *status, qhx_error *err, const char *fmt, ...) {
    *status = 400;
    err->code = QHX_E_ARG;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return -1;
}

/* The compiler's message after the field it came from, with the status its failure maps to. */
static int compiled(qhx_status rc, const char *field, int *status, qhx_error *err) {
    if (!rc) return 0;
    char why[QHX_ERROR_MSG_SIZE];
    memcpy(why, err->msg, sizeof why);
    int r = bad(status, err, "'%s': %s", field, why);
    *status = srv_http_status(rc);
    return r;
}

static int from_schema(json_t *schema, const char *field, srv_job *j, int *status, qhx_error *err) {
    if (!json_is_object(schema) && !json_is_boolean(schema)) return bad(status, err, "'%s' must be a JSON Schema (an object)", field);
    char *text = json_dumps(schema, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!text) {
        bad(status, err, "out of memory");
        *status = 503;
        return -1;
    }
    qhx_status rc = qhx_grammar_from_json_schema(text, strlen(text), &j->grammar, err);
    free(text);
    return compiled(rc, field, status, err);
}

static int response_format(json_t *rf, srv_job *j, int *status, qhx_error *err) {
    if (!json_is_object(rf)) return bad(status, err, "'response_format' must be an object");
    const char *type = json_string_value(json_object_get(rf, "type"));
    if (!type) return bad(status, err, "'response_format' needs a 'type' (text, json_object or json_schema)");
    if (!strcmp(type, "text")) return 0;
    if (!strcmp(type, "json_object")) {
        json_t *schema = json_object_get(rf, "schema"); /* llama-server takes a schema here too */
        if (schema && !json_is_null(schema)) return from_schema(schema, "response_format.schema", j, status, err);
        return compiled(qhx_grammar_json_object(&j->grammar, err), "response_format", status, err);
    }
    if (strcmp(type, "json_schema"))
        return bad(status, err, "'response_format' type '%s' is not text, json_object or json_schema", type);
    json_t *js = json_object_get(rf, "json_schema");
    if (!json_is_object(js)) return bad(status, err, "'response_format.json_schema' must be an object with a 'schema'");
    json_t *strict = json_object_get(js, "strict");
    if (strict && !json_is_boolean(strict) && !json_is_null(strict))
        return bad(status, err, "'response_format.json_schema.strict' must be a boolean");
    json_t *schema = json_object_get(js, "schema");
    if (!schema) return bad(status, err, "'response_format.json_schema' has no 'schema'");
    /* strict or not, the answer follows the schema: that is what a grammar is for */
    return from_schema(schema, "response_format.json_schema.schema", j, status, err);
}

int srv_request_constraint(json_t *root, srv_job *j, int *status, qhx_error *err) {
    json_t *rf = json_object_get(root, "response_format"), *gr = json_object_get(root, "grammar"),
           *js = json_object_get(root, "json_schema");
    if (rf && json_is_null(rf)) rf = NULL;
    if (gr && json_is_null(gr)) gr = NULL;
    if (js && json_is_null(js)) js = NULL;
    if ((rf != NULL) + (gr != NULL) + (js != NULL) > 1)
        return bad(status, err, "give one of 'response_format', 'grammar' and 'json_schema'");
    if (rf) return response_format(rf, j, status, err);
    if (js) return from_schema(js, "json_schema", j, status, err);
    if (!gr) return 0;
    if (!json_is_string(gr)) return bad(status, err, "'grammar' must be a string (GBNF)");
    if (json_string_length(gr) == 0) return 0; /* llama-server sends "" for none */
    return compiled(qhx_grammar_parse(json_string_value(gr), json_string_length(gr), NULL, &j->grammar, err), "grammar",
                    status, err);
}

int srv_request_tool_grammar(const qhx_model *m, json_t *root, const char *const *tools, size_t n_tools, srv_job *j,
                             int *status, qhx_error *err) {
    json_t *choice = json_object_get(root, "tool_choice");
    const char *name = json_is_object(choice) ? json_string_value(json_object_get(json_object_get(choice, "function"), "name")) : NULL;
    qhx_status rc = qhx_grammar_tool_call(m, tools, n_tools, name, &j->grammar, err);
    return compiled(rc, "tools", status, err);
}
