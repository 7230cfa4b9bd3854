/* core/file: read-only file mapping and bounded whole-file reads. */
#ifndef QHX_CORE_FILE_H
#define QHX_CORE_FILE_H

#include "core/status.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* A read-only view of a whole file. Mapped (PROT_READ, MAP_PRIVATE, never written) or, for an
 * empty file, data == NULL and size == 0. The fd is closed right after mapping. */
typedef struct qhx_file_map {
    const uint8_t *data;
    size_t size;
    int is_mapped;
    size_t span; /* bytes to unmap when more than size (an anonymous buffer), else 0 */
} qhx_file_map;

/* How qhx_file_load brings a file into memory. */
typedef enum qhx_file_mode {
    QHX_FILE_MAP = 0,          /* a read-only mapping, paged in on first touch (qhx_file_map_open) */
    QHX_FILE_MAP_POPULATE = 1, /* the same, every page read and mapped up front (MAP_POPULATE) */
    QHX_FILE_READ = 2,         /* read() into anonymous memory aligned to 2 MiB, transparent huge
                                * pages requested (MADV_HUGEPAGE), then made read-only */
    QHX_FILE_SMALL_READ = 3,   /* READ up to QHX_FILE_SMALL_MAX bytes, MAP above (qhx_file_map_open) */
    QHX_FILE_AUTO = 4          /* MAP_POPULATE when the page cache already holds (nearly) all of the
                                * file, READ when it does not (QHX_WEIGHTS_DEFAULT; BENCHMARKS.md,
                                * "Weights in memory" has the figures) */
} qhx_file_mode;

/* The share of a file's pages the page cache must hold for QHX_FILE_AUTO to map it. */
#define QHX_FILE_AUTO_RESIDENT 0.95

/* Files up to this size are read rather than mapped by qhx_file_map_open, so that another process
 * truncating them cannot fault a later access (SIGBUS). */
#define QHX_FILE_SMALL_MAX ((uint64_t)256 << 20)

/* Bring `path` into memory read-only: a private copy up to QHX_FILE_SMALL_MAX bytes, a mapping
 * above. On failure *map is zeroed and err names the path and the OS error. */
qhx_status qhx_file_map_open(const char *path, qhx_file_map *map /* OUT */, qhx_error *err);
void qhx_file_map_close(qhx_file_map *map); /* NULL / zeroed allowed */

/* Progress of a load that may span several files: after each step of at most 64 MiB that
 * brings bytes into memory (a read, or populating a mapping), done grows and fn(user, done,
 * total) is called on the loading thread. total is what the caller expects over all files (0
 * when unknown); done may pass it if the guess was short. */
typedef struct qhx_load_progress {
    void (*fn)(void *user, uint64_t done_bytes, uint64_t total_bytes);
    void *user;
    uint64_t done, total;
} qhx_load_progress;

/* Map or read `path` as `mode` says; the result is closed with qhx_file_map_close either way.
 * QHX_FILE_READ checks that exactly the size fstat reported was read (a file that shrinks or
 * grows meanwhile is refused with QHX_E_IO). */
qhx_status qhx_file_load(const char *path, qhx_file_mode mode, qhx_file_map *map /* OUT */, qhx_error *err);

/* A zeroed, writable anonymous region of `size` bytes on a 2 MiB boundary (transparent huge
 * pages requested), closed with qhx_file_map_close; its pages become resident only when
 * touched. */
qhx_status qhx_file_anon(size_t size, qhx_file_map *map /* OUT */, qhx_error *err);

/* The same, reporting to progress (NULL: none) as the bytes come in. QHX_FILE_MAP_POPULATE then
 * populates the mapping 64 MiB at a time (MADV_POPULATE_READ, or a read of every page where the
 * kernel lacks it) instead of in one MAP_POPULATE call. */
qhx_status qhx_file_load_progress(const char *path, qhx_file_mode mode, qhx_load_progress *progress,
                                  qhx_file_map *map /* OUT */, qhx_error *err);

/* Bring the pages of [p, p + size) of a read-only mapping into memory, 64 MiB at a time
 * (MADV_POPULATE_READ, or a read of every page where the kernel lacks it), reporting to
 * progress (NULL: none). */
void qhx_file_populate(const uint8_t *p, size_t size, qhx_load_progress *progress);

/* Give back the whole pages inside p[0..size) of a mapping (MADV_DONTNEED) once nothing will
 * read them again: a tensor copied into another layout is then not held twice. Advisory. */
void qhx_file_release(const void *p, size_t size);

/* Add bytes to a load's progress and report it (NULL: nothing). */
void qhx_load_progress_add(qhx_load_progress *pr, size_t bytes);

/* The mode a load of `path` will use: QHX_FILE_AUTO resolved by the page-cache share (READ or
 * MAP_POPULATE), any other mode as it is. */
qhx_file_mode qhx_file_resolve_mode(const char *path, qhx_file_mode mode);

/* Read a whole file of at most max_bytes into a new NUL-terminated buffer (owned: qhx_free).
 * A larger file is refused with QHX_E_LIMIT naming both sizes. */
qhx_status qhx_file_read_all(const char *path, size_t max_bytes, char **out /* OUT */,
                             size_t *out_len /* OUT */, qhx_error *err);

/* What a file that is not a regular file is, for messages: "a folder", "a FIFO", "a character
 * device", "a block device", "a socket", "a symbolic link", else "not a file". */
const char *qhx_file_kind(unsigned mode /* st_mode */);
/* The one refusal of an input that is not a regular file: "PATH: not a regular file (a FIFO)"
 * (QHX_E_IO). Inputs are opened with O_NONBLOCK and judged by fstat, so a FIFO or a device
 * never blocks and never reads as "no such file". */
qhx_status qhx_fail_not_regular(qhx_error *err, const char *path, unsigned mode);
/* An open of an input that failed with errno e: "PATH: cannot open: <reason>", or for a socket
 * (which open refuses with ENXIO) the not-a-regular-file line. */
qhx_status qhx_fail_open(qhx_error *err, const char *path, int e);

/* Text read from a file (a calibration or evaluation text) that must be UTF-8: QHX_OK, or
 * QHX_E_FORMAT "PATH: byte N (0xXX) is not well-formed UTF-8" (or "is a NUL") at the first bad
 * byte, so the message names the file and where in it. */
qhx_status qhx_text_check_utf8(const char *path, const char *text, size_t len, qhx_error *err);

/* Whether path is an existing directory / regular file. */
int qhx_path_is_dir(const char *path);
int qhx_path_is_file(const char *path);

/* Join dir and name into a new string (owned: qhx_free); NULL on allocation failure. */
char *qhx_path_join(const char *dir, const char *name);

/* ---- output files that appear whole or not at all -------------------------------------------
 * The one policy for every writer (session files, tokenizer binaries, manifests, safetensors,
 * the CLI's --out files), so none ever replaces something that is not a regular file:
 *   - a missing or regular target: written to TARGET.tmp-XXXXXX beside it, synced and renamed
 *     onto it by commit (a reader never sees half a file; a failure leaves the old file);
 *   - a symbolic link: the link is kept and what it points at is written, by the same rules
 *     (a link to nothing is refused);
 *   - a device or a FIFO (/dev/null, a pipe): written directly, never replaced; a FIFO with no
 *     reader is refused rather than waited on;
 *   - a folder or a socket: refused. */
typedef struct qhx_out_file {
    FILE *f;
    char *tmp;  /* the temporary file; NULL when the target is written directly */
    char *dest; /* what commit renames onto: the target, or what its link points at */
    const char *path; /* the target as given, for messages */
} qhx_out_file;

/* mode: the new file's permissions (0600 for private data; 0666 is narrowed by the umask).
 * On failure *o holds nothing to release. */
qhx_status qhx_out_open(qhx_out_file *o /* OUT */, const char *path, unsigned mode, qhx_error *err);
/* Flush, sync, close and rename into place. On failure the temporary file is removed. */
qhx_status qhx_out_commit(qhx_out_file *o, qhx_error *err);
/* Close and remove the temporary file. Accepts an output never opened or already committed. */
void qhx_out_abort(qhx_out_file *o);

#endif
