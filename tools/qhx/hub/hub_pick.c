/* hub_pick.c: which of a repository's files a model needs. A safetensors repository: the
 * config, generation config, tokenizer files, preprocessor config, and the shards its index
 * names (or model.safetensors). A GGUF repository: the file QUANT names (Q4_K_M when none is
 * given, as llama.cpp chooses; every part of a split file) and its mmproj file. */
#include "hub_internal.h"

#include <ctype.h>
#include <dirent.h>
#include <fnmatch.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#define DEFAULT_QUANT "Q4_K_M"

/* The files besides the weights a checkpoint folder is read with (top level only). */
static const char *const AUX_FILES[] = {
    "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt",
    "special_tokens_map.json", "added_tokens.json", "chat_template.json", "chat_template.jinja",
    "preprocessor_config.json", "video_preprocessor_config.json", "model.safetensors.index.json", "model.safetensors",
};

void hub_listing_free(hub_listing *l) {
    for (size_t i = 0; i < l->n; i++) free(l->files[i].path);
    free(l->files);
    memset(l, 0, sizeof *l);
}

int hub_listing_add(hub_listing *l, const char *path, int64_t size, const char *blob, bool lfs, hub_err *e) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        hub_file *f = realloc(l->files, cap * sizeof *f);
        if (!f) return hub_fail(e, "out of memory");
        l->files = f, l->cap = cap;
    }
    hub_file *f = &l->files[l->n];
    memset(f, 0, sizeof *f);
    f->path = strdup(path);
    if (!f->path) return hub_fail(e, "out of memory");
    f->size = size;
    snprintf(f->blob, sizeof f->blob, "%s", blob);
    f->lfs = lfs;
    l->n++;
    return 0;
}

const hub_file *hub_listing_find(const hub_listing *l, const char *path) {
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->files[i].path, path)) return &l->files[i];
    return NULL;
}

void hub_pick_free(hub_pick *p) {
    for (size_t i = 0; i < p->n; i++) free(p->names[i]);
    free(p->names);
    memset(p, 0, sizeof *p);
}

bool hub_pick_has(const hub_pick *p, const char *name) {
    for (size_t i = 0; i < p->n; i++)
        if (!strcmp(p->names[i], name)) return true;
    return false;
}

int hub_pick_add(hub_pick *p, const char *name, hub_err *e) {
    if (hub_pick_has(p, name)) return 0;
    char **n = realloc(p->names, (p->n + 1) * sizeof *n);
    if (!n) return hub_fail(e, "out of memory");
    p->names = n;
    if (!(p->names[p->n] = strdup(name))) return hub_fail(e, "out of memory");
    p->n++;
    return 0;
}

static bool ends_with_ci(const char *s, const char *tail) {
    size_t n = strlen(s), m = strlen(tail);
    return n >= m && !strcasecmp(s + n - m, tail);
}

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static bool is_gguf(const char *p) { return ends_with_ci(p, ".gguf"); }
static bool is_mmproj(const char *p) { return is_gguf(p) && strcasestr(base_name(p), "mmproj") != NULL; }

/* Whether path names quant as a whole word: "Qwen3-2B-Q4_K_M.gguf" has Q4_K_M and not Q4_K
 * (letters, digits and '_' around the match are not boundaries). */
static bool names_quant(const char *path, const char *quant) {
    size_t m = strlen(quant);
    for (const char *s = path; (s = strcasestr(s, quant)); s++) {
        bool left = s == path || !(isalnum((unsigned char)s[-1]) || s[-1] == '_');
        bool right = !(isalnum((unsigned char)s[m]) || s[m] == '_');
        if (left && right) return true;
    }
    return false;
}

static bool matches_any(const char *name, const char *const *globs) {
    for (; globs && *globs; globs++)
        if (!fnmatch(*globs, name, 0) || !fnmatch(*globs, base_name(name), 0)) return true;
    return false;
}

/* A split GGUF's parts: "X-00001-of-00003.gguf" -> prefix "X-" (the length before the number). */
static size_t split_prefix(const char *p) {
    size_t n = strlen(p);
    const char *tail = "-00000-of-00000.gguf";
    size_t m = strlen(tail);
    if (n < m) return 0;
    const char *s = p + n - m;
    for (size_t i = 0; i < m; i++)
        if (tail[i] == '0' ? !isdigit((unsigned char)s[i]) : tolower((unsigned char)s[i]) != tail[i]) return 0;
    return n - m + 1;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static int pick_gguf(const char *const *names, size_t n, const char *repo, const char *quant, hub_pick *p, hub_err *e) {
    const char **sorted = malloc((n ? n : 1) * sizeof *sorted);
    if (!sorted) return hub_fail(e, "out of memory");
    memcpy(sorted, names, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, cmp_str);
    const char *want = quant[0] ? quant : DEFAULT_QUANT, *model = NULL;
    for (size_t i = 0; i < n && !model; i++)
        if (is_gguf(sorted[i]) && !is_mmproj(sorted[i]) && names_quant(sorted[i], want)) model = sorted[i];
    if (!model && !quant[0]) /* no Q4_K_M: the first GGUF, as the hub's default does */
        for (size_t i = 0; i < n && !model; i++)
            if (is_gguf(sorted[i]) && !is_mmproj(sorted[i])) model = sorted[i];
    if (!model) {
        char have[600] = "";
        size_t k = 0;
        for (size_t i = 0; i < n && k + 80 < sizeof have; i++)
            if (is_gguf(sorted[i]) && !is_mmproj(sorted[i])) k += (size_t)snprintf(have + k, sizeof have - k, "%s%s", k ? ", " : "", base_name(sorted[i]));
        free(sorted);
        return hub_fail(e, "%s: no GGUF file for quantization '%s' (the repository has: %s)", repo, want, k ? have : "no GGUF file");
    }
    snprintf(p->gguf, sizeof p->gguf, "%s", model);
    snprintf(p->quant_used, sizeof p->quant_used, "%s", names_quant(model, want) ? want : "");
    size_t pre = split_prefix(model);
    for (size_t i = 0; i < n; i++)
        if (sorted[i] == model || (pre && split_prefix(sorted[i]) == pre && !strncmp(sorted[i], model, pre)))
            if (hub_pick_add(p, sorted[i], e)) goto fail;
    /* The projector: the one naming the same quantization, else F16, BF16, F32, else the first. */
    const char *order[] = {want, "F16", "BF16", "F32"};
    const char *proj = NULL;
    for (size_t o = 0; o < 4 && !proj; o++)
        for (size_t i = 0; i < n && !proj; i++)
            if (is_mmproj(sorted[i]) && names_quant(sorted[i], order[o])) proj = sorted[i];
    for (size_t i = 0; i < n && !proj; i++)
        if (is_mmproj(sorted[i])) proj = sorted[i];
    if (proj) {
        snprintf(p->mmproj, sizeof p->mmproj, "%s", proj);
        if (hub_pick_add(p, proj, e)) goto fail;
    }
    free(sorted);
    return 0;
fail:
    free(sorted);
    return -1;
}

int hub_pick_files(const char *const *names, size_t n, const char *repo, const char *quant,
                   const char *const *includes, const char *const *excludes, hub_pick *p, hub_err *e) {
    memset(p, 0, sizeof *p);
    bool config = false, st = false, gguf = false;
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(names[i], "config.json")) config = true;
        if (!strchr(names[i], '/') && ends_with_ci(names[i], ".safetensors")) st = true;
        if (is_gguf(names[i]) && !is_mmproj(names[i])) gguf = true;
    }
    if (includes && *includes) {
        for (size_t i = 0; i < n; i++)
            if (matches_any(names[i], includes) && !matches_any(names[i], excludes) && hub_pick_add(p, names[i], e)) return -1;
        if (!p->n) return hub_fail(e, "%s: no file matches --include", repo);
        p->kind = config && st ? HUB_KIND_SAFETENSORS : gguf ? HUB_KIND_GGUF : HUB_KIND_NONE;
        return 0;
    }
    if (quant[0] || (gguf && !(config && st))) {
        if (!gguf) return hub_fail(e, "%s: quantization ':%s' asked, but the repository has no GGUF file", repo, quant);
        p->kind = HUB_KIND_GGUF;
        if (pick_gguf(names, n, repo, quant, p, e)) return -1;
    } else if (config && st) {
        p->kind = HUB_KIND_SAFETENSORS;
        for (size_t i = 0; i < n; i++)
            for (size_t k = 0; k < sizeof AUX_FILES / sizeof AUX_FILES[0]; k++)
                if (!strcmp(names[i], AUX_FILES[k]) && hub_pick_add(p, names[i], e)) return -1;
    } else {
        return hub_fail(e, "%s: neither safetensors weights with a config.json nor GGUF files: nothing qhexrt can run (--include fetches files anyway)",
                        repo);
    }
    for (size_t i = p->n; i-- > 0;) /* --exclude takes files back out */
        if (matches_any(p->names[i], excludes)) {
            free(p->names[i]);
            memmove(p->names + i, p->names + i + 1, (p->n - i - 1) * sizeof *p->names);
            p->n--;
        }
    return 0;
}

int hub_index_shards(const char *index_path, hub_pick *p, hub_err *e) {
    json_error_t je;
    json_t *j = json_load_file(index_path, 0, &je);
    if (!j) return hub_fail(e, "%s: not JSON: %s (line %d)", index_path, je.text, je.line);
    json_t *map = json_object_get(j, "weight_map");
    if (!json_is_object(map)) {
        json_decref(j);
        return hub_fail(e, "%s: no \"weight_map\" object", index_path);
    }
    const char *key;
    json_t *v;
    int rc = 0;
    json_object_foreach(map, key, v) {
        const char *shard = json_string_value(v);
        if (!shard || !hub_safe_relpath(shard) || !ends_with_ci(shard, ".safetensors")) {
            rc = hub_fail(e, "%s: tensor '%.80s' names a bad shard", index_path, key);
            break;
        }
        if (hub_pick_add(p, shard, e)) {
            rc = -1;
            break;
        }
    }
    json_decref(j);
    return rc;
}

/* ---- the cached snapshot ---- */

/* The regular files (through links) under dir, as paths relative to it. */
static int walk(const char *dir, const char *rel, hub_pick *out, int depth, hub_err *e) {
    char path[HUB_PATH_MAX];
    snprintf(path, sizeof path, "%s%s%s", dir, rel[0] ? "/" : "", rel);
    DIR *d = opendir(path);
    if (!d) return 0;
    struct dirent *de;
    int rc = 0;
    while (!rc && (de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char sub[HUB_PATH_MAX], full[HUB_PATH_MAX * 2];
        snprintf(sub, sizeof sub, "%s%s%s", rel, rel[0] ? "/" : "", de->d_name);
        snprintf(full, sizeof full, "%s/%s", dir, sub);
        struct stat st;
        if (stat(full, &st)) continue; /* a dangling link: the blob is missing */
        if (S_ISDIR(st.st_mode) && depth < 8) rc = walk(dir, sub, out, depth + 1, e);
        else if (S_ISREG(st.st_mode)) rc = hub_pick_add(out, sub, e);
    }
    closedir(d);
    return rc;
}

/* The listing huggingface_hub keeps of a commit (trees/COMMIT.json), when there is one. */
static int tree_cache_names(const char *repo_dir, const char *commit, hub_pick *names, hub_err *e) {
    char path[HUB_PATH_MAX + 128];
    snprintf(path, sizeof path, "%s/trees/%s.json", repo_dir, commit);
    json_t *j = json_load_file(path, 0, NULL);
    json_t *files = j ? json_object_get(j, "files") : NULL;
    int rc = 0;
    if (json_is_object(files) && json_integer_value(json_object_get(j, "format_version")) == 1) {
        const char *key;
        json_t *v;
        json_object_foreach(files, key, v) if (hub_safe_relpath(key) && hub_pick_add(names, key, e)) rc = -1;
    } else {
        rc = 1;
    }
    json_decref(j);
    return rc;
}

int hub_cached_model(const hub_env *env, const hub_ref *r, char out[HUB_PATH_MAX], char mmproj[HUB_PATH_MAX],
                     bool *missing, hub_err *e) {
    char dir[HUB_PATH_MAX], commit[41], snap[HUB_PATH_MAX + 64];
    *missing = false;
    if (mmproj) mmproj[0] = '\0';
    hub_repo_dir(env, r->repo, dir);
    if (hub_cache_commit(env, r, commit))
        return hub_fail(e, "%s (revision %s) is not in the Hugging Face cache (%s)", r->repo, r->revision, env->cache);
    snprintf(snap, sizeof snap, "%s/snapshots/%s", dir, commit);
    hub_pick have = {0}, listed = {0}, p = {0};
    int rc = -1;
    if (walk(snap, "", &have, 0, e)) goto out;
    int t = tree_cache_names(dir, commit, &listed, e);
    if (t < 0) goto out;
    /* Choose from the full listing when huggingface_hub left one, else from what is there. */
    const hub_pick *from = t == 0 ? &listed : &have;
    if (hub_pick_files((const char *const *)from->names, from->n, r->repo, r->quant, NULL, NULL, &p, e)) {
        *missing = have.n > 0;
        goto out;
    }
    if (p.kind == HUB_KIND_SAFETENSORS) {
        char idx[HUB_PATH_MAX + 128];
        snprintf(idx, sizeof idx, "%s/model.safetensors.index.json", snap);
        if (hub_pick_has(&have, "model.safetensors.index.json")) {
            if (hub_index_shards(idx, &p, e)) goto out;
        } else if (!hub_pick_has(&p, "model.safetensors") || hub_pick_has(&p, "model.safetensors.index.json")) {
            *missing = true;
            hub_fail(e, "%s: the cached snapshot %s lacks its weights (model.safetensors or its index)", r->repo, commit);
            goto out;
        }
    }
    for (size_t i = 0; i < p.n; i++)
        if (!hub_pick_has(&have, p.names[i])) {
            *missing = true;
            hub_fail(e, "%s: the cached snapshot %s lacks %s", r->repo, commit, p.names[i]);
            goto out;
        }
    if (p.kind == HUB_KIND_SAFETENSORS) {
        if (!hub_pick_has(&have, "config.json")) {
            *missing = true;
            hub_fail(e, "%s: the cached snapshot %s lacks config.json", r->repo, commit);
            goto out;
        }
        hub_fmt(out, HUB_PATH_MAX, "%s", snap);
    } else {
        hub_fmt(out, HUB_PATH_MAX, "%s/%s", snap, p.gguf);
        if (mmproj && p.mmproj[0] && hub_pick_has(&have, p.mmproj)) hub_fmt(mmproj, HUB_PATH_MAX, "%s/%s", snap, p.mmproj);
    }
    rc = 0;
out:
    hub_pick_free(&have);
    hub_pick_free(&listed);
    hub_pick_free(&p);
    return rc;
}
