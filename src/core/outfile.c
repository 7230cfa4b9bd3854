/* core/outfile: output files that appear whole or not at all, and never replace a device, a
 * FIFO or a symbolic link (the policy is in core/file.h). */
#include "core/file.h"

#include "core/alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Open a device or a FIFO for writing in place. O_NONBLOCK first, so a FIFO nobody reads fails
 * (ENXIO) instead of blocking forever; then cleared, so writes wait for a slow reader. */
static qhx_status open_in_place(qhx_out_file *o, const char *target, qhx_error *err) {
    int fd = open(target, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0 && errno == ENXIO) return qhx_fail(err, QHX_E_IO, "%s: a FIFO with no reader", o->path);
    if (fd < 0) return qhx_fail(err, QHX_E_IO, "%s: cannot open for writing: %s", o->path, strerror(errno));
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    if (!(o->f = fdopen(fd, "wb"))) {
        close(fd);
        return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", o->path);
    }
    return QHX_OK;
}

/* A fresh temporary file beside dest, with the requested permissions. */
static qhx_status open_temp(qhx_out_file *o, unsigned mode, qhx_error *err) {
    size_t n = strlen(o->dest) + 16;
    if (!(o->tmp = qhx_malloc(n))) return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", o->path);
    snprintf(o->tmp, n, "%s.tmp-XXXXXX", o->dest);
    int fd = mkstemp(o->tmp);
    if (fd < 0) {
        qhx_status rc = qhx_fail(err, QHX_E_IO, "%s: cannot create: %s", o->path, strerror(errno));
        qhx_free(o->tmp);
        o->tmp = NULL;
        return rc;
    }
    mode_t mask = umask(0); /* mkstemp makes 0600; a public file gets the usual umask */
    umask(mask);
    if (mode != 0600) (void)fchmod(fd, (mode_t)mode & ~mask);
    if (!(o->f = fdopen(fd, "wb"))) {
        close(fd);
        unlink(o->tmp);
        qhx_free(o->tmp);
        o->tmp = NULL;
        return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", o->path);
    }
    return QHX_OK;
}

/* Where the file really goes: the path itself, or what its symbolic link points at. */
static qhx_status resolve(qhx_out_file *o, struct stat *st, int *exists, qhx_error *err) {
    *exists = 0;
    if (lstat(o->path, st) != 0) {
        if (errno != ENOENT) return qhx_fail(err, QHX_E_IO, "%s: %s", o->path, strerror(errno));
        o->dest = qhx_strndup(o->path, strlen(o->path));
        return o->dest ? QHX_OK : qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", o->path);
    }
    *exists = 1;
    if (!S_ISLNK(st->st_mode)) {
        o->dest = qhx_strndup(o->path, strlen(o->path));
        return o->dest ? QHX_OK : qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", o->path);
    }
    char *real = realpath(o->path, NULL); /* malloc'd by libc */
    if (!real || stat(real, st) != 0) {
        free(real);
        return qhx_fail(err, QHX_E_IO, "%s: a symbolic link to nothing (not followed)", o->path);
    }
    o->dest = qhx_strndup(real, strlen(real));
    free(real);
    return o->dest ? QHX_OK : qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", o->path);
}

qhx_status qhx_out_open(qhx_out_file *o, const char *path, unsigned mode, qhx_error *err) {
    memset(o, 0, sizeof *o);
    o->path = path;
    if (!path || !*path) return qhx_fail(err, QHX_E_ARG, "no output file name");
    struct stat st;
    int exists;
    qhx_status rc = resolve(o, &st, &exists, err);
    if (rc == QHX_OK && exists && S_ISDIR(st.st_mode)) rc = qhx_fail(err, QHX_E_IO, "%s: is a folder", path);
    else if (rc == QHX_OK && exists && S_ISSOCK(st.st_mode)) rc = qhx_fail(err, QHX_E_IO, "%s: is a socket", path);
    else if (rc == QHX_OK && exists && !S_ISREG(st.st_mode)) rc = open_in_place(o, o->dest, err);
    else if (rc == QHX_OK) rc = open_temp(o, mode, err);
    if (rc != QHX_OK) qhx_out_abort(o);
    o->path = path;
    return rc;
}

qhx_status qhx_out_commit(qhx_out_file *o, qhx_error *err) {
    if (!o->f) {
        qhx_out_abort(o);
        return qhx_fail(err, QHX_E_IO, "%s: not open", o->path ? o->path : "output");
    }
    errno = 0;
    int ok = !ferror(o->f) && fflush(o->f) == 0;
    int e = ok ? 0 : errno;
    if (ok && o->tmp && fsync(fileno(o->f)) != 0) {
        ok = 0;
        e = errno;
    }
    if (fclose(o->f) != 0 && ok) {
        ok = 0;
        e = errno;
    }
    o->f = NULL;
    qhx_status rc = QHX_OK;
    if (!ok) rc = qhx_fail(err, QHX_E_IO, "%s: write failed: %s", o->path, strerror(e ? e : EIO));
    else if (o->tmp && rename(o->tmp, o->dest) != 0)
        rc = qhx_fail(err, QHX_E_IO, "%s: cannot rename into place: %s", o->path, strerror(errno));
    else {
        qhx_free(o->tmp); /* in place now: nothing for abort to remove */
        o->tmp = NULL;
    }
    qhx_out_abort(o);
    return rc;
}

void qhx_out_abort(qhx_out_file *o) {
    if (o->f) fclose(o->f);
    if (o->tmp) unlink(o->tmp);
    qhx_free(o->tmp);
    qhx_free(o->dest);
    o->f = NULL;
    o->tmp = o->dest = NULL;
}
