/* hub_pull.c: fetch what the cache lacks of a repository, into the layout huggingface_hub uses:
 * blobs/NAME (NAME: the LFS sha256, or the git blob id of a small file), snapshots/COMMIT/PATH
 * a relative link to its blob, refs/REVISION holding the commit. A blob is written as
 * blobs/NAME.incomplete (the name huggingface_hub resumes too) under the lock file
 * huggingface_hub takes (.locks/models--ORG--NAME/NAME.lock), and renamed into place only once
 * its size and sha256 are right. A few files are fetched at a time (one thread each). */
#include "hub_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

enum { MAX_WORKERS = 4 };

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The commit a revision names now, from /api/models/REPO/revision/REV. */
static int resolve_commit(const hub_env *env, const hub_ref *r, char commit[41], hub_err *e) {
    char rev[600], url[1400], what[300];
    hub_url_escape(r->revision, false, rev, sizeof rev);
    snprintf(url, sizeof url, "%s/api/models/%s/revision/%s", env->endpoint, r->repo, rev);
    snprintf(what, sizeof what, "%s", r->revision);
    char *body;
    size_t len;
    if (hub_http_get(env, url, r->repo, what, &body, &len, e)) return -1;
    json_t *j = json_loadb(body, len, 0, NULL);
    free(body);
    const char *sha = j ? json_string_value(json_object_get(j, "sha")) : NULL;
    int rc = 0;
    if (!sha || !hub_is_hex(sha, 40)) rc = hub_fail(e, "%s: the hub's answer for revision %s has no commit (\"sha\")", r->repo, r->revision);
    else memcpy(commit, sha, 41);
    json_decref(j);
    return rc;
}

/* Every file of the commit, from /api/models/REPO/tree/COMMIT?recursive=true. */
static int list_tree(const hub_env *env, const hub_ref *r, const char *commit, hub_listing *l, hub_err *e) {
    char url[1400];
    snprintf(url, sizeof url, "%s/api/models/%s/tree/%s?recursive=true&expand=false", env->endpoint, r->repo, commit);
    char *body;
    size_t len;
    if (hub_http_get(env, url, r->repo, r->revision, &body, &len, e)) return -1;
    json_error_t je;
    json_t *j = json_loadb(body, len, 0, &je);
    free(body);
    if (!json_is_array(j)) {
        json_decref(j);
        return hub_fail(e, "%s: the hub's file listing is not a JSON array", r->repo);
    }
    size_t i;
    json_t *it;
    int rc = 0;
    json_array_foreach(j, i, it) {
        if (rc) break;
        const char *type = json_string_value(json_object_get(it, "type"));
        if (!type || strcmp(type, "file")) continue;
        const char *path = json_string_value(json_object_get(it, "path"));
        const char *oid = json_string_value(json_object_get(it, "oid"));
        json_t *lfs = json_object_get(it, "lfs");
        const char *sha = lfs ? json_string_value(json_object_get(lfs, "oid")) : NULL;
        json_int_t size = json_integer_value(json_object_get(lfs ? lfs : it, "size"));
        if (!path || !hub_safe_relpath(path)) {
            rc = hub_fail(e, "%s: the hub listed a file with an unsafe path ('%.80s')", r->repo, path ? path : "");
        } else if (lfs ? !sha || !hub_is_hex(sha, 64) : !oid || !hub_is_hex(oid, 40)) {
            rc = hub_fail(e, "%s: the hub listed %s without a valid %s", r->repo, path, lfs ? "LFS sha256" : "blob id");
        } else if (size < 0) {
            rc = hub_fail(e, "%s: the hub listed %s with a negative size", r->repo, path);
        } else {
            rc = hub_listing_add(l, path, (int64_t)size, lfs ? sha : oid, lfs != NULL, e);
        }
    }
    json_decref(j);
    return rc;
}

/* ---- a few files at a time ---- */
typedef struct job {
    const hub_env *env;
    const hub_ref *r;
    const char *commit;
    const char *dir; /* models--ORG--NAME */
    const char *label;
    const hub_file **files;
    size_t n;
    atomic_size_t next;
    atomic_llong bytes;   /* arrived (resumed bytes count as arrived) */
    atomic_int done;
    pthread_mutex_t lock; /* the first error, lines on stderr */
    hub_err err;
    bool failed;
} job;

static void job_error(job *j, const hub_err *e) {
    pthread_mutex_lock(&j->lock);
    if (!j->failed) {
        j->failed = true;
        j->err = *e;
    }
    pthread_mutex_unlock(&j->lock);
    atomic_store(&hub_stop, 2); /* the other transfers stop too (2: not the user's Ctrl-C) */
}

static int link_snapshot(const job *j, const hub_file *f, hub_err *e) {
    char link[HUB_PATH_MAX * 2], target[HUB_PATH_MAX], folder[HUB_PATH_MAX * 2];
    snprintf(link, sizeof link, "%s/snapshots/%s/%s", j->dir, j->commit, f->path);
    snprintf(folder, sizeof folder, "%s", link);
    *strrchr(folder, '/') = '\0';
    if (hub_mkdirs(folder, e)) return -1;
    size_t k = (size_t)snprintf(target, sizeof target, "../../");
    for (const char *c = f->path; *c; c++)
        if (*c == '/') k += (size_t)snprintf(target + k, sizeof target - k, "../");
    snprintf(target + k, sizeof target - k, "blobs/%s", f->blob);
    char old[HUB_PATH_MAX];
    ssize_t n = readlink(link, old, sizeof old - 1);
    if (n >= 0) {
        old[n] = '\0';
        if (!strcmp(old, target)) return 0;
    }
    unlink(link);
    if (symlink(target, link)) return hub_fail(e, "%s: cannot link it to its blob: %s", link, strerror(errno));
    return 0;
}

static bool blob_ready(const char *blob, int64_t size) {
    struct stat st;
    return !stat(blob, &st) && S_ISREG(st.st_mode) && st.st_size == size;
}

static int fetch_one(job *j, const hub_file *f, hub_err *e) {
    char blob[HUB_PATH_MAX * 2], part[HUB_PATH_MAX * 2 + 16], lockp[HUB_PATH_MAX * 2], url[4096], esc[2400];
    snprintf(blob, sizeof blob, "%s/blobs/%s", j->dir, f->blob);
    const char *repo_folder = strrchr(j->dir, '/') + 1;
    snprintf(lockp, sizeof lockp, "%s/.locks/%s", j->env->cache, repo_folder);
    if (hub_mkdirs(lockp, e)) return -1;
    snprintf(lockp + strlen(lockp), sizeof lockp - strlen(lockp), "/%s.lock", f->blob);
    int lfd = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lfd < 0) return hub_fail(e, "%s: %s", lockp, strerror(errno));
    while (flock(lfd, LOCK_EX | LOCK_NB)) { /* another process fetches this blob: wait for it */
        if (atomic_load(&hub_stop)) {
            close(lfd);
            e->interrupted = atomic_load(&hub_stop) == 1;
            return hub_fail(e, "%s: stopped while waiting for %s", j->r->repo, lockp);
        }
        usleep(100000);
    }
    int rc = 0;
    if (!blob_ready(blob, f->size)) {
        snprintf(part, sizeof part, "%s.incomplete", blob);
        hub_url_escape(f->path, true, esc, sizeof esc);
        snprintf(url, sizeof url, "%s/%s/resolve/%s/%s", j->env->endpoint, j->r->repo, j->commit, esc);
        rc = hub_http_download(j->env, url, j->r->repo, f->path, part, f->size, f->lfs ? f->blob : NULL, &j->bytes, e);
        if (!rc && rename(part, blob)) rc = hub_fail(e, "%s: cannot rename it into place: %s", part, strerror(errno));
    } else {
        atomic_fetch_add(&j->bytes, (long long)f->size);
    }
    flock(lfd, LOCK_UN);
    close(lfd);
    if (!rc) rc = link_snapshot(j, f, e);
    if (!rc && !j->env->tty && !j->env->quiet) {
        char sz[32];
        hub_human_bytes((double)f->size, sz, sizeof sz);
        pthread_mutex_lock(&j->lock);
        fprintf(stderr, "%s: %s: %s (%s) ok\n", j->label, j->r->repo, f->path, sz);
        pthread_mutex_unlock(&j->lock);
    }
    return rc;
}

static void *worker(void *arg) {
    job *j = arg;
    for (;;) {
        size_t i = atomic_fetch_add(&j->next, 1);
        if (i >= j->n || atomic_load(&hub_stop)) break;
        hub_err e = {0};
        if (fetch_one(j, j->files[i], &e)) {
            if (atomic_load(&hub_stop) == 1) e.interrupted = true;
            job_error(j, &e);
            break;
        }
    }
    atomic_fetch_add(&j->done, 1);
    return NULL;
}

static void draw_bar(const job *j, long long total, double t0, long long base, bool last) {
    long long got = atomic_load(&j->bytes);
    double dt = now_s() - t0, rate = dt > 0.2 ? (double)(got - base) / dt : 0;
    char a[32], b[32], rs[32], eta[32] = "";
    hub_human_bytes((double)got, a, sizeof a);
    hub_human_bytes((double)total, b, sizeof b);
    hub_human_bytes(rate, rs, sizeof rs);
    if (rate > 0 && got < total) {
        double left = (double)(total - got) / rate;
        snprintf(eta, sizeof eta, ", %dm%02ds left", (int)(left / 60), (int)left % 60);
    }
    int pct = total > 0 ? (int)(100.0 * (double)got / (double)total) : 100, w = 24, fill = pct * w / 100;
    char bar[32];
    for (int i = 0; i < w; i++) bar[i] = i < fill ? '#' : '.';
    bar[w] = '\0';
    fprintf(stderr, "\r%s: [%s] %3d%% %s / %s, %s/s%s   %s", j->label, bar, pct, a, b, rs, eta, last ? "\n" : "");
    fflush(stderr);
}

/* Fail early when the disk cannot hold what is still to come. */
static int check_space(const char *dir, const hub_file *const *files, size_t n, hub_err *e) {
    long long need = 0;
    for (size_t i = 0; i < n; i++) {
        char part[HUB_PATH_MAX * 2 + 96];
        struct stat st;
        snprintf(part, sizeof part, "%s/blobs/%s", dir, files[i]->blob);
        if (!stat(part, &st)) continue;
        strcat(part, ".incomplete");
        need += files[i]->size - (!stat(part, &st) && st.st_size <= files[i]->size ? st.st_size : 0);
    }
    char blobs[HUB_PATH_MAX + 16];
    snprintf(blobs, sizeof blobs, "%s/blobs", dir);
    struct statvfs vf;
    if (!statvfs(blobs, &vf) && (double)vf.f_bavail * (double)vf.f_frsize < (double)need) {
        char a[32], b[32];
        hub_human_bytes((double)need, a, sizeof a);
        hub_human_bytes((double)vf.f_bavail * (double)vf.f_frsize, b, sizeof b);
        return hub_fail(e, "%s: the disk is full: the files need %s, %s is free; free some space (or set HF_HUB_CACHE) and run the same command again",
                        blobs, a, b);
    }
    return 0;
}

static int fetch_set(const hub_env *env, const hub_ref *r, const char *dir, const char *commit, const char *label,
                     const hub_file **files, size_t n, hub_err *e) {
    if (!n) return 0;
    if (check_space(dir, files, n, e)) return -1;
    job j = {.env = env, .r = r, .commit = commit, .dir = dir, .label = label, .files = files, .n = n};
    pthread_mutex_init(&j.lock, NULL);
    long long total = 0;
    for (size_t i = 0; i < n; i++) total += files[i]->size;
    int nw = n < MAX_WORKERS ? (int)n : MAX_WORKERS;
    pthread_t th[MAX_WORKERS];
    int started = 0;
    for (; started < nw; started++)
        if (pthread_create(&th[started], NULL, worker, &j)) break;
    if (!started) worker(&j);
    double t0 = now_s(), last = 0;
    long long base = -1;
    while (atomic_load(&j.done) < (started ? started : 1)) {
        usleep(50000);
        if (base < 0) base = atomic_load(&j.bytes); /* resumed bytes do not count toward the rate */
        if (env->tty && !env->quiet && now_s() - last > 0.25) {
            draw_bar(&j, total, t0, base, false);
            last = now_s();
        }
    }
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    if (env->tty && !env->quiet) draw_bar(&j, total, t0, base < 0 ? 0 : base, true);
    pthread_mutex_destroy(&j.lock);
    if (j.failed) {
        *e = j.err;
        return -1;
    }
    return 0;
}

static int write_ref(const char *dir, const hub_ref *r, const char *commit, hub_err *e) {
    if (!strcmp(r->revision, commit)) return 0;
    char path[HUB_PATH_MAX + 256], tmp[HUB_PATH_MAX + 300], folder[HUB_PATH_MAX + 256];
    snprintf(path, sizeof path, "%s/refs/%s", dir, r->revision);
    snprintf(folder, sizeof folder, "%s", path);
    *strrchr(folder, '/') = '\0';
    if (hub_mkdirs(folder, e)) return -1;
    snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return hub_fail(e, "%s: %s", tmp, strerror(errno));
    int bad = fputs(commit, f) < 0; /* no newline, as huggingface_hub writes it */
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path)) {
        unlink(tmp);
        return hub_fail(e, "%s: cannot write the revision's commit", path);
    }
    return 0;
}

/* The files of the listing that p names, in p's order. */
static int gather(const hub_listing *l, const hub_pick *p, size_t from, const hub_file ***out, size_t *n, hub_err *e) {
    *out = calloc(p->n ? p->n : 1, sizeof **out);
    if (!*out) return hub_fail(e, "out of memory");
    *n = 0;
    for (size_t i = from; i < p->n; i++) {
        const hub_file *f = hub_listing_find(l, p->names[i]);
        if (!f) return hub_fail(e, "the repository has no file '%s' (its index names it)", p->names[i]);
        (*out)[(*n)++] = f;
    }
    return 0;
}

static void print_plan(const hub_ref *r, const char *commit, const hub_listing *l, const hub_pick *p) {
    printf("%s %s\n", r->repo, commit);
    for (size_t i = 0; i < p->n; i++) {
        const hub_file *f = hub_listing_find(l, p->names[i]);
        printf("%s\t%lld\n", p->names[i], f ? (long long)f->size : -1LL);
    }
}

int hub_pull(const hub_env *env, const hub_ref *r, const hub_pull_opts *o, char out[HUB_PATH_MAX], hub_err *e) {
    if (env->offline) {
        bool missing;
        hub_err why = {0};
        if (!hub_cached_model(env, r, out, NULL, &missing, &why)) return 0;
        return hub_fail(e, "%s; HF_HUB_OFFLINE=1 runs from the cache only: unset it to fetch the files", why.msg);
    }
    char dir[HUB_PATH_MAX], commit[41];
    hub_repo_dir(env, r->repo, dir);
    if (resolve_commit(env, r, commit, e)) return -1;
    hub_listing l = {0};
    hub_pick p = {0};
    const hub_file **files = NULL;
    int rc = -1;
    if (list_tree(env, r, commit, &l, e)) goto out;
    const char **names = calloc(l.n ? l.n : 1, sizeof *names);
    if (!names) {
        hub_fail(e, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < l.n; i++) names[i] = l.files[i].path;
    int pr = hub_pick_files(names, l.n, r->repo, r->quant, o->includes, o->excludes, &p, e);
    free(names);
    if (pr) goto out;
    if (o->dry_run) {
        print_plan(r, commit, &l, &p);
        rc = 0;
        goto out;
    }
    char blobs[HUB_PATH_MAX + 16];
    snprintf(blobs, sizeof blobs, "%s/blobs", dir);
    if (hub_mkdirs(blobs, e)) goto out;
    size_t n, first = p.n;
    if (gather(&l, &p, 0, &files, &n, e) || fetch_set(env, r, dir, commit, o->label, files, n, e)) goto out;
    if (p.kind == HUB_KIND_SAFETENSORS && hub_pick_has(&p, "model.safetensors.index.json") && !(o->includes && *o->includes)) {
        char idx[HUB_PATH_MAX + 128];
        snprintf(idx, sizeof idx, "%s/snapshots/%s/model.safetensors.index.json", dir, commit);
        if (hub_index_shards(idx, &p, e)) goto out;
        free(files);
        files = NULL;
        if (gather(&l, &p, first, &files, &n, e) || fetch_set(env, r, dir, commit, o->label, files, n, e)) goto out;
    }
    if (write_ref(dir, r, commit, e)) goto out;
    if (p.kind == HUB_KIND_GGUF && p.gguf[0]) hub_fmt(out, HUB_PATH_MAX, "%s/snapshots/%s/%s", dir, commit, p.gguf);
    else hub_fmt(out, HUB_PATH_MAX, "%s/snapshots/%s", dir, commit);
    rc = 0;
out:
    free(files);
    hub_pick_free(&p);
    hub_listing_free(&l);
    return rc;
}
