/* hub_list.c: qhx list. What the Hugging Face cache and ollama's store hold: each model's name,
 * family, parameters, quantization and size on disk, runnable or not (and why not). A
 * safetensors snapshot is judged by its config.json (model_type) and its weights' headers, a
 * GGUF file by its metadata (general.architecture, general.file_type, general.size_label) and
 * whether it makes a run plan. */
#include "hub.h"
#include "hub_internal.h"

#include "core/file.h"
#include "families/family.h"
#include "io/gguf.h"
#include "io/safetensors.h"

#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

typedef struct entry {
    char name[400], family[64], params[32], quant[32], size[32], why[300];
    bool runnable;
} entry;

typedef struct entries {
    entry *e;
    size_t n, cap;
} entries;

static entry *push(entries *l) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        entry *e = realloc(l->e, cap * sizeof *e);
        if (!e) return NULL;
        l->e = e, l->cap = cap;
    }
    entry *e = &l->e[l->n++];
    memset(e, 0, sizeof *e);
    hub_fmt(e->family, sizeof e->family, "-");
    hub_fmt(e->params, sizeof e->params, "-");
    hub_fmt(e->quant, sizeof e->quant, "-");
    return e;
}

static void params_text(double n, char *out, size_t cap) {
    if (n >= 1e9) hub_fmt(out, cap, "%.1fB", n / 1e9);
    else if (n >= 1e6) hub_fmt(out, cap, "%.1fM", n / 1e6);
    else hub_fmt(out, cap, "%.0fK", n / 1e3);
}

/* llama.cpp's llama_ftype names (general.file_type). */
static const char *ftype_name(int64_t t) {
    static const char *const names[] = {
        [0] = "F32", [1] = "F16", [2] = "Q4_0", [3] = "Q4_1", [7] = "Q8_0", [8] = "Q5_0", [9] = "Q5_1", [10] = "Q2_K",
        [11] = "Q3_K_S", [12] = "Q3_K_M", [13] = "Q3_K_L", [14] = "Q4_K_S", [15] = "Q4_K_M", [16] = "Q5_K_S",
        [17] = "Q5_K_M", [18] = "Q6_K", [19] = "IQ2_XXS", [20] = "IQ2_XS", [21] = "Q2_K_S", [22] = "IQ3_XS",
        [23] = "IQ3_XXS", [24] = "IQ1_S", [25] = "IQ4_NL", [26] = "IQ3_S", [27] = "IQ3_M", [28] = "IQ2_S",
        [29] = "IQ2_M", [30] = "IQ4_XS", [31] = "IQ1_M", [32] = "BF16", [36] = "TQ1_0", [37] = "TQ2_0"};
    if (t < 0 || t >= (int64_t)(sizeof names / sizeof names[0]) || !names[t]) return "?";
    return names[t];
}

static void gguf_entry(const char *path, entry *e) {
    qhx_gguf *g = NULL;
    qhx_error err = {0};
    if (qhx_gguf_open(path, QHX_FILE_MAP, &g, &err)) {
        hub_fmt(e->why, sizeof e->why, "not a readable GGUF file: %s", err.msg);
        return;
    }
    qhx_gguf_str s;
    if (!qhx_gguf_get_str(g, "general.architecture", &s, &err)) hub_fmt(e->family, sizeof e->family, "%.*s", (int)(s.len < 60 ? s.len : 60), s.p);
    int64_t ft;
    if (!qhx_gguf_get_int(g, "general.file_type", &ft, &err)) hub_fmt(e->quant, sizeof e->quant, "%s", ftype_name(ft));
    double n = 0;
    for (int64_t i = 0; i < qhx_gguf_n_tensors(g); i++) n += (double)qhx_gguf_tensor_at(g, i)->n_elements;
    if (!qhx_gguf_get_str(g, "general.size_label", &s, &err)) hub_fmt(e->params, sizeof e->params, "%.*s", (int)(s.len < 30 ? s.len : 30), s.p);
    else params_text(n, e->params, sizeof e->params);
    qhx_gguf_free(g);
    /* runnable when it makes a run plan: an architecture a family reads, with every key it needs */
    qhx_plan *plan = NULL;
    if (qhx_family_gguf_plan(path, NULL, &plan, &err)) {
        hub_fmt(e->why, sizeof e->why, "%s", err.msg);
        return;
    }
    const qhx_family_desc *f = qhx_family_for_model_type(plan->model_type);
    if (f) hub_fmt(e->family, sizeof e->family, "%s", f->title);
    e->runnable = f != NULL;
    qhx_plan_free(plan);
}

/* Parameters of a safetensors snapshot: the elements of every tensor its files hold. */
static void st_params(const char *snap, entry *e) {
    DIR *d = opendir(snap);
    if (!d) return;
    char *paths[256];
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < 256) {
        size_t len = strlen(de->d_name);
        if (len > 12 && !strcmp(de->d_name + len - 12, ".safetensors")) {
            paths[n] = malloc(strlen(snap) + len + 2);
            if (paths[n]) sprintf(paths[n++], "%s/%s", snap, de->d_name);
        }
    }
    closedir(d);
    qhx_st_set *set = NULL;
    qhx_error err = {0};
    if (n && !qhx_st_open_many((const char *const *)paths, n, &set, &err)) {
        double total = 0;
        for (int64_t i = 0; i < qhx_st_n_tensors(set); i++) {
            const qhx_st_tensor *t = qhx_st_tensor_at(set, i);
            double k = 1;
            for (int j = 0; j < t->n_dims; j++) k *= (double)t->shape[j];
            total += k;
        }
        params_text(total, e->params, sizeof e->params);
        qhx_st_free(set);
    }
    for (int i = 0; i < n; i++) free(paths[i]);
}

static void st_entry(const char *snap, entry *e) {
    char cfg[HUB_PATH_MAX + 16];
    hub_fmt(cfg, sizeof cfg, "%s/config.json", snap);
    json_t *j = json_load_file(cfg, 0, NULL);
    const char *mt = j ? json_string_value(json_object_get(j, "model_type")) : NULL;
    const char *dt = j ? json_string_value(json_object_get(j, "torch_dtype")) : NULL;
    if (!dt && j) dt = json_string_value(json_object_get(j, "dtype"));
    if (!dt && j) dt = json_string_value(json_object_get(json_object_get(j, "text_config"), "dtype"));
    if (dt) hub_fmt(e->quant, sizeof e->quant, "%s", dt);
    const qhx_family_desc *f = mt ? qhx_family_for_model_type(mt) : NULL;
    if (f) {
        hub_fmt(e->family, sizeof e->family, "%s", f->title);
        e->runnable = true;
    } else {
        hub_fmt(e->family, sizeof e->family, "%s", mt ? mt : "-");
        if (!j) hub_fmt(e->why, sizeof e->why, "no readable config.json");
        else hub_fmt(e->why, sizeof e->why, "model_type '%s' is not a family qhexrt runs", mt ? mt : "(none)");
    }
    json_decref(j);
    st_params(snap, e);
}

/* Bytes of the blobs a snapshot's links reach (each counted once). */
static double snapshot_bytes(const char *snap, int depth) {
    DIR *d = opendir(snap);
    if (!d) return 0;
    double total = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char p[HUB_PATH_MAX * 2];
        hub_fmt(p, sizeof p, "%s/%s", snap, de->d_name);
        struct stat st;
        if (stat(p, &st)) continue;
        if (S_ISDIR(st.st_mode) && depth < 8) total += snapshot_bytes(p, depth + 1);
        else if (S_ISREG(st.st_mode)) total += (double)st.st_size;
    }
    closedir(d);
    return total;
}

/* The revision part of the name -m takes for a snapshot: "" when refs/main holds its commit,
 * "@REF" for another ref, else "@COMMIT". */
static void snapshot_rev(const hub_env *env, const char *repo, const char *commit, char *out, size_t cap) {
    static const char *const refs[] = {"main", "master"};
    for (size_t i = 0; i < sizeof refs / sizeof refs[0]; i++) {
        hub_ref r = {0};
        hub_fmt(r.repo, sizeof r.repo, "%s", repo);
        hub_fmt(r.revision, sizeof r.revision, "%s", refs[i]);
        char c[41];
        if (!hub_cache_commit(env, &r, c) && !strcmp(c, commit)) {
            hub_fmt(out, cap, i == 0 ? "" : "@%s", refs[i]);
            return;
        }
    }
    hub_fmt(out, cap, "@%s", commit);
}

static void list_hf(const hub_env *env, entries *l) {
    DIR *d = opendir(env->cache);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, "models--", 8)) continue;
        char repo[300];
        hub_fmt(repo, sizeof repo, "%s", de->d_name + 8);
        char *sep = strstr(repo, "--");
        if (!sep) continue;
        memmove(sep + 1, sep + 2, strlen(sep + 2) + 1);
        *sep = '/';
        char snaps[HUB_PATH_MAX * 2];
        hub_fmt(snaps, sizeof snaps, "%s/%s/snapshots", env->cache, de->d_name);
        DIR *s = opendir(snaps);
        if (!s) continue;
        struct dirent *se;
        while ((se = readdir(s))) {
            if (!hub_is_hex(se->d_name, 40)) continue;
            char snap[HUB_PATH_MAX * 2 + 64], rev[64];
            hub_fmt(snap, sizeof snap, "%s/%s", snaps, se->d_name);
            snapshot_rev(env, repo, se->d_name, rev, sizeof rev);
            /* Its files: one entry per GGUF model file, or one for a safetensors folder. */
            char cfg[sizeof snap + 16];
            hub_fmt(cfg, sizeof cfg, "%s/config.json", snap);
            struct stat st;
            bool st_folder = !stat(cfg, &st);
            DIR *f = opendir(snap);
            struct dirent *fe;
            int ggufs = 0;
            while (f && (fe = readdir(f))) {
                size_t len = strlen(fe->d_name);
                if (len > 5 && !strcasecmp(fe->d_name + len - 5, ".gguf") && !strcasestr(fe->d_name, "mmproj")) {
                    char gp[sizeof snap + 300];
                    hub_fmt(gp, sizeof gp, "%s/%s", snap, fe->d_name);
                    if (stat(gp, &st)) continue;
                    entry *en = push(l);
                    if (!en) break;
                    hub_human_bytes((double)st.st_size, en->size, sizeof en->size);
                    gguf_entry(gp, en);
                    /* NAME:QUANT, the quantization its metadata gives (what -m and -hf take) */
                    hub_fmt(en->name, sizeof en->name, "%s:%s%s", repo, en->quant, rev);
                    ggufs++;
                }
            }
            if (f) closedir(f);
            if (st_folder || !ggufs) {
                entry *en = push(l);
                if (!en) break;
                hub_fmt(en->name, sizeof en->name, "%s%s", repo, rev);
                hub_human_bytes(snapshot_bytes(snap, 0), en->size, sizeof en->size);
                if (st_folder) st_entry(snap, en);
                else hub_fmt(en->why, sizeof en->why, "neither a config.json nor a GGUF file");
            }
        }
        closedir(s);
    }
    closedir(d);
}

static void list_ollama_dir(const char *root, const char *rel, int depth, entries *l) {
    char path[HUB_PATH_MAX * 2];
    hub_fmt(path, sizeof path, "%s/manifests/%s", root, rel);
    DIR *d = opendir(path);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char sub[1200];
        hub_fmt(sub, sizeof sub, "%s%s%s", rel, rel[0] ? "/" : "", de->d_name);
        if (depth < 3) {
            list_ollama_dir(root, sub, depth + 1, l);
            continue;
        }
        /* sub: HOST/NAMESPACE/MODEL/TAG -> the name ollama shows */
        char host[300], ns[300], model[300], tag[300], name[1300];
        if (sscanf(sub, "%299[^/]/%299[^/]/%299[^/]/%299s", host, ns, model, tag) != 4) continue;
        if (!strcmp(host, "registry.ollama.ai") && !strcmp(ns, "library")) hub_fmt(name, sizeof name, "%s:%s", model, tag);
        else if (!strcmp(host, "registry.ollama.ai")) hub_fmt(name, sizeof name, "%s/%s:%s", ns, model, tag);
        else hub_fmt(name, sizeof name, "%s/%s/%s:%s", host, ns, model, tag);
        entry *en = push(l);
        if (!en) break;
        hub_fmt(en->name, sizeof en->name, "ollama:%s", name);
        char mp[HUB_PATH_MAX], pp[HUB_PATH_MAX];
        hub_err e = {0};
        if (hub_ollama_resolve(name, mp, pp, &e)) {
            hub_fmt(en->why, sizeof en->why, "%s", e.msg);
            continue;
        }
        struct stat st;
        double bytes = !stat(mp, &st) ? (double)st.st_size : 0;
        if (pp[0] && !stat(pp, &st)) bytes += (double)st.st_size;
        hub_human_bytes(bytes, en->size, sizeof en->size);
        gguf_entry(mp, en);
    }
    closedir(d);
}

static int by_name(const void *a, const void *b) { return strcmp(((const entry *)a)->name, ((const entry *)b)->name); }

static void print_table(const entries *l, bool runnable) {
    for (size_t i = 0; i < l->n; i++) {
        const entry *e = &l->e[i];
        if (e->runnable != runnable) continue;
        printf("%-56s %-12s %-8s %-9s %-9s", e->name, e->family, e->params, e->quant, e->size);
        if (!runnable) printf(" %s", e->why);
        printf("\n");
    }
}

int qhx_cmd_list(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: qhx list\n\nWhat the Hugging Face cache (HF_HUB_CACHE, HF_HOME/hub, ~/.cache/huggingface/hub) and\n"
                   "ollama's store (OLLAMA_MODELS, ~/.ollama/models) hold: the models qhexrt runs (name, family,\n"
                   "parameters, quantization, size on disk; -m takes the name), then the ones it cannot, with why.\n");
            return HUB_EXIT_OK;
        }
        fprintf(stderr, "qhx list: unknown argument '%s' (try 'qhx list --help')\n", argv[i]);
        return HUB_EXIT_USAGE;
    }
    hub_env env;
    hub_err e = {0};
    if (hub_env_load(&env, NULL, &e)) {
        fprintf(stderr, "qhx list: %s\n", e.msg);
        return HUB_EXIT_RUNTIME;
    }
    entries l = {0};
    list_hf(&env, &l);
    char root[HUB_PATH_MAX];
    hub_ollama_root(root);
    list_ollama_dir(root, "", 0, &l);
    if (l.n) qsort(l.e, l.n, sizeof *l.e, by_name);
    size_t runnable = 0;
    for (size_t i = 0; i < l.n; i++) runnable += l.e[i].runnable;
    printf("%-56s %-12s %-8s %-9s %-9s\n", "runs (-m NAME)", "FAMILY", "PARAMS", "QUANT", "SIZE");
    print_table(&l, true);
    if (!runnable) printf("(none)\n");
    if (runnable < l.n) {
        printf("\n%-56s %-12s %-8s %-9s %-9s %s\n", "does not run", "FAMILY", "PARAMS", "QUANT", "SIZE", "WHY");
        print_table(&l, false);
    }
    printf("\n(Hugging Face cache: %s; ollama: %s)\n", env.cache, root);
    free(l.e);
    return HUB_EXIT_OK;
}
