/* runtime/api_frontend.c: the public calls of qhx.h's "For front ends" section: model facts,
 * the chat template check, chat text with an image or after an earlier answer, and images
 * encoded once and fed with caller-made ids. Thin wrappers over the family, plan, tokenizer and
 * session internals, so a front end (tools/qhx) needs no internal header. */
#include "core/alloc.h"
#include "core/file.h"
#include "core/sha256.h"
#include "io/gguf.h"
#include "io/json.h"
#include "io/manifest.h"
#include "runtime/hostop.h"
#include "runtime/model.h"
#include "runtime/prompt.h"
#include "runtime/session.h"
#include "text/tokenizer.h"

#include <jansson.h>
#include <string.h>

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
    "3636d0f0bd6bef02654cdffdc447b79cb2cef8ab02cc75267345946291a489e4", /* Qwen3-VL-8B-Instruct (the 2B's may differ) */
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

/* A GGUF file's tokenizer.chat_template (owned: qhx_free), or NULL. */
static char *gguf_chat_template(const char *path) {
    qhx_gguf *g = NULL;
    if (qhx_gguf_open(path, QHX_FILE_MAP, &g, NULL)) return NULL;
    qhx_gguf_str s;
    char *text = NULL;
    if (qhx_gguf_find_kv(g, "tokenizer.chat_template") && !qhx_gguf_get_str(g, "tokenizer.chat_template", &s, NULL) &&
        s.len <= MAX_TEMPLATE_BYTES)
        text = qhx_strndup(s.p, (size_t)s.len); /* hashed up to a NUL, as a .jinja file */
    qhx_gguf_free(g);
    return text;
}

/* Whether a template writes the family's turns: its turn-start and turn-end tokens appear. */
static bool has_turn_marks(const qhx_model *m, const char *text) {
    const qhx_family_desc *f = m->family;
    const char *start = NULL, *end = NULL;
    for (const qhx_plan_token_name *n = f ? f->special_names : NULL; n && n->text; n++) {
        if (!strcmp(n->key, "im_start")) start = n->text;
        if (!strcmp(n->key, "im_end")) end = n->text;
    }
    return start && end && strstr(text, start) && strstr(text, end);
}

qhx_chat_template_kind qhx_model_chat_template(const qhx_model *m, char *sha256_hex) {
    if (sha256_hex) sha256_hex[0] = '\0';
    if (!m) return QHX_CHAT_TEMPLATE_NONE;
    const qhx_plan_file *tf = m->plan ? &m->plan->tokenizer : NULL;
    char *dir = tf && tf->format != QHX_ART_GGUF ? tokenizer_folder(m) : NULL;
    char *text = dir ? folder_chat_template(dir) : tf && tf->path && tf->format == QHX_ART_GGUF ? gguf_chat_template(tf->path) : NULL;
    qhx_free(dir);
    if (!text) return QHX_CHAT_TEMPLATE_NONE;
    qhx_sha256 h;
    uint8_t digest[32];
    char hex[65];
    qhx_sha256_init(&h);
    qhx_sha256_update(&h, text, strlen(text));
    qhx_sha256_final(&h, digest);
    qhx_sha256_hex(digest, hex);
    const bool marks = has_turn_marks(m, text);
    qhx_free(text);
    if (sha256_hex) memcpy(sha256_hex, hex, sizeof hex);
    for (size_t k = 0; k < sizeof KNOWN_TEMPLATES / sizeof KNOWN_TEMPLATES[0]; k++)
        if (!strcmp(hex, KNOWN_TEMPLATES[k])) return QHX_CHAT_TEMPLATE_KNOWN;
    return marks ? QHX_CHAT_TEMPLATE_OTHER : QHX_CHAT_TEMPLATE_FOREIGN;
}

/* ---- the former chat calls: wrappers over the prompt object (runtime/prompt.c) ------------- */

/* The messages of a former chat call as a chat spec: n_images images (file paths, or for a text
 * only the pad counts) before the text of the last user message. turns (n, owned: qhx_free) and
 * parts (QHX_HOSTOP_MAX_IMAGES + 1) are the spec's storage. */
static qhx_status spec_of_msgs(const qhx_chat_msg *msgs, size_t n, const char *const *paths, const int64_t *pads,
                               size_t n_images, int add_generation_prompt, int thinking, qhx_chat_turn **turns,
                               qhx_chat_content *parts, qhx_chat_spec *spec, qhx_error *err) {
    *turns = NULL;
    if (n > QHX_CHAT_MAX_MESSAGES) return qhx_fail(err, QHX_E_LIMIT, "chat: %zu messages, the limit is %d", n, QHX_CHAT_MAX_MESSAGES);
    if (!msgs && n) return qhx_fail(err, QHX_E_ARG, "chat: msgs is NULL");
    if (n_images > QHX_HOSTOP_MAX_IMAGES)
        return qhx_fail(err, QHX_E_LIMIT, "chat: %zu images in one turn, the limit is %d", n_images, QHX_HOSTOP_MAX_IMAGES);
    qhx_chat_turn *t = qhx_calloc(n ? n : 1, sizeof *t);
    if (!t) return qhx_fail(err, QHX_E_NOMEM, "chat: out of memory");
    size_t last_user = n;
    for (size_t i = 0; i < n; i++) {
        t[i] = (qhx_chat_turn){.role = msgs[i].role, .content = msgs[i].content ? msgs[i].content : ""};
        if (msgs[i].role && !strcmp(msgs[i].role, "user")) last_user = i;
    }
    if (n_images > 0) { /* the images first, in order, then the text of the last user message */
        if (last_user == n) {
            qhx_free(t);
            return qhx_fail(err, QHX_E_ARG, "chat: an image needs a user message");
        }
        for (size_t k = 0; k < n_images; k++)
            parts[k] = paths ? (qhx_chat_content){.image_path = paths[k]} : (qhx_chat_content){.image_tokens = pads[k]};
        parts[n_images] = (qhx_chat_content){.text = t[last_user].content, .text_len = strlen(t[last_user].content)};
        t[last_user].parts = parts;
        t[last_user].n_parts = n_images + 1;
    }
    *spec = (qhx_chat_spec){.turns = t, .n_turns = n, .thinking = thinking,
                            .no_generation_prompt = !add_generation_prompt, .render_only = !paths,
                            .max_images = (int64_t)n_images};
    *turns = t;
    return QHX_OK;
}

/* The chat text of msgs (after the closing of s's answer when s is not NULL) with images of
 * image_tokens pads into buf[cap], by qhx_chat_format's rules. */
static qhx_status format_chat(const qhx_model *m, const qhx_session *s, const qhx_chat_msg *msgs, size_t n,
                              int add_generation_prompt, int thinking, const int64_t *image_tokens, size_t n_images,
                              char *buf, size_t cap, size_t *len_out, qhx_error *err) {
    qhx_chat_content parts[QHX_HOSTOP_MAX_IMAGES + 1];
    qhx_chat_turn *turns;
    qhx_chat_spec spec;
    qhx_prompt *p = NULL;
    qhx_status rc = spec_of_msgs(msgs, n, NULL, image_tokens, n_images, add_generation_prompt, thinking, &turns, parts,
                                 &spec, err);
    if (!rc) rc = qhx_prompt_build(m, s, &spec, false, &p, err);
    qhx_free(turns);
    if (rc) return rc;
    size_t len;
    const char *text = qhx_prompt_text(p, &len);
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
    qhx_prompt_free(p);
    return rc;
}

/* The images' pad counts: at most QHX_HOSTOP_MAX_IMAGES, each in [1, QHX_CHAT_MAX_IMAGE_TOKENS]. */
static qhx_status check_image_tokens(const int64_t *image_tokens, size_t n_images, qhx_error *err) {
    if (n_images > QHX_HOSTOP_MAX_IMAGES)
        return qhx_fail(err, QHX_E_LIMIT, "chat: %zu images in one turn, the limit is %d", n_images, QHX_HOSTOP_MAX_IMAGES);
    if (n_images && !image_tokens) return qhx_fail(err, QHX_E_ARG, "chat: %zu images but no token counts", n_images);
    for (size_t k = 0; k < n_images; k++)
        if (image_tokens[k] < 1 || image_tokens[k] > QHX_CHAT_MAX_IMAGE_TOKENS)
            return qhx_fail(err, QHX_E_ARG, "chat: image %zu: %lld image tokens", k + 1, (long long)image_tokens[k]);
    return QHX_OK;
}

/* The common checks of the formatting calls: OUT and buffer arguments. */
static qhx_status check_out(const void *owner, const char *what, char *buf, size_t cap, size_t *len_out,
                            qhx_error *err) {
    if (!len_out) return qhx_fail(err, QHX_E_ARG, "chat: len_out is NULL");
    *len_out = 0;
    if (!owner) return qhx_fail(err, QHX_E_ARG, "chat: %s is NULL", what);
    if (!buf && cap) return qhx_fail(err, QHX_E_ARG, "chat: buf is NULL with cap %zu", cap);
    return QHX_OK;
}

qhx_status qhx_chat_format_images(const qhx_model *m, const qhx_chat_msg *msgs, size_t n, int add_generation_prompt,
                                  int thinking, const int64_t *image_tokens, size_t n_images, char *buf, size_t cap,
                                  size_t *len_out, qhx_error *err) {
    qhx_status rc = check_out(m, "model", buf, cap, len_out, err);
    if (!rc) rc = check_image_tokens(image_tokens, n_images, err);
    return rc ? rc : format_chat(m, NULL, msgs, n, add_generation_prompt, thinking, image_tokens, n_images, buf, cap,
                                 len_out, err);
}

qhx_status qhx_session_chat_format_images(const qhx_session *s, const qhx_chat_msg *msgs, size_t n, int thinking,
                                          const int64_t *image_tokens, size_t n_images, char *buf, size_t cap,
                                          size_t *len_out, qhx_error *err) {
    qhx_status rc = check_out(s, "session", buf, cap, len_out, err);
    if (!rc) rc = check_image_tokens(image_tokens, n_images, err);
    return rc ? rc : format_chat(qhx_session_model(s), s, msgs, n, 1, thinking, image_tokens, n_images, buf, cap,
                                 len_out, err);
}

qhx_status qhx_chat_format_image(const qhx_model *m, const qhx_chat_msg *msgs, size_t n, int add_generation_prompt,
                                 int thinking, int64_t image_tokens, char *buf, size_t cap, size_t *len_out,
                                 qhx_error *err) {
    qhx_status rc = check_out(m, "model", buf, cap, len_out, err);
    if (rc) return rc;
    if (image_tokens < 0) return qhx_fail(err, QHX_E_ARG, "chat: %lld image tokens is negative", (long long)image_tokens);
    return format_chat(m, NULL, msgs, n, add_generation_prompt, thinking, &image_tokens, image_tokens > 0, buf, cap,
                       len_out, err);
}

qhx_status qhx_session_chat_format(const qhx_session *s, const qhx_chat_msg *msgs, size_t n, int thinking,
                                   int64_t image_tokens, char *buf, size_t cap, size_t *len_out, qhx_error *err) {
    qhx_status rc = check_out(s, "session", buf, cap, len_out, err);
    if (rc) return rc;
    if (image_tokens < 0) return qhx_fail(err, QHX_E_ARG, "chat: %lld image tokens is negative", (long long)image_tokens);
    return format_chat(qhx_session_model(s), s, msgs, n, 1, thinking, &image_tokens, image_tokens > 0, buf, cap,
                       len_out, err);
}

qhx_status qhx_chat_format(const qhx_model *m, const qhx_chat_msg *msgs, size_t n, int add_generation_prompt,
                           int thinking, char *buf, size_t cap, size_t *len_out, qhx_error *err) {
    /* the same text without an image */
    qhx_status rc = check_out(m, "model", buf, cap, len_out, err);
    return rc ? rc : format_chat(m, NULL, msgs, n, add_generation_prompt, thinking, NULL, 0, buf, cap, len_out, err);
}

/* One chat turn fed: msgs with images (n_images file paths) in one prompt for s, then fed after
 * what s holds (the pending token first, so the images' announcement covers exactly its ids). */
static qhx_status feed_chat(qhx_session *s, const qhx_chat_msg *msgs, size_t n, const char *const *paths,
                            size_t n_images, int thinking, qhx_error *err) {
    if (!qhx_session_model(s)->tok) return qhx_fail(err, QHX_E_ARG, "session: the model has no tokenizer");
    if (!msgs || n == 0 || n > QHX_CHAT_MAX_MESSAGES)
        return qhx_fail(err, QHX_E_ARG, "chat: 1 to %d messages are needed", QHX_CHAT_MAX_MESSAGES);
    for (size_t k = 0; k < n_images; k++)
        if (!paths[k]) return qhx_fail(err, QHX_E_ARG, "chat: image %zu has no path", k + 1);
    qhx_chat_content parts[QHX_HOSTOP_MAX_IMAGES + 1];
    qhx_chat_turn *turns;
    qhx_chat_spec spec;
    qhx_prompt *p = NULL;
    qhx_status rc = spec_of_msgs(msgs, n, paths, NULL, n_images, 1, thinking, &turns, parts, &spec, err);
    if (!rc) rc = qhx_prompt_build(qhx_session_model(s), s, &spec, false, &p, err);
    qhx_free(turns);
    if (!rc) rc = qhx_prompt_feed_all(s, p, err);
    qhx_prompt_free(p);
    return rc;
}

qhx_status qhx_session_feed_chat(qhx_session *s, const qhx_chat_msg *msgs, size_t n, const char *image_path,
                                 int thinking, qhx_error *err) {
    qhx_status rc = qhx_session_guard_enter(s, "chat", err);
    if (rc) return rc;
    const char *const images[1] = {image_path};
    return qhx_session_guard_leave(s, feed_chat(s, msgs, n, images, image_path ? 1 : 0, thinking, err));
}

qhx_status qhx_session_feed_chat_images(qhx_session *s, const qhx_chat_msg *msgs, size_t n,
                                        const char *const *image_paths, size_t n_images, int thinking,
                                        qhx_error *err) {
    qhx_status rc = qhx_session_guard_enter(s, "chat", err);
    if (rc) return rc;
    if (n_images > QHX_HOSTOP_MAX_IMAGES)
        return qhx_session_guard_leave(s, qhx_fail(err, QHX_E_LIMIT, "chat: %zu images in one turn, the limit is %d",
                                                   n_images, QHX_HOSTOP_MAX_IMAGES));
    if (n_images && !image_paths)
        return qhx_session_guard_leave(s, qhx_fail(err, QHX_E_ARG, "chat: %zu images but no paths", n_images));
    return qhx_session_guard_leave(s, feed_chat(s, msgs, n, image_paths, n_images, thinking, err));
}

qhx_status qhx_session_feed_text(qhx_session *s, const char *text, size_t len, qhx_error *err) {
    qhx_status rc = qhx_session_guard_enter(s, "feed text", err);
    if (rc) return rc;
    if (!text && len) return qhx_session_guard_leave(s, qhx_fail(err, QHX_E_ARG, "feed text: text is NULL"));
    qhx_prompt *p = NULL;
    rc = qhx_prompt_build_text(qhx_session_model(s), s, text ? text : "", len, &p, err);
    size_t n = 0;
    const qhx_token *ids = qhx_prompt_ids(p, &n);
    if (!rc) rc = qhx_session_feed_ids(s, ids, n, err);
    qhx_prompt_free(p);
    return qhx_session_guard_leave(s, rc);
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

qhx_status qhx_encoded_images_load(const qhx_model *m, const char *const *paths, size_t n, int64_t budget,
                                   qhx_encoded_image **out, qhx_error *err) {
    if (!out) return qhx_fail(err, QHX_E_ARG, "images: out is NULL");
    for (size_t k = 0; k < n; k++) out[k] = NULL;
    if (!m) return qhx_fail(err, QHX_E_ARG, "images: model is NULL");
    if (n < 1 || n > QHX_HOSTOP_MAX_IMAGES || !paths)
        return qhx_fail(err, n > QHX_HOSTOP_MAX_IMAGES ? QHX_E_LIMIT : QHX_E_ARG, "images: %zu images (1 to %d)", n,
                        QHX_HOSTOP_MAX_IMAGES);
    if (budget < 0) return qhx_fail(err, QHX_E_ARG, "images: budget %lld is negative", (long long)budget);
    qhx_image_embed im[QHX_HOSTOP_MAX_IMAGES];
    qhx_status rc = qhx_model_images_load(m, paths, (int)n, budget, im, err); /* says why a model takes none */
    for (size_t k = 0; !rc && k < n; k++) {
        if (!(out[k] = qhx_calloc(1, sizeof *out[k]))) rc = qhx_fail(err, QHX_E_NOMEM, "images: out of memory");
        else out[k]->im = im[k], im[k] = (qhx_image_embed){0};
    }
    if (rc) {
        for (size_t k = 0; k < n; k++) {
            qhx_encoded_image_free(out[k]);
            out[k] = NULL;
            qhx_image_embed_deinit(&im[k]);
        }
    }
    return rc;
}

qhx_status qhx_session_feed_images(qhx_session *s, const qhx_token *ids, size_t n,
                                   const qhx_encoded_image *const *images, size_t n_images, qhx_error *err) {
    qhx_status rc = qhx_session_guard_enter(s, "feed images", err);
    if (rc) return rc;
    const qhx_model *m = qhx_session_model(s);
    if (n_images > QHX_HOSTOP_MAX_IMAGES)
        return qhx_session_guard_leave(s, qhx_fail(err, QHX_E_LIMIT, "feed images: %zu images, the limit is %d", n_images,
                                                   QHX_HOSTOP_MAX_IMAGES));
    if (n_images && !qhx_model_takes_images(m))
        return qhx_session_guard_leave(s, qhx_fail(err, QHX_E_UNSUPPORTED, "feed images: the model's host-op %s takes no images",
                                                   qhx_model_host_op(m)));
    if ((!ids && n) || (n_images && !images)) return qhx_session_guard_leave(s, qhx_fail(err, QHX_E_ARG, "feed images: ids or images is NULL"));
    if (n > (size_t)INT64_MAX) return qhx_session_guard_leave(s, qhx_fail(err, QHX_E_LIMIT, "feed images: %zu ids", n));
    qhx_image_embed im[QHX_HOSTOP_MAX_IMAGES];
    for (size_t k = 0; k < n_images; k++) {
        if (!images[k]) return qhx_session_guard_leave(s, qhx_fail(err, QHX_E_ARG, "feed images: image %zu is NULL", k + 1));
        im[k] = images[k]->im; /* a shallow view: the rows stay the caller's */
    }
    return qhx_session_guard_leave(s, qhx_session_feed_announced(s, ids, n, im, (int)n_images, err));
}

qhx_status qhx_session_feed_image(qhx_session *s, const qhx_token *ids, size_t n, const qhx_encoded_image *image,
                                  qhx_error *err) {
    /* under the session's guard: the pending token, the announcement, the feed */
    qhx_status rc = qhx_session_guard_enter(s, "feed image", err);
    if (rc) return rc;
    const qhx_model *m = qhx_session_model(s);
    if (image && !qhx_model_takes_images(m))
        return qhx_session_guard_leave(s, qhx_fail(err, QHX_E_UNSUPPORTED, "feed image: the model's host-op %s takes no images",
                                                   qhx_model_host_op(m)));
    if (!ids && n) return qhx_session_guard_leave(s, qhx_fail(err, QHX_E_ARG, "feed image: ids is NULL"));
    if (n > (size_t)INT64_MAX) return qhx_session_guard_leave(s, qhx_fail(err, QHX_E_LIMIT, "feed image: %zu ids", n));
    return qhx_session_guard_leave(s, qhx_session_feed_announced(s, ids, n, image ? &image->im : NULL, image ? 1 : 0, err));
}

/* ---- generation: the host-op's loop, entered through the session's guard ------------------ */

qhx_status qhx_session_generate(qhx_session *s, const qhx_generate_params *p, qhx_generate_stats *stats,
                                qhx_error *err) {
    qhx_status rc = qhx_session_guard_enter(s, "generate", err);
    return rc ? rc : qhx_session_guard_leave(s, qhx_hostop_of(qhx_session_model(s))->generate(s, p, stats, err));
}
