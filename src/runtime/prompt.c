/* runtime/prompt.c: the prompt object (qhx.h qhx_prompt): a conversation rendered in the model
 * family's chat format (after the closing of an earlier answer when it continues a session), its
 * images loaded and encoded within the room the prompt has, tokenized once. The one writer of
 * chat prompts: qhx generate, qhx chat and qhx serve build theirs here, and the former chat
 * calls (api_frontend.c) are wrappers over it. */
#include "runtime/prompt.h"

#include "core/alloc.h"
#include "core/time.h"
#include "image/image.h"
#include "runtime/hostop.h"
#include "runtime/model.h"
#include "text/tokenizer.h"

#include <string.h>

#define MAX_TURNS 4096
#define MAX_IMAGES 64
#define DEFAULT_MAX_IMAGES 8
#define MAX_VIDEOS 4
#define DEFAULT_MAX_PIXELS ((int64_t)16 << 20)

struct qhx_prompt {
    const qhx_model *m;
    char *text;               /* what was tokenized (NUL-terminated), or NULL for ids */
    size_t text_len;
    int32_t *ids;
    size_t n;
    size_t reusable;          /* first id standing for an image (its run's start), or n */
    size_t images_end;        /* one past the last image-pad id (0 without images) */
    qhx_image_embed *images;  /* (n_images), in the order of their pads */
    int n_images;
    qhx_prompt_video_stats video;
};

void qhx_prompt_free(qhx_prompt *p) {
    if (!p) return;
    qhx_free(p->text);
    qhx_free(p->ids);
    for (int i = 0; i < p->n_images; i++) qhx_image_embed_deinit(&p->images[i]);
    qhx_free(p->images);
    qhx_model_release(p->m);
    qhx_free(p);
}

void qhx_prompt_video_stats_get(const qhx_prompt *p, qhx_prompt_video_stats *out) {
    if (!out) return;
    if (p) *out = p->video;
    else memset(out, 0, sizeof *out);
}

const qhx_token *qhx_prompt_ids(const qhx_prompt *p, size_t *n) {
    if (n) *n = p ? p->n : 0;
    return p ? p->ids : NULL;
}

const char *qhx_prompt_text(const qhx_prompt *p, size_t *len) {
    if (len) *len = p && p->text ? p->text_len : 0;
    return p && p->text ? p->text : "";
}

size_t qhx_prompt_reusable(const qhx_prompt *p) { return p ? p->reusable : 0; }

static void find_reusable(qhx_prompt *p) {
    p->reusable = p->n;
    p->images_end = 0;
    if (p->n_images == 0) return;
    const qhx_chat_style *f = qhx_model_chat_style(p->m);
    int32_t vs = f->image_start ? qhx_tok_token_to_id(p->m->tok, f->image_start) : -1;
    int64_t pad = p->m->cfg.image_token_id, vpad = qhx_model_video_pad(p->m);
    for (size_t i = 0; i < p->n; i++) {
        bool is_pad = p->ids[i] == pad || (vpad >= 0 && p->ids[i] == vpad);
        if ((p->ids[i] == vs || is_pad) && p->reusable == p->n) p->reusable = i;
        if (is_pad) p->images_end = i + 1;
    }
}

static qhx_prompt *prompt_new(const qhx_model *m, int n_images) {
    qhx_prompt *p = qhx_calloc(1, sizeof *p);
    if (!p) return NULL;
    if (n_images && !(p->images = qhx_calloc((size_t)n_images, sizeof *p->images))) {
        qhx_free(p);
        return NULL;
    }
    p->n_images = n_images; /* zeroed rows until each is encoded: freeing them is a no-op */
    p->m = qhx_model_retain(m);
    return p;
}

qhx_status qhx_prompt_from_ids(const qhx_model *m, const qhx_token *ids, size_t n, qhx_prompt **out,
                               qhx_error *err) {
    if (!out) return qhx_fail(err, QHX_E_ARG, "prompt: out is NULL");
    *out = NULL;
    if (!m || (!ids && n)) return qhx_fail(err, QHX_E_ARG, "prompt: model and ids are required");
    if (n == 0) return qhx_fail(err, QHX_E_ARG, "prompt: no tokens");
    int64_t vocab = qhx_model_n_vocab(m);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab)
            return qhx_fail(err, QHX_E_ARG, "prompt: token %zu: id %d is outside the vocabulary [0, %lld)", i, ids[i],
                            (long long)vocab);
    qhx_prompt *p = prompt_new(m, 0);
    if (!p || !(p->ids = qhx_malloc(n * sizeof *p->ids))) {
        qhx_prompt_free(p);
        return qhx_fail(err, QHX_E_NOMEM, "prompt: out of memory for %zu ids", n);
    }
    memcpy(p->ids, ids, n * sizeof *ids);
    p->n = p->reusable = n;
    *out = p;
    return QHX_OK;
}

/* ---- tokens ---------------------------------------------------------------------------------- */

/* Tokenize text into *ids (owned) / *n: for a session, refused before the work when it cannot fit
 * in what its context leaves, with its abort callback polled. */
static qhx_status tokenize(const qhx_model *m, const qhx_session *s, const char *text, size_t len, int32_t **ids,
                           size_t *n, qhx_error *err) {
    if (!s) return qhx_tok_encode_alloc(m->tok, text, len, ids, n, err);
    qhx_status rc = qhx_session_text_may_fit(s, len, err);
    if (rc) return rc;
    int (*abort_cb)(void *);
    void *abort_user;
    qhx_session_abort_cb(s, &abort_cb, &abort_user);
    return qhx_tok_encode_alloc_abortable(m->tok, text, len, abort_cb, abort_user, ids, n, err);
}

qhx_status qhx_prompt_build_text(const qhx_model *m, const qhx_session *s, const char *text, size_t len,
                                 qhx_prompt **out, qhx_error *err) {
    if (!out) return qhx_fail(err, QHX_E_ARG, "prompt: out is NULL");
    *out = NULL;
    if (!m || (!text && len)) return qhx_fail(err, QHX_E_ARG, "prompt: model and text are required");
    if (!m->tok) return qhx_fail(err, QHX_E_ARG, "session: the model has no tokenizer");
    qhx_prompt *p = prompt_new(m, 0);
    if (!p || !(p->text = qhx_strndup(text ? text : "", len)))
        return qhx_prompt_free(p), qhx_fail(err, QHX_E_NOMEM, "prompt: out of memory");
    p->text_len = len;
    qhx_status rc = tokenize(m, s, p->text, len, &p->ids, &p->n, err);
    if (rc) return qhx_prompt_free(p), rc;
    p->reusable = p->n;
    *out = p;
    return QHX_OK;
}

qhx_status qhx_prompt_from_text(const qhx_model *m, const char *text, size_t len, qhx_prompt **out, qhx_error *err) {
    return qhx_prompt_build_text(m, NULL, text, len, out, err);
}

/* ---- images ---------------------------------------------------------------------------------- */

/* Decode and encode an image given as bytes through the model's vision graph. */
static qhx_status encode_bytes(const qhx_model *m, const qhx_chat_spec *spec, const qhx_chat_content *c,
                               qhx_image_embed *out, qhx_error *err) {
    if (!qhx_model_takes_images(m))
        return qhx_fail(err, QHX_E_ARG, "image: this model (%s, host-op %s) takes no images", qhx_model_family_title(m),
                        qhx_model_host_op(m));
    if (!c->image || !c->image_size) return qhx_fail(err, QHX_E_FORMAT, "image: no bytes");
    int64_t max_px = spec->max_image_pixels > 0 ? spec->max_image_pixels : DEFAULT_MAX_PIXELS;
    qhx_image_limits lim = qhx_image_default_limits();
    if ((uint64_t)max_px * 3u < lim.max_bytes) lim.max_bytes = (size_t)max_px * 3u;
    qhx_image img;
    qhx_status rc = qhx_image_decode(c->image, c->image_size, &lim, "image", &img, err);
    if (rc) return rc;
    rc = qhx_model_image_encode(m, &img, out, err);
    qhx_image_deinit(&img);
    if (rc) return rc;
    if (spec->max_image_tokens > 0 && out->n_tokens > spec->max_image_tokens) {
        int64_t n = out->n_tokens;
        qhx_image_embed_deinit(out);
        return qhx_fail(err, QHX_E_LIMIT, "image: it takes %lld tokens, the cap is %lld", (long long)n,
                        (long long)spec->max_image_tokens);
    }
    return QHX_OK;
}

static bool is_file_image(const qhx_chat_content *c) { return !c->text && !c->image && c->image_path; }

/* A video part: no text, no image, a video file. */
static bool is_video(const qhx_chat_content *c) {
    return !c->text && !c->image && !c->image_path && (c->video_path || c->video);
}

/* The spec's image parts in order (n_images of them) into parts; videos apart. */
static void image_parts(const qhx_chat_spec *spec, const qhx_chat_content **parts) {
    size_t k = 0;
    for (size_t i = 0; i < spec->n_turns; i++)
        for (size_t j = 0; spec->turns[i].parts && j < spec->turns[i].n_parts; j++)
            if (!spec->turns[i].parts[j].text && !is_video(&spec->turns[i].parts[j])) parts[k++] = &spec->turns[i].parts[j];
}

static size_t count_videos(const qhx_chat_spec *spec) {
    size_t n = 0;
    for (size_t i = 0; i < spec->n_turns; i++)
        for (size_t j = 0; spec->turns[i].parts && j < spec->turns[i].n_parts; j++) n += is_video(&spec->turns[i].parts[j]);
    return n;
}

/* ---- rendering ------------------------------------------------------------------------------- */

/* The tokenizer's chat messages for spec: parts, tool calls and reasoning carried over; image k
 * becomes a placeholder of pads[k] pads. Text made here is kept in *owned. */
typedef struct chat_build {
    qhx_chat_message *msgs;
    qhx_chat_part *parts;
    qhx_chat_tool_call *calls;
    qhx_chat_tool_arg *args;
    char **owned;
    size_t n_owned;
} chat_build;

static void chat_build_free(chat_build *b, size_t n_turns) {
    for (size_t i = 0; b->owned && i < n_turns; i++) qhx_free(b->owned[i]);
    qhx_free(b->owned);
    qhx_free(b->msgs);
    qhx_free(b->parts);
    qhx_free(b->calls);
    qhx_free(b->args);
}

static size_t count_parts(const qhx_chat_spec *spec, size_t *n_calls, size_t *n_args, size_t *n_images) {
    size_t parts = 0;
    *n_calls = *n_args = *n_images = 0;
    for (size_t i = 0; i < spec->n_turns; i++) {
        const qhx_chat_turn *t = &spec->turns[i];
        parts += t->parts ? t->n_parts : 0;
        for (size_t k = 0; t->parts && k < t->n_parts; k++) *n_images += t->parts[k].text == NULL && !is_video(&t->parts[k]);
        *n_calls += t->calls ? t->n_calls : 0;
        for (size_t k = 0; t->calls && k < t->n_calls; k++) *n_args += t->calls[k].n_args;
    }
    return parts;
}

/* reasoning goes back into the content as the template reads it there */
static qhx_status with_reasoning(const qhx_chat_style *f, chat_build *b, size_t i, const qhx_chat_turn *t,
                                 qhx_error *err) {
    const char *content = t->content ? t->content : "";
    size_t a = strlen(t->reasoning), c = strlen(content);
    size_t o = strlen(f->reasoning_open), e = strlen(f->reasoning_close);
    char *s = qhx_malloc(o + a + e + c + 1);
    if (!s) return qhx_fail(err, QHX_E_NOMEM, "chat: out of memory");
    memcpy(s, f->reasoning_open, o);
    memcpy(s + o, t->reasoning, a);
    memcpy(s + o + a, f->reasoning_close, e);
    memcpy(s + o + a + e, content, c + 1);
    b->owned[i] = s;
    b->msgs[i].content = s;
    return QHX_OK;
}

/* f->reasoning_open: the family's template reads reasoning (else it drops it) */
static qhx_status build_messages(const qhx_chat_spec *spec, const int64_t *pads, const char *const *vtexts,
                                 const qhx_chat_style *f, chat_build *b, qhx_error *err) {
    size_t n_calls, n_args, n_images;
    size_t n_parts = count_parts(spec, &n_calls, &n_args, &n_images);
    size_t n_turns = spec->n_turns ? spec->n_turns : 1;
    b->msgs = qhx_calloc(n_turns, sizeof *b->msgs);
    b->parts = qhx_calloc(n_parts ? n_parts : 1, sizeof *b->parts);
    b->calls = qhx_calloc(n_calls ? n_calls : 1, sizeof *b->calls);
    b->args = qhx_calloc(n_args ? n_args : 1, sizeof *b->args);
    b->owned = qhx_calloc(n_turns, sizeof *b->owned);
    if (!b->msgs || !b->parts || !b->calls || !b->args || !b->owned) return qhx_fail(err, QHX_E_NOMEM, "chat: out of memory");
    size_t pi = 0, ci = 0, ai = 0;
    int img = 0, vid = 0;
    for (size_t i = 0; i < spec->n_turns; i++) {
        const qhx_chat_turn *t = &spec->turns[i];
        qhx_chat_message *m = &b->msgs[i];
        if (!t->role) return qhx_fail(err, QHX_E_ARG, "chat: message %zu has no role", i);
        m->role = t->role;
        m->content = t->content ? t->content : "";
        if (t->parts && t->n_parts) {
            m->parts = &b->parts[pi];
            m->n_parts = t->n_parts;
            for (size_t k = 0; k < t->n_parts; k++, pi++) {
                const qhx_chat_content *c = &t->parts[k];
                if (c->text) b->parts[pi] = (qhx_chat_part){.text = c->text, .text_len = c->text_len};
                else if (is_video(c)) b->parts[pi] = (qhx_chat_part){.text = NULL, .video = vtexts ? vtexts[vid++] : ""};
                else b->parts[pi] = (qhx_chat_part){.text = NULL, .image_tokens = (int32_t)pads[img++]};
                /* both templates render images in user and tool contents, never elsewhere */
                if (!c->text && strcmp(t->role, "user") && strcmp(t->role, "tool"))
                    return qhx_fail(err, QHX_E_ARG,
                                    "chat: message %zu: an image in a %s message (only user and tool messages take images)",
                                    i, t->role);
            }
        }
        if (t->calls && t->n_calls) {
            m->tool_calls = &b->calls[ci];
            m->n_tool_calls = t->n_calls;
            for (size_t k = 0; k < t->n_calls; k++, ci++) {
                const qhx_chat_call *c = &t->calls[k];
                if (c->n_args && !c->args) return qhx_fail(err, QHX_E_ARG, "chat: message %zu: call %zu has no arguments", i, k);
                b->calls[ci] = (qhx_chat_tool_call){.name = c->name, .args = &b->args[ai], .n_args = c->n_args,
                                                    .arguments = c->arguments};
                for (size_t j = 0; j < c->n_args; j++, ai++)
                    b->args[ai] = (qhx_chat_tool_arg){.name = c->args[j].name, .value = c->args[j].value};
            }
        }
        if (t->reasoning && f->reasoning_open && f->reasoning_close) {
            if (m->parts) return qhx_fail(err, QHX_E_ARG, "chat: message %zu: reasoning with a content list", i);
            qhx_status rc = with_reasoning(f, b, i, t, err);
            if (rc) return rc;
        }
    }
    return QHX_OK;
}

/* *text (qhx_malloc'd, *len bytes) = head + sep + *text + tail. */
static qhx_status wrap_text(char **text, size_t *len, const char *head, const char *sep, const char *tail,
                            qhx_error *err) {
    size_t h0 = strlen(head), h = h0 + strlen(sep), t = strlen(tail);
    char *s = qhx_malloc(h + *len + t + 1);
    if (!s) return qhx_fail(err, QHX_E_NOMEM, "chat: out of memory");
    memcpy(s, head, h0);
    memcpy(s + h0, sep, h - h0);
    memcpy(s + h, *text, *len);
    memcpy(s + h + *len, tail, t + 1);
    qhx_free(*text);
    *text = s;
    *len += h + t;
    return QHX_OK;
}

/* The text of spec with image k as pads[k] pads: for a session that holds an answer, the closing
 * of it first (its stop token is pending: then only the separator; after another stop the
 * end-of-turn marker too); the forced start of the answer after the generation prompt. */
static qhx_status render(const qhx_model *m, const qhx_session *s, const qhx_chat_spec *spec, const int64_t *pads,
                         const char *const *vtexts, bool roles_as_arg, char **text, size_t *len, qhx_error *err) {
    *text = NULL;
    *len = 0;
    const qhx_chat_style *f = qhx_model_chat_style(m);
    chat_build b = {0};
    qhx_status rc = build_messages(spec, pads, vtexts, f, &b, err);
    if (!rc) {
        qhx_chat_options opt = {.add_generation_prompt = !spec->no_generation_prompt, .enable_thinking = spec->thinking,
                                .add_vision_id = spec->add_vision_id,
                                .tools = spec->tools, .n_tools = spec->tools ? spec->n_tools : 0};
        rc = qhx_tok_chat_format(f, b.msgs, spec->n_turns, &opt, text, len, err);
    }
    chat_build_free(&b, spec->n_turns);
    if (rc == QHX_E_UNSUPPORTED && roles_as_arg) rc = QHX_E_ARG;
    const bool closes = s && (qhx_session_n_past(s) > 0 || qhx_session_pending(s) >= 0);
    const char *end = !closes ? "" : qhx_session_last_stop(s) == QHX_STOP_TOKEN ? "" : f->turn_end;
    const char *sep = closes ? f->turn_sep : "";
    if (!rc && (closes || spec->answer_prefix))
        rc = wrap_text(text, len, end, sep, spec->answer_prefix ? spec->answer_prefix : "", err);
    if (rc) {
        qhx_free(*text);
        *text = NULL;
    }
    return rc;
}

/* ---- building -------------------------------------------------------------------------------- */

/* The room the images loaded from files share (*budget, 0: no bound): what the other tokens of
 * the prompt (rendered with one pad per file image) leave of max_tokens and of the session's
 * context after one token of answer, at most image_budget. */
static qhx_status file_image_budget(const qhx_model *m, const qhx_session *s, const qhx_chat_spec *spec,
                                    const int64_t *pads, const char *const *vtexts, bool roles_as_arg, int n_files,
                                    int64_t *budget, qhx_error *err) {
    *budget = spec->image_budget > 0 ? spec->image_budget : 0;
    int64_t room = -1; /* the tokens the prompt may take; -1: no bound */
    if (s) room = qhx_session_n_ctx(s) - qhx_session_n_past(s) - (qhx_session_pending(s) >= 0 ? 1 : 0) - 1;
    if (spec->max_tokens > 0 && (room < 0 || spec->max_tokens < room)) room = spec->max_tokens;
    if (room < 0) return QHX_OK;
    char *text = NULL;
    int32_t *ids = NULL;
    size_t len = 0, n_ids = 0;
    qhx_status rc = render(m, s, spec, pads, vtexts, roles_as_arg, &text, &len, err);
    if (!rc) rc = tokenize(m, s, text, len, &ids, &n_ids, err);
    qhx_free(text);
    qhx_free(ids);
    if (rc) return rc;
    const int64_t others = (int64_t)n_ids - n_files, left = room - others;
    if (left < 1)
        return qhx_fail(err, QHX_E_LIMIT, "chat: %lld tokens of text leave no room for the image%s in the %lld tokens left for the prompt",
                        (long long)others, n_files == 1 ? "" : "s", (long long)(room > 0 ? room : 0));
    if (!*budget || left < *budget) *budget = left;
    return QHX_OK;
}

/* Every image of spec into p->images (in order) and its pad count into pads: bytes decoded and
 * encoded one by one, files loaded together within their shared room, placeholders as given. */
static qhx_status load_images(const qhx_model *m, const qhx_session *s, const qhx_chat_spec *spec,
                              const qhx_chat_content **parts, const char *const *vtexts, bool roles_as_arg,
                              qhx_prompt *p, int64_t *pads, qhx_error *err) {
    const char *paths[MAX_IMAGES];
    int n_files = 0;
    qhx_status rc = QHX_OK;
    for (int k = 0; k < p->n_images && !rc; k++) {
        const qhx_chat_content *c = parts[k];
        if (spec->render_only) {
            if (c->image_tokens < 1 || c->image_tokens > QHX_CHAT_MAX_IMAGE_TOKENS)
                rc = qhx_fail(err, QHX_E_ARG, "chat: image %d: %lld image tokens is outside [1, %lld]", k + 1,
                              (long long)c->image_tokens, (long long)QHX_CHAT_MAX_IMAGE_TOKENS);
            pads[k] = c->image_tokens;
        } else if (is_file_image(c)) {
            paths[n_files++] = c->image_path;
            pads[k] = 1; /* until the files are loaded: their room is counted with one pad each */
        } else if (!(rc = encode_bytes(m, spec, c, &p->images[k], err))) {
            pads[k] = p->images[k].n_tokens;
        }
    }
    if (rc || !n_files) return rc;
    if (!qhx_model_takes_images(m)) { /* the model's own message: no vision graph, or a text host-op */
        qhx_image_embed none;
        rc = qhx_model_image_load(m, paths[0], 0, &none, err);
        qhx_image_embed_deinit(&none);
        return rc ? rc : qhx_fail(err, QHX_E_UNSUPPORTED, "image: this model takes no images");
    }
    int64_t budget;
    if ((rc = file_image_budget(m, s, spec, pads, vtexts, roles_as_arg, n_files, &budget, err))) return rc;
    qhx_image_embed im[MAX_IMAGES];
    if ((rc = qhx_model_images_load(m, paths, n_files, budget, im, err))) return rc;
    for (int k = 0, f = 0; k < p->n_images; k++)
        if (!spec->render_only && is_file_image(parts[k])) {
            p->images[k] = im[f++];
            pads[k] = p->images[k].n_tokens;
        }
    return QHX_OK;
}

/* ---- videos ---------------------------------------------------------------------------------- */

/* A video part of the spec, probed: its source and what its stream holds. */
typedef struct video_in {
    qhx_video_src src;
    qhx_video_meta meta;
    double probe_ms;
} video_in;

/* The videos' sampling with at most max_frames frames (0: as asked) and a pixel budget of
 * max_pixels for all of a video's frames (0: as asked): the processor's own parameters, so the
 * frames and the sizes are the ones it gives for them. */
static qhx_video_prep capped_video_prep(const qhx_video_prep *base, int64_t max_frames, int64_t max_pixels) {
    qhx_video_prep p = *base;
    if (max_frames > 0 && p.num_frames > 0 && p.num_frames > max_frames) p.num_frames = max_frames;
    if (max_frames > 0 && p.num_frames <= 0 && p.max_frames > max_frames) p.max_frames = max_frames;
    if (max_pixels > 0) p.img.max_pixels = max_pixels;
    return p;
}

/* The videos as prep would sample them: their prompt texts (texts (n,), owned) and frames. */
static qhx_status plan_videos(const qhx_model *m, const video_in *vin, size_t n, const qhx_video_prep *prep,
                              char **texts, int64_t *frames, qhx_error *err) {
    *frames = 0;
    qhx_status rc = QHX_OK;
    for (size_t v = 0; v < n && !rc; v++) {
        qhx_video_patches plan;
        const char *label = vin[v].src.label ? vin[v].src.label : vin[v].src.path;
        if ((rc = qhx_video_plan(&vin[v].meta, prep, NULL, label, &plan, err))) break;
        int64_t per_group;
        qhx_free(texts[v]);
        texts[v] = NULL;
        rc = qhx_model_video_text(m, &plan, prep, &texts[v], &per_group, err);
        *frames += plan.n_sampled;
        qhx_video_patches_deinit(&plan);
    }
    return rc;
}

/* What fitting needs besides the videos: the prompt around them and its room. */
typedef struct video_fit {
    const qhx_model *m;
    const qhx_session *s;
    const qhx_chat_spec *spec;
    const int64_t *pads;   /* the images' pads as the room counts them (one per file image) */
    bool roles_as_arg;
    const video_in *vin;
    size_t n;
    qhx_video_prep base;
    int64_t room;          /* tokens the prompt may take */
} video_fit;

/* The prompt's tokens with the videos sampled by prep (*n_ids; *frames sampled); 0 or a failure
 * that is not about the room. */
static qhx_status fit_count(const video_fit *f, const qhx_video_prep *prep, int64_t *n_ids, int64_t *frames,
                            qhx_error *err) {
    char *texts[MAX_VIDEOS] = {0};
    qhx_status rc = plan_videos(f->m, f->vin, f->n, prep, texts, frames, err);
    char *text = NULL;
    int32_t *ids = NULL;
    size_t len = 0, n = 0;
    if (!rc) rc = render(f->m, f->s, f->spec, f->pads, (const char *const *)texts, f->roles_as_arg, &text, &len, err);
    if (!rc) rc = tokenize(f->m, NULL, text, len, &ids, &n, err); /* the room is checked here, not by the session */
    *n_ids = (int64_t)n;
    qhx_free(text);
    qhx_free(ids);
    for (size_t v = 0; v < f->n; v++) qhx_free(texts[v]);
    return rc;
}

/* Whether the videos sampled with these caps fit the room (*fits). */
static qhx_status fit_try(const video_fit *f, int64_t max_frames, int64_t max_pixels, bool *fits, qhx_error *err) {
    const qhx_video_prep prep = capped_video_prep(&f->base, max_frames, max_pixels);
    int64_t n_ids, frames;
    qhx_status rc = fit_count(f, &prep, &n_ids, &frames, err);
    *fits = !rc && n_ids <= f->room;
    return rc;
}

/* The largest x in [lo, hi] for which fit_try(x) holds, given that it holds at lo (a bisection:
 * the tokens grow with the frames and the pixels, up to the sizes' rounding). */
static qhx_status fit_search(const video_fit *f, bool frames, int64_t lo, int64_t hi, int64_t fixed_frames,
                             int64_t *best, qhx_error *err) {
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        bool fits;
        qhx_status rc = frames ? fit_try(f, mid, 0, &fits, err) : fit_try(f, fixed_frames, mid, &fits, err);
        if (rc) return rc;
        if (fits) lo = mid;
        else hi = mid - 1;
    }
    *best = lo;
    return QHX_OK;
}

/* The videos' sampling fitted to the room: as asked when it fits; else at most the frame count
 * that fits (from the asked count down to the temporal patch); else, at that fewest count, the
 * pixel budget that fits (down to the processor's min_pixels); else QHX_E_LIMIT. *prep, and what
 * was lowered in *st. */
static qhx_status fit_videos(const video_fit *f, qhx_video_prep *prep, qhx_prompt_video_stats *st, qhx_error *err) {
    *prep = f->base;
    if (f->room < 0) return QHX_OK; /* no bound */
    int64_t n_ids, frames;
    qhx_status rc = fit_count(f, &f->base, &n_ids, &frames, err);
    if (rc || n_ids <= f->room) return rc;
    int64_t asked_frames = frames, asked_tokens = n_ids;
    const int64_t fewest = f->base.img.temporal_patch_size, asked_px = f->base.img.max_pixels;
    int64_t most = 0; /* the largest frame count one video takes as asked */
    for (size_t v = 0; v < f->n; v++) {
        const int64_t idx_cap = qhx_video_default_limits().max_frames; /* as qhx_video_plan samples */
        int64_t k = 0;
        int64_t *idx = qhx_malloc((size_t)idx_cap * sizeof *idx);
        if (!idx) return qhx_fail(err, QHX_E_NOMEM, "video: out of memory");
        rc = qhx_video_sample(f->vin[v].meta.n_frames, f->vin[v].meta.fps, &f->base, idx_cap, idx, &k, err);
        qhx_free(idx);
        if (rc) return rc;
        if (k > most) most = k;
    }
    bool fits;
    int64_t cap_frames = fewest, cap_px = 0;
    if (most > fewest && (rc = fit_try(f, fewest, 0, &fits, err))) return rc;
    if (most > fewest && fits) {
        if ((rc = fit_search(f, true, fewest, most - 1, 0, &cap_frames, err))) return rc;
    } else {
        const int64_t least_px = f->base.img.min_pixels > 0 ? f->base.img.min_pixels : 1;
        if ((rc = fit_try(f, fewest, least_px, &fits, err))) return rc;
        if (!fits || !f->base.img.do_resize) {
            int64_t least;
            qhx_video_prep small = capped_video_prep(&f->base, fewest, least_px);
            if ((rc = fit_count(f, &small, &least, &frames, err))) return rc;
            return qhx_fail(err, QHX_E_LIMIT,
                            "chat: the prompt with its video%s takes %lld tokens, %lld even at %lld frames of at most "
                            "%lld pixels, more than the %lld tokens it may take",
                            f->n == 1 ? "" : "s", (long long)asked_tokens, (long long)least, (long long)fewest,
                            (long long)least_px, (long long)f->room);
        }
        if ((rc = fit_search(f, false, least_px, asked_px - 1, fewest, &cap_px, err))) return rc;
    }
    *prep = capped_video_prep(&f->base, cap_frames, cap_px);
    st->fitted = 1;
    st->frames_asked = asked_frames;
    st->max_frames = cap_frames;
    st->max_pixels_asked = asked_px;
    st->max_pixels = cap_px;
    return QHX_OK;
}

/* The room the prompt may take, as file_image_budget counts it (-1: no bound). */
static int64_t prompt_room(const qhx_session *s, const qhx_chat_spec *spec) {
    int64_t room = -1;
    if (s) room = qhx_session_n_ctx(s) - qhx_session_n_past(s) - (qhx_session_pending(s) >= 0 ? 1 : 0) - 1;
    if (spec->max_tokens > 0 && (room < 0 || spec->max_tokens < room)) room = spec->max_tokens;
    return room;
}

/* Every video part of spec probed, its sampling fitted to the prompt's room (fit_videos, images
 * counted with one pad each), decoded and encoded (vids, in order) with its expansion in vtexts;
 * what was lowered in *st. render_only: no loading, the template's one pad. */
static qhx_status load_videos(const qhx_model *m, const qhx_session *s, const qhx_chat_spec *spec, bool roles_as_arg,
                              int n_images, qhx_video_embed *vids, const char **vtexts, qhx_prompt_video_stats *st,
                              qhx_error *err) {
    video_in vin[MAX_VIDEOS];
    size_t n = 0;
    for (size_t i = 0; i < spec->n_turns; i++)
        for (size_t j = 0; spec->turns[i].parts && j < spec->turns[i].n_parts; j++) {
            const qhx_chat_content *c = &spec->turns[i].parts[j];
            if (!is_video(c)) continue;
            if (spec->render_only) {
                vtexts[n++] = "";
                continue;
            }
            vin[n].src = (qhx_video_src){.path = c->video_path, .buf = c->video_path ? NULL : c->video,
                                         .len = c->video_path ? 0 : c->video_size, .label = c->video_path ? NULL : "video"};
            qhx_status rc = qhx_model_video_check(m, &vin[n].src, err);
            if (rc) return rc;
            const uint64_t t0 = qhx_time_ns();
            qhx_video_limits lim = qhx_video_default_limits();
            if ((rc = qhx_video_probe_src(&vin[n].src, &lim, &vin[n].meta, err))) return rc;
            vin[n].probe_ms = (double)(qhx_time_ns() - t0) / 1e6;
            n++;
        }
    if (spec->render_only || !n) return QHX_OK;
    int64_t pads[MAX_IMAGES];
    for (int k = 0; k < n_images; k++) pads[k] = 1;
    video_fit f = {.m = m, .s = s, .spec = spec, .pads = pads, .roles_as_arg = roles_as_arg, .vin = vin, .n = n,
                   .base = qhx_model_video_prep(m, spec->video_fps, spec->video_max_frames),
                   .room = prompt_room(s, spec)};
    qhx_video_prep prep;
    qhx_status rc = fit_videos(&f, &prep, st, err);
    for (size_t v = 0; v < n && !rc; v++) {
        rc = qhx_model_video_load_probed(m, &vin[v].src, &vin[v].meta, vin[v].probe_ms, &prep, &vids[v], err);
        if (!rc) vtexts[v] = vids[v].text;
    }
    return rc;
}

/* The prompt's embeds in the order of their pad runs: images as they are, each video as its
 * temporal groups (moved out of vids). */
static qhx_status merge_videos(qhx_prompt *p, const qhx_chat_spec *spec, qhx_video_embed *vids, qhx_error *err) {
    if (spec->render_only) return QHX_OK;
    size_t total = (size_t)p->n_images;
    for (size_t v = 0; v < MAX_VIDEOS && vids[v].frames; v++) total += (size_t)vids[v].n_frames;
    qhx_image_embed *all = qhx_calloc(total ? total : 1, sizeof *all);
    if (!all) return qhx_fail(err, QHX_E_NOMEM, "chat: out of memory");
    size_t o = 0, img = 0, vid = 0;
    for (size_t i = 0; i < spec->n_turns; i++)
        for (size_t j = 0; spec->turns[i].parts && j < spec->turns[i].n_parts; j++) {
            const qhx_chat_content *c = &spec->turns[i].parts[j];
            if (c->text) continue;
            if (!is_video(c)) {
                all[o++] = p->images[img++];
                continue;
            }
            qhx_video_embed *ve = &vids[vid++];
            qhx_prompt_video_stats *vs = &p->video;
            vs->n_videos++;
            vs->frames += ve->n_sampled;
            vs->grid_t = ve->grid_t;
            vs->grid_h = ve->grid_h;
            vs->grid_w = ve->grid_w;
            vs->n_tokens += ve->n_tokens;
            vs->decode_ms += ve->decode_ms;
            vs->preprocess_ms += ve->preprocess_ms;
            vs->vision_ms += ve->vision_ms;
            for (int g = 0; g < ve->n_frames; g++) all[o++] = ve->frames[g];
            qhx_free(ve->frames);
            ve->frames = NULL;
            ve->n_frames = 0;
        }
    qhx_free(p->images);
    p->images = all;
    p->n_images = (int)o;
    return QHX_OK;
}

qhx_status qhx_prompt_build(const qhx_model *m, const qhx_session *s, const qhx_chat_spec *spec, bool roles_as_arg,
                            qhx_prompt **out, qhx_error *err) {
    if (!out) return qhx_fail(err, QHX_E_ARG, "chat: out is NULL");
    *out = NULL;
    if (!m || !spec) return qhx_fail(err, QHX_E_ARG, "chat: model and spec are required");
    if (!spec->render_only && !m->tok) return qhx_fail(err, QHX_E_ARG, "chat: the model has no tokenizer");
    if ((!spec->turns && spec->n_turns) || spec->n_turns > MAX_TURNS || (spec->n_turns == 0 && !spec->render_only))
        return qhx_fail(err, QHX_E_ARG, "chat: 1 to %d messages are needed", MAX_TURNS);
    size_t n_calls, n_args, n_images;
    count_parts(spec, &n_calls, &n_args, &n_images);
    int64_t max_images = spec->max_images > 0 ? spec->max_images : DEFAULT_MAX_IMAGES;
    if (max_images > MAX_IMAGES) max_images = MAX_IMAGES;
    if ((int64_t)n_images > max_images)
        return qhx_fail(err, QHX_E_LIMIT, "chat: %zu images, at most %lld per request", n_images, (long long)max_images);
    qhx_prompt *p = prompt_new(m, (int)n_images);
    if (!p) return qhx_fail(err, QHX_E_NOMEM, "chat: out of memory");
    const qhx_chat_content *parts[MAX_IMAGES];
    int64_t pads[MAX_IMAGES];
    image_parts(spec, parts);
    size_t n_videos = count_videos(spec);
    qhx_video_embed vids[MAX_VIDEOS];
    const char *vtexts[MAX_VIDEOS];
    memset(vids, 0, sizeof vids);
    qhx_status rc = n_videos > MAX_VIDEOS ? qhx_fail(err, QHX_E_LIMIT, "chat: %zu videos, at most %d per request", n_videos, MAX_VIDEOS)
                                          : load_videos(m, s, spec, roles_as_arg, p->n_images, vids, vtexts,
                                                        &p->video, err);
    if (!rc) rc = load_images(m, s, spec, parts, vtexts, roles_as_arg, p, pads, err);
    if (!rc) rc = render(m, s, spec, pads, vtexts, roles_as_arg, &p->text, &p->text_len, err);
    if (!rc && n_videos) rc = merge_videos(p, spec, vids, err);
    for (size_t v = 0; v < n_videos && v < MAX_VIDEOS; v++) qhx_video_embed_deinit(&vids[v]);
    if (!rc && !spec->render_only) rc = tokenize(m, s, p->text, p->text_len, &p->ids, &p->n, err);
    if (!rc && !spec->render_only && p->n == 0) rc = qhx_fail(err, QHX_E_ARG, "chat: the prompt is empty");
    if (rc) {
        qhx_prompt_free(p);
        return rc;
    }
    find_reusable(p);
    *out = p;
    return QHX_OK;
}

/* A role the format does not take is the caller's request here (QHX_E_ARG), as any other bad turn. */
qhx_status qhx_prompt_from_chat(const qhx_model *m, const qhx_chat_spec *spec, qhx_prompt **out, qhx_error *err) {
    return qhx_prompt_build(m, NULL, spec, true, out, err);
}

qhx_status qhx_prompt_for_session(const qhx_session *s, const qhx_chat_spec *spec, qhx_prompt **out, qhx_error *err) {
    if (!s) {
        if (out) *out = NULL;
        return qhx_fail(err, QHX_E_ARG, "chat: session is NULL");
    }
    return qhx_prompt_build(qhx_session_model(s), s, spec, true, out, err);
}

/* ---- feeding --------------------------------------------------------------------------------- */

static qhx_status feed_range(qhx_session *s, const qhx_prompt *p, size_t from, size_t to, qhx_error *err) {
    /* the images' ids [reusable, images_end) go in one piece, all of them or none */
    bool has_images = p->n_images && from < p->images_end && to > p->reusable;
    if (has_images && (from > p->reusable || to < p->images_end))
        return qhx_fail(err, QHX_E_ARG, "feed prompt: [%zu, %zu) cuts through the images' ids [%zu, %zu)", from, to,
                        p->reusable, p->images_end);
    /* announced either way: without its images a range may hold no image-pad id */
    if (!has_images) return qhx_session_feed_announced(s, p->ids + from, to - from, NULL, 0, err);
    if (qhx_session_n_past(s) + (int64_t)(to - from) > qhx_session_n_ctx(s))
        return qhx_fail(err, QHX_E_LIMIT, "context full: %lld tokens held + %zu new exceed the context of %lld",
                        (long long)qhx_session_n_past(s), to - from, (long long)qhx_session_n_ctx(s));
    return qhx_session_feed_announced(s, p->ids + from, to - from, p->images, p->n_images, err);
}

qhx_status qhx_prompt_feed_all(qhx_session *s, const qhx_prompt *p, qhx_error *err) {
    return feed_range(s, p, 0, p->n, err);
}

qhx_status qhx_session_feed_prompt(qhx_session *s, const qhx_prompt *p, size_t from, size_t to, qhx_error *err) {
    if (!s || !p) return qhx_fail(err, QHX_E_ARG, "feed prompt: session and prompt are required");
    if (from >= to || to > p->n)
        return qhx_fail(err, QHX_E_ARG, "feed prompt: [%zu, %zu) is not a range inside the %zu ids", from, to, p->n);
    qhx_status rc = qhx_session_guard_enter(s, "feed prompt", err);
    return rc ? rc : qhx_session_guard_leave(s, feed_range(s, p, from, to, err));
}
