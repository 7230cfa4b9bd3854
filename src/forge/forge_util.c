/* forge_util: the staging folder (build in OUT_DIR.tmp-XXXXXX, rename when complete), disk space,
 * progress/cancel plumbing, JSON and file output, page release of mapped inputs. */
#include "forge/forge_internal.h"

#include "core/alloc.h"
#include "core/file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

uint64_t forge_tensor_key(uint64_t seed, const char *name) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a of the name, then mixed with the seed */
    for (const unsigned char *s = (const unsigned char *)name; *s; s++) h = (h ^ *s) * 0x100000001b3ull;
    return forge_bits(h, seed);
}

// ---- staging folder ------------------------------------------------------------------------------

/* Remove a flat folder of files (the stage never has subfolders). Allocates nothing: it runs
 * on the way out of failures, out-of-memory ones included. */
static void remove_flat_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            unlinkat(dirfd(d), e->d_name, 0);
        }
        closedir(d);
    }
    rmdir(dir);
}

qhx_status forge_job_begin(forge_job *j, const char *out_dir, const qhx_forge_params *p, qhx_error *err) {
    memset(j, 0, sizeof *j);
    j->p = p;
    size_t n = strlen(out_dir);
    while (n > 1 && out_dir[n - 1] == '/') n--; /* "out/" and "out" are the same folder */
    if (n == 0) return qhx_fail(err, QHX_E_ARG, "empty output folder name");
    struct stat st;
    j->out_dir = qhx_strndup(out_dir, n);
    if (!j->out_dir) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    if (lstat(j->out_dir, &st) == 0)
        return qhx_fail(err, QHX_E_IO, "%s: already exists; remove it or choose another output folder", j->out_dir);
    j->tmp_dir = qhx_malloc(n + 16);
    if (!j->tmp_dir) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    snprintf(j->tmp_dir, n + 16, "%s.tmp-XXXXXX", j->out_dir);
    if (!mkdtemp(j->tmp_dir)) {
        int e = errno;
        qhx_free(j->tmp_dir);
        j->tmp_dir = NULL;
        return qhx_fail(err, QHX_E_IO, "%s: cannot create a staging folder beside it: %s", j->out_dir, strerror(e));
    }
    mode_t mask = umask(0);
    umask(mask);
    chmod(j->tmp_dir, 0777 & ~mask);
    if (p->staging) p->staging(p->user, j->tmp_dir);
    return QHX_OK;
}

qhx_status forge_job_commit(forge_job *j, qhx_error *err) {
    if (rename(j->tmp_dir, j->out_dir) != 0)
        return qhx_fail(err, QHX_E_IO, "%s: cannot move the finished bundle into place: %s", j->out_dir, strerror(errno));
    qhx_free(j->tmp_dir);
    j->tmp_dir = NULL;
    if (j->p->staging) j->p->staging(j->p->user, NULL);
    return QHX_OK;
}

/* Replace every mention of the staging folder in err's message by the output folder: the user
 * named OUT_DIR, and the staging folder is gone once the job ends. */
static void name_out_dir(const forge_job *j, qhx_error *err) {
    if (!err || !j->tmp_dir || !j->out_dir) return;
    char msg[sizeof err->msg];
    const size_t nt = strlen(j->tmp_dir), no = strlen(j->out_dir);
    size_t at = 0;
    for (const char *s = err->msg; *s && at + 1 < sizeof msg;) {
        if (!strncmp(s, j->tmp_dir, nt)) {
            size_t k = no < sizeof msg - 1 - at ? no : sizeof msg - 1 - at;
            memcpy(msg + at, j->out_dir, k);
            at += k;
            s += nt;
        } else {
            msg[at++] = *s++;
        }
    }
    msg[at] = 0;
    memcpy(err->msg, msg, at + 1);
}

void forge_job_end(forge_job *j, qhx_error *err) {
    name_out_dir(j, err);
    if (j->tmp_dir) remove_flat_dir(j->tmp_dir);
    if (j->tmp_dir && j->p && j->p->staging) j->p->staging(j->p->user, NULL);
    qhx_free(j->tmp_dir);
    qhx_free(j->out_dir);
    j->tmp_dir = j->out_dir = NULL;
}

char *forge_job_path(const forge_job *j, const char *name) { return qhx_path_join(j->tmp_dir, name); }

qhx_status forge_job_check_space(const forge_job *j, uint64_t need, qhx_error *err) {
    struct statvfs vs;
    if (statvfs(j->tmp_dir, &vs) != 0) return QHX_OK; /* unknown: let the writes tell */
    uint64_t avail = (uint64_t)vs.f_bavail * (uint64_t)vs.f_frsize;
    uint64_t margin = need / 100 + ((uint64_t)16 << 20);
    if (avail < need + margin)
        return qhx_fail(err, QHX_E_IO, "%s: needs %.2f GB of free disk space, %.2f GB available", j->out_dir,
                        (double)(need + margin) / 1e9, (double)avail / 1e9);
    return QHX_OK;
}

qhx_status forge_job_tick(forge_job *j, uint64_t bytes, qhx_error *err) {
    j->done += bytes;
    if (j->p->progress) j->p->progress(j->p->user, j->done, j->total);
    if (j->p->cancel && j->p->cancel(j->p->user)) return qhx_fail(err, QHX_E_ABORTED, "%s: interrupted", j->out_dir);
    return QHX_OK;
}

void forge_job_log(const forge_job *j, const char *fmt, ...) {
    if (!j->p->log) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    j->p->log(j->p->user, line);
}

// ---- output --------------------------------------------------------------------------------------

qhx_status forge_write_json(const forge_job *j, const char *name, json_t *doc, qhx_error *err) {
    char *path = forge_job_path(j, name);
    if (!doc || !path) { /* doc is ours either way: released here too */
        qhx_free(path);
        json_decref(doc);
        return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", name);
    }
    FILE *f = fopen(path, "w");
    qhx_status rc = QHX_OK;
    if (!f) {
        rc = qhx_fail(err, QHX_E_IO, "%s: cannot create: %s", path, strerror(errno));
    } else {
        int bad = json_dumpf(doc, f, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15)) != 0;
        bad |= fputc('\n', f) == EOF;
        bad |= fclose(f) != 0;
        if (bad) rc = qhx_fail(err, QHX_E_IO, "%s: write failed: %s", path, strerror(errno));
    }
    qhx_free(path);
    json_decref(doc);
    return rc;
}

qhx_status forge_copy_file(const forge_job *j, const char *src, const char *name, qhx_error *err) {
    char *dst = forge_job_path(j, name);
    if (!dst) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    qhx_status rc = QHX_OK;
    int in = open(src, O_RDONLY | O_CLOEXEC), out = -1;
    if (in < 0) {
        rc = qhx_fail(err, QHX_E_IO, "%s: cannot open: %s", src, strerror(errno));
        goto done;
    }
    out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (out < 0) {
        rc = qhx_fail(err, QHX_E_IO, "%s: cannot create: %s", dst, strerror(errno));
        goto done;
    }
    char buf[1 << 16];
    for (;;) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            rc = qhx_fail(err, QHX_E_IO, "%s: read failed: %s", src, strerror(errno));
            goto done;
        }
        if (n == 0) break;
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(out, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR) continue;
            if (w < 0) {
                rc = qhx_fail(err, QHX_E_IO, "%s: write failed: %s", dst, strerror(errno));
                goto done;
            }
            off += w;
        }
    }
done:
    if (in >= 0) close(in);
    if (out >= 0 && close(out) != 0 && rc == QHX_OK)
        rc = qhx_fail(err, QHX_E_IO, "%s: write failed: %s", dst, strerror(errno));
    qhx_free(dst);
    return rc;
}

void forge_release_pages(const void *p, size_t n) {
    long ps = sysconf(_SC_PAGESIZE);
    if (ps <= 0 || !p || !n) return;
    uintptr_t a = ((uintptr_t)p + (uintptr_t)ps - 1) & ~((uintptr_t)ps - 1);
    uintptr_t b = ((uintptr_t)p + n) & ~((uintptr_t)ps - 1);
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}
