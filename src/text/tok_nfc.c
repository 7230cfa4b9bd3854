/* text/tok_nfc: the NFC normalizer, as the reference tokenizer computes it.
 *
 * The reference normalizes with Unicode 9.0.0 tables. Text made only of code points that NFC
 * cannot change is passed through (a quick check over a generated bitmap); other text is
 * normalized with utf8proc, except that code points assigned after Unicode 9.0 are treated as
 * the reference treats them: unknown, so they never decompose, reorder or compose (they split
 * the text into independently normalized runs). See docs/tokenizer.md, "Unicode versions". */
#include "text/tok_internal.h"

#include "core/alloc.h"

#include <string.h>
#include <utf8proc.h>

bool qhx_tok_nfc_quick(const char *text, size_t n) {
    const uint8_t *s = (const uint8_t *)text;
    size_t i = 0;
    while (i < n) {
        while (i + 8 <= n) { /* no byte >= 0xCC in 8 bytes: nothing at or above U+0300 starts */
            uint64_t w;
            memcpy(&w, s + i, 8);
            uint64_t hi = w & 0x8080808080808080ull;
            if (!hi) {
                i += 8;
                continue;
            }
            break;
        }
        if (i >= n) break;
        if (s[i] < 0xCC) {
            i++;
            continue;
        }
        uint32_t cp;
        int k = qhx_tok_utf8_next(s + i, n - i, &cp);
        if (!k) return false; /* not reached: input is validated before */
        if (qhx_tok_nfc_maybe(cp)) return false;
        i += (size_t)k;
    }
    return true;
}

unsigned qhx_tok_scan(const char *text, size_t n) {
    const uint8_t *s = (const uint8_t *)text;
    unsigned flags = 0;
    size_t i = 0;
    while (i < n) {
        while (i + 8 <= n) { /* nothing at or above U+0300 starts in 8 bytes below 0xCC */
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (w & 0x8080808080808080ull) break;
            i += 8;
        }
        if (i >= n) break;
        if (s[i] < 0xCC) {
            i++;
            continue;
        }
        uint32_t cp;
        int k = qhx_tok_utf8_next(s + i, n - i, &cp);
        if (!k) return TOK_SCAN_NFC | TOK_SCAN_EXTRA; /* not reached: input is validated */
        if (qhx_tok_nfc_maybe(cp)) flags |= TOK_SCAN_NFC;
        if (qhx_tok_unicode_extra(cp)) flags |= TOK_SCAN_EXTRA;
        if (flags == (TOK_SCAN_NFC | TOK_SCAN_EXTRA)) break;
        i += (size_t)k;
    }
    return flags;
}

/* Normalize one run (all code points known to Unicode 9.0) with utf8proc; append to out. */
static bool nfc_run(const uint8_t *s, size_t n, tok_buf *out) {
    const utf8proc_option_t opt = UTF8PROC_STABLE | UTF8PROC_COMPOSE;
    int32_t local[256];
    int32_t *buf = local;
    utf8proc_ssize_t cap = 256;
    if (n > (size_t)(PTRDIFF_MAX / 8)) return false;
    for (;;) {
        utf8proc_ssize_t m = utf8proc_decompose(s, (utf8proc_ssize_t)n, buf, cap, opt);
        if (m < 0) goto fail;
        if (m > cap) {
            if (buf != local) qhx_free(buf);
            size_t bytes;
            if (!qhx_size_mul((size_t)m, sizeof(int32_t), &bytes)) return false;
            buf = qhx_malloc(bytes);
            if (!buf) return false;
            cap = m;
            continue;
        }
        m = utf8proc_normalize_utf32(buf, m, opt);
        if (m < 0) goto fail;
        size_t bytes;
        if (!qhx_size_mul((size_t)m, 4, &bytes) || !qhx_tok_buf_reserve(out, bytes)) goto fail;
        for (utf8proc_ssize_t j = 0; j < m; j++)
            out->n += qhx_tok_utf8_put(out->p + out->n, (uint32_t)buf[j]);
        if (buf != local) qhx_free(buf);
        return true;
    }
fail:
    if (buf != local) qhx_free(buf);
    return false;
}

bool qhx_tok_nfc(const char *text, size_t n, tok_buf *out) {
    if (qhx_tok_nfc_quick(text, n)) return qhx_tok_buf_put(out, text, n);
    const uint8_t *s = (const uint8_t *)text;
    size_t i = 0, run = 0;
    while (i < n) {
        uint32_t cp;
        int k = s[i] < 0x80 ? (cp = s[i], 1) : qhx_tok_utf8_next(s + i, n - i, &cp);
        if (!k) return false;
        if (cp >= 0x300 && !qhx_tok_unicode9_assigned(cp)) {
            if (i > run && !nfc_run(s + run, i - run, out)) return false;
            if (!qhx_tok_buf_put(out, s + i, (size_t)k)) return false;
            run = i + (size_t)k;
        }
        i += (size_t)k;
    }
    if (i > run && !nfc_run(s + run, i - run, out)) return false;
    return true;
}
