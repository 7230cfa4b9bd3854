/* devices/opencl/ocl_cache.c: the program, built once per device at creation, and its on-disk
 * binary cache. The cache folder: $QHX_OPENCL_CACHE_DIR, else $XDG_CACHE_HOME/qhexrt/opencl,
 * else ~/.cache/qhexrt/opencl; QHX_OPENCL_CACHE=0 turns it off. An entry is named by the sha256
 * of (device name, driver version, platform version, build options, kernel source) and holds a
 * header (magic, length, sha256 of the binary) before the driver's binary. An entry that does
 * not match its header, or that the driver refuses to load or build, is rebuilt from source
 * and replaced; a folder that cannot be written only means no cache. */
#include "devices/opencl/ocl_impl.h"

#include "core/alloc.h"
#include "core/file.h"
#include "core/sha256.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

extern const unsigned char qhx_ocl_kernel_source[];
extern const size_t qhx_ocl_kernel_source_len;

#define CACHE_MAGIC "QHXOCL01"
#define CACHE_HEADER (8 + 8 + 32)
#define CACHE_MAX_BYTES ((size_t)256 << 20)

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

static char *cache_path(const ocl_dev *o, const char *opts) {
    char *dir = cache_dir();
    if (!dir) return NULL;
    char drv[128] = "", pver[128] = "", hex[65], name[80];
    clGetDeviceInfo(o->id, CL_DRIVER_VERSION, sizeof drv - 1, drv, NULL);
    clGetPlatformInfo(o->platform, CL_PLATFORM_VERSION, sizeof pver - 1, pver, NULL);
    qhx_sha256 s;
    uint8_t dg[32];
    qhx_sha256_init(&s);
    const char *parts[4] = {o->name, drv, pver, opts};
    for (int i = 0; i < 4; i++) qhx_sha256_update(&s, parts[i], strlen(parts[i]) + 1);
    qhx_sha256_update(&s, qhx_ocl_kernel_source, qhx_ocl_kernel_source_len);
    qhx_sha256_final(&s, dg);
    qhx_sha256_hex(dg, hex);
    snprintf(name, sizeof name, "%.40s.bin", hex);
    char *p = qhx_path_join(dir, name);
    qhx_free(dir);
    return p;
}

/* The cached binary when its header matches (owned: qhx_free), else NULL. */
static unsigned char *cache_read(const char *path, size_t *len) {
    char *buf = NULL;
    size_t n = 0;
    if (!qhx_path_is_file(path) || qhx_file_read_all(path, CACHE_MAX_BYTES, &buf, &n, NULL)) return NULL;
    uint64_t blen = 0;
    if (n >= CACHE_HEADER) memcpy(&blen, buf + 8, 8);
    if (n < CACHE_HEADER || memcmp(buf, CACHE_MAGIC, 8) || blen != n - CACHE_HEADER || blen == 0) {
        qhx_free(buf);
        return NULL;
    }
    uint8_t dg[32];
    qhx_sha256 s;
    qhx_sha256_init(&s);
    qhx_sha256_update(&s, buf + CACHE_HEADER, (size_t)blen);
    qhx_sha256_final(&s, dg);
    if (memcmp(dg, buf + 16, 32)) {
        qhx_free(buf);
        return NULL;
    }
    memmove(buf, buf + CACHE_HEADER, (size_t)blen);
    *len = (size_t)blen;
    return (unsigned char *)buf;
}

static void cache_write(const char *path, cl_program prog) {
    size_t len = 0;
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof len, &len, NULL) != CL_SUCCESS || !len ||
        len > CACHE_MAX_BYTES)
        return;
    unsigned char *bin = qhx_malloc(len);
    if (!bin) return;
    qhx_out_file f;
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) == CL_SUCCESS &&
        qhx_out_open(&f, path, 0600, NULL) == QHX_OK) {
        uint8_t dg[32];
        qhx_sha256 s;
        qhx_sha256_init(&s);
        qhx_sha256_update(&s, bin, len);
        qhx_sha256_final(&s, dg);
        const uint64_t blen = len;
        int ok = fwrite(CACHE_MAGIC, 1, 8, f.f) == 8 && fwrite(&blen, 8, 1, f.f) == 1 && fwrite(dg, 1, 32, f.f) == 32 &&
                 fwrite(bin, 1, len, f.f) == len;
        if (ok) qhx_out_commit(&f, NULL);
        else qhx_out_abort(&f);
    }
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
static bool from_cache(ocl_dev *o, const char *path, const char *opts) {
    size_t len = 0;
    unsigned char *bin = path ? cache_read(path, &len) : NULL;
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
    char *path = cache_path(o, opts);
    if (from_cache(o, path, opts)) {
        qhx_free(path);
        return CL_SUCCESS;
    }
    cl_int rc;
    const char *src = (const char *)qhx_ocl_kernel_source;
    const size_t len = qhx_ocl_kernel_source_len;
    o->prog = clCreateProgramWithSource(o->ctx, 1, &src, &len, &rc);
    if (rc == CL_SUCCESS) rc = clBuildProgram(o->prog, 1, &o->id, opts, NULL, NULL);
    if (rc == CL_SUCCESS) rc = make_kernels(o);
    if (rc == CL_SUCCESS && path) cache_write(path, o->prog);
    qhx_free(path);
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
