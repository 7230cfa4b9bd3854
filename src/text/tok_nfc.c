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

/* ---- one run -----------------------------------------------------------------------------
 * utf8proc_decompose puts combining marks in canonical order with a bubble sort, quadratic in a
 * run of marks (a 256 KB run took a minute). The same three steps are done here, each linear
 * or n log n: utf8proc decomposes one code point at a time, each run of marks (combining class
 * > 0) is sorted here by class with a stable merge sort (what the bubble sort computes: it
 * swaps only strictly descending neighbours), and utf8proc composes (one pass). */

typedef struct cp_buf {
    int32_t *p;
    size_t n, cap;
} cp_buf;

static bool cp_reserve(cp_buf *b, size_t extra) {
    if (b->cap - b->n >= extra) return true;
    size_t want = b->cap ? b->cap : 256, bytes;
    while (want - b->n < extra)
        if (!qhx_size_mul(want, 2, &want)) return false;
    if (!qhx_size_mul(want, sizeof(int32_t), &bytes)) return false;
    int32_t *p = qhx_realloc(b->p, bytes);
    if (!p) return false;
    b->p = p;
    b->cap = want;
    return true;
}

static int ccc(int32_t cp) { return utf8proc_get_property(cp)->combining_class; }

/* Stable merge sort of a[0..n) by combining class; tmp holds n entries. */
static void sort_marks(int32_t *a, int32_t *tmp, size_t n) {
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) tmp[k++] = ccc(a[j]) < ccc(a[i]) ? a[j++] : a[i++];
            while (i < mid) tmp[k++] = a[i++];
            while (j < hi) tmp[k++] = a[j++];
        }
        memcpy(a, tmp, n * sizeof *a);
    }
}

/* Canonical order: every maximal run of marks sorted by class. */
static bool canonical_order(cp_buf *b) {
    int32_t *tmp = NULL;
    size_t tmp_cap = 0;
    for (size_t i = 0; i < b->n;) {
        if (!ccc(b->p[i])) {
            i++;
            continue;
        }
        size_t j = i + 1;
        while (j < b->n && ccc(b->p[j])) j++;
        if (j - i > 1 && j - i > tmp_cap) {
            size_t bytes;
            qhx_free(tmp);
            tmp_cap = j - i;
            if (!qhx_size_mul(tmp_cap, sizeof *tmp, &bytes) || !(tmp = qhx_malloc(bytes))) return false;
        }
        if (j - i > 1) sort_marks(b->p + i, tmp, j - i);
        i = j;
    }
    qhx_free(tmp);
    return true;
}

/* Normalize one run (all code points known to Unicode 9.0); append to out. */
static bool nfc_run(const uint8_t *s, size_t n, tok_buf *out) {
    const utf8proc_option_t opt = UTF8PROC_STABLE | UTF8PROC_COMPOSE;
    cp_buf b = {0};
    bool ok = true;
    for (size_t i = 0; ok && i < n;) {
        uint32_t cp;
        int k = qhx_tok_utf8_next(s + i, n - i, &cp);
        if (!k || !cp_reserve(&b, 32)) {
            ok = false;
            break;
        }
        int bound = 0;
        utf8proc_ssize_t m = utf8proc_decompose_char((int32_t)cp, b.p + b.n, 32, opt, &bound);
        ok = m >= 0 && m <= 32; /* a canonical decomposition has at most 4 code points */
        if (ok) b.n += (size_t)m;
        i += (size_t)k;
    }
    ok = ok && canonical_order(&b);
    utf8proc_ssize_t m = ok ? utf8proc_normalize_utf32(b.p, (utf8proc_ssize_t)b.n, opt) : -1;
    size_t bytes;
    ok = m >= 0 && qhx_size_mul((size_t)m, 4, &bytes) && qhx_tok_buf_reserve(out, bytes);
    for (utf8proc_ssize_t j = 0; ok && j < m; j++) out->n += qhx_tok_utf8_put(out->p + out->n, (uint32_t)b.p[j]);
    qhx_free(b.p);
    return ok;
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
