/* io/gguf_tok: a GGUF file's tokenizer (the tokenizer.ggml.* keys) written out as the
 * tokenizer.json the Hugging Face tokenizers library would read for the same model, so that one
 * strict loader (text/tok_json.c) serves both kinds of file.
 *
 * What the keys hold (as llama.cpp's converter writes them): `model` "gpt2" for byte-level BPE;
 * `tokens`, every id's string; `token_type` per id: 1 normal, 3 control (a special added token),
 * 4 user-defined (an added token that is not special), 5 unused (a padding id the tokenizer
 * never produces), 2 and 6 kept as vocabulary; `merges`, "left right" in rank order; `pre`, the
 * pre-tokenizer's name. The names this reader knows are the Qwen tokenizers': "qwen2" (Qwen2,
 * Qwen3, Qwen3-VL) and "qwen35" (Qwen3.5, whose split also keeps combining marks with their
 * letters). Both normalise to NFC as tokenizer.json says (llama.cpp itself skips the normaliser;
 * the ids here follow the Hugging Face tokenizer). A file with another model or pre-tokenizer is
 * refused naming it: a tokenizer that splits differently would give other ids without a word. */
#include "io/gguf.h"
#include "io/gguf_tok.h"

#include "core/alloc.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

enum { TOKEN_NORMAL = 1, TOKEN_UNKNOWN = 2, TOKEN_CONTROL = 3, TOKEN_USER = 4, TOKEN_UNUSED = 5, TOKEN_BYTE = 6 };

static const struct {
    const char *pre, *regex;
} PRE_TOKENIZERS[] = {
    {"qwen2", "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
              "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    {"qwen35", "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+"
               "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
};

static const char *pre_regex(const qhx_gguf_str *pre) {
    for (size_t i = 0; i < sizeof PRE_TOKENIZERS / sizeof PRE_TOKENIZERS[0]; i++)
        if (strlen(PRE_TOKENIZERS[i].pre) == pre->len && !memcmp(PRE_TOKENIZERS[i].pre, pre->p, pre->len))
            return PRE_TOKENIZERS[i].regex;
    return NULL;
}

/* The string array under `key`, or a message. */
static qhx_status string_array(const qhx_gguf *g, const char *key, const qhx_gguf_kv **out, qhx_error *err) {
    *out = qhx_gguf_find_kv(g, key);
    if (!*out) return qhx_fail(err, QHX_E_FORMAT, "%s: GGUF: the key '%s' is missing", qhx_gguf_label(g), key);
    if ((*out)->type != QHX_GGUF_ARRAY || (*out)->elem != QHX_GGUF_STRING)
        return qhx_fail(err, QHX_E_FORMAT, "%s: GGUF: key '%s' is not an array of strings", qhx_gguf_label(g), key);
    return QHX_OK;
}

static json_t *pre_tokenizer_json(const char *regex) {
    return json_pack("{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, {s:s, s:b, s:b, s:b}]}", "type", "Sequence", "pretokenizers",
                     "type", "Split", "pattern", "Regex", regex, "behavior", "Isolated", "invert", 0, "type",
                     "ByteLevel", "add_prefix_space", 0, "trim_offsets", 0, "use_regex", 0);
}

static json_t *byte_level_json(void) {
    return json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 0,
                     "use_regex", 0);
}

/* The vocabulary and the added tokens from tokens + token_type. */
static qhx_status vocab_json(const qhx_gguf *g, const qhx_gguf_kv *tokens, const qhx_gguf_kv *types, json_t *vocab,
                             json_t *added, qhx_error *err) {
    const char *label = qhx_gguf_label(g);
    for (uint64_t id = 0; id < tokens->n; id++) {
        int64_t type = types ? qhx_gguf_arr_int(types, id) : TOKEN_NORMAL;
        if (type == TOKEN_UNUSED) continue;
        const qhx_gguf_str *s = &tokens->str[id];
        json_t *content = memchr(s->p, 0, s->len) ? NULL : json_stringn(s->p, s->len);
        if (!content)
            return qhx_fail(err, QHX_E_FORMAT, "%s: GGUF: tokenizer.ggml.tokens[%llu] is not UTF-8 text without NUL",
                            label, (unsigned long long)id);
        if (type == TOKEN_CONTROL || type == TOKEN_USER) {
            json_t *t = json_pack("{s:I, s:o, s:b, s:b, s:b, s:b, s:b}", "id", (json_int_t)id, "content", content,
                                  "single_word", 0, "lstrip", 0, "rstrip", 0, "normalized", 0, "special",
                                  type == TOKEN_CONTROL);
            if (!t || json_array_append_new(added, t)) return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", label);
            continue;
        }
        if (type != TOKEN_NORMAL && type != TOKEN_UNKNOWN && type != TOKEN_BYTE) {
            json_decref(content);
            return qhx_fail(err, QHX_E_FORMAT, "%s: GGUF: tokenizer.ggml.token_type[%llu] is %lld (1 to 6)", label,
                            (unsigned long long)id, (long long)type);
        }
        const char *key = json_string_value(content);
        if (json_object_get(vocab, key)) {
            json_decref(content);
            return qhx_fail(err, QHX_E_FORMAT, "%s: GGUF: tokenizer.ggml.tokens[%llu] repeats an earlier token", label,
                            (unsigned long long)id);
        }
        int rc = json_object_set_new_nocheck(vocab, key, json_integer((json_int_t)id));
        json_decref(content);
        if (rc) return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", label);
    }
    return QHX_OK;
}

static qhx_status merges_json(const qhx_gguf *g, const qhx_gguf_kv *merges, json_t *out, qhx_error *err) {
    for (uint64_t i = 0; merges && i < merges->n; i++) {
        json_t *m = json_stringn(merges->str[i].p, merges->str[i].len);
        if (!m)
            return qhx_fail(err, QHX_E_FORMAT, "%s: GGUF: tokenizer.ggml.merges[%llu] is not UTF-8 text",
                            qhx_gguf_label(g), (unsigned long long)i);
        if (json_array_append_new(out, m)) return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", qhx_gguf_label(g));
    }
    return QHX_OK;
}

/* The checks on the keys before anything is built. */
static qhx_status tokenizer_keys(const qhx_gguf *g, const qhx_gguf_kv **tokens, const qhx_gguf_kv **types,
                                 const qhx_gguf_kv **merges, const char **regex, qhx_error *err) {
    const char *label = qhx_gguf_label(g);
    qhx_gguf_str model, pre;
    qhx_status st = qhx_gguf_get_str(g, "tokenizer.ggml.model", &model, err);
    if (st) return st;
    if (model.len != 4 || memcmp(model.p, "gpt2", 4))
        return qhx_fail(err, QHX_E_UNSUPPORTED,
                        "%s: GGUF: tokenizer.ggml.model '%.*s' is not supported (byte-level BPE, 'gpt2', is)", label,
                        (int)(model.len > 64 ? 64 : model.len), model.p);
    if ((st = qhx_gguf_get_str(g, "tokenizer.ggml.pre", &pre, err))) return st;
    if (!(*regex = pre_regex(&pre)))
        return qhx_fail(err, QHX_E_UNSUPPORTED,
                        "%s: GGUF: tokenizer.ggml.pre '%.*s' is not a pre-tokenizer qhexrt knows (qwen2, qwen35)", label,
                        (int)(pre.len > 64 ? 64 : pre.len), pre.p);
    if ((st = string_array(g, "tokenizer.ggml.tokens", tokens, err)) ||
        (st = string_array(g, "tokenizer.ggml.merges", merges, err)))
        return st;
    *types = qhx_gguf_find_kv(g, "tokenizer.ggml.token_type");
    if (*types && ((*types)->type != QHX_GGUF_ARRAY || (*types)->elem == QHX_GGUF_STRING ||
                   (*types)->elem == QHX_GGUF_FLOAT32 || (*types)->elem == QHX_GGUF_FLOAT64 ||
                   (*types)->n != (*tokens)->n))
        return qhx_fail(err, QHX_E_FORMAT,
                        "%s: GGUF: tokenizer.ggml.token_type must be an integer array as long as tokenizer.ggml.tokens",
                        label);
    return QHX_OK;
}

qhx_status qhx_gguf_tokenizer_json(const qhx_gguf *g, char **out, size_t *len, qhx_error *err) {
    *out = NULL;
    *len = 0;
    const qhx_gguf_kv *tokens = NULL, *types = NULL, *merges = NULL;
    const char *regex = NULL;
    qhx_status st = tokenizer_keys(g, &tokens, &types, &merges, &regex, err);
    if (st) return st;
    json_t *vocab = json_object(), *added = json_array(), *mlist = json_array();
    json_t *doc = json_pack("{s:s, s:n, s:n, s:o, s:{s:s}, s:o, s:n, s:o, s:{s:s, s:n, s:n, s:n, s:n, s:b, s:b, s:o, s:o}}",
                            "version", "1.0", "truncation", "padding", "added_tokens", added, "normalizer", "type",
                            "NFC", "pre_tokenizer", pre_tokenizer_json(regex), "post_processor", "decoder",
                            byte_level_json(), "model", "type", "BPE", "dropout", "unk_token",
                            "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk", 0, "byte_fallback", 0,
                            "vocab", vocab, "merges", mlist);
    if (!doc) return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", qhx_gguf_label(g));
    st = vocab_json(g, tokens, types, vocab, added, err);
    if (!st) st = merges_json(g, merges, mlist, err);
    char *text = st ? NULL : json_dumps(doc, JSON_COMPACT);
    if (!st && (!text || !(*out = qhx_strdup(text)))) st = qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", qhx_gguf_label(g));
    if (!st) *len = strlen(*out);
    free(text);
    json_decref(doc);
    return st;
}
