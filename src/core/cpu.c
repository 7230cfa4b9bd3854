/* core/cpu: feature detection and core counting.
 *
 * x86: a vector extension is usable only when CPUID reports it AND the OS has enabled saving of
 * its register state in XCR0 (read with XGETBV, which is legal only when CPUID.1:ECX.OSXSAVE is
 * set). YMM needs XCR0 bits 1-2; AVX-512 additionally needs bits 5-7 (opmask, ZMM0-15 upper
 * halves, ZMM16-31). Skipping this check crashes with SIGILL on kernels/VMs that disable AVX.
 * aarch64: the kernel reports usable features in the auxiliary vector. */
#include "core/cpu.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define QHX_CPU_X86 1
#elif defined(__aarch64__)
#include <sys/auxv.h>
#define QHX_CPU_ARM64 1
#endif

/* ---- x86 ---------------------------------------------------------------------------- */
#ifdef QHX_CPU_X86
static unsigned long long read_xcr0(void) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}

static void detect_x86(qhx_cpu_info *info) {
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return;
    unsigned max_leaf = a;
    memcpy(info->vendor + 0, &b, 4);
    memcpy(info->vendor + 4, &d, 4);
    memcpy(info->vendor + 8, &c, 4);
    info->vendor[12] = '\0';

    if (__get_cpuid(0x80000000u, &a, &b, &c, &d) && a >= 0x80000004u) {
        unsigned regs[12];
        for (unsigned i = 0; i < 3; i++)
            __get_cpuid(0x80000002u + i, &regs[4 * i], &regs[4 * i + 1], &regs[4 * i + 2], &regs[4 * i + 3]);
        memcpy(info->brand, regs, 48);
        info->brand[48] = '\0';
        char *p = info->brand; /* some CPUs pad the brand string with leading blanks */
        while (*p == ' ') p++;
        memmove(info->brand, p, strlen(p) + 1);
    }

    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, fma = (c >> 12) & 1, f16c = (c >> 29) & 1;
    if (!osxsave || !avx) return; /* no usable YMM: nothing beyond SSE */
    unsigned long long xcr0 = read_xcr0();
    int ymm_ok = (xcr0 & 0x6) == 0x6;
    int zmm_ok = ymm_ok && (xcr0 & 0xe0) == 0xe0;
    if (!ymm_ok) return;
    if (fma) info->features |= QHX_CPU_FMA;
    if (f16c) info->features |= QHX_CPU_F16C;
    if (max_leaf < 7) return;

    __cpuid_count(7, 0, a, b, c, d);
    unsigned max_sub = a;
    if ((b >> 5) & 1) info->features |= QHX_CPU_AVX2;
    if (zmm_ok) {
        if ((b >> 16) & 1) info->features |= QHX_CPU_AVX512F;
        if ((b >> 17) & 1) info->features |= QHX_CPU_AVX512DQ;
        if ((b >> 30) & 1) info->features |= QHX_CPU_AVX512BW;
        if ((b >> 31) & 1) info->features |= QHX_CPU_AVX512VL;
        if ((c >> 11) & 1) info->features |= QHX_CPU_AVX512_VNNI;
    }
    if (max_sub >= 1) {
        __cpuid_count(7, 1, a, b, c, d);
        if ((a >> 4) & 1) info->features |= QHX_CPU_AVX_VNNI;
        if (zmm_ok && ((a >> 5) & 1)) info->features |= QHX_CPU_AVX512_BF16;
    }
    /* The AVX-512 sub-features mean nothing without the foundation. */
    if (!(info->features & QHX_CPU_AVX512F))
        info->features &= ~(QHX_CPU_AVX512BW | QHX_CPU_AVX512VL | QHX_CPU_AVX512DQ |
                            QHX_CPU_AVX512_VNNI | QHX_CPU_AVX512_BF16);
}
#endif

/* ---- aarch64 ------------------------------------------------------------------------ */
#ifdef QHX_CPU_ARM64
/* Bit values from the Linux uapi <asm/hwcap.h>, spelled out so older headers still build. */
#define QHX_HWCAP_ASIMD (1ul << 1)
#define QHX_HWCAP_ASIMDDP (1ul << 20)
#define QHX_HWCAP2_I8MM (1ul << 13)

static void detect_arm64(qhx_cpu_info *info) {
    unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    if (hw & QHX_HWCAP_ASIMD) info->features |= QHX_CPU_NEON;
    if (hw & QHX_HWCAP_ASIMDDP) info->features |= QHX_CPU_ASIMDDP;
    if (hw2 & QHX_HWCAP2_I8MM) info->features |= QHX_CPU_I8MM;
}
#endif

/* ---- cores -------------------------------------------------------------------------- */

/* The first line of a small /sys file into buf; 0 on success. */
static int read_line(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int ok = fgets(buf, (int)cap, f) != NULL;
    fclose(f);
    if (!ok) return -1;
    buf[strcspn(buf, "\n")] = '\0';
    return 0;
}

#define QHX_CPU_MAX_SCAN 1024

/* Count CPUs in the affinity mask, and distinct cores among them: two CPUs are the same core
 * when their topology/thread_siblings_list is the same text (SMT siblings). */
static void count_cores(qhx_cpu_info *info) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (online < 1) online = 1;
    info->n_logical = (int)online;
    info->n_physical = (int)online;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return;
    int n_cpu = CPU_COUNT(&set);
    if (n_cpu < 1) return;
    info->n_logical = n_cpu;
    info->n_physical = n_cpu;

    /* Keep the first CPU of each sibling group seen; only small machines are scanned fully. */
    static const int max_groups = 256;
    char groups[256][32];
    int n_groups = 0, n_unknown = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE && cpu < QHX_CPU_MAX_SCAN; cpu++) {
        if (!CPU_ISSET(cpu, &set)) continue;
        char path[96], line[32];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", cpu);
        if (read_line(path, line, sizeof line) != 0) {
            n_unknown++;
            continue;
        }
        int seen = 0;
        for (int g = 0; g < n_groups && !seen; g++) seen = !strcmp(groups[g], line);
        if (seen) continue;
        if (n_groups == max_groups) return; /* too many to track: keep the logical count */
        snprintf(groups[n_groups++], sizeof groups[0], "%s", line);
    }
    if (n_groups + n_unknown >= 1) info->n_physical = n_groups + n_unknown;
}

void qhx_cpu_detect(qhx_cpu_info *info) {
    memset(info, 0, sizeof *info);
#if defined(__x86_64__)
    snprintf(info->arch, sizeof info->arch, "x86_64");
#elif defined(__aarch64__)
    snprintf(info->arch, sizeof info->arch, "aarch64");
#else
    snprintf(info->arch, sizeof info->arch, "other");
#endif
#ifdef QHX_CPU_X86
    detect_x86(info);
#endif
#ifdef QHX_CPU_ARM64
    detect_arm64(info);
#endif
    count_cores(info);
}

int qhx_cpu_n_physical(void) {
    qhx_cpu_info info;
    qhx_cpu_detect(&info);
    return info.n_physical;
}

static const struct {
    unsigned bit;
    const char *name;
} FEATURES[] = {
    {QHX_CPU_AVX2, "avx2"},           {QHX_CPU_FMA, "fma"},
    {QHX_CPU_F16C, "f16c"},           {QHX_CPU_AVX512F, "avx512f"},
    {QHX_CPU_AVX512BW, "avx512bw"},   {QHX_CPU_AVX512VL, "avx512vl"},
    {QHX_CPU_AVX512DQ, "avx512dq"},   {QHX_CPU_AVX512_VNNI, "avx512_vnni"},
    {QHX_CPU_AVX512_BF16, "avx512_bf16"}, {QHX_CPU_AVX_VNNI, "avx_vnni"},
    {QHX_CPU_NEON, "neon"},           {QHX_CPU_ASIMDDP, "asimddp"},
    {QHX_CPU_I8MM, "i8mm"},
};

const char *qhx_cpu_feature_name(unsigned bit) {
    for (size_t i = 0; i < sizeof FEATURES / sizeof FEATURES[0]; i++)
        if (FEATURES[i].bit == bit) return FEATURES[i].name;
    return NULL;
}

size_t qhx_cpu_features_str(unsigned features, char *buf, size_t cap) {
    size_t n = 0;
    if (cap) buf[0] = '\0';
    for (size_t i = 0; i < sizeof FEATURES / sizeof FEATURES[0]; i++) {
        if (!(features & FEATURES[i].bit)) continue;
        int k = snprintf(n < cap ? buf + n : NULL, n < cap ? cap - n : 0, "%s%s", n ? " " : "",
                         FEATURES[i].name);
        n += (size_t)k;
    }
    return n;
}

int64_t qhx_mem_available_bytes(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    long long kib = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lld kB", &kib) == 1) break;
    fclose(f);
    return kib > 0 && kib < (long long)(INT64_MAX / 1024) ? (int64_t)kib * 1024 : 0;
}
