/* core/cpu: what the CPU and the OS let us run, how many cores to use by default, the free memory.
 * Detection asks the hardware (x86: CPUID, plus XGETBV to confirm the OS saves YMM/ZMM state;
 * aarch64: getauxval(AT_HWCAP/AT_HWCAP2)), so a feature is reported only when it can really be
 * used. Kernel selection (kernels/select.c) reads qhx_cpu_info; nothing here picks kernels. */
#ifndef QHX_CORE_CPU_H
#define QHX_CORE_CPU_H

#include <stddef.h>
#include <stdint.h>

/* Feature bits of qhx_cpu_info.features. */
#define QHX_CPU_AVX2        (1u << 0)  /* with OS YMM support */
#define QHX_CPU_FMA         (1u << 1)  /* FMA3 */
#define QHX_CPU_F16C        (1u << 2)
#define QHX_CPU_AVX512F     (1u << 3)  /* with OS ZMM + opmask support */
#define QHX_CPU_AVX512BW    (1u << 4)
#define QHX_CPU_AVX512VL    (1u << 5)
#define QHX_CPU_AVX512DQ    (1u << 6)
#define QHX_CPU_AVX512_VNNI (1u << 7)
#define QHX_CPU_AVX512_BF16 (1u << 8)
#define QHX_CPU_AVX_VNNI    (1u << 9)  /* VEX-encoded VNNI (Alder Lake, Zen 5) */
#define QHX_CPU_NEON        (1u << 16) /* aarch64 Advanced SIMD */
#define QHX_CPU_ASIMDDP     (1u << 17) /* SDOT/UDOT */
#define QHX_CPU_I8MM        (1u << 18) /* SMMLA/USMMLA */

/* Convenience groups for kernel selection. */
#define QHX_CPU_GROUP_AVX2   (QHX_CPU_AVX2 | QHX_CPU_FMA | QHX_CPU_F16C)
#define QHX_CPU_GROUP_AVX512 (QHX_CPU_GROUP_AVX2 | QHX_CPU_AVX512F | QHX_CPU_AVX512BW | \
                              QHX_CPU_AVX512VL | QHX_CPU_AVX512DQ)

typedef struct qhx_cpu_info {
    unsigned features; /* QHX_CPU_* bits usable by this process */
    int n_logical;     /* CPUs this process may run on (affinity mask), at least 1 */
    int n_physical;    /* distinct cores among them (SMT siblings counted once), at least 1 */
    char arch[16];     /* "x86_64", "aarch64" or "other" */
    char vendor[16];   /* x86 CPUID vendor ("GenuineIntel", "AuthenticAMD"), else "" */
    char brand[64];    /* x86 brand string, else "" */
} qhx_cpu_info;

/* Fill *info. Cheap (a few CPUID calls and small /sys reads); thread-safe; never fails. */
void qhx_cpu_detect(qhx_cpu_info *info /* OUT */);

/* The default thread count: physical cores this process may use (falls back to online CPUs). */
int qhx_cpu_n_physical(void);
/* The memory the system says is available now (/proc/meminfo MemAvailable), in bytes; 0 when
 * it cannot be read. */
int64_t qhx_mem_available_bytes(void);

/* Name of one feature bit ("avx2"), or NULL for an unknown bit. */
const char *qhx_cpu_feature_name(unsigned bit);

/* Write the feature names of `features`, space-separated, into buf (always NUL-terminated when
 * cap > 0). Returns the length the full text needs, like snprintf. */
size_t qhx_cpu_features_str(unsigned features, char *buf, size_t cap);

#endif
