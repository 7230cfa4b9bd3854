/* runtime/api_frontend.c: the public calls of qhx.h's "For front ends" section: model facts,
 * the chat template check, chat text with an image or after an earlier answer, and images
 * encoded once and fed with caller-made ids. Thin wrappers over the family, plan, tokenizer and
 * session internals, so a front end (tools/qhx) needs no internal header. */
#include "core/alloc.h"
#include "core/file.h"
#include "core/sha256.h"
#include "io/json.h"
#include "io/manifest.h"
#include "runtime/model.h"
#include "runtime/session.h"
#include "text/tokenizer.h"

#include <jansson.h>
#include <string.h>

#define MAX_CHAT_MESSAGES 4096
#define MAX_IMAGE_TOKENS ((int64_t)1 << 20) /* as text/tok_chat.c */

/* ---- model facts ----------------------------------------------------------------------------- */

int qhx_model_has_tokenizer(const qhx_model *m) { return m && m->tok; }

int qhx_model_thinking_default(const qhx_model *m) { return m && m->plan && m->plan->generation.thinking; }

int qhx_model_context_from_plan(const qhx_model *m) {
    return m && (!m->plan || m->plan->source == QHX_PLAN_FROM_MANIFEST || !m->plan->config);
}

/* ---- the checkpoint's own chat template ------------------------------------------------------ */

/* sha256 of the released chat templates the built-in formats are checked against
 * (tests/data/chat_templates, tests/cli/chat_templates.sh). */
static const char *const KNOWN_TEMPLATES[] = {
    "a4aee8afcf2e0711942cf848899be66016f8d14a889ff9ede07bca099c28f715", /* Qwen3.5-4B */
};

#define MAX_TEMPLATE_BYTES ((size_t)4 << 20)

/* The chat_template text of folder dir (owned: qhx_free), or NULL. */
static char *folder_chat_template(const char *dir) {
    static const char *const files[] = {"chat_template.jinja", "chat_template.json", "tokenizer_config.json"};
    for (size_t k = 0; k < 3; k++) {
        char *path = qhx_path_join(dir, files[k]);
        if (!path || !qhx_path_is_file(path)) {
            qhx_free(path);
            continue;
        }
        char *text = NULL;
        if (k == 0) {
            size_t len;
            if (qhx_file_read_all(path, MAX_TEMPLATE_BYTES, &text, &len, NULL)) text = NULL; /* hashed up to a NUL */
        } else {
            json_t *root = qhx_json_load_file(path, NULL);
            const char *t = json_string_value(json_object_get(root, "chat_template"));
            if (t) text = qhx_strdup(t);
            json_decref(root);
        }
        qhx_free(path);
        if (text) return text;
    }
    return NULL;
}

/* The folder of the model's tokenizer file (owned: qhx_free), or NULL. */
static char *tokenizer_folder(const qhx_model *m) {
    const char *tok = m->plan ? m->plan->tokenizer.path : NULL;
    if (!tok) return NULL;
    const char *slash = strrchr(tok, '/');
    return slash ? qhx_strndup(tok, (size_t)(slash - tok)) : qhx_strdup(".");
}

qhx_chat_template_kind qhx_model_chat_template(const qhx_model *m, char *sha256_hex) {
    if (sha256_hex) sha256_hex[0] = '\0';
    if (!m) return QHX_CHAT_TEMPLATE_NONE;
    char *dir = tokenizer_folder(m);
    char *text = dir ? folder_chat_template(dir) : NULL;
    qhx_free(dir);
    if (!text) return QHX_CHAT_TEMPLATE_NONE;
    qhx_sha256 h;
    uint8_t digest[32];
    char hex[65];
    qhx_sha256_init(&h);
    qhx_sha256_update(&h, text, strlen(text));
    qhx_sha256_final(&h, digest);
    qhx_sha256_hex(digest, hex);
    qhx_free(text);
    if (sha256_hex) memcpy(sha256_hex, hex, sizeof hex);
    for (size_t k = 0; k < sizeof KNOWN_TEMPLATES / sizeof KNOWN_TEMPLATES[0]; k++)
        if (!strcmp(hex, KNOWN_TEMPLATES[k])) return QHX_CHAT_TEMPLATE_KNOWN;
    return QHX_CHAT_TEMPLATE_OTHER;
}

/* ---- chat text ------------------------------------------------------------------------------- */

/* msgs rendered for the model's family (owned: qhx_free), with image_tokens pads before the text
 * of the last user message when image_tokens > 0. */
static qhx_status render_chat(const qhx_model *m, const qhx_chat_msg *msgs, size_t n, int add_generation_prompt,
                              int thinking, int64_t image_tokens, char **out, size_t *len, qhx_error *err) {
    *out = NULL;
    *len = 0;
    if (n > MAX_CHAT_MESSAGES) return qhx_fail(err, QHX_E_LIMIT, "chat: %zu messages, the limit is %d", n, MAX_CHAT_MESSAGES);
    if (!msgs && n) return qhx_fail(err, QHX_E_ARG, "chat: msgs is NULL");
    if (image_tokens < 0 || image_tokens > MAX_IMAGE_TOKENS)
        return qhx_fail(err, QHX_E_ARG, "chat: %lld image tokens is outside [0, %lld]", (long long)image_tokens,
                        (long long)MAX_IMAGE_TOKENS);
    qhx_chat_message *cm = qhx_calloc(n ? n : 1, sizeof *cm);
    if (!cm) return qhx_fail(err, QHX_E_NOMEM, "chat: out of memory");
    size_t last_user = n;
    for (size_t i = 0; i < n; i++) {
        cm[i].role = msgs[i].role;
        cm[i].content = msgs[i].content ? msgs[i].content : "";
        if (msgs[i].role && !strcmp(msgs[i].role, "user")) last_user = i;
    }
    qhx_chat_part parts[2];
    if (image_tokens > 0) {
        if (last_user == n) {
            qhx_free(cm);
            return qhx_fail(err, QHX_E_ARG, "chat: an image needs a user message");
        }
        parts[0] = (qhx_chat_part){.text = NULL, .image_tokens = (int32_t)image_tokens};
        parts[1] = (qhx_chat_part){.text = cm[last_user].content, .text_len = strlen(cm[last_user].content)};
        cm[last_user].parts = parts;
        cm[last_user].n_parts = 2;
    }
    qhx_chat_options opt = {.add_generation_prompt = add_generation_prompt, .enable_thinking = thinking};
    qhx_status rc = qhx_tok_chat_format(qhx_model_chat_style(m), cm, n, &opt, out, len, err);
    qhx_free(cm);
    return rc;
}

/* text (len bytes, owned: freed here) into buf[cap] by qhx_chat_format's rules. */
static qhx_status copy_out(char *text, size_t len, char *buf, size_t cap, size_t *len_out, qhx_error *err) {
    qhx_status rc = QHX_OK;
    *len_out = len;
    if (len < cap) {
        memcpy(buf, text, len + 1);
    } else {
        if (cap) {
            memcpy(buf, text, cap - 1);
            buf[cap - 1] = '\0';
        }
        rc = qhx_fail(err, QHX_E_LIMIT, "chat: %zu bytes + NUL do not fit in %zu", len, cap);
    }
    qhx_free(text);
    return rc;
}

qhx_status qhx_chat_format_image(const qhx_model *m, const qhx_chat_msg *msgs, size_t n, int add_generation_prompt,
                                 int thinking, int64_t image_tokens, char *buf, size_t cap, size_t *len_out,
                                 qhx_error *err) {
    if (!len_out) return qhx_fail(err, QHX_E_ARG, "chat: len_out is NULL");
    *len_out = 0;
    if (!m) return qhx_fail(err, QHX_E_ARG, "chat: model is NULL");
    if (!buf && cap) return qhx_fail(err, QHX_E_ARG, "chat: buf is NULL with cap %zu", cap);
    char *text = NULL;
    size_t len = 0;
    qhx_status rc = render_chat(m, msgs, n, add_generation_prompt, thinking, image_tokens, &text, &len, err);
    return rc ? rc : copy_out(text, len, buf, cap, len_out, err);
}

qhx_status qhx_session_chat_format(const qhx_session *s, const qhx_chat_msg *msgs, size_t n, int thinking,
                                   int64_t image_tokens, char *buf, size_t cap, size_t *len_out, qhx_error *err) {
    if (!len_out) return qhx_fail(err, QHX_E_ARG, "chat: len_out is NULL");
    *len_out = 0;
    if (!s) return qhx_fail(err, QHX_E_ARG, "chat: session is NULL");
    if (!buf && cap) return qhx_fail(err, QHX_E_ARG, "chat: buf is NULL with cap %zu", cap);
    char *body = NULL;
    size_t len = 0;
    qhx_status rc = render_chat(qhx_session_model(s), msgs, n, 1, thinking, image_tokens, &body, &len, err);
    if (rc) return rc;
    if (qhx_session_n_past(s) == 0) return copy_out(body, len, buf, cap, len_out, err);
    /* close the previous answer: its stop token (<|im_end|>) is pending and fed with this turn;
     * after any other stop (length, a stop string, a callback) the marker has to be added */
    const char *sep = qhx_session_last_stop(s) == QHX_STOP_TOKEN ? "\n" : "<|im_end|>\n";
    size_t n_sep = strlen(sep);
    char *t = qhx_malloc(n_sep + len + 1);
    if (!t) {
        qhx_free(body);
        return qhx_fail(err, QHX_E_NOMEM, "chat: out of memory");
    }
    memcpy(t, sep, n_sep);
    memcpy(t + n_sep, body, len + 1);
    qhx_free(body);
    return copy_out(t, n_sep + len, buf, cap, len_out, err);
}

/* ---- images ---------------------------------------------------------------------------------- */

struct qhx_encoded_image {
    qhx_image_embed im;
};

qhx_status qhx_encoded_image_load(const qhx_model *m, const char *path, int64_t max_tokens, qhx_encoded_image **out,
                                  qhx_error *err) {
    if (!out) return qhx_fail(err, QHX_E_ARG, "image: out is NULL");
    *out = NULL;
    if (!m) return qhx_fail(err, QHX_E_ARG, "image: model is NULL");
    if (!path) return qhx_fail(err, QHX_E_ARG, "image: path is NULL");
    if (max_tokens < 0) return qhx_fail(err, QHX_E_ARG, "image: max_tokens %lld is negative", (long long)max_tokens);
    qhx_encoded_image *e = qhx_calloc(1, sizeof *e);
    if (!e) return qhx_fail(err, QHX_E_NOMEM, "image: out of memory");
    qhx_status rc = qhx_model_image_load(m, path, max_tokens, &e->im, err); /* says why a model takes none */
    if (rc) {
        qhx_encoded_image_free(e);
        return rc;
    }
    *out = e;
    return QHX_OK;
}

int64_t qhx_encoded_image_n_tokens(const qhx_encoded_image *e) { return e ? e->im.n_tokens : 0; }

void qhx_encoded_image_free(qhx_encoded_image *e) {
    if (!e) return;
    qhx_image_embed_deinit(&e->im);
    qhx_free(e);
}

qhx_status qhx_session_feed_image(qhx_session *s, const qhx_token *ids, size_t n, const qhx_encoded_image *image,
                                  qhx_error *err) {
    /* the pending token and the announcement under the session's guard; the feed guards itself */
    qhx_status rc = qhx_session_guard_enter(s, "feed image", err);
    if (rc) return rc;
    const qhx_model *m = qhx_session_model(s);
    if (image && !qhx_model_takes_images(m))
        return qhx_session_guard_leave(s, qhx_fail(err, QHX_E_UNSUPPORTED, "feed image: the model's host-op %s takes no images",
                                                   qhx_model_host_op(m)));
    if (!ids && n) return qhx_session_guard_leave(s, qhx_fail(err, QHX_E_ARG, "feed image: ids is NULL"));
    if (n > (size_t)INT64_MAX) return qhx_session_guard_leave(s, qhx_fail(err, QHX_E_LIMIT, "feed image: %zu ids", n));
    rc = qhx_session_feed_pending(s, err); /* first, so the announcement covers exactly these ids */
    if (!rc && n) rc = qhx_model_state_attach(qhx_session_state(s), image ? &image->im : NULL, image ? 1 : 0, ids, (int64_t)n, err);
    qhx_session_guard_leave(s, rc);
    if (!rc) rc = qhx_session_feed(s, ids, n, err);
    qhx_model_state_attach(qhx_session_state(s), NULL, 0, NULL, 0, NULL); /* the image is the caller's: drop it */
    return rc;
}
