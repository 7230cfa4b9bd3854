/* core/sha256: SHA-256 (FIPS 180-4), streaming, for checking artifact files against the hashes
 * a manifest records. Plain C, no allocation; not constant-time (hashes public files only). */
#ifndef QHX_CORE_SHA256_H
#define QHX_CORE_SHA256_H

#include "core/status.h"

#include <stddef.h>
#include <stdint.h>

typedef struct qhx_sha256 {
    uint32_t h[8];
    uint64_t n_bytes;
    uint8_t block[64];
    size_t fill;
} qhx_sha256;

void qhx_sha256_init(qhx_sha256 *s);
void qhx_sha256_update(qhx_sha256 *s, const void *data, size_t len);
/* Finish and write the 32-byte digest. s must be re-initialised before reuse. */
void qhx_sha256_final(qhx_sha256 *s, uint8_t digest[32]);

/* Digest as 64 lower-case hex characters plus NUL. */
void qhx_sha256_hex(const uint8_t digest[32], char hex[65]);

/* Hash a whole file, reading it in chunks (no mapping), into hex[65]. */
qhx_status qhx_sha256_file(const char *path, char hex[65] /* OUT */, qhx_error *err);

#endif
