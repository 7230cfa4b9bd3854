/* qhx serve's output pipeline (tools/qhx/serve/output.c) on hand-made token texts: reasoning
 * split from content at </think>, Qwen3.5 and Qwen3-VL tool-call blocks parsed into OpenAI
 * tool_calls, the SSE chunks of a stream. (Stop strings are the decoder's before the text gets
 * here: test_gen.c checks them, tests/serve/test_openai.py through the server.) */
#include "serve/serve.h"
#include "t.h"

#include <stdlib.h>
#include <string.h>

static srv_job *job(bool stream, bool thinking, bool tools) {
    srv_job *j = srv_job_new();
    j->kind = SRV_CHAT;
    j->stream = stream;
    j->thinking = thinking;
    j->tools = tools;
    j->model_name = "m";
    snprintf(j->id, sizeof j->id, "chatcmpl-test");
    return j;
}

/* push the texts as tokens; -1 when every one was taken, -2 on a failure */
static int run(srv_output *o, const char *const *texts, int n) {
    for (int i = 0; i < n; i++)
        if (srv_output_token(o, 1, texts[i], strlen(texts[i]), NULL)) return -2;
    return -1;
}

static json_t *body_of(srv_job *j) {
    char *b = srv_output_body(j);
    json_t *v = b ? json_loads(b, 0, NULL) : NULL;
    free(b);
    return v;
}

static const char *message_field(json_t *body, const char *key) {
    return json_string_value(json_object_get(json_object_get(json_array_get(json_object_get(body, "choices"), 0), "message"), key));
}

int main(void) {
    /* reasoning before </think> (split across tokens), content after it without the newlines */
    {
        srv_job *j = job(false, true, false);
        srv_output *o = srv_output_new(NULL, j);
        const char *t[] = {"Let me ", "think.</th", "ink>\n", "\nThe answer", " is 4."};
        CHECK_EQ(run(o, t, 5), -1);
        j->finish = SRV_FINISH_LENGTH;
        CHECK_EQ(srv_output_end(o), 0);
        json_t *b = body_of(j);
        CHECK_STR(message_field(b, "reasoning_content"), "Let me think.");
        CHECK_STR(message_field(b, "content"), "The answer is 4.");
        json_decref(b);
        srv_output_free(o);
        srv_job_unref(j);
    }
    /* a Qwen3.5 tool call: content before it, the call parsed, finish_reason tool_calls */
    {
        srv_job *j = job(false, false, true);
        srv_output *o = srv_output_new(NULL, j);
        const char *t[] = {"Checking.\n\n<tool", "_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n",
                           "<parameter=days>\n3\n</parameter>\n<parameter=hourly>\nTrue\n</parameter>\n",
                           "<parameter=opts>\n{\"unit\": \"C\"}\n</parameter>\n</function>\n</tool_call>"};
        CHECK_EQ(run(o, t, 4), -1);
        j->finish = SRV_FINISH_STOP;
        CHECK_EQ(srv_output_end(o), 0);
        CHECK_EQ(j->finish, SRV_FINISH_TOOLS);
        json_t *b = body_of(j);
        CHECK_STR(message_field(b, "content"), "Checking.");
        json_t *calls = json_object_get(json_object_get(json_array_get(json_object_get(b, "choices"), 0), "message"), "tool_calls");
        CHECK_EQ(json_array_size(calls), 1);
        json_t *fn = json_object_get(json_array_get(calls, 0), "function");
        CHECK_STR(json_string_value(json_object_get(fn, "name")), "get_weather");
        json_t *args = json_loads(json_string_value(json_object_get(fn, "arguments")), 0, NULL);
        CHECK_STR(json_string_value(json_object_get(args, "city")), "Paris");
        CHECK_EQ(json_integer_value(json_object_get(args, "days")), 3);
        CHECK(json_is_true(json_object_get(args, "hourly")));
        CHECK_STR(json_string_value(json_object_get(json_object_get(args, "opts"), "unit")), "C");
        CHECK_STR(json_string_value(json_object_get(json_array_get(json_object_get(b, "choices"), 0), "finish_reason")), "tool_calls");
        json_decref(args);
        json_decref(b);
        srv_output_free(o);
        srv_job_unref(j);
    }
    /* a forced call (tool_choice): the prompt ended with its start, the answer is the rest */
    {
        srv_job *j = job(false, false, true);
        j->answer_prefix = strdup("<tool_call>\n<function=");
        srv_output *o = srv_output_new(NULL, j);
        const char *t[] = {"get_wea", "ther>\n<parameter=city>\nParis\n</parameter>\n", "</function>\n</tool_call>"};
        CHECK_EQ(run(o, t, 3), -1);
        j->finish = SRV_FINISH_STOP;
        CHECK_EQ(srv_output_end(o), 0);
        CHECK_EQ(j->finish, SRV_FINISH_TOOLS);
        json_t *b = body_of(j);
        json_t *msg = json_object_get(json_array_get(json_object_get(b, "choices"), 0), "message");
        CHECK(json_is_null(json_object_get(msg, "content")));
        json_t *fn = json_object_get(json_array_get(json_object_get(msg, "tool_calls"), 0), "function");
        CHECK_STR(json_string_value(json_object_get(fn, "name")), "get_weather");
        CHECK_STR(json_string_value(json_object_get(fn, "arguments")), "{\"city\":\"Paris\"}");
        json_decref(b);
        srv_output_free(o);
        srv_job_unref(j);
    }
    /* a forced start the answer never completes into a call: all of it is content */
    {
        srv_job *j = job(false, false, true);
        j->answer_prefix = strdup("<tool_call>\n<function=");
        srv_output *o = srv_output_new(NULL, j);
        const char *t[] = {"no name ", "here"};
        CHECK_EQ(run(o, t, 2), -1);
        j->finish = SRV_FINISH_LENGTH;
        CHECK_EQ(srv_output_end(o), 0);
        CHECK_EQ(j->finish, SRV_FINISH_LENGTH);
        json_t *b = body_of(j);
        CHECK_STR(message_field(b, "content"), "<tool_call>\n<function=no name here");
        json_decref(b);
        srv_output_free(o);
        srv_job_unref(j);
    }
    /* streamed: the forced start is never a content delta, the call comes whole at the end */
    {
        srv_job *j = job(true, false, true);
        j->answer_prefix = strdup("<tool_call>\n<function=get_weather>\n");
        srv_output *o = srv_output_new(NULL, j);
        const char *t[] = {"<parameter=city>\nParis\n</parameter>\n", "</function>\n</tool_call>"};
        CHECK_EQ(run(o, t, 2), -1);
        j->finish = SRV_FINISH_STOP;
        CHECK_EQ(srv_output_end(o), 0);
        CHECK(strstr(j->sse.p, "<tool_call>") == NULL && strstr(j->sse.p, "<function") == NULL);
        CHECK(strstr(j->sse.p, "\"name\":\"get_weather\"") != NULL);
        CHECK(strstr(j->sse.p, "\"finish_reason\":\"tool_calls\"") != NULL);
        srv_output_free(o);
        srv_job_unref(j);
    }
    /* Qwen3-VL calls (JSON objects): two of them, content before, the arguments as compact JSON */
    {
        srv_job *j = job(false, false, true);
        srv_output *o = srv_output_new(NULL, j);
        const char *t[] = {"Let me check.\n<tool", "_call>\n{\"name\": \"get_weather\", \"argu", "ments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>",
                           "\n<tool_call>\n{\"name\": \"convert\", \"arguments\": {\"values\": [1, 2.5], \"unit\": \"\u00b0C\"}}\n</tool_call>"};
        CHECK_EQ(run(o, t, 4), -1);
        j->finish = SRV_FINISH_STOP;
        CHECK_EQ(srv_output_end(o), 0);
        CHECK_EQ(j->finish, SRV_FINISH_TOOLS);
        json_t *b = body_of(j);
        CHECK_STR(message_field(b, "content"), "Let me check.");
        json_t *calls = json_object_get(json_object_get(json_array_get(json_object_get(b, "choices"), 0), "message"), "tool_calls");
        CHECK_EQ(json_array_size(calls), 2);
        json_t *f0 = json_object_get(json_array_get(calls, 0), "function"), *f1 = json_object_get(json_array_get(calls, 1), "function");
        CHECK_STR(json_string_value(json_object_get(f0, "name")), "get_weather");
        CHECK_STR(json_string_value(json_object_get(f0, "arguments")), "{\"city\":\"Paris\",\"days\":3}");
        CHECK_STR(json_string_value(json_object_get(f1, "name")), "convert");
        CHECK_STR(json_string_value(json_object_get(f1, "arguments")), "{\"values\":[1,2.5],\"unit\":\"\u00b0C\"}");
        CHECK_STR(json_string_value(json_object_get(json_array_get(calls, 1), "type")), "function");
        json_decref(b);
        srv_output_free(o);
        srv_job_unref(j);
    }
    /* Qwen3-VL, streamed after a forced named start: the call whole at the end, no content */
    {
        srv_job *j = job(true, false, true);
        j->answer_prefix = strdup("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ");
        srv_output *o = srv_output_new(NULL, j);
        const char *t[] = {"{\"city\"", ": \"Oslo\"}}\n</tool_call>"};
        CHECK_EQ(run(o, t, 2), -1);
        j->finish = SRV_FINISH_STOP;
        CHECK_EQ(srv_output_end(o), 0);
        CHECK(strstr(j->sse.p, "<tool_call>") == NULL && strstr(j->sse.p, "tool_call>") == NULL);
        CHECK(strstr(j->sse.p, "\"name\":\"get_weather\"") != NULL);
        CHECK(strstr(j->sse.p, "\"arguments\":\"{\\\"city\\\":\\\"Oslo\\\"}\"") != NULL);
        CHECK(strstr(j->sse.p, "\"finish_reason\":\"tool_calls\"") != NULL);
        srv_output_free(o);
        srv_job_unref(j);
    }
    /* malformed Qwen3-VL calls are content, whole: cut JSON, no name, a list, trailing text */
    {
        static const char *const bad[] = {
            "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ",
            "<tool_call>\n{\"arguments\": {}}\n</tool_call>",
            "<tool_call>\n{\"name\": \"\", \"arguments\": {}}\n</tool_call>",
            "<tool_call>\n[\"get_weather\"]\n</tool_call>",
            "<tool_call>\n{\"name\": \"f\", \"arguments\": [1]}\n</tool_call>",
            "<tool_call>\n{\"name\": \"f\"} and more\n</tool_call>",
            "<tool_call>\n{\"name\": 7}\n</tool_call>",
        };
        for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
            CHECK(srv_parse_tool_calls(bad[k], strlen(bad[k]), "x") == NULL);
            srv_job *j = job(false, false, true);
            srv_output *o = srv_output_new(NULL, j);
            CHECK_EQ(run(o, &bad[k], 1), -1);
            j->finish = SRV_FINISH_LENGTH;
            CHECK_EQ(srv_output_end(o), 0);
            CHECK_EQ(j->finish, SRV_FINISH_LENGTH);
            json_t *b = body_of(j);
            CHECK_STR(message_field(b, "content"), bad[k]);
            json_decref(b);
            srv_output_free(o);
            srv_job_unref(j);
        }
        /* a name alone (no arguments) is a call with {} */
        const char *bare = "<tool_call>{\"name\": \"now\"}</tool_call>";
        json_t *calls = srv_parse_tool_calls(bare, strlen(bare), "x");
        CHECK(calls && json_array_size(calls) == 1);
        CHECK_STR(json_string_value(json_object_get(json_object_get(json_array_get(calls, 0), "function"), "arguments")), "{}");
        json_decref(calls);
    }
    /* tojson as the templates write it: floats as Python's repr (expected strings: Python 3.11's
     * repr of the same doubles), lowercase \u escapes, ", " and ": " */
    {
        static const struct { double d; const char *want; } f[] = {
            {0.1, "0.1"}, {48.85, "48.85"}, {1e16, "1e+16"}, {1e15, "1000000000000000.0"}, {1e-05, "1e-05"},
            {0.0001, "0.0001"}, {-0.0, "-0.0"}, {2.5, "2.5"}, {123456789.125, "123456789.125"},
            {1.7976931348623157e308, "1.7976931348623157e+308"}, {5e-324, "5e-324"}, {1.0 / 3, "0.3333333333333333"},
            {100.0, "100.0"}, {1e22, "1e+22"}, {-1.5e-7, "-1.5e-07"}};
        for (size_t k = 0; k < sizeof f / sizeof f[0]; k++) {
            char buf[48];
            srv_py_float(f[k].d, buf, sizeof buf);
            CHECK_STR(buf, f[k].want);
        }
        json_t *v = json_loads("{\"a\": \"x\\u001b\\\"\\\\\\n/\u00e9\", \"b\": [1, 2.5, null, true], \"c\": {}}", 0, NULL);
        char *t = srv_tojson(v);
        CHECK_STR(t, "{\"a\": \"x\\u001b\\\"\\\\\\n/\u00e9\", \"b\": [1, 2.5, null, true], \"c\": {}}");
        free(t);
        json_decref(v);
    }
    /* text that only looks like the start of a tool call is content in the end */
    {
        json_t *none = srv_parse_tool_calls("<tool_call>no function here</tool_call>", 39, "x");
        CHECK(none == NULL);
    }
    /* a stream: role first, reasoning and content deltas, the finish chunk, the usage, [DONE] */
    {
        srv_job *j = job(true, true, false);
        j->include_usage = true;
        srv_output *o = srv_output_new(NULL, j);
        const char *t[] = {"hmm", "</think>\n\nYes", "."};
        CHECK_EQ(run(o, t, 3), -1);
        j->finish = SRV_FINISH_LENGTH;
        j->n_generated = 3;
        CHECK_EQ(srv_output_end(o), 0);
        const char *s = j->sse.p;
        CHECK(s && strstr(s, "\"role\":\"assistant\""));
        CHECK(s && strstr(s, "\"reasoning_content\":\"hmm\""));
        CHECK(s && strstr(s, "\"content\":\"Yes\""));
        CHECK(s && strstr(s, "\"finish_reason\":\"length\""));
        CHECK(s && strstr(s, "\"completion_tokens\":3"));
        CHECK(s && j->sse.n >= 14 && !strcmp(s + j->sse.n - 14, "data: [DONE]\n\n"));
        srv_output_free(o);
        srv_job_unref(j);
    }
    /* a stream that fails after its first chunk: the error event, then a last chunk with its
       finish_reason, then [DONE], in that order; the held-back text is not sent */
    {
        srv_job *j = job(true, false, false);
        j->include_usage = true;
        srv_output *o = srv_output_new(NULL, j);
        const char *t[] = {"xx", "x"};
        CHECK_EQ(run(o, t, 2), -1);
        CHECK_EQ(srv_output_fail(o, 413, "grammar: too ambiguous"), 0);
        const char *s = j->sse.p;
        const char *ev = s ? strstr(s, "data: {\"error\":{\"message\":\"grammar: too ambiguous\"") : NULL;
        const char *fin = ev ? strstr(ev, "\"finish_reason\":\"error\"") : NULL;
        const char *usage = fin ? strstr(fin, "\"usage\":{") : NULL;
        CHECK(ev != NULL && strstr(ev, "\"code\":413") != NULL);
        CHECK(fin != NULL && usage != NULL);
        CHECK(s && j->sse.n >= 14 && !strcmp(s + j->sse.n - 14, "data: [DONE]\n\n"));
        srv_output_free(o);
        srv_job_unref(j);
    }
    /* ... and before any byte went out it sends nothing: the connection answers with the status */
    {
        srv_job *j = job(true, false, false);
        srv_output *o = srv_output_new(NULL, j);
        CHECK_EQ(srv_output_fail(o, 400, "no"), 0);
        CHECK_EQ(j->sse.n, 0);
        srv_output_free(o);
        srv_job_unref(j);
    }
    /* one mapping of library statuses: what a client causes is a 4xx, only the server's own
       failures are a 5xx */
    CHECK_EQ(srv_http_status(QHX_E_ARG), 400);
    CHECK_EQ(srv_http_status(QHX_E_FORMAT), 400);
    CHECK_EQ(srv_http_status(QHX_E_UNSUPPORTED), 400);
    CHECK_EQ(srv_http_status(QHX_E_LIMIT), 413);
    CHECK_EQ(srv_http_status(QHX_E_NOMEM), 503);
    CHECK_EQ(srv_http_status(QHX_E_ABORTED), 499);
    CHECK_EQ(srv_http_status(QHX_E_IO), 500);
    CHECK_EQ(srv_http_status(QHX_E_INTERNAL), 500);
    /* the error shape */
    {
        char *e = srv_error_json(413, "too big \xff");
        json_t *v = e ? json_loads(e, 0, NULL) : NULL;
        CHECK_EQ(json_integer_value(json_object_get(json_object_get(v, "error"), "code")), 413);
        CHECK_STR(json_string_value(json_object_get(json_object_get(v, "error"), "message")), "too big ?");
        json_decref(v);
        free(e);
    }
    return t_done("test_serve_output");
}
