/* hub_env.c: the settings huggingface_hub reads from the environment, read the same way, and
 * the REPO[:QUANT][@REVISION] references. */
#include "hub_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int hub_fail(hub_err *e, const char *fmt, ...) {
    if (!e) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    for (char *c = e->msg; *c; c++)
        if ((unsigned char)*c < 0x20) *c = '?'; /* one line, whatever a server sent */
    return -1;
}

static const char *env_nonempty(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static bool env_true(const char *name) {
    const char *v = env_nonempty(name);
    if (!v) return false;
    return !strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on");
}

/* HF_HOME, else $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface (huggingface_hub's
 * constants.py). */
static int hf_home(char out[HUB_PATH_MAX], hub_err *e) {
    const char *v = env_nonempty("HF_HOME"), *xdg = env_nonempty("XDG_CACHE_HOME"), *home = env_nonempty("HOME");
    int n;
    if (v) n = snprintf(out, HUB_PATH_MAX, "%s", v);
    else if (xdg) n = snprintf(out, HUB_PATH_MAX, "%s/huggingface", xdg);
    else n = snprintf(out, HUB_PATH_MAX, "%s/.cache/huggingface", home ? home : ".");
    if (n >= HUB_PATH_MAX) return hub_fail(e, "HF_HOME: path too long");
    return 0;
}

/* The token: --token, HF_TOKEN (or the older HUGGING_FACE_HUB_TOKEN), else the file
 * huggingface_hub's login writes (HF_TOKEN_PATH, or HF_HOME/token). */
static void load_token(hub_env *env, const char *token_arg, const char *home) {
    const char *t = token_arg && *token_arg ? token_arg : env_nonempty("HF_TOKEN");
    if (!t) t = env_nonempty("HUGGING_FACE_HUB_TOKEN");
    if (t) {
        snprintf(env->token, sizeof env->token, "%s", t);
    } else {
        char path[HUB_PATH_MAX + 16];
        const char *p = env_nonempty("HF_TOKEN_PATH");
        if (p) snprintf(path, sizeof path, "%s", p);
        else snprintf(path, sizeof path, "%s/token", home);
        FILE *f = fopen(path, "r");
        if (f) {
            if (!fgets(env->token, sizeof env->token, f)) env->token[0] = '\0';
            fclose(f);
        }
    }
    /* Trim whitespace and refuse characters that do not belong in a header. */
    size_t n = strlen(env->token);
    while (n && isspace((unsigned char)env->token[n - 1])) env->token[--n] = '\0';
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)env->token[i] <= 0x20 || env->token[i] == 0x7f) {
            env->token[0] = '\0';
            break;
        }
}

int hub_env_load(hub_env *env, const char *token_arg, hub_err *e) {
    memset(env, 0, sizeof *env);
    const char *ep = env_nonempty("HF_ENDPOINT");
    snprintf(env->endpoint, sizeof env->endpoint, "%s", ep ? ep : "https://huggingface.co");
    size_t n = strlen(env->endpoint);
    while (n && env->endpoint[n - 1] == '/') env->endpoint[--n] = '\0';
    char home[HUB_PATH_MAX];
    if (hf_home(home, e)) return -1;
    const char *c = env_nonempty("HF_HUB_CACHE");
    if (!c) c = env_nonempty("HUGGINGFACE_HUB_CACHE");
    int w = c ? snprintf(env->cache, sizeof env->cache, "%s", c) : snprintf(env->cache, sizeof env->cache, "%s/hub", home);
    if (w >= (int)sizeof env->cache - 200) return hub_fail(e, "HF_HUB_CACHE: path too long");
    load_token(env, token_arg, home);
    env->offline = env_true("HF_HUB_OFFLINE") || env_true("TRANSFORMERS_OFFLINE");
    env->tty = isatty(STDERR_FILENO);
    return 0;
}

static bool id_char(char c) { return isalnum((unsigned char)c) || c == '-' || c == '_' || c == '.'; }

/* One part of a repository id: [A-Za-z0-9._-]{1,96}, not starting or ending with '.' or '-',
 * no "--" or "..", as the hub's own validation (huggingface_hub validate_repo_id). */
static bool id_part_ok(const char *s, size_t n) {
    if (n == 0 || n > 96) return false;
    for (size_t i = 0; i < n; i++)
        if (!id_char(s[i])) return false;
    if (s[0] == '.' || s[0] == '-' || s[n - 1] == '.' || s[n - 1] == '-') return false;
    for (size_t i = 0; i + 1 < n; i++)
        if ((s[i] == '-' && s[i + 1] == '-') || (s[i] == '.' && s[i + 1] == '.')) return false;
    return true;
}

bool hub_is_repo_id(const char *s) {
    const char *slash = strchr(s, '/');
    if (!slash || strchr(slash + 1, '/')) return false;
    return id_part_ok(s, (size_t)(slash - s)) && id_part_ok(slash + 1, strlen(slash + 1));
}

/* A revision: a branch, tag or commit; [A-Za-z0-9._/-], no ".." and no empty component (it
 * names a file under refs/). */
static bool revision_ok(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n >= 200 || s[0] == '/' || s[n - 1] == '/') return false;
    for (size_t i = 0; i < n; i++)
        if (!(isalnum((unsigned char)s[i]) || strchr("._-/", s[i]))) return false;
    return !strstr(s, "..") && !strstr(s, "//");
}

int hub_ref_parse(const char *s, hub_ref *r, hub_err *e) {
    memset(r, 0, sizeof *r);
    char buf[512];
    if (strlen(s) >= sizeof buf) return hub_fail(e, "'%.60s...': too long for ORG/NAME[:QUANT][@REVISION]", s);
    snprintf(buf, sizeof buf, "%s", s);
    char *at = strchr(buf, '@');
    if (at) {
        *at = '\0';
        if (!revision_ok(at + 1))
            return hub_fail(e, "'%s': bad revision '%s' (a branch, tag or commit: letters, digits, '._-/')", s, at + 1);
        if (snprintf(r->revision, sizeof r->revision, "%s", at + 1) >= (int)sizeof r->revision)
            return hub_fail(e, "'%s': revision too long", s);
    } else {
        snprintf(r->revision, sizeof r->revision, "main");
    }
    char *colon = strchr(buf, ':');
    if (colon) {
        *colon = '\0';
        const char *q = colon + 1;
        size_t n = strlen(q);
        if (n == 0 || n >= sizeof r->quant) return hub_fail(e, "'%s': empty or too long quantization after ':'", s);
        for (size_t i = 0; i < n; i++)
            if (!(isalnum((unsigned char)q[i]) || q[i] == '_' || q[i] == '-' || q[i] == '.'))
                return hub_fail(e, "'%s': bad quantization '%s' (e.g. Q4_K_M, Q8_0, F16)", s, q);
        snprintf(r->quant, sizeof r->quant, "%s", q);
    }
    if (!hub_is_repo_id(buf))
        return hub_fail(e, "'%s': not a repository id: expected ORG/NAME[:QUANT][@REVISION] (e.g. Qwen/Qwen3-VL-2B-Instruct-GGUF:Q4_K_M)", s);
    if (snprintf(r->repo, sizeof r->repo, "%s", buf) >= (int)sizeof r->repo) return hub_fail(e, "'%s': too long", s);
    return 0;
}

void hub_repo_dir(const hub_env *env, const char *repo, char out[HUB_PATH_MAX]) {
    /* models--ORG--NAME: every '/' of the id as "--" (huggingface_hub repo_folder_name) */
    char name[256];
    size_t k = 0;
    for (const char *p = repo; *p && k + 3 < sizeof name; p++) {
        if (*p == '/') {
            name[k++] = '-';
            name[k++] = '-';
        } else {
            name[k++] = *p;
        }
    }
    name[k] = '\0';
    if (snprintf(out, HUB_PATH_MAX, "%s/models--%s", env->cache, name) >= HUB_PATH_MAX) out[0] = '\0';
}

bool hub_is_hex(const char *s, size_t n) {
    if (strlen(s) != n) return false;
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i])) return false;
    return true;
}

bool hub_safe_relpath(const char *p) {
    size_t n = strlen(p);
    if (n == 0 || n > 1000 || p[0] == '/' || p[n - 1] == '/') return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)p[i] < 0x20 || p[i] == '\\' || p[i] == 0x7f) return false;
    /* no empty, "." or ".." component */
    const char *c = p;
    while (*c) {
        const char *end = strchr(c, '/');
        size_t len = end ? (size_t)(end - c) : strlen(c);
        if (len == 0 || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.')) return false;
        c += len + (end ? 1 : 0);
    }
    return true;
}

int hub_cache_commit(const hub_env *env, const hub_ref *r, char commit[41]) {
    char dir[HUB_PATH_MAX], path[HUB_PATH_MAX + 256];
    hub_repo_dir(env, r->repo, dir);
    struct stat st;
    if (hub_is_hex(r->revision, 40)) {
        snprintf(path, sizeof path, "%s/snapshots/%s", dir, r->revision);
        if (stat(path, &st) || !S_ISDIR(st.st_mode)) return -1;
        memcpy(commit, r->revision, 41);
        return 0;
    }
    snprintf(path, sizeof path, "%s/refs/%s", dir, r->revision);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char buf[64] = {0};
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    while (got && isspace((unsigned char)buf[got - 1])) buf[--got] = '\0';
    if (!hub_is_hex(buf, 40)) return -1;
    memcpy(commit, buf, 41);
    return 0;
}

int hub_mkdirs(const char *path, hub_err *e) {
    char buf[HUB_PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return hub_fail(e, "%s: path too long", path);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || !*p) {
            char keep = *p;
            *p = '\0';
            if (mkdir(buf, 0755) && errno != EEXIST) return hub_fail(e, "%s: cannot create the folder: %s", buf, strerror(errno));
            *p = keep;
            if (!keep) break;
        }
    }
    return 0;
}

void hub_human_bytes(double b, char *out, size_t cap) {
    static const char *const units[] = {"B", "kB", "MB", "GB", "TB"};
    int u = 0;
    while (b >= 1000.0 && u < 4) b /= 1000.0, u++;
    if (u == 0) snprintf(out, cap, "%.0f B", b);
    else snprintf(out, cap, "%.*f %s", b < 10 ? 2 : b < 100 ? 1 : 0, b, units[u]);
}

int hub_fmt(char *dst, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(dst, cap, fmt, ap);
    va_end(ap);
    return n;
}
