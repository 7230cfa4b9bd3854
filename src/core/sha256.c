/* core/sha256: the FIPS 180-4 compression function over 64-byte blocks; on x86-64 with the SHA
 * extensions (CPUID leaf 7 EBX bit 29, SSE4.1), the same function through sha256rnds2 and
 * friends (several times faster: qhx pull hashes every byte it downloads). Both give the same
 * digest; QHX_SHA256_PLAIN=1 forces the portable one (tests compare the two). */
#include "core/sha256.h"

#include "core/alloc.h"
#include "core/file.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static inline uint32_t ror(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void compress(uint32_t h[8], const uint8_t *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = hh + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
        uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        hh = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d;
    h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
}

static void compress_blocks_plain(uint32_t h[8], const uint8_t *p, size_t n) {
    for (; n; n--, p += 64) compress(h, p);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>

/* The message schedule four words at a time (W[g] holds words 4g..4g+3), then two
 * sha256rnds2 per group of four rounds; the state lives as ABEF / CDGH. */
__attribute__((target("sha,sse4.1,ssse3"))) static void compress_blocks_shani(uint32_t h[8], const uint8_t *p, size_t n) {
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    __m128i tmp = _mm_loadu_si128((const __m128i *)&h[0]);     /* DCBA */
    __m128i st1 = _mm_loadu_si128((const __m128i *)&h[4]);     /* HGFE */
    tmp = _mm_shuffle_epi32(tmp, 0xB1);                        /* CDAB */
    st1 = _mm_shuffle_epi32(st1, 0x1B);                        /* EFGH */
    __m128i st0 = _mm_alignr_epi8(tmp, st1, 8);                /* ABEF */
    st1 = _mm_blend_epi16(st1, tmp, 0xF0);                     /* CDGH */
    for (; n; n--, p += 64) {
        __m128i w[16], save0 = st0, save1 = st1;
        for (int g = 0; g < 4; g++) w[g] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * g)), bswap);
        for (int g = 4; g < 16; g++) {
            __m128i t = _mm_sha256msg1_epu32(w[g - 4], w[g - 3]);
            t = _mm_add_epi32(t, _mm_alignr_epi8(w[g - 1], w[g - 2], 4));
            w[g] = _mm_sha256msg2_epu32(t, w[g - 1]);
        }
        for (int g = 0; g < 16; g++) {
            __m128i m = _mm_add_epi32(w[g], _mm_loadu_si128((const __m128i *)&K[4 * g]));
            st1 = _mm_sha256rnds2_epu32(st1, st0, m);
            st0 = _mm_sha256rnds2_epu32(st0, st1, _mm_shuffle_epi32(m, 0x0E));
        }
        st0 = _mm_add_epi32(st0, save0);
        st1 = _mm_add_epi32(st1, save1);
    }
    tmp = _mm_shuffle_epi32(st0, 0x1B);                        /* FEBA */
    st1 = _mm_shuffle_epi32(st1, 0xB1);                        /* DCHG */
    st0 = _mm_blend_epi16(tmp, st1, 0xF0);                     /* DCBA */
    st1 = _mm_alignr_epi8(st1, tmp, 8);                        /* HGFE */
    _mm_storeu_si128((__m128i *)&h[0], st0);
    _mm_storeu_si128((__m128i *)&h[4], st1);
}

static int cpu_has_sha(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 19)) || !(c & (1u << 9))) return 0; /* SSE4.1, SSSE3 */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    return (b >> 29) & 1;
}
#endif

static void (*compress_blocks)(uint32_t h[8], const uint8_t *p, size_t n) = compress_blocks_plain;
static pthread_once_t pick_once = PTHREAD_ONCE_INIT;

static void pick_compress(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    const char *plain = getenv("QHX_SHA256_PLAIN");
    if (cpu_has_sha() && !(plain && plain[0] == '1')) compress_blocks = compress_blocks_shani;
#endif
}

void qhx_sha256_init(qhx_sha256 *s) {
    pthread_once(&pick_once, pick_compress);
    static const uint32_t H0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, H0, sizeof H0);
    s->n_bytes = 0;
    s->fill = 0;
}

void qhx_sha256_update(qhx_sha256 *s, const void *data, size_t len) {
    const uint8_t *p = data;
    s->n_bytes += len;
    if (s->fill) {
        size_t take = 64 - s->fill < len ? 64 - s->fill : len;
        memcpy(s->block + s->fill, p, take);
        s->fill += take;
        p += take;
        len -= take;
        if (s->fill < 64) return;
        compress_blocks(s->h, s->block, 1);
        s->fill = 0;
    }
    size_t blocks = len / 64;
    if (blocks) compress_blocks(s->h, p, blocks);
    p += 64 * blocks;
    len -= 64 * blocks;
    memcpy(s->block, p, len);
    s->fill = len;
}

void qhx_sha256_final(qhx_sha256 *s, uint8_t digest[32]) {
    uint64_t bits = s->n_bytes * 8;
    uint8_t pad[72] = {0x80};
    size_t pad_len = (s->fill < 56 ? 56 : 120) - s->fill;
    for (int i = 0; i < 8; i++) pad[pad_len + i] = (uint8_t)(bits >> (56 - 8 * i));
    uint64_t keep = s->n_bytes;
    qhx_sha256_update(s, pad, pad_len + 8);
    s->n_bytes = keep;
    for (int i = 0; i < 8; i++) {
        digest[4 * i] = (uint8_t)(s->h[i] >> 24);
        digest[4 * i + 1] = (uint8_t)(s->h[i] >> 16);
        digest[4 * i + 2] = (uint8_t)(s->h[i] >> 8);
        digest[4 * i + 3] = (uint8_t)s->h[i];
    }
}

void qhx_sha256_hex(const uint8_t digest[32], char hex[65]) {
    static const char X[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        hex[2 * i] = X[digest[i] >> 4];
        hex[2 * i + 1] = X[digest[i] & 15];
    }
    hex[64] = '\0';
}

qhx_status qhx_sha256_file(const char *path, char hex[65], qhx_error *err) {
    hex[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block the open */
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
    const size_t chunk = (size_t)1 << 20;
    uint8_t *buf = qhx_malloc(chunk);
    if (!buf) {
        close(fd);
        return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", path);
    }
    qhx_sha256 s;
    qhx_sha256_init(&s);
    uint64_t total = 0;
    for (;;) {
        ssize_t n = read(fd, buf, chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            int e = errno;
            qhx_free(buf);
            close(fd);
            return qhx_fail(err, QHX_E_IO, "%s: read failed at byte %llu: %s", path,
                            (unsigned long long)total, strerror(e));
        }
        if (n == 0) break;
        qhx_sha256_update(&s, buf, (size_t)n);
        total += (uint64_t)n;
    }
    qhx_free(buf);
    close(fd);
    uint8_t d[32];
    qhx_sha256_final(&s, d);
    qhx_sha256_hex(d, hex);
    return QHX_OK;
}
