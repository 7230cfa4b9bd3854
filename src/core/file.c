/* core/file: mmap and bounded reads. */
#include "core/file.h"
#include "core/json_scan.h"

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
    return qhx_file_load(path, QHX_FILE_SMALL_READ, map, err);
}

#define HUGE_ALIGN ((size_t)2 << 20)
#define READ_STEP ((size_t)64 << 20) /* bytes per read() call */

/* An anonymous read-write region of at least `size` bytes starting on a 2 MiB boundary; *span
 * gets its length. NULL on failure. */
static void *anon_huge(size_t size, size_t *span) {
    size_t want = (size + HUGE_ALIGN - 1) & ~(HUGE_ALIGN - 1);
    if (want < size || want + HUGE_ALIGN < want) return NULL;
    uint8_t *p = mmap(NULL, want + HUGE_ALIGN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    uintptr_t a = ((uintptr_t)p + HUGE_ALIGN - 1) & ~(uintptr_t)(HUGE_ALIGN - 1);
    size_t head = (size_t)(a - (uintptr_t)p), tail = HUGE_ALIGN - head;
    if (head) munmap(p, head);
    if (tail) munmap((uint8_t *)a + want, tail);
#ifdef MADV_HUGEPAGE
    if (size >= HUGE_ALIGN) madvise((void *)a, want, MADV_HUGEPAGE); /* advisory: fine if refused */
#endif
    *span = want;
    return (void *)a;
}

qhx_status qhx_file_anon(size_t size, qhx_file_map *map, qhx_error *err) {
    memset(map, 0, sizeof *map);
    size_t span = 0;
    uint8_t *buf = size ? anon_huge(size, &span) : NULL;
    if (size && !buf) return qhx_fail(err, QHX_E_NOMEM, "cannot allocate %zu bytes of anonymous memory", size);
    map->data = buf;
    map->size = size;
    map->span = span;
    map->is_mapped = buf != NULL;
    return QHX_OK;
}

void qhx_load_progress_add(qhx_load_progress *pr, size_t bytes) {
    if (!pr) return;
    pr->done += bytes;
    if (pr->fn) pr->fn(pr->user, pr->done, pr->total);
}

static qhx_status read_into(int fd, const char *path, uint8_t *dst, size_t size, qhx_load_progress *pr,
                            qhx_error *err) {
    size_t got = 0;
    while (got < size) {
        size_t step = size - got < READ_STEP ? size - got : READ_STEP;
        ssize_t n = read(fd, dst + got, step);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return qhx_fail(err, QHX_E_IO, "%s: read failed at byte %zu: %s", path, got, strerror(errno));
        if (n == 0)
            return qhx_fail(err, QHX_E_IO, "%s: the file ended at byte %zu of the %zu it had when opened", path, got,
                            size);
        got += (size_t)n;
        qhx_load_progress_add(pr, (size_t)n);
    }
    uint8_t extra;
    ssize_t n;
    while ((n = read(fd, &extra, 1)) < 0 && errno == EINTR) {
    }
    if (n != 0) return qhx_fail(err, QHX_E_IO, "%s: the file grew past the %zu bytes it had when opened", path, size);
    return QHX_OK;
}

void qhx_file_populate(const uint8_t *p, size_t size, qhx_load_progress *pr) {
    if (!size) return;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)p & ~(page - 1), end = (uintptr_t)p + size;
    for (uintptr_t at = a; at < end; at += READ_STEP) {
        size_t step = end - at < READ_STEP ? end - at : READ_STEP;
        int done = 0;
#ifdef MADV_POPULATE_READ
        done = madvise((void *)at, step, MADV_POPULATE_READ) == 0;
#endif
        if (!done) {
            volatile uint8_t sink = 0;
            for (size_t i = 0; i < step; i += page) sink ^= *(const volatile uint8_t *)(at + i);
            (void)sink;
        }
        qhx_load_progress_add(pr, step);
    }
}

/* The share of the file's pages in the page cache (mincore over a mapping that is not touched);
 * 0 when it cannot be told. A mapping of a resident file costs no copy and no fresh memory,
 * while a read into anonymous memory pays for both (on the KVM guest of BENCHMARKS.md 13-20 s
 * for 2.9 GB, against 1.7-2.5 s mapped) to decode ~10 % faster. */
static double resident_share(int fd, size_t size) {
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0 || size == 0) return 0.0;
    size_t pages = (size + (size_t)page - 1) / (size_t)page;
    void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) return 0.0;
    unsigned char *vec = qhx_malloc(pages);
    double share = 0.0;
    if (vec && mincore(p, size, vec) == 0) {
        size_t in = 0;
        for (size_t i = 0; i < pages; i++) in += vec[i] & 1;
        share = (double)in / (double)pages;
    }
    qhx_free(vec);
    munmap(p, size);
    return share;
}

qhx_file_mode qhx_file_resolve_mode(const char *path, qhx_file_mode mode) {
    if (mode != QHX_FILE_AUTO) return mode;
    int fd = open(path, OPEN_FLAGS);
    struct stat st;
    double share = 0.0;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) share = resident_share(fd, (size_t)st.st_size);
    if (fd >= 0) close(fd);
    return share >= QHX_FILE_AUTO_RESIDENT ? QHX_FILE_MAP_POPULATE : QHX_FILE_READ;
}

qhx_status qhx_file_load(const char *path, qhx_file_mode mode, qhx_file_map *map, qhx_error *err) {
    return qhx_file_load_progress(path, mode, NULL, map, err);
}

qhx_status qhx_file_load_progress(const char *path, qhx_file_mode mode, qhx_load_progress *progress,
                                  qhx_file_map *map, qhx_error *err) {
    memset(map, 0, sizeof *map);
    int fd = open(path, OPEN_FLAGS);
    if (fd < 0) return qhx_fail_open(err, path, errno);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return qhx_fail(err, QHX_E_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return qhx_fail_not_regular(err, path, st.st_mode);
    }
    if (st.st_size == 0) {
        close(fd);
        return QHX_OK;
    }
    if ((uint64_t)st.st_size > SIZE_MAX / 2) {
        close(fd);
        return qhx_fail(err, QHX_E_LIMIT, "%s: %lld bytes cannot be addressed", path, (long long)st.st_size);
    }
    /* A mapped file that another process truncates raises SIGBUS on the next touch of a lost
     * page; a private copy cannot. Small files (tokenizer binaries, session states, goldens) are
     * therefore read, which costs no more than paging them in once. */
    if (mode == QHX_FILE_SMALL_READ) mode = (uint64_t)st.st_size <= QHX_FILE_SMALL_MAX ? QHX_FILE_READ : QHX_FILE_MAP;
    if (mode == QHX_FILE_AUTO) mode = resident_share(fd, (size_t)st.st_size) >= QHX_FILE_AUTO_RESIDENT
                                          ? QHX_FILE_MAP_POPULATE : QHX_FILE_READ;
    if (mode == QHX_FILE_READ) {
        size_t size = (size_t)st.st_size, span = 0;
        uint8_t *buf = anon_huge(size, &span);
        if (!buf) {
            close(fd);
            return qhx_fail(err, QHX_E_NOMEM, "%s: cannot allocate %zu bytes to read it into", path, size);
        }
        qhx_status rc = read_into(fd, path, buf, size, progress, err);
        close(fd);
        if (rc == QHX_OK && mprotect(buf, span, PROT_READ) != 0)
            rc = qhx_fail(err, QHX_E_IO, "%s: cannot make the buffer read-only: %s", path, strerror(errno));
        if (rc != QHX_OK) {
            munmap(buf, span);
            return rc;
        }
        map->data = buf;
        map->size = size;
        map->span = span;
        map->is_mapped = 1;
        return QHX_OK;
    }
    int flags = MAP_PRIVATE;
#ifdef MAP_POPULATE
    if (mode == QHX_FILE_MAP_POPULATE && !progress) flags |= MAP_POPULATE;
#endif
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, flags, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) return qhx_fail(err, QHX_E_IO, "%s: cannot map: %s", path, strerror(e));
    if (mode == QHX_FILE_MAP_POPULATE && progress) qhx_file_populate(p, (size_t)st.st_size, progress);
    map->data = p;
    map->size = (size_t)st.st_size;
    map->is_mapped = 1;
    return QHX_OK;
}

void qhx_file_map_close(qhx_file_map *map) {
    if (!map) return;
    if (map->is_mapped && map->data) munmap((void *)map->data, map->span > map->size ? map->span : map->size);
    memset(map, 0, sizeof *map);
}

qhx_status qhx_file_read_all(const char *path, size_t max_bytes, char **out, size_t *out_len,
                             qhx_error *err) {
    *out = NULL;
    *out_len = 0;
    int fd = open(path, OPEN_FLAGS);
    if (fd < 0) return qhx_fail_open(err, path, errno);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return qhx_fail(err, QHX_E_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return qhx_fail_not_regular(err, path, st.st_mode);
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

const char *qhx_file_kind(unsigned mode) {
    if (S_ISDIR(mode)) return "a folder";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISLNK(mode)) return "a symbolic link";
    return "not a file";
}

qhx_status qhx_fail_not_regular(qhx_error *err, const char *path, unsigned mode) {
    return qhx_fail(err, QHX_E_IO, "%s: not a regular file (%s)", path, qhx_file_kind(mode));
}

qhx_status qhx_fail_open(qhx_error *err, const char *path, int e) {
    struct stat st; /* a socket cannot be opened (ENXIO): say what it is */
    if (e == ENXIO && stat(path, &st) == 0 && !S_ISREG(st.st_mode)) return qhx_fail_not_regular(err, path, st.st_mode);
    return qhx_fail(err, QHX_E_IO, "%s: cannot open: %s", path, strerror(e));
}

qhx_status qhx_text_check_utf8(const char *path, const char *text, size_t len, qhx_error *err) {
    const uint8_t *s = (const uint8_t *)text;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        int k = s[i] ? qhx_utf8_next(s + i, len - i, &cp) : 0;
        if (!k)
            return s[i] ? qhx_fail(err, QHX_E_FORMAT, "%s: byte %zu (0x%02X) is not well-formed UTF-8 (expected UTF-8 text)",
                                   path, i, s[i])
                        : qhx_fail(err, QHX_E_FORMAT, "%s: byte %zu is a NUL (expected UTF-8 text)", path, i);
        i += (size_t)k;
    }
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

void qhx_file_release(const void *p, size_t size) {
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)p + page - 1) & ~(page - 1), b = ((uintptr_t)p + size) & ~(page - 1);
    if (page > 0 && b > a) madvise((void *)a, (size_t)(b - a), MADV_DONTNEED);
}
