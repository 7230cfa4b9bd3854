// ctest-labels: unit
/* Core substrate, second part: CPU detection, monotonic clock, random numbers, files that
 * change under us. */
#include "core/alloc.h"
#include "core/cpu.h"
#include "core/file.h"
#include "core/rng.h"
#include "core/time.h"
#include "t.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void test_cpu(void) {
    qhx_cpu_info info;
    qhx_cpu_detect(&info);
    CHECK(info.n_logical >= 1);
    CHECK(info.n_physical >= 1);
    CHECK(info.n_physical <= info.n_logical);
    CHECK(qhx_cpu_n_physical() == info.n_physical);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    CHECK(info.n_logical <= online);
    char feats[256];
    size_t need = qhx_cpu_features_str(info.features, feats, sizeof feats);
    CHECK(need < sizeof feats);
    fprintf(stderr, "cpu: %s %s '%s', %d logical / %d physical, features: %s\n", info.arch,
            info.vendor, info.brand, info.n_logical, info.n_physical, feats[0] ? feats : "(none)");
#if defined(__x86_64__)
    CHECK_STR(info.arch, "x86_64");
    CHECK(!(info.features & (QHX_CPU_NEON | QHX_CPU_ASIMDDP | QHX_CPU_I8MM)));
    /* AVX-512 sub-features never without the foundation */
    if (!(info.features & QHX_CPU_AVX512F))
        CHECK(!(info.features & (QHX_CPU_AVX512BW | QHX_CPU_AVX512VL | QHX_CPU_AVX512DQ |
                                 QHX_CPU_AVX512_VNNI | QHX_CPU_AVX512_BF16)));
#if defined(__AVX2__)
    CHECK(info.features & QHX_CPU_AVX2); /* the compiler was told the target has it */
#endif
#elif defined(__aarch64__)
    CHECK_STR(info.arch, "aarch64");
    CHECK(info.features & QHX_CPU_NEON); /* mandatory in ARMv8-A Linux */
#endif
    CHECK_STR(qhx_cpu_feature_name(QHX_CPU_AVX512_BF16), "avx512_bf16");
    CHECK(qhx_cpu_feature_name(1u << 30) == NULL);
    char small[6];
    need = qhx_cpu_features_str(QHX_CPU_AVX2 | QHX_CPU_FMA | QHX_CPU_I8MM, small, sizeof small);
    CHECK_EQ(need, strlen("avx2 fma i8mm"));
    CHECK_STR(small, "avx2 ");
    CHECK_EQ(qhx_cpu_features_str(0, small, sizeof small), 0);
    CHECK_STR(small, "");
}

static void test_time(void) {
    uint64_t t0 = qhx_time_ns();
    uint64_t prev = t0;
    int backwards = 0;
    for (int i = 0; i < 100000; i++) {
        uint64_t t = qhx_time_ns();
        if (t < prev) backwards++;
        prev = t;
    }
    CHECK_EQ(backwards, 0);
    usleep(2000);
    uint64_t t1 = qhx_time_ns();
    CHECK(t1 - t0 >= 2000000u); /* slept at least 2 ms: a lower bound, never an upper one */
    CHECK(qhx_time_s() > 0.0);
}

static void test_rng(void) {
    /* Reference streams computed independently from the published algorithms. */
    qhx_rng r;
    qhx_rng_seed(&r, 42);
    CHECK(qhx_rng_u64(&r) == 0x15780b2e0c2ec716u);
    CHECK(qhx_rng_u64(&r) == 0x6104d9866d113a7eu);
    CHECK(qhx_rng_u64(&r) == 0xae17533239e499a1u);
    CHECK(qhx_rng_u64(&r) == 0xecb8ad4703b360a1u);
    CHECK(qhx_rng_f32(&r) == 0.9918038845062256f);
    qhx_rng k = {{1, 2, 3, 4}}; /* xoshiro256** reference: state {1,2,3,4} */
    CHECK(qhx_rng_u64(&k) == 11520u);
    CHECK(qhx_rng_u64(&k) == 0u);
    CHECK(qhx_rng_u64(&k) == 1509978240u);
    CHECK(qhx_rng_u64(&k) == 1215971899390074240u);

    /* same seed, same stream; another seed, another stream */
    qhx_rng a, b, c;
    qhx_rng_seed(&a, 7);
    qhx_rng_seed(&b, 7);
    qhx_rng_seed(&c, 8);
    int same = 1, differ = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t x = qhx_rng_u64(&a), y = qhx_rng_u64(&b), z = qhx_rng_u64(&c);
        same &= x == y;
        differ += x != z;
    }
    CHECK(same);
    CHECK(differ > 990);

    /* ranges and rough moments */
    qhx_rng_seed(&a, 1);
    double sum = 0, sum2 = 0, nsum = 0, nsum2 = 0;
    int out_of_range = 0, hist[10] = {0};
    const int n = 200000;
    for (int i = 0; i < n; i++) {
        float f = qhx_rng_f32(&a);
        double d = qhx_rng_f64(&a);
        if (!(f >= 0.0f && f < 1.0f) || !(d >= 0.0 && d < 1.0)) out_of_range++;
        sum += f;
        sum2 += (double)f * f;
        uint64_t u = qhx_rng_below(&a, 10);
        if (u >= 10) out_of_range++;
        else hist[u]++;
        double g = qhx_rng_normal(&a);
        nsum += g;
        nsum2 += g * g;
    }
    CHECK_EQ(out_of_range, 0);
    CHECK_NEAR(sum / n, 0.5, 0.01);
    CHECK_NEAR(sum2 / n - (sum / n) * (sum / n), 1.0 / 12, 0.005);
    CHECK_NEAR(nsum / n, 0.0, 0.02);
    CHECK_NEAR(nsum2 / n, 1.0, 0.02);
    for (int i = 0; i < 10; i++) CHECK_NEAR(hist[i], n / 10, n / 100);
    CHECK_EQ(qhx_rng_below(&a, 0), 0);
    CHECK_EQ(qhx_rng_below(&a, 1), 0);
    uint64_t big = qhx_rng_below(&a, UINT64_MAX);
    CHECK(big < UINT64_MAX);
}

/* A small file opened through qhx_file_map_open and then truncated by someone else must stay
 * readable in full (a private copy); with a shared mapping this read would raise SIGBUS. */
static void test_file_truncated_after_open(void) {
    char path[] = "/tmp/qhx_trunc_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    size_t n = (size_t)3 << 20;
    uint8_t *buf = malloc(n);
    CHECK(buf != NULL);
    if (!buf) return;
    for (size_t i = 0; i < n; i++) buf[i] = (uint8_t)(i * 131u + 7u);
    CHECK_EQ(write(fd, buf, n), (ssize_t)n);
    qhx_file_map map;
    CHECK_EQ(qhx_file_map_open(path, &map, NULL), QHX_OK);
    CHECK_EQ(ftruncate(fd, 0), 0);
    CHECK_EQ(map.size, n);
    CHECK(map.data && memcmp(map.data, buf, n) == 0);
    qhx_file_map_close(&map);
    /* above the size limit a file is mapped (sparse here, so nothing is written) */
    CHECK_EQ(ftruncate(fd, (off_t)QHX_FILE_SMALL_MAX + 4096), 0);
    CHECK_EQ(qhx_file_map_open(path, &map, NULL), QHX_OK);
    CHECK_EQ(map.size, (size_t)QHX_FILE_SMALL_MAX + 4096);
    CHECK_EQ(map.span, (size_t)0);
    CHECK_EQ(map.data[map.size - 1], 0);
    qhx_file_map_close(&map);
    close(fd);
    unlink(path);
    free(buf);
}

/* Load progress: every mode that brings bytes in reports them, in steps that add up to the file
 * size, on top of what an earlier file of the same load reported; a plain mapping reports
 * nothing. The data is the file's either way. */
typedef struct progress_log {
    int calls;
    uint64_t last_done, last_total;
    int monotonic;
} progress_log;

static void progress_note(void *user, uint64_t done, uint64_t total) {
    progress_log *l = user;
    if (done < l->last_done) l->monotonic = 0;
    l->calls++, l->last_done = done, l->last_total = total;
}

static void test_file_load_progress(void) {
    char path[] = "/tmp/qhx_prog_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    size_t n = ((size_t)64 << 20) + 12345; /* two read steps */
    uint8_t *buf = malloc(n);
    if (!buf) return;
    for (size_t i = 0; i < n; i++) buf[i] = (uint8_t)(i * 29u + 3u);
    CHECK_EQ(write(fd, buf, n), (ssize_t)n);
    close(fd);
    static const qhx_file_mode modes[] = {QHX_FILE_READ, QHX_FILE_MAP_POPULATE, QHX_FILE_MAP};
    for (int m = 0; m < 3; m++) {
        progress_log log = {.monotonic = 1};
        qhx_load_progress pr = {.fn = progress_note, .user = &log, .done = 1000, .total = 1000 + n};
        qhx_file_map map;
        CHECK_EQ(qhx_file_load_progress(path, modes[m], &pr, &map, NULL), QHX_OK);
        CHECK(map.size == n && memcmp(map.data, buf, n) == 0);
        if (modes[m] == QHX_FILE_MAP) {
            CHECK_EQ(log.calls, 0);
            CHECK_EQ(pr.done, (uint64_t)1000);
        } else {
            CHECK_EQ(log.calls, 2);
            CHECK(log.monotonic);
            CHECK_EQ(log.last_done, (uint64_t)(1000 + n));
            CHECK_EQ(log.last_total, (uint64_t)(1000 + n));
        }
        qhx_file_map_close(&map);
    }
    /* AUTO: the file was just written, so the page cache holds it: mapped (no anonymous copy) */
    qhx_file_map map;
    CHECK_EQ(qhx_file_load(path, QHX_FILE_AUTO, &map, NULL), QHX_OK);
    CHECK(map.size == n && memcmp(map.data, buf, n) == 0);
    CHECK_EQ(map.span, (size_t)0);
    qhx_file_map_close(&map);
    unlink(path);
    free(buf);
}

/* Write "text" to path through qhx_out_open/commit; the status. */
static qhx_status out_write(const char *path, const char *text, qhx_error *err) {
    qhx_out_file o;
    qhx_status rc = qhx_out_open(&o, path, 0666, err);
    if (rc) return rc;
    fputs(text, o.f);
    return qhx_out_commit(&o, err);
}

static int file_is(const char *path, const char *text) {
    char *got = NULL;
    size_t n = 0;
    int same = qhx_file_read_all(path, 1 << 20, &got, &n, NULL) == QHX_OK && !strcmp(got, text);
    qhx_free(got);
    return same;
}

/* The one output policy: never replace a device, a FIFO or a link; whole files or nothing. */
static void test_out_file_targets(void) {
    char dir[] = "/tmp/qhx_out_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char reg[256], lnk[256], dangling[256], fifo[256], sub[256];
    snprintf(reg, sizeof reg, "%s/reg", dir);
    snprintf(lnk, sizeof lnk, "%s/lnk", dir);
    snprintf(dangling, sizeof dangling, "%s/dangling", dir);
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    snprintf(sub, sizeof sub, "%s/sub", dir);
    qhx_error err;
    CHECK_EQ(out_write(reg, "one", &err), QHX_OK);
    CHECK(file_is(reg, "one"));
    CHECK_EQ(symlink("reg", lnk), 0);
    CHECK_EQ(out_write(lnk, "two", &err), QHX_OK); /* through the link: the link stays */
    struct stat st;
    CHECK(lstat(lnk, &st) == 0 && S_ISLNK(st.st_mode));
    CHECK(file_is(reg, "two"));
    CHECK_EQ(symlink("nowhere", dangling), 0);
    CHECK_EQ(out_write(dangling, "x", &err), QHX_E_IO);
    CHECK_CONTAINS(err.msg, "symbolic link to nothing");
    CHECK(lstat(dangling, &st) == 0 && S_ISLNK(st.st_mode));
    CHECK_EQ(mkdir(sub, 0700), 0);
    CHECK_EQ(out_write(sub, "x", &err), QHX_E_IO);
    CHECK_CONTAINS(err.msg, "is a folder");
    CHECK_EQ(mkfifo(fifo, 0600), 0);
    CHECK_EQ(out_write(fifo, "x", &err), QHX_E_IO); /* no reader: refused, not waited on */
    CHECK_CONTAINS(err.msg, "FIFO with no reader");
    CHECK(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));
    int rd = open(fifo, O_RDONLY | O_NONBLOCK);
    CHECK_EQ(out_write(fifo, "pipe", &err), QHX_OK); /* a reader: written in place */
    char buf[8] = {0};
    CHECK_EQ(read(rd, buf, sizeof buf - 1), 4);
    CHECK_STR(buf, "pipe");
    close(rd);
    CHECK(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));
    CHECK_EQ(out_write("/dev/null", "x", &err), QHX_OK);
    CHECK(stat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode));
    if (access("/dev/full", W_OK) == 0) {
        CHECK_EQ(out_write("/dev/full", "x", &err), QHX_E_IO);
        CHECK_CONTAINS(err.msg, "write failed");
        CHECK(stat("/dev/full", &st) == 0 && S_ISCHR(st.st_mode));
    }
    qhx_out_file o;
    CHECK_EQ(qhx_out_open(&o, reg, 0600, &err), QHX_OK);
    fputs("three", o.f);
    qhx_out_abort(&o); /* abandoned: the old file stays, no temporary file */
    CHECK(file_is(reg, "two"));
    qhx_out_abort(&o);
    unlink(reg), unlink(lnk), unlink(dangling), unlink(fifo), rmdir(sub);
    CHECK_EQ(rmdir(dir), 0); /* fails if a temporary file was left */
}

int main(void) {
    test_out_file_targets();
    test_file_truncated_after_open();
    test_file_load_progress();
    test_cpu();
    test_time();
    test_rng();
    return t_done("test_core_more");
}
