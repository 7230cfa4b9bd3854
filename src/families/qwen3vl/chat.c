/* qwen3vl/chat.c: Qwen3-VL Instruct's chat format, as its chat_template renders it (the 8B
 * release's text, spec/qwen3_vl.md §6.1): contents verbatim, images as
 * <|vision_start|><|image_pad|><|vision_end|> (after "Picture N: " with add_vision_id), no
 * <think> block; tools as its "# Tools" system block of tojson lines, an assistant's tool calls
 * as <tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>, and "tool" messages as
 * <tool_response> blocks in one user turn per run of them. */
#include "families/qwen3vl/qwen3vl.h"
#include "text/chat.h"

#include <string.h>

/* Qwen3-VL's tools block, before and after the definitions, word for word. */
static const char VL_TOOLS_HEAD[] =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with "
    "function signatures within <tools></tools> XML tags:\n<tools>";
static const char VL_TOOLS_TAIL[] =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\n</tool_call><|im_end|>\n";

/* The system turn: the system message's text (and, with tools, the tools block after it). */
static qhx_status qwen3vl_system(qhx_chat_render *c, const qhx_chat_message *msgs, size_t n) {
    qhx_chat_buf *o = &c->out;
    bool has_sys = n && qhx_chat_role_is(&msgs[0], "system");
    if (!has_sys && !c->opt->n_tools) return QHX_OK;
    qhx_chat_puts(c, o, "<|im_start|>system\n");
    if (has_sys) {
        qhx_status rc = qhx_chat_render_content(c, &msgs[0], 0, 0);
        if (rc) return rc;
        qhx_chat_put(c, o, c->tmp.p, c->tmp.n);
    }
    if (!c->opt->n_tools) {
        qhx_chat_puts(c, o, "<|im_end|>\n");
        return QHX_OK;
    }
    if (has_sys) qhx_chat_puts(c, o, "\n\n");
    qhx_chat_puts(c, o, VL_TOOLS_HEAD);
    for (size_t k = 0; k < c->opt->n_tools; k++) {
        if (!c->opt->tools || !c->opt->tools[k]) return qhx_fail(c->err, QHX_E_ARG, "chat: tool %zu has no definition", k);
        qhx_chat_puts(c, o, "\n");
        qhx_chat_puts(c, o, c->opt->tools[k]);
    }
    qhx_chat_puts(c, o, VL_TOOLS_TAIL);
    return QHX_OK;
}

/* An assistant's tool calls as JSON objects; a newline before each but a first one that
 * follows no content (the template tests the content's truth: a non-empty string or list). */
static qhx_status qwen3vl_tool_calls(qhx_chat_render *c, const qhx_chat_message *m, size_t idx) {
    qhx_chat_buf *o = &c->out;
    bool content = m->parts ? m->n_parts > 0 : m->content && m->content[0];
    for (size_t j = 0; j < m->n_tool_calls; j++) {
        const qhx_chat_tool_call *tc = &m->tool_calls[j];
        if (!tc->name) return qhx_fail(c->err, QHX_E_ARG, "chat: message %zu: tool call %zu has no name", idx, j);
        if (j || content) qhx_chat_puts(c, o, "\n");
        qhx_chat_puts(c, o, "<tool_call>\n{\"name\": \"");
        qhx_chat_puts(c, o, tc->name);
        qhx_chat_puts(c, o, "\", \"arguments\": ");
        qhx_chat_puts(c, o, tc->arguments ? tc->arguments : "{}");
        qhx_chat_puts(c, o, "}\n</tool_call>");
    }
    return QHX_OK;
}

static qhx_status qwen3vl(qhx_chat_render *c, const qhx_chat_message *msgs, size_t n) {
    qhx_status rc;
    qhx_chat_buf *o = &c->out;
    if ((rc = qwen3vl_system(c, msgs, n))) return rc;
    for (size_t i = 0; i < n; i++) {
        const qhx_chat_message *m = &msgs[i];
        if (qhx_chat_role_is(m, "system")) continue; /* the first message only, rendered above */
        bool assistant = qhx_chat_role_is(m, "assistant");
        /* user and tool contents hold images; an assistant's renders its text parts only */
        if ((rc = qhx_chat_render_content(c, m, i, QHX_CHAT_COUNT | (!assistant ? QHX_CHAT_IMAGES : 0)))) return rc;
        if (qhx_chat_role_is(m, "tool")) {
            if (i == 0 || !qhx_chat_role_is(&msgs[i - 1], "tool")) qhx_chat_puts(c, o, "<|im_start|>user");
            qhx_chat_puts(c, o, "\n<tool_response>\n");
            qhx_chat_put(c, o, c->tmp.p, c->tmp.n);
            qhx_chat_puts(c, o, "\n</tool_response>");
            if (i + 1 == n || !qhx_chat_role_is(&msgs[i + 1], "tool")) qhx_chat_puts(c, o, "<|im_end|>\n");
            continue;
        }
        qhx_chat_puts(c, o, assistant ? "<|im_start|>assistant\n" : "<|im_start|>user\n");
        qhx_chat_put(c, o, c->tmp.p, c->tmp.n);
        if (assistant && (rc = qwen3vl_tool_calls(c, m, i))) return rc;
        qhx_chat_puts(c, o, "<|im_end|>\n");
    }
    if (c->opt->add_generation_prompt) qhx_chat_puts(c, o, "<|im_start|>assistant\n");
    return QHX_OK;
}

const qhx_chat_style qhx_chat_style_qwen3vl = {
    .name = "qwen3_vl",
    .render = qwen3vl,
    .turn_start = "<|im_start|>",
    .turn_end = "<|im_end|>",
    .turn_sep = "\n",
    .image_start = "<|vision_start|>",
    .image_pad = "<|image_pad|>",
    .video_pad = "<|video_pad|>",
    .image_end = "<|vision_end|>",
    .image_label = "Picture ",
    .image_label_end = ": ",
    .think_open = NULL, /* its template writes no think block and drops reasoning */
    .think_close = NULL,
    .reasoning_open = NULL,
    .reasoning_close = NULL,
    .tool_open = "<tool_call>",
    .tool_close = "</tool_call>",
    .tool_prefix = "<tool_call>\n{\"name\": \"",
    .tool_named = "\", \"arguments\": ",
    .tool_json = true,
    .tool_call_end = "}\n</tool_call>",
};
