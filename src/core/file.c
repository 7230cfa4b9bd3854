/* core/file: mmap and bounded reads. */
#include "core/file.h"

#include "core/alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* O_NONBLOCK: opening a FIFO (or a device) named as an input must not wait for a writer; the
 * regular-file check that follows refuses it. Reads of regular files ignore the flag. */
#define OPEN_FLAGS (O_RDONLY | O_CLOEXEC | O_NONBLOCK)

qhx_status qhx_file_map_open(const char *path, qhx_file_map *map, qhx_error *err) {
    memset(map, 0, sizeof *map);
    int fd = open(path, OPEN_FLAGS);
    if (fd < 0) return qhx_fail(err, QHX_E_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return qhx_fail(err, QHX_E_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return qhx_fail(err, QHX_E_IO, "%s: not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return QHX_OK;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) return qhx_fail(err, QHX_E_IO, "%s: cannot map: %s", path, strerror(e));
    map->data = p;
    map->size = (size_t)st.st_size;
    map->is_mapped = 1;
    return QHX_OK;
}

void qhx_file_map_close(qhx_file_map *map) {
    if (!map) return;
    if (map->is_mapped && map->data) munmap((void *)map->data, map->size);
    memset(map, 0, sizeof *map);
}

qhx_status qhx_file_read_all(const char *path, size_t max_bytes, char **out, size_t *out_len,
                             qhx_error *err) {
    *out = NULL;
    *out_len = 0;
    int fd = open(path, OPEN_FLAGS);
    if (fd < 0) return qhx_fail(err, QHX_E_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return qhx_fail(err, QHX_E_IO, "%s: not a readable regular file", path);
    }
    if ((uint64_t)st.st_size > max_bytes) {
        close(fd);
        return qhx_fail(err, QHX_E_LIMIT, "%s: file has %lld bytes, the limit is %zu", path,
                        (long long)st.st_size, max_bytes);
    }
    size_t size = (size_t)st.st_size;
    char *buf = qhx_malloc(size + 1);
    if (!buf) {
        close(fd);
        return qhx_fail(err, QHX_E_NOMEM, "%s: cannot allocate %zu bytes", path, size + 1);
    }
    size_t got = 0;
    while (got < size) {
        ssize_t n = read(fd, buf + got, size - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            int e = errno;
            close(fd);
            qhx_free(buf);
            return qhx_fail(err, QHX_E_IO, "%s: read failed at byte %zu: %s", path, got,
                            n == 0 ? "unexpected end of file" : strerror(e));
        }
        got += (size_t)n;
    }
    close(fd);
    buf[size] = '\0';
    *out = buf;
    *out_len = size;
    return QHX_OK;
}

int qhx_path_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int qhx_path_is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

char *qhx_path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    int slash = a > 0 && dir[a - 1] != '/';
    char *s = qhx_malloc(a + (size_t)slash + b + 1);
    if (!s) return NULL;
    memcpy(s, dir, a);
    if (slash) s[a] = '/';
    memcpy(s + a + slash, name, b + 1);
    return s;
}
