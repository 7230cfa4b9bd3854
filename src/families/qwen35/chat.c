/* qwen35/chat.c: Qwen3.5's chat format, as its chat_template.jinja renders it (spec/qwen3_5.md
 * §9.3; the tokenizer_config.json files of the parity fixtures carry no chat_template, so this
 * follows the released model's): contents rendered by its render_content macro and |trim'med; a
 * system message only first; assistant turns after the last user query keep their reasoning as
 * "<think>\n...\n</think>\n\n", earlier ones drop it; the generation prompt ends with
 * "<think>\n" (thinking) or "<think>\n\n</think>\n\n" (not thinking); tools as its "# Tools"
 * system block, an assistant's tool calls as <tool_call><function=...><parameter=...> blocks, and
 * "tool" messages as <tool_response> blocks in one user turn per run of them. */
#include "families/qwen35/qwen35.h"
#include "text/chat.h"

#include <string.h>

/* The template's instructions after the tool list, word for word. */
static const char TOOLS_HOWTO[] =
    "\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n<tool_call>\n"
    "<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
    "<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n"
    "</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the "
    "specified format: an inner <function=...></function> block must be nested within <tool_call></tool_call> "
    "XML tags\n- Required parameters MUST be specified\n- You may provide optional reasoning for your function "
    "call in natural language BEFORE the function call, but NOT after\n- If there is no function call "
    "available, answer the question like normal with your current knowledge and do not tell the user about "
    "function calls\n</IMPORTANT>";

/* The system turn: the tools block (with the system message after it) or the system message. */
static qhx_status qwen35_system(qhx_chat_render *c, const qhx_chat_message *msgs, size_t n) {
    qhx_chat_buf *o = &c->out;
    qhx_chat_str sys = {"", 0};
    bool has_sys = n && qhx_chat_role_is(&msgs[0], "system");
    if (has_sys) {
        qhx_status rc = qhx_chat_render_content(c, &msgs[0], 0, QHX_CHAT_SYSTEM | QHX_CHAT_IMAGES);
        if (rc) return rc;
        sys = qhx_chat_trim(qhx_chat_tmp(c));
    }
    if (c->opt->n_tools) {
        qhx_chat_puts(c, o, "<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>");
        for (size_t k = 0; k < c->opt->n_tools; k++) {
            if (!c->opt->tools || !c->opt->tools[k])
                return qhx_fail(c->err, QHX_E_ARG, "chat: tool %zu has no definition", k);
            qhx_chat_puts(c, o, "\n");
            qhx_chat_puts(c, o, c->opt->tools[k]);
        }
        qhx_chat_puts(c, o, "\n</tools>");
        qhx_chat_puts(c, o, TOOLS_HOWTO);
        if (sys.n) {
            qhx_chat_puts(c, o, "\n\n");
            qhx_chat_put(c, o, sys.p, sys.n);
        }
        qhx_chat_puts(c, o, "<|im_end|>\n");
    } else if (has_sys) {
        qhx_chat_puts(c, o, "<|im_start|>system\n");
        qhx_chat_put(c, o, sys.p, sys.n);
        qhx_chat_puts(c, o, "<|im_end|>\n");
    }
    return QHX_OK;
}

/* An assistant's tool calls, after its content (`content` as the template has it then). */
static qhx_status qwen35_tool_calls(qhx_chat_render *c, const qhx_chat_message *m, size_t idx, qhx_chat_str content) {
    qhx_chat_buf *o = &c->out;
    for (size_t j = 0; j < m->n_tool_calls; j++) {
        const qhx_chat_tool_call *tc = &m->tool_calls[j];
        if (!tc->name || (tc->n_args && !tc->args))
            return qhx_fail(c->err, QHX_E_ARG, "chat: message %zu: tool call %zu has no name or arguments", idx, j);
        qhx_chat_puts(c, o, j ? "\n<tool_call>\n<function=" : qhx_chat_trim(content).n ? "\n\n<tool_call>\n<function=" : "<tool_call>\n<function=");
        qhx_chat_puts(c, o, tc->name);
        qhx_chat_puts(c, o, ">\n");
        for (size_t k = 0; k < tc->n_args; k++) {
            if (!tc->args[k].name || !tc->args[k].value)
                return qhx_fail(c->err, QHX_E_ARG, "chat: message %zu: tool call %zu: argument %zu is empty", idx, j, k);
            qhx_chat_puts(c, o, "<parameter=");
            qhx_chat_puts(c, o, tc->args[k].name);
            qhx_chat_puts(c, o, ">\n");
            qhx_chat_puts(c, o, tc->args[k].value);
            qhx_chat_puts(c, o, "\n</parameter>\n");
        }
        qhx_chat_puts(c, o, "</function>\n</tool_call>");
    }
    return QHX_OK;
}

/* A tool's response: a run of tool messages is one user turn of <tool_response> blocks. */
static void qwen35_tool_response(qhx_chat_render *c, const qhx_chat_message *msgs, size_t n, size_t i, qhx_chat_str content) {
    qhx_chat_buf *o = &c->out;
    if (i > 0 && !qhx_chat_role_is(&msgs[i - 1], "tool")) qhx_chat_puts(c, o, "<|im_start|>user");
    qhx_chat_puts(c, o, "\n<tool_response>\n");
    qhx_chat_put(c, o, content.p, content.n);
    qhx_chat_puts(c, o, "\n</tool_response>");
    if (i + 1 == n || !qhx_chat_role_is(&msgs[i + 1], "tool")) qhx_chat_puts(c, o, "<|im_end|>\n");
}

static qhx_status qwen35(qhx_chat_render *c, const qhx_chat_message *msgs, size_t n) {
    qhx_status rc;
    qhx_chat_buf *o = &c->out;
    if ((rc = qwen35_system(c, msgs, n))) return rc;
    /* the last user message that is a real query (not a wrapped tool response) */
    size_t last_query = 0;
    int found = 0;
    for (size_t i = n; i-- > 0;) {
        if (!qhx_chat_role_is(&msgs[i], "user")) continue;
        if ((rc = qhx_chat_render_content(c, &msgs[i], i, QHX_CHAT_IMAGES))) return rc;
        qhx_chat_str t = qhx_chat_trim(qhx_chat_tmp(c));
        static const char open[] = "<tool_response>", close[] = "</tool_response>";
        int wrapped = t.n >= sizeof open - 1 && !memcmp(t.p, open, sizeof open - 1) &&
                      t.n >= sizeof close - 1 && !memcmp(t.p + t.n - (sizeof close - 1), close, sizeof close - 1);
        if (!wrapped) {
            last_query = i;
            found = 1;
            break;
        }
    }
    if (!found) return qhx_fail(c->err, QHX_E_ARG, "chat: no user query found in the messages");
    for (size_t i = 0; i < n; i++) {
        const qhx_chat_message *m = &msgs[i];
        if ((rc = qhx_chat_render_content(c, m, i, QHX_CHAT_COUNT | QHX_CHAT_IMAGES))) return rc;
        qhx_chat_str t = qhx_chat_trim(qhx_chat_tmp(c));
        if (qhx_chat_role_is(m, "system")) continue;
        if (qhx_chat_role_is(m, "user")) {
            qhx_chat_puts(c, o, "<|im_start|>user\n");
            qhx_chat_put(c, o, t.p, t.n);
            qhx_chat_puts(c, o, "<|im_end|>\n");
            continue;
        }
        if (qhx_chat_role_is(m, "tool")) {
            qwen35_tool_response(c, msgs, n, i, t);
            continue;
        }
        /* assistant: split off the reasoning as the template does */
        qhx_chat_str reasoning = {"", 0}, content = t;
        const char *close = qhx_chat_find(t, "</think>");
        if (close) {
            qhx_chat_str before = {t.p, (size_t)(close - t.p)};
            while (before.n && before.p[before.n - 1] == '\n') before.n--;
            const char *open = qhx_chat_rfind(before, "<think>");
            if (open) before = (qhx_chat_str){open + 7, before.n - (size_t)(open + 7 - before.p)};
            while (before.n && before.p[0] == '\n') before = (qhx_chat_str){before.p + 1, before.n - 1};
            reasoning = before;
            const char *last = qhx_chat_rfind(t, "</think>");
            content = (qhx_chat_str){last + 8, t.n - (size_t)(last + 8 - t.p)};
            while (content.n && content.p[0] == '\n') content = (qhx_chat_str){content.p + 1, content.n - 1};
        }
        reasoning = qhx_chat_trim(reasoning);
        qhx_chat_puts(c, o, "<|im_start|>assistant\n");
        if (i > last_query) {
            qhx_chat_puts(c, o, "<think>\n");
            qhx_chat_put(c, o, reasoning.p, reasoning.n);
            qhx_chat_puts(c, o, "\n</think>\n\n");
        }
        qhx_chat_put(c, o, content.p, content.n);
        if ((rc = qwen35_tool_calls(c, m, i, content))) return rc;
        qhx_chat_puts(c, o, "<|im_end|>\n");
    }
    if (c->opt->add_generation_prompt) {
        qhx_chat_puts(c, o, "<|im_start|>assistant\n");
        qhx_chat_puts(c, o, c->opt->enable_thinking ? "<think>\n" : "<think>\n\n</think>\n\n");
    }
    return QHX_OK;
}

const qhx_chat_style qhx_chat_style_qwen35 = {
    .name = "qwen3_5",
    .render = qwen35,
    .turn_start = "<|im_start|>",
    .turn_end = "<|im_end|>",
    .turn_sep = "\n",
    .image_start = "<|vision_start|>",
    .image_pad = "<|image_pad|>",
    .video_pad = "<|video_pad|>",
    .image_end = "<|vision_end|>",
    .image_label = "Picture ",
    .image_label_end = ": ",
    .think_open = "<think>",
    .think_close = "</think>",
    .reasoning_open = "<think>\n",
    .reasoning_close = "\n</think>\n\n",
    .tool_open = "<tool_call>",
    .tool_close = "</tool_call>",
    .tool_prefix = "<tool_call>\n<function=",
    .tool_named = ">\n",
    .tool_json = false,
    .tool_fn_open = "<function=",
    .tool_param_open = "<parameter=",
    .tool_param_open_end = ">\n",
    .tool_param_close = "</parameter>",
    .tool_call_end = "</function>\n</tool_call>",
};
