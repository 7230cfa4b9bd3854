/* hub_internal.h: the pieces of the hub client (tools/qhx/hub): settings from the environment,
 * the cache's paths, HTTP through libcurl, the choice of a repository's files, ollama's store. */
#ifndef QHX_HUB_INTERNAL_H
#define QHX_HUB_INTERNAL_H

#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HUB_PATH_MAX 4096
#define HUB_MSG_MAX 1024

/* Exit codes, as the other commands use them (tools/qhx/cli.h). */
enum { HUB_EXIT_OK = 0, HUB_EXIT_RUNTIME = 1, HUB_EXIT_USAGE = 2, HUB_EXIT_INTERRUPTED = 130 };

/* An error: one line for the user; interrupted when Ctrl-C stopped the work. */
typedef struct hub_err {
    char msg[HUB_MSG_MAX];
    bool interrupted;
} hub_err;
int hub_fail(hub_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3))); /* returns -1 */

/* Where and how: from the environment (HF_ENDPOINT, HF_HUB_CACHE, HF_HOME, HF_TOKEN, ...). */
typedef struct hub_env {
    char endpoint[512];      /* no trailing '/' */
    char cache[HUB_PATH_MAX]; /* the hub cache: .../hub */
    char token[512];         /* "" when none */
    bool offline;            /* HF_HUB_OFFLINE=1 */
    bool tty;                /* stderr is a terminal: a progress bar */
    bool quiet;
} hub_env;
/* token_arg: --token, or NULL. Fails only on a path too long. */
int hub_env_load(hub_env *env, const char *token_arg, hub_err *e);

/* REPO[:QUANT][@REVISION] */
typedef struct hub_ref {
    char repo[200];     /* ORG/NAME */
    char quant[64];     /* "" when none given */
    char revision[200]; /* "main" when none given */
} hub_ref;
int hub_ref_parse(const char *s, hub_ref *r, hub_err *e);
/* Whether s has the shape ORG/NAME (nothing else: no quant, no revision). */
bool hub_is_repo_id(const char *s);

/* ---- the cache: HUB/models--ORG--NAME/{blobs,snapshots/COMMIT,refs/REV} ---- */
void hub_repo_dir(const hub_env *env, const char *repo, char out[HUB_PATH_MAX]);
/* The commit a revision names in the cache (refs/REV, or REV itself when it is a commit hash
 * with a snapshot folder); 0 and commit[41], or -1 when the cache has none. */
int hub_cache_commit(const hub_env *env, const hub_ref *r, char commit[41]);
int hub_mkdirs(const char *path, hub_err *e); /* mkdir -p */
bool hub_is_hex(const char *s, size_t n);
/* Whether a repository's relative file path is safe to write under a snapshot folder. */
bool hub_safe_relpath(const char *p);

/* ---- a repository's files ---- */
typedef struct hub_file {
    char *path;        /* in the repository */
    int64_t size;      /* bytes (the LFS object's for LFS files) */
    char blob[65];     /* the blob's name: the LFS sha256, or the git blob id */
    bool lfs;          /* blob is a sha256 to check */
} hub_file;
typedef struct hub_listing {
    hub_file *files;
    size_t n, cap;
} hub_listing;
void hub_listing_free(hub_listing *l);
int hub_listing_add(hub_listing *l, const char *path, int64_t size, const char *blob, bool lfs, hub_err *e);
const hub_file *hub_listing_find(const hub_listing *l, const char *path);

/* What to fetch: the kind of repository and the names chosen. */
typedef enum { HUB_KIND_NONE, HUB_KIND_SAFETENSORS, HUB_KIND_GGUF } hub_kind;
typedef struct hub_pick {
    hub_kind kind;
    char **names;
    size_t n;
    char gguf[HUB_PATH_MAX]; /* the GGUF file chosen (first part of a split one), "" otherwise */
    char mmproj[HUB_PATH_MAX];
    char quant_used[64];
} hub_pick;
void hub_pick_free(hub_pick *p);
/* Choose from names[0..n) (a repository's files). includes/excludes: fnmatch globs (NULL-ended
 * arrays, NULL for none); with includes, only what they match. The shards of a safetensors
 * index are added by the caller once the index is read (hub_index_shards). */
int hub_pick_files(const char *const *names, size_t n, const char *repo, const char *quant,
                   const char *const *includes, const char *const *excludes, hub_pick *p, hub_err *e);
int hub_pick_add(hub_pick *p, const char *name, hub_err *e);
bool hub_pick_has(const hub_pick *p, const char *name);
/* The shard names of model.safetensors.index.json at path, added to p. */
int hub_index_shards(const char *index_path, hub_pick *p, hub_err *e);

/* ---- the cached snapshot a command runs ---- */
/* The path -m takes for a cached repository: its snapshot folder (safetensors) or the chosen
 * GGUF file; mmproj (NULL allowed) the GGUF's vision tower file when the snapshot has one, else
 * "". 0, or -1 with e set when the cache lacks it or it is incomplete (*missing set to true
 * then, when the cache has part of it). */
int hub_cached_model(const hub_env *env, const hub_ref *r, char out[HUB_PATH_MAX], char mmproj[HUB_PATH_MAX],
                     bool *missing, hub_err *e);

/* ---- HTTP ---- */
extern atomic_int hub_stop; /* set by SIGINT: transfers end, partial files stay for a resume */
void hub_catch_sigint(void);
void hub_http_global_init(void);
/* GET url (JSON, at most 64 MiB) into *body (owned: free; NUL-terminated). what names the
 * request in messages ("repository Qwen/X", "revision main of Qwen/X"). */
int hub_http_get(const hub_env *env, const char *url, const char *repo, const char *what, char **body, size_t *len,
                 hub_err *e);
/* Download url into part_path (resuming what it holds), checking size and, with sha256 (hex),
 * the digest; on success part_path holds the whole file (the caller renames it). progress
 * (may be NULL) is added the bytes as they arrive. */
int hub_http_download(const hub_env *env, const char *url, const char *repo, const char *file, const char *part_path,
                      int64_t size, const char *sha256, atomic_llong *progress, hub_err *e);
/* url-encode s into out ('/' kept when keep_slash). */
void hub_url_escape(const char *s, bool keep_slash, char *out, size_t cap);

/* ---- fetching ---- */
typedef struct hub_pull_opts {
    const char *const *includes;
    const char *const *excludes;
    bool dry_run;
    const char *label; /* "qhx pull" or "qhx generate", for the lines on stderr */
} hub_pull_opts;
/* Fetch what the cache lacks of r; out: the path -m takes. */
int hub_pull(const hub_env *env, const hub_ref *r, const hub_pull_opts *o, char out[HUB_PATH_MAX], hub_err *e);

/* ---- ollama ---- */
/* OLLAMA_MODELS or ~/.ollama/models */
void hub_ollama_root(char out[HUB_PATH_MAX]);
/* "NAME[:TAG]" (NAME may be NS/NAME or HOST/NS/NAME) -> the model blob and projector blob
 * ("" when none). */
int hub_ollama_resolve(const char *ref, char model[HUB_PATH_MAX], char projector[HUB_PATH_MAX], hub_err *e);

/* snprintf for display text that may be cut short (a name in a table, a path in a message). */
int hub_fmt(char *dst, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- sizes for people ---- */
void hub_human_bytes(double b, char *out, size_t cap);

#endif
