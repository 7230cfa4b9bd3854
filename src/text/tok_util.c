/* text/tok_util: growable buffers, hashing, UTF-8 and the GPT-2 byte-level alphabet. */
#include "text/tok_internal.h"

#include "core/alloc.h"

#include <string.h>

/* ---- growable buffers ------------------------------------------------------------------ */

bool qhx_tok_ids_push(tok_ids *v, int32_t id) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        size_t bytes;
        if (!qhx_size_mul(cap, sizeof *v->p, &bytes)) return false;
        int32_t *p = qhx_realloc(v->p, bytes);
        if (!p) return false;
        v->p = p;
        v->cap = cap;
    }
    v->p[v->n++] = id;
    return true;
}

/* ---- hashing --------------------------------------------------------------------------- */

static inline uint64_t mix64(uint64_t x) {
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ull;
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ull;
    x ^= x >> 32;
    return x;
}

/* Word-at-a-time multiply-xorshift; strings here are short (tokens, words). Part of the
 * binary format (the vocab index): changing it needs a new format version. */
uint64_t qhx_tok_hash(const void *data, size_t n) {
    const uint8_t *p = data;
    uint64_t h = 0x9e3779b97f4a7c15ull ^ ((uint64_t)n * 0xff51afd7ed558ccdull);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
        p += 8;
        n -= 8;
    }
    if (n) {
        uint64_t w = 0;
        memcpy(&w, p, n);
        h = (h ^ w) * 0x94d049bb133111ebull;
    }
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 32);
}

/* Four independent lanes over 32-byte blocks, then folded; stable across platforms (bytes
 * are read little-endian). Changing it changes the binary tokenizer format. */
uint64_t qhx_tok_file_hash(const void *data, size_t n) {
    const uint8_t *p = data;
    const uint64_t P1 = 0x9e3779b185ebca87ull, P2 = 0xc2b2ae3d27d4eb4full;
    uint64_t v[4] = {P1 + P2, P2, 0, 0 - P1};
    size_t len = n;
    while (n >= 32) {
        for (int k = 0; k < 4; k++) {
            uint64_t w = 0;
            for (int b = 0; b < 8; b++) w |= (uint64_t)p[k * 8 + b] << (8 * b);
            v[k] += w * P2;
            v[k] = (v[k] << 31 | v[k] >> 33) * P1;
        }
        p += 32;
        n -= 32;
    }
    uint64_t h = len * P1;
    for (int k = 0; k < 4; k++) h = (h ^ mix64(v[k])) * P2;
    while (n--) h = (h ^ *p++) * P1;
    return mix64(h);
}

/* ---- UTF-8 (one step: core/json_scan.h) ------------------------------------------------ */

size_t qhx_tok_utf8_check(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        /* ASCII runs, 8 bytes at a time */
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (w & 0x8080808080808080ull) break;
            i += 8;
        }
        if (i >= n) break;
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        int k = qhx_tok_utf8_next(s + i, n - i, &cp);
        if (!k) return i;
        i += (size_t)k;
    }
    return n;
}


/* Length of the longest prefix of s[0..n) that can begin a well-formed sequence (the
 * "maximal subpart"); 0 if s[0] cannot start one. Sets *complete if it is a whole sequence. */
static size_t utf8_subpart(const uint8_t *s, size_t n, int *complete) {
    uint8_t c = s[0];
    size_t need;
    uint8_t lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    *complete = 0;
    if (c < 0x80) {
        *complete = 1;
        return 1;
    }
    if (c >= 0xC2 && c <= 0xDF) need = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else return 0;
    size_t k = 1;
    while (k < need && k < n) {
        uint8_t b = s[k];
        if (k == 1 ? (b < lo || b > hi) : (b & 0xC0) != 0x80) break;
        k++;
    }
    if (k == need) *complete = 1;
    return k;
}

bool qhx_tok_utf8_lossy(tok_buf *out, const uint8_t *s, size_t n, bool hold_tail,
                        size_t *consumed) {
    static const char repl[3] = {(char)0xEF, (char)0xBF, (char)0xBD};
    size_t i = 0, run = 0; /* s[run..i) is valid text not yet copied */
    if (consumed) *consumed = 0;
    if (!n) return true;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        int complete;
        size_t k = utf8_subpart(s + i, n - i, &complete);
        if (complete) {
            i += k;
            continue;
        }
        if (!qhx_tok_buf_put(out, s + run, i - run)) return false;
        if (k > 0 && i + k == n && hold_tail) { /* may still be completed by later bytes */
            if (consumed) *consumed = i;
            return true;
        }
        if (!qhx_tok_buf_put(out, repl, 3)) return false;
        i += k ? k : 1;
        run = i;
    }
    if (!qhx_tok_buf_put(out, s + run, i - run)) return false;
    if (consumed) *consumed = n;
    return true;
}

/* ---- GPT-2 byte-level alphabet ----------------------------------------------------------- */

/* Printable bytes (0x21-0x7E, 0xA1-0xAC, 0xAE-0xFF) stand for themselves; the other 68 bytes
 * map, in byte order, to U+0100..U+0143 (so 0x20 is U+0120 'Ġ', 0x0A is U+010A 'Ċ'). */
const uint16_t qhx_tok_byte_to_cp[256] = {
    0x100, 0x101, 0x102, 0x103, 0x104, 0x105, 0x106, 0x107, 0x108, 0x109, 0x10A, 0x10B,
    0x10C, 0x10D, 0x10E, 0x10F, 0x110, 0x111, 0x112, 0x113, 0x114, 0x115, 0x116, 0x117,
    0x118, 0x119, 0x11A, 0x11B, 0x11C, 0x11D, 0x11E, 0x11F, 0x120, 0x021, 0x022, 0x023,
    0x024, 0x025, 0x026, 0x027, 0x028, 0x029, 0x02A, 0x02B, 0x02C, 0x02D, 0x02E, 0x02F,
    0x030, 0x031, 0x032, 0x033, 0x034, 0x035, 0x036, 0x037, 0x038, 0x039, 0x03A, 0x03B,
    0x03C, 0x03D, 0x03E, 0x03F, 0x040, 0x041, 0x042, 0x043, 0x044, 0x045, 0x046, 0x047,
    0x048, 0x049, 0x04A, 0x04B, 0x04C, 0x04D, 0x04E, 0x04F, 0x050, 0x051, 0x052, 0x053,
    0x054, 0x055, 0x056, 0x057, 0x058, 0x059, 0x05A, 0x05B, 0x05C, 0x05D, 0x05E, 0x05F,
    0x060, 0x061, 0x062, 0x063, 0x064, 0x065, 0x066, 0x067, 0x068, 0x069, 0x06A, 0x06B,
    0x06C, 0x06D, 0x06E, 0x06F, 0x070, 0x071, 0x072, 0x073, 0x074, 0x075, 0x076, 0x077,
    0x078, 0x079, 0x07A, 0x07B, 0x07C, 0x07D, 0x07E, 0x121, 0x122, 0x123, 0x124, 0x125,
    0x126, 0x127, 0x128, 0x129, 0x12A, 0x12B, 0x12C, 0x12D, 0x12E, 0x12F, 0x130, 0x131,
    0x132, 0x133, 0x134, 0x135, 0x136, 0x137, 0x138, 0x139, 0x13A, 0x13B, 0x13C, 0x13D,
    0x13E, 0x13F, 0x140, 0x141, 0x142, 0x0A1, 0x0A2, 0x0A3, 0x0A4, 0x0A5, 0x0A6, 0x0A7,
    0x0A8, 0x0A9, 0x0AA, 0x0AB, 0x0AC, 0x143, 0x0AE, 0x0AF, 0x0B0, 0x0B1, 0x0B2, 0x0B3,
    0x0B4, 0x0B5, 0x0B6, 0x0B7, 0x0B8, 0x0B9, 0x0BA, 0x0BB, 0x0BC, 0x0BD, 0x0BE, 0x0BF,
    0x0C0, 0x0C1, 0x0C2, 0x0C3, 0x0C4, 0x0C5, 0x0C6, 0x0C7, 0x0C8, 0x0C9, 0x0CA, 0x0CB,
    0x0CC, 0x0CD, 0x0CE, 0x0CF, 0x0D0, 0x0D1, 0x0D2, 0x0D3, 0x0D4, 0x0D5, 0x0D6, 0x0D7,
    0x0D8, 0x0D9, 0x0DA, 0x0DB, 0x0DC, 0x0DD, 0x0DE, 0x0DF, 0x0E0, 0x0E1, 0x0E2, 0x0E3,
    0x0E4, 0x0E5, 0x0E6, 0x0E7, 0x0E8, 0x0E9, 0x0EA, 0x0EB, 0x0EC, 0x0ED, 0x0EE, 0x0EF,
    0x0F0, 0x0F1, 0x0F2, 0x0F3, 0x0F4, 0x0F5, 0x0F6, 0x0F7, 0x0F8, 0x0F9, 0x0FA, 0x0FB,
    0x0FC, 0x0FD, 0x0FE, 0x0FF,
};

int qhx_tok_cp_to_byte(uint32_t cp) {
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF))
        return (int)cp;
    if (cp < 0x100 || cp > 0x143) return -1;
    /* the (cp - 0x100)-th byte that is not printable */
    unsigned k = cp - 0x100;
    if (k <= 0x20) return (int)k;              /* 0x00-0x20 */
    if (k <= 0x20 + 34) return (int)(0x7F + (k - 0x21)); /* 0x7F-0xA0 */
    return 0xAD;
}
