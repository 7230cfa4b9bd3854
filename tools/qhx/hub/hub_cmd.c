/* hub_cmd.c: qhx pull, and the model references of every command that takes -m:
 * -hf REPO[:QUANT][@REV] (fetched when missing), -m ORG/NAME (the cached snapshot) and
 * -m ollama:NAME[:TAG] (ollama's blob, in place). */
#include "hub.h"
#include "hub_internal.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { MAX_GLOBS = 64, MAX_REFS = 4 };

static void pull_usage(FILE *f) {
    fprintf(f, "usage: qhx pull REPO[:QUANT][@REVISION] [options]\n"
               "\n"
               "Fetch a model from the Hugging Face hub into its cache (HF_HUB_CACHE, else\n"
               "HF_HOME/hub, else ~/.cache/huggingface/hub: the layout huggingface_hub uses, so each\n"
               "reads what the other wrote). A safetensors repository brings its config, generation\n"
               "config, tokenizer and preprocessor files and the shards its index names; a GGUF\n"
               "repository the file QUANT names (default Q4_K_M) and its mmproj file. Files already\n"
               "cached are not fetched again; a partial file is resumed. Prints the path -m takes.\n"
               "\n"
               "options:\n"
               "  --include GLOB   fetch only the files GLOB matches (repeatable)\n"
               "  --exclude GLOB   leave out the files GLOB matches (repeatable)\n"
               "  --token TOKEN    the hub token (else HF_TOKEN, else the file `hf auth login` writes)\n"
               "  --dry-run        print the commit and the files it would fetch (path, bytes), fetch nothing\n"
               "  -q, --quiet      no progress lines\n"
               "  -h, --help       this help\n"
               "\n"
               "HF_ENDPOINT sets the hub (a mirror); HF_HUB_OFFLINE=1 uses the cache only (docs/hub.md).\n");
}

/* Ctrl-C ends the transfers (the partial files stay); the old handlers come back after. */
typedef struct sig_saved {
    struct sigaction intr, term;
} sig_saved;
static void sig_enter(sig_saved *s) {
    sigaction(SIGINT, NULL, &s->intr);
    sigaction(SIGTERM, NULL, &s->term);
    atomic_store(&hub_stop, 0);
    hub_catch_sigint();
}
static void sig_leave(const sig_saved *s) {
    sigaction(SIGINT, &s->intr, NULL);
    sigaction(SIGTERM, &s->term, NULL);
}

static int report(const char *label, const hub_err *e) {
    fprintf(stderr, "%s: %s%s\n", label, e->interrupted ? "interrupted: " : "", e->msg);
    return e->interrupted ? HUB_EXIT_INTERRUPTED : HUB_EXIT_RUNTIME;
}

int qhx_cmd_pull(int argc, char **argv) {
    const char *label = "qhx pull", *ref = NULL, *token = NULL;
    const char *inc[MAX_GLOBS + 1] = {0}, *exc[MAX_GLOBS + 1] = {0};
    int ni = 0, ne = 0;
    bool dry = false, quiet = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            pull_usage(stdout);
            return HUB_EXIT_OK;
        } else if (!strcmp(a, "--include") || !strcmp(a, "--exclude") || !strcmp(a, "--token")) {
            if (!has) {
                fprintf(stderr, "%s: %s needs a value (try 'qhx pull --help')\n", label, a);
                return HUB_EXIT_USAGE;
            }
            const char *v = argv[++i];
            if (a[2] == 't') {
                token = v;
            } else {
                int *n = a[2] == 'i' ? &ni : &ne;
                if (*n == MAX_GLOBS) {
                    fprintf(stderr, "%s: more than %d %s options\n", label, MAX_GLOBS, a);
                    return HUB_EXIT_USAGE;
                }
                (a[2] == 'i' ? inc : exc)[(*n)++] = v;
            }
        } else if (!strcmp(a, "--dry-run")) {
            dry = true;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            quiet = true;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "%s: unknown option '%s' (try 'qhx pull --help')\n", label, a);
            return HUB_EXIT_USAGE;
        } else if (ref) {
            fprintf(stderr, "%s: one repository at a time ('%s' and '%s')\n", label, ref, a);
            return HUB_EXIT_USAGE;
        } else {
            ref = a;
        }
    }
    if (!ref) {
        fprintf(stderr, "%s: missing REPO (e.g. qhx pull Qwen/Qwen3.5-2B; try 'qhx pull --help')\n", label);
        return HUB_EXIT_USAGE;
    }
    hub_err e = {0};
    hub_ref r;
    if (hub_ref_parse(ref, &r, &e)) {
        fprintf(stderr, "%s: %s\n", label, e.msg);
        return HUB_EXIT_USAGE;
    }
    hub_env env;
    if (hub_env_load(&env, token, &e)) return report(label, &e);
    env.quiet = quiet;
    hub_pull_opts o = {.includes = inc, .excludes = exc, .dry_run = dry, .label = label};
    char out[HUB_PATH_MAX];
    sig_saved s;
    sig_enter(&s);
    int rc = hub_pull(&env, &r, &o, out, &e);
    sig_leave(&s);
    if (rc) return report(label, &e);
    if (!dry) printf("%s\n", out);
    return HUB_EXIT_OK;
}

/* ---- -hf and -m on the other commands ---- */

static const char *const MODEL_COMMANDS[] = {"generate", "chat", "serve", "logits", "perplexity", "parity",
                                             "embed-image", "tokenize", "bench", "chat-format"};
/* Options whose value is free text (never a model reference, even when it reads "-hf"). */
static const char *const TEXT_OPTIONS[] = {"-p", "--prompt", "--system", "--system-prompt", "-sys", "--stop", "-r",
                                           "--reverse-prompt", "--ids", "-f", "--file", "--grammar", "--json-schema"};

static bool in_list(const char *s, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(s, list[i])) return true;
    return false;
}

static char resolved[MAX_REFS][HUB_PATH_MAX];
static char projector[HUB_PATH_MAX];

/* The commands that take --mmproj: a resolved GGUF model brings its vision tower file along. */
static const char *const MMPROJ_COMMANDS[] = {"generate", "chat", "serve", "logits", "parity", "embed-image"};

static bool path_exists(const char *p) {
    struct stat st;
    return !stat(p, &st);
}

/* -hf REF: the cached model, else fetched now; proj gets its vision tower's file or "". */
static int resolve_hf(const char *label, const char *v, char out[HUB_PATH_MAX], char proj[HUB_PATH_MAX]) {
    hub_err e = {0};
    hub_ref r;
    if (hub_ref_parse(v, &r, &e)) {
        fprintf(stderr, "%s: -hf: %s\n", label, e.msg);
        return HUB_EXIT_USAGE;
    }
    hub_env env;
    if (hub_env_load(&env, NULL, &e)) return report(label, &e);
    bool missing;
    if (!hub_cached_model(&env, &r, out, proj, &missing, &e)) return -1; /* no request at all */
    if (!env.offline) fprintf(stderr, "%s: fetching %s from %s into %s\n", label, v, env.endpoint, env.cache);
    hub_pull_opts o = {.label = label};
    sig_saved s;
    sig_enter(&s);
    int rc = hub_pull(&env, &r, &o, out, &e);
    sig_leave(&s);
    if (rc) return report(label, &e);
    if (hub_cached_model(&env, &r, out, proj, &missing, &e)) proj[0] = '\0'; /* what was fetched: its tower too */
    return -1;
}

/* -m VALUE: ollama:NAME[:TAG], or ORG/NAME[:QUANT][@REV] where no such path exists; proj gets
 * the model's vision tower file or "". */
static int resolve_m(const char *label, const char *v, char out[HUB_PATH_MAX], char proj[HUB_PATH_MAX], bool *changed) {
    *changed = false;
    proj[0] = '\0';
    hub_err e = {0};
    if (!strncmp(v, "ollama:", 7)) {
        if (hub_ollama_resolve(v + 7, out, proj, &e)) return report(label, &e);
        *changed = true;
        return -1;
    }
    if (path_exists(v) || v[0] == '/' || v[0] == '.' || !strchr(v, '/')) return -1;
    hub_ref r;
    if (hub_ref_parse(v, &r, &e)) return -1; /* not a repository id: the loader says what is wrong */
    hub_env env;
    if (hub_env_load(&env, NULL, &e)) return report(label, &e);
    bool missing;
    if (hub_cached_model(&env, &r, out, proj, &missing, &e)) {
        fprintf(stderr, "%s: %s: no such file or folder, and %s; `qhx pull %s` or -hf %s fetches it\n", label, v, e.msg, v, v);
        return HUB_EXIT_RUNTIME;
    }
    *changed = true;
    return -1;
}

int qhx_hub_resolve_args(const char *cmd, int argc, char **argv, int *argc_out, char ***argv_out) {
    char label[64];
    snprintf(label, sizeof label, "qhx %s", cmd);
    char **out = calloc((size_t)argc + 3, sizeof *out); /* room for a --mmproj PATH pair */
    if (!out) {
        fprintf(stderr, "%s: out of memory\n", label);
        return HUB_EXIT_RUNTIME;
    }
    bool takes_m = in_list(cmd, MODEL_COMMANDS, sizeof MODEL_COMMANDS / sizeof MODEL_COMMANDS[0]);
    int n = 0, refs = 0, rc = -1;
    bool has_hf = false, has_m = false, raw = false, has_mmproj = false;
    projector[0] = '\0';
    for (int i = 0; i < argc && rc == -1; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
        out[n++] = argv[i];
        if (raw || i == 0 || !takes_m) continue;
        has_mmproj |= !strcmp(a, "--mmproj");
        if (!strcmp(a, "--")) {
            raw = true;
        } else if (in_list(a, TEXT_OPTIONS, sizeof TEXT_OPTIONS / sizeof TEXT_OPTIONS[0]) && has) {
            out[n++] = argv[++i];
        } else if ((!strcmp(a, "-hf") || !strcmp(a, "--hf-repo")) && !has) {
            fprintf(stderr, "%s: %s needs a value: ORG/NAME[:QUANT][@REVISION]\n", label, a);
            rc = HUB_EXIT_USAGE;
        } else if (!strcmp(a, "-hf") || !strcmp(a, "--hf-repo") || ((!strcmp(a, "-m") || !strcmp(a, "--model")) && has)) {
            bool hf = !strcmp(a, "-hf") || !strcmp(a, "--hf-repo");
            if ((hf && (has_hf || has_m)) || (!hf && has_hf)) {
                fprintf(stderr, "%s: give the model once: -m PATH or -hf REPO\n", label);
                rc = HUB_EXIT_USAGE;
                break;
            }
            if (refs == MAX_REFS) continue; /* -m given again and again: the rest as written */
            bool changed = true;
            rc = hf ? resolve_hf(label, argv[i + 1], resolved[refs], projector)
                    : resolve_m(label, argv[i + 1], resolved[refs], projector, &changed);
            if (rc != -1) break;
            has_hf |= hf, has_m |= !hf;
            out[n - 1] = hf ? (char *)"-m" : argv[i];
            out[n++] = changed ? resolved[refs++] : argv[i + 1];
            i++;
        }
    }
    if (rc != -1) {
        free(out);
        return rc;
    }
    bool takes_mmproj = in_list(cmd, MMPROJ_COMMANDS, sizeof MMPROJ_COMMANDS / sizeof MMPROJ_COMMANDS[0]);
    if (projector[0] && takes_mmproj && !has_mmproj && !raw) { /* the repository's tower, unless one was named */
        out[n++] = (char *)"--mmproj";
        out[n++] = projector;
    }
    out[n] = NULL;
    *argc_out = n;
    *argv_out = out;
    return -1;
}

void qhx_hub_args_free(int argc, char **argv) {
    (void)argc;
    free(argv);
}
