/* devices/opencl/ocl_cache.c: the program, built once per device at creation, and its on-disk
 * binary cache. The cache folder: $QHX_OPENCL_CACHE_DIR, else $XDG_CACHE_HOME/qhexrt/opencl,
 * else ~/.cache/qhexrt/opencl; QHX_OPENCL_CACHE=0 turns it off.
 *
 * A driver trusts the binary it is handed: PoCL asserts (the process aborts) on one cut short,
 * so nothing reaches clCreateProgramWithBinary that this file has not checked (docs/backends.md,
 * "The program cache"). An entry is named by the SHA-256 of its key (device name, driver version,
 * platform version, build options, kernel source) and is two files, each written to a temporary
 * file, synced and renamed (qhx_out_open):
 *   KEY.bin: "QHXOCL02" | u64 binary size (the driver's CL_PROGRAM_BINARY_SIZES) | the key's
 *            SHA-256 (32) | the binary's SHA-256 (32) | the binary
 *   KEY.sum: "QHXOCLS1" | the SHA-256 of the whole KEY.bin (written after it)
 * The entry is used only when the .bin is a regular file whose size is the header's, whose key is
 * this device's and whose binary hashes to the header's digest, and the .sum beside it hashes
 * the same bytes: so a torn write (the .bin without its .sum, or a stale one), a flipped bit, a
 * cut or empty file, an entry of another device or driver, and a .bin whose header was
 * recomputed over a cut binary are all rebuilt from source and rewritten. An entry the driver
 * refuses to load or build is rebuilt the same way; a folder that cannot be written only means
 * no cache. Not defended: both files rewritten consistently on purpose (whoever can write the
 * folder can run code as its owner anyway). */
#include "devices/opencl/ocl_impl.h"

#include "core/alloc.h"
#include "core/file.h"
#include "core/sha256.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

extern const unsigned char qhx_ocl_kernel_source[];
extern const size_t qhx_ocl_kernel_source_len;

#define CACHE_MAGIC "QHXOCL02"
#define CACHE_HEADER (8 + 8 + 32 + 32)
#define CACHE_MAX_BYTES ((size_t)256 << 20)
#define SUM_MAGIC "QHXOCLS1"
#define SUM_BYTES (8 + 32)

static void sha256_of(const void *p, size_t n, uint8_t out[32]) {
    qhx_sha256 s;
    qhx_sha256_init(&s);
    qhx_sha256_update(&s, p, n);
    qhx_sha256_final(&s, out);
}

/* An entry's two files and the key they must carry. */
typedef struct cache_entry {
    char *bin, *sum; /* owned: qhx_free */
    uint8_t key[32];
} cache_entry;

static void entry_free(cache_entry *e) {
    qhx_free(e->bin);
    qhx_free(e->sum);
    e->bin = e->sum = NULL;
}

static void build_options(const ocl_dev *o, char *buf, size_t size) {
    snprintf(buf, size, "-cl-std=CL1.2 -DWG=%zu", o->wg);
}

/* mkdir -p of the cache folder; NULL when there is none (turned off, no home) */
static char *cache_dir(void) {
    const char *off = getenv("QHX_OPENCL_CACHE");
    if (off && !strcmp(off, "0")) return NULL;
    const char *dir = getenv("QHX_OPENCL_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char path[1024];
    if (dir && *dir) snprintf(path, sizeof path, "%s", dir);
    else if (xdg && *xdg) snprintf(path, sizeof path, "%s/qhexrt/opencl", xdg);
    else if (home && *home) snprintf(path, sizeof path, "%s/.cache/qhexrt/opencl", home);
    else return NULL;
    for (char *c = path + 1; *c; c++) {
        if (*c != '/') continue;
        *c = 0;
        mkdir(path, 0700);
        *c = '/';
    }
    if (mkdir(path, 0700) != 0 && errno != EEXIST) return NULL;
    size_t n = strlen(path) + 1;
    char *out = qhx_malloc(n);
    if (out) memcpy(out, path, n);
    return out;
}

/* The entry of this device and options: false when there is no cache (or no memory). */
static bool cache_entry_of(const ocl_dev *o, const char *opts, cache_entry *e) {
    memset(e, 0, sizeof *e);
    char *dir = cache_dir();
    if (!dir) return false;
    char drv[128] = "", pver[128] = "", hex[65], name[80];
    clGetDeviceInfo(o->id, CL_DRIVER_VERSION, sizeof drv - 1, drv, NULL);
    clGetPlatformInfo(o->platform, CL_PLATFORM_VERSION, sizeof pver - 1, pver, NULL);
    qhx_sha256 s;
    qhx_sha256_init(&s);
    const char *parts[4] = {o->name, drv, pver, opts};
    for (int i = 0; i < 4; i++) qhx_sha256_update(&s, parts[i], strlen(parts[i]) + 1);
    qhx_sha256_update(&s, qhx_ocl_kernel_source, qhx_ocl_kernel_source_len);
    qhx_sha256_final(&s, e->key);
    qhx_sha256_hex(e->key, hex);
    snprintf(name, sizeof name, "%.40s.bin", hex);
    e->bin = qhx_path_join(dir, name);
    snprintf(name, sizeof name, "%.40s.sum", hex);
    e->sum = qhx_path_join(dir, name);
    qhx_free(dir);
    if (!e->bin || !e->sum) entry_free(e);
    return e->bin != NULL;
}

/* Whether the .sum beside the entry holds the SHA-256 of its .bin bytes (all n of them). */
static bool sum_matches(const cache_entry *e, const char *bin, size_t n) {
    char *sum = NULL;
    size_t m = 0;
    if (qhx_file_read_all(e->sum, SUM_BYTES, &sum, &m, NULL)) return false;
    uint8_t dg[32];
    sha256_of(bin, n, dg);
    bool ok = m == SUM_BYTES && !memcmp(sum, SUM_MAGIC, 8) && !memcmp(sum + 8, dg, 32);
    qhx_free(sum);
    return ok;
}

/* The cached binary when every check of the entry passes (owned: qhx_free), else NULL. */
static unsigned char *cache_read(const cache_entry *e, size_t *len) {
    char *buf = NULL;
    size_t n = 0;
    if (qhx_file_read_all(e->bin, CACHE_MAX_BYTES, &buf, &n, NULL)) return NULL; /* a regular file only */
    uint64_t blen = 0;
    if (n >= CACHE_HEADER) memcpy(&blen, buf + 8, 8);
    uint8_t dg[32];
    bool ok = n > CACHE_HEADER && !memcmp(buf, CACHE_MAGIC, 8) && blen == n - CACHE_HEADER &&
              !memcmp(buf + 16, e->key, 32); /* another device's, driver's or source's entry: no */
    if (ok) {
        sha256_of(buf + CACHE_HEADER, (size_t)blen, dg);
        ok = !memcmp(dg, buf + 48, 32) && sum_matches(e, buf, n);
    }
    if (!ok) {
        qhx_free(buf);
        return NULL;
    }
    memmove(buf, buf + CACHE_HEADER, (size_t)blen);
    *len = (size_t)blen;
    return (unsigned char *)buf;
}

/* Write head (nh bytes) then data (n bytes) to path, whole or not at all (temporary file, sync,
 * rename). */
static bool write_whole(const char *path, const void *head, size_t nh, const void *data, size_t n) {
    qhx_out_file f;
    if (qhx_out_open(&f, path, 0600, NULL) != QHX_OK) return false;
    if (fwrite(head, 1, nh, f.f) == nh && fwrite(data, 1, n, f.f) == n) return qhx_out_commit(&f, NULL) == QHX_OK;
    qhx_out_abort(&f);
    return false;
}

/* The program's binary into the entry: the .bin, then the .sum that vouches for it (a crash
 * between the two leaves a .bin without a matching .sum: rebuilt next time). */
static void cache_write(const cache_entry *e, cl_program prog) {
    size_t len = 0;
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof len, &len, NULL) != CL_SUCCESS || !len ||
        len > CACHE_MAX_BYTES - CACHE_HEADER)
        return;
    unsigned char *bin = qhx_malloc(len);
    if (!bin) return;
    unsigned char *file = NULL;
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) == CL_SUCCESS &&
        (file = qhx_malloc(CACHE_HEADER + len))) {
        const uint64_t blen = len;
        memcpy(file, CACHE_MAGIC, 8);
        memcpy(file + 8, &blen, 8);
        memcpy(file + 16, e->key, 32);
        sha256_of(bin, len, file + 48);
        memcpy(file + CACHE_HEADER, bin, len);
        unsigned char sum[SUM_BYTES];
        memcpy(sum, SUM_MAGIC, 8);
        sha256_of(file, CACHE_HEADER + len, sum + 8);
        unlink(e->sum); /* the old .sum must not vouch for the new .bin, nor outlive a failed write */
        if (write_whole(e->bin, file, CACHE_HEADER, bin, len)) write_whole(e->sum, sum, 8, sum + 8, 32);
    }
    qhx_free(file);
    qhx_free(bin);
}

static cl_int make_kernels(ocl_dev *o) {
    for (int i = 0; i < OK_COUNT; i++) {
        cl_int rc;
        o->k[i] = clCreateKernel(o->prog, QHX_OCL_KERNEL_NAMES[i], &rc);
        if (rc != CL_SUCCESS) return rc;
        size_t wg = 0;
        if (clGetKernelWorkGroupInfo(o->k[i], o->id, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, NULL) == CL_SUCCESS &&
            wg < o->wg)
            return CL_INVALID_WORK_GROUP_SIZE;
    }
    return CL_SUCCESS;
}

static void drop_program(ocl_dev *o) {
    for (int i = 0; i < OK_COUNT; i++)
        if (o->k[i]) clReleaseKernel(o->k[i]), o->k[i] = NULL;
    if (o->prog) clReleaseProgram(o->prog), o->prog = NULL;
}

/* The program from a cached binary: true when it loads, builds and has every kernel. */
static bool from_cache(ocl_dev *o, const cache_entry *e, const char *opts) {
    size_t len = 0;
    unsigned char *bin = e->bin ? cache_read(e, &len) : NULL;
    if (!bin) return false;
    cl_int rc, st;
    const unsigned char *b = bin;
    o->prog = clCreateProgramWithBinary(o->ctx, 1, &o->id, &len, &b, &st, &rc);
    qhx_free(bin);
    if (rc == CL_SUCCESS && st == CL_SUCCESS) rc = clBuildProgram(o->prog, 1, &o->id, opts, NULL, NULL);
    if (rc == CL_SUCCESS && st == CL_SUCCESS && make_kernels(o) == CL_SUCCESS) return true;
    drop_program(o);
    return false;
}

static qhx_status build_failed(ocl_dev *o, cl_int rc, qhx_error *err) {
    char log[512] = "";
    if (o->prog) clGetProgramBuildInfo(o->prog, o->id, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
    for (char *c = log; *c; c++)
        if (*c == '\n') *c = ' ';
    return qhx_fail(err, QHX_E_UNSUPPORTED, "device %s: the kernels do not build: %s%s%.300s", o->label,
                    qhx_ocl_err_name(rc), *log ? ": " : "", log);
}

/* The program for the current work-group size: from the cache, else built and cached. */
static cl_int build_once(ocl_dev *o) {
    char opts[96];
    build_options(o, opts, sizeof opts);
    cache_entry e;
    cache_entry_of(o, opts, &e);
    if (from_cache(o, &e, opts)) {
        entry_free(&e);
        return CL_SUCCESS;
    }
    cl_int rc;
    const char *src = (const char *)qhx_ocl_kernel_source;
    const size_t len = qhx_ocl_kernel_source_len;
    o->prog = clCreateProgramWithSource(o->ctx, 1, &src, &len, &rc);
    if (rc == CL_SUCCESS) rc = clBuildProgram(o->prog, 1, &o->id, opts, NULL, NULL);
    if (rc == CL_SUCCESS) rc = make_kernels(o);
    if (rc == CL_SUCCESS && e.bin) cache_write(&e, o->prog);
    entry_free(&e);
    return rc;
}

/* A kernel that cannot run work-groups of o->wg on this device (registers, local memory) makes
 * the program be built again for half the size, down to 16. */
qhx_status qhx_ocl_build(ocl_dev *o, qhx_error *err) {
    for (;;) {
        cl_int rc = build_once(o);
        if (rc == CL_SUCCESS) return QHX_OK;
        if (rc != CL_INVALID_WORK_GROUP_SIZE || o->wg <= 16) return build_failed(o, rc, err);
        drop_program(o);
        o->wg /= 2;
    }
}
