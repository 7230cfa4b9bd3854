/* image/decode: PNG (libspng) and JPEG (libjpeg-turbo) bytes to RGB8, converted the way the
 * reference's loader does it (PIL: Image.open, ImageOps.exif_transpose, convert("RGB")).
 * Width, height and decoded size are checked against caps from the header, before any pixel
 * buffer is allocated. Not here: resampling (resize.c) and patching (preprocess.c). */
#include "image/image.h"

#include "core/alloc.h"
#include "core/file.h"

#include <setjmp.h>
#include <stdio.h> /* FILE, needed before jpeglib.h */
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>
#include <spng.h>

#define ENCODED_MAX_BYTES ((size_t)256 << 20)
#define PNG_CHUNK_MAX ((size_t)64 << 20)

qhx_image_limits qhx_image_default_limits(void) {
    qhx_image_limits l = {QHX_IMAGE_MAX_SIDE, QHX_IMAGE_MAX_SIDE, QHX_IMAGE_MAX_BYTES};
    return l;
}

void qhx_image_deinit(qhx_image *img) {
    if (!img) return;
    qhx_free(img->rgb);
    memset(img, 0, sizeof *img);
}

/* Check the header's size against the caps; *bytes = w * h * 3. */
static qhx_status check_size(int64_t w, int64_t h, const qhx_image_limits *lim, const char *label,
                             size_t *bytes, qhx_error *err) {
    if (w < 1 || h < 1)
        return qhx_fail(err, QHX_E_FORMAT, "%s: image size %lldx%lld is empty", label,
                        (long long)w, (long long)h);
    if (w > lim->max_width || h > lim->max_height)
        return qhx_fail(err, QHX_E_LIMIT, "%s: image size %lldx%lld exceeds the cap %lldx%lld",
                        label, (long long)w, (long long)h, (long long)lim->max_width,
                        (long long)lim->max_height);
    size_t n;
    if (!qhx_size_mul((size_t)w, (size_t)h, &n) || !qhx_size_mul(n, 3, &n) || n > lim->max_bytes)
        return qhx_fail(err, QHX_E_LIMIT,
                        "%s: image size %lldx%lld decodes to more than the cap of %zu bytes",
                        label, (long long)w, (long long)h, lim->max_bytes);
    *bytes = n;
    return QHX_OK;
}

/* ---- EXIF orientation ------------------------------------------------------ */

static unsigned rd16(const uint8_t *p, int be) { return be ? (unsigned)(p[0] << 8 | p[1]) : (unsigned)(p[1] << 8 | p[0]); }
static uint32_t rd32(const uint8_t *p, int be) {
    return be ? ((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3])
              : ((uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0]);
}

/* The Orientation tag (0x0112) of IFD0 of a TIFF-structured EXIF block: its value (1..8; 0 for
 * one PIL does not act on), or -1 when the tag is absent or the block unreadable. */
static int exif_tag(const uint8_t *t, size_t n) {
    if (n < 8) return -1;
    int be;
    if (t[0] == 'I' && t[1] == 'I') be = 0;
    else if (t[0] == 'M' && t[1] == 'M') be = 1;
    else return -1;
    if (rd16(t + 2, be) != 42) return -1;
    uint32_t ifd = rd32(t + 4, be);
    if (ifd > n || n - ifd < 2) return -1;
    unsigned count = rd16(t + ifd, be);
    for (unsigned i = 0; i < count; i++) {
        size_t e = (size_t)ifd + 2 + (size_t)i * 12;
        if (e + 12 > n) return -1;
        if (rd16(t + e, be) != 0x0112) continue;
        unsigned type = rd16(t + e + 2, be);
        unsigned v = type == 3 ? rd16(t + e + 8, be) : type == 4 ? (unsigned)rd32(t + e + 8, be) : 0;
        return v >= 1 && v <= 8 ? (int)v : 0;
    }
    return -1;
}

/* The orientation to apply (1 = none) from an EXIF block; PIL leaves an image without a
 * readable tag as it is. */
static int exif_orientation(const uint8_t *t, size_t n) {
    int v = exif_tag(t, n);
    return v >= 1 ? v : 1;
}

/* Apply orientation o (2..8) as PIL's exif_transpose: 2 FLIP_LEFT_RIGHT, 3 ROTATE_180,
 * 4 FLIP_TOP_BOTTOM, 5 TRANSPOSE, 6 ROTATE_270, 7 TRANSVERSE, 8 ROTATE_90 (counter-clockwise). */
static qhx_status apply_orientation(qhx_image *img, int o, qhx_error *err) {
    if (o < 2 || o > 8) return QHX_OK;
    int64_t W = img->width, H = img->height;
    int swap = o >= 5;
    int64_t ow = swap ? H : W, oh = swap ? W : H;
    uint8_t *dst = qhx_malloc((size_t)W * (size_t)H * 3);
    if (!dst) return qhx_fail(err, QHX_E_NOMEM, "image: out of memory rotating %lldx%lld", (long long)W, (long long)H);
    for (int64_t y = 0; y < oh; y++) {
        for (int64_t x = 0; x < ow; x++) {
            int64_t sx, sy;
            switch (o) {
            case 2: sx = W - 1 - x; sy = y; break;
            case 3: sx = W - 1 - x; sy = H - 1 - y; break;
            case 4: sx = x; sy = H - 1 - y; break;
            case 5: sx = y; sy = x; break;
            case 6: sx = y; sy = H - 1 - x; break;
            case 7: sx = W - 1 - y; sy = H - 1 - x; break;
            default: sx = W - 1 - y; sy = x; break; /* 8 */
            }
            memcpy(dst + (y * ow + x) * 3, img->rgb + (sy * W + sx) * 3, 3);
        }
    }
    qhx_free(img->rgb);
    img->rgb = dst;
    img->width = ow;
    img->height = oh;
    return QHX_OK;
}

/* ---- PNG orientation: eXIf, then text chunks, then XMP ------------------------------------
 * As Pillow (PngImagePlugin, Image.getexif) reads it after the whole file is loaded: the eXIf
 * chunk; else a text chunk (tEXt, zTXt or iTXt) "Raw profile type exif", whose lines after the
 * third hold the EXIF block in hex; and, when neither has an Orientation tag, the XMP packet
 * (a text chunk "XML:com.adobe.xmp"): the first digit after `tiff:Orientation="` or
 * `tiff:Orientation>`. With several chunks of one key, the last counts. */

static int hex_digit(int c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static int hex_space(int c) { return c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r'; }

/* The EXIF block of a "Raw profile type exif" text (decoded into out, which holds n bytes):
 * its length, or -1 when the hex is malformed (Pillow then fails; here the image just keeps
 * its orientation). */
static long raw_profile_exif(const char *t, size_t n, uint8_t *out) {
    size_t i = 0;
    for (int lines = 0; lines < 3 && i < n; i++)
        if (t[i] == '\n') lines++;
    long len = 0;
    int hi = -1;
    for (; i < n; i++) {
        int c = (unsigned char)t[i];
        if (c == '\n') continue; /* the lines are joined */
        if (hi < 0 && hex_space(c)) continue;
        int d = hex_digit(c);
        if (d < 0) return -1;
        if (hi < 0) {
            hi = d;
        } else {
            out[len++] = (uint8_t)(hi << 4 | d);
            hi = -1;
        }
    }
    return hi < 0 ? len : -1;
}

/* Drop the "Exif\0\0" header Pillow strips (once or twice). */
static const uint8_t *skip_exif_header(const uint8_t *p, size_t *n) {
    for (int k = 0; k < 2 && *n >= 6 && !memcmp(p, "Exif\0\0", 6); k++) p += 6, *n -= 6;
    return p;
}

/* The XMP orientation digit (0..9), or -1 when there is none. */
static int xmp_orientation(const char *t, size_t n) {
    static const char key[] = "tiff:Orientation";
    size_t k = sizeof key - 1;
    for (size_t i = 0; i + k < n; i++) {
        if (memcmp(t + i, key, k)) continue;
        size_t j = i + k;
        if (t[j] == '=' && j + 2 < n && t[j + 1] == '"' && t[j + 2] >= '0' && t[j + 2] <= '9') return t[j + 2] - '0';
        if (t[j] == '>' && j + 1 < n && t[j + 1] >= '0' && t[j + 1] <= '9') return t[j + 1] - '0';
    }
    return -1;
}

/* The orientation of a decoded PNG (1 = none), or 0 when out of memory. */
static int png_orientation(spng_ctx *ctx) {
    int v = -1;
    struct spng_exif ex;
    int have_exif = spng_get_exif(ctx, &ex) == 0 && ex.data;
    if (have_exif) v = exif_tag((const uint8_t *)ex.data, ex.length);
    uint32_t n = 0;
    struct spng_text *text = NULL;
    if (spng_get_text(ctx, NULL, &n) == 0 && n) {
        if (!(text = qhx_calloc(n, sizeof *text))) return 0;
        if (spng_get_text(ctx, text, &n)) n = 0;
    }
    const struct spng_text *raw = NULL, *xmp = NULL;
    for (uint32_t i = 0; text && i < n; i++) {
        if (!strcmp(text[i].keyword, "Raw profile type exif")) raw = &text[i];
        if (!strcmp(text[i].keyword, "XML:com.adobe.xmp")) xmp = &text[i];
    }
    if (!have_exif && raw) {
        uint8_t *buf = qhx_malloc(raw->length / 2 + 1);
        if (!buf) {
            qhx_free(text);
            return 0;
        }
        long len = raw_profile_exif(raw->text, raw->length, buf);
        if (len > 0) {
            size_t m = (size_t)len;
            const uint8_t *p = skip_exif_header(buf, &m);
            v = exif_tag(p, m);
        }
        qhx_free(buf);
    }
    if (v < 0 && xmp) v = xmp_orientation(xmp->text, xmp->length);
    qhx_free(text);
    return v >= 2 && v <= 8 ? v : 1;
}

/* ---- PNG ---------------------------------------------------------------------- */

static qhx_status decode_png(const uint8_t *buf, size_t len, const qhx_image_limits *lim,
                             const char *label, qhx_image *out, int *orientation, qhx_error *err) {
    qhx_status rc = QHX_OK;
    uint8_t *tmp = NULL;
    spng_ctx *ctx = spng_ctx_new(0);
    if (!ctx) return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", label);
    uint32_t cap_w = lim->max_width > 0x7fffffff ? 0x7fffffff : (uint32_t)lim->max_width;
    uint32_t cap_h = lim->max_height > 0x7fffffff ? 0x7fffffff : (uint32_t)lim->max_height;
    spng_set_image_limits(ctx, cap_w, cap_h);
    spng_set_chunk_limits(ctx, PNG_CHUNK_MAX, PNG_CHUNK_MAX);
    int e = spng_set_png_buffer(ctx, buf, len);
    struct spng_ihdr ihdr;
    if (!e) e = spng_get_ihdr(ctx, &ihdr);
    if ((e == SPNG_EUSER_WIDTH || e == SPNG_EUSER_HEIGHT) && len >= 24) {
        /* over the caps: say so with the size, as for JPEG (IHDR: width, height at bytes 16, 20) */
        rc = qhx_fail(err, QHX_E_LIMIT, "%s: image size %lux%lu exceeds the cap %lldx%lld", label,
                      (unsigned long)rd32(buf + 16, 1), (unsigned long)rd32(buf + 20, 1), (long long)lim->max_width,
                      (long long)lim->max_height);
        goto fail;
    }
    if (e) {
        rc = qhx_fail(err, QHX_E_FORMAT, "%s: PNG header: %s", label, spng_strerror(e));
        goto fail;
    }
    size_t bytes;
    if ((rc = check_size(ihdr.width, ihdr.height, lim, label, &bytes, err))) goto fail;
    size_t npx = (size_t)ihdr.width * ihdr.height;
    out->rgb = qhx_malloc(bytes);
    if (!out->rgb) { rc = qhx_fail(err, QHX_E_NOMEM, "%s: out of memory for %zu bytes", label, bytes); goto fail; }
    out->width = ihdr.width;
    out->height = ihdr.height;
    if (ihdr.color_type == SPNG_COLOR_TYPE_GRAYSCALE && ihdr.bit_depth == 16) {
        /* PIL opens 16-bit grayscale as mode I and convert("RGB") clips each value at 255. */
        size_t n16 = npx * 2;
        if (!(tmp = qhx_malloc(n16))) { rc = qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", label); goto fail; }
        e = spng_decode_image(ctx, tmp, n16, SPNG_FMT_PNG, 0);
        if (!e) {
            for (size_t i = 0; i < npx; i++) {
                uint16_t v;
                memcpy(&v, tmp + 2 * i, 2); /* host-endian */
                uint8_t g = v > 255 ? 255 : (uint8_t)v;
                out->rgb[3 * i] = out->rgb[3 * i + 1] = out->rgb[3 * i + 2] = g;
            }
        }
    } else {
        /* RGBA8 is defined for every color type and depth: 16-bit samples keep their high byte,
         * low-depth gray is scaled to 0..255, palettes are looked up; alpha is dropped below. */
        size_t n4;
        if (spng_decoded_image_size(ctx, SPNG_FMT_RGBA8, &n4) || n4 != npx * 4) {
            rc = qhx_fail(err, QHX_E_FORMAT, "%s: PNG format not decodable", label);
            goto fail;
        }
        if (!(tmp = qhx_malloc(n4))) { rc = qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", label); goto fail; }
        e = spng_decode_image(ctx, tmp, n4, SPNG_FMT_RGBA8, 0);
        if (!e)
            for (size_t i = 0; i < npx; i++) memcpy(out->rgb + 3 * i, tmp + 4 * i, 3);
    }
    if (e) { rc = qhx_fail(err, QHX_E_FORMAT, "%s: PNG data: %s", label, spng_strerror(e)); goto fail; }
    if (!(*orientation = png_orientation(ctx))) {
        rc = qhx_fail(err, QHX_E_NOMEM, "%s: out of memory reading the PNG's text chunks", label);
        goto fail;
    }
    qhx_free(tmp);
    spng_ctx_free(ctx);
    return QHX_OK;
fail:
    qhx_free(tmp);
    spng_ctx_free(ctx);
    qhx_image_deinit(out);
    return rc;
}

/* ---- JPEG --------------------------------------------------------------------- */

typedef struct jpeg_err {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    int eof; /* the data ended before the image: PIL refuses such a file ("truncated") */
} jpeg_err;

static void jerr_exit(j_common_ptr c) { longjmp(((jpeg_err *)c->err)->jb, 1); }
static void jerr_emit(j_common_ptr c, int level) {
    if (level < 0 && c->err->msg_code == JWRN_JPEG_EOF) ((jpeg_err *)c->err)->eof = 1;
}
static void jerr_output(j_common_ptr c) { (void)c; }

/* PIL's cmyk2rgb: nk = 255 - k; out = clip(nk - nk * c / 255) with its rounding MULDIV255. */
static uint8_t cmyk_chan(unsigned c, unsigned k) {
    unsigned nk = 255 - k, t = c * nk + 128;
    int v = (int)nk - (int)(((t >> 8) + t) >> 8);
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* Everything the longjmp may cross lives in this struct (no clobbered locals). */
typedef struct jpeg_job {
    struct jpeg_decompress_struct cinfo;
    jpeg_err jerr;
    uint8_t *row;
    int created;
} jpeg_job;

static qhx_status decode_jpeg(const uint8_t *buf, size_t len, const qhx_image_limits *lim,
                              const char *label, qhx_image *out, int *orientation, qhx_error *err) {
    jpeg_job *job = qhx_calloc(1, sizeof *job);
    if (!job) return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", label);
    qhx_status rc = QHX_OK;
    struct jpeg_decompress_struct *ci = &job->cinfo;
    ci->err = jpeg_std_error(&job->jerr.pub);
    job->jerr.pub.error_exit = jerr_exit;
    job->jerr.pub.emit_message = jerr_emit;
    job->jerr.pub.output_message = jerr_output;
    if (setjmp(job->jerr.jb)) {
        char msg[JMSG_LENGTH_MAX];
        job->jerr.pub.format_message((j_common_ptr)ci, msg);
        rc = qhx_fail(err, QHX_E_FORMAT, "%s: JPEG: %s", label, msg);
        goto done;
    }
    jpeg_create_decompress(ci);
    job->created = 1;
    jpeg_mem_src(ci, buf, (unsigned long)len);
    jpeg_save_markers(ci, JPEG_APP0 + 1, 0xffff);
    jpeg_read_header(ci, TRUE);
    size_t bytes;
    if ((rc = check_size(ci->image_width, ci->image_height, lim, label, &bytes, err))) goto done;
    if (ci->data_precision != 8) {
        rc = qhx_fail(err, QHX_E_UNSUPPORTED, "%s: %d-bit JPEG samples are not supported", label, ci->data_precision);
        goto done;
    }
    /* Working memory (progressive coefficient buffers) is bounded too; past it libjpeg fails. */
    ci->mem->max_memory_to_use = (long)(lim->max_bytes > (size_t)1 << 30 ? (size_t)1 << 30 : lim->max_bytes) * 3;
    int cmyk = 0, gray = 0;
    switch (ci->jpeg_color_space) {
    case JCS_GRAYSCALE: ci->out_color_space = JCS_GRAYSCALE; gray = 1; break;
    case JCS_CMYK: case JCS_YCCK: ci->out_color_space = JCS_CMYK; cmyk = 1; break;
    default: ci->out_color_space = JCS_RGB; break;
    }
    for (jpeg_saved_marker_ptr m = ci->marker_list; m; m = m->next) {
        if (m->marker == JPEG_APP0 + 1 && m->data_length >= 6 && !memcmp(m->data, "Exif\0\0", 6)) {
            *orientation = exif_orientation(m->data + 6, m->data_length - 6);
            break;
        }
    }
    jpeg_start_decompress(ci);
    int64_t W = ci->output_width, H = ci->output_height;
    if (W != (int64_t)ci->image_width || H != (int64_t)ci->image_height || ci->output_components != (gray ? 1 : cmyk ? 4 : 3)) {
        rc = qhx_fail(err, QHX_E_FORMAT, "%s: JPEG: unexpected output layout", label);
        goto done;
    }
    out->rgb = qhx_malloc(bytes);
    job->row = qhx_malloc((size_t)W * 4);
    if (!out->rgb || !job->row) { rc = qhx_fail(err, QHX_E_NOMEM, "%s: out of memory for %zu bytes", label, bytes); goto done; }
    out->width = W;
    out->height = H;
    /* Pillow reads every CMYK JPEG as "CMYK;I" (Adobe's inverted convention), with an Adobe
     * marker or without one: so do we */
    int invert = cmyk;
    while (ci->output_scanline < ci->output_height) {
        int64_t y = ci->output_scanline;
        JSAMPROW rp = job->row;
        if (jpeg_read_scanlines(ci, &rp, 1) != 1) break;
        uint8_t *d = out->rgb + y * W * 3;
        for (int64_t x = 0; x < W; x++) {
            const uint8_t *s = job->row + x * (gray ? 1 : cmyk ? 4 : 3);
            if (gray) {
                d[3 * x] = d[3 * x + 1] = d[3 * x + 2] = s[0];
            } else if (cmyk) {
                unsigned c = s[0], m = s[1], yy = s[2], k = s[3];
                if (invert) { c = 255 - c; m = 255 - m; yy = 255 - yy; k = 255 - k; }
                d[3 * x] = cmyk_chan(c, k);
                d[3 * x + 1] = cmyk_chan(m, k);
                d[3 * x + 2] = cmyk_chan(yy, k);
            } else {
                memcpy(d + 3 * x, s, 3);
            }
        }
    }
    if (job->jerr.eof || ci->output_scanline < ci->output_height) {
        rc = qhx_fail(err, QHX_E_FORMAT, "%s: JPEG data is truncated", label);
        goto done;
    }
    jpeg_finish_decompress(ci);
done:
    if (job->created) jpeg_destroy_decompress(ci);
    qhx_free(job->row);
    qhx_free(job);
    if (rc) qhx_image_deinit(out);
    return rc;
}

/* ---- entry points ------------------------------------------------------------- */

qhx_status qhx_image_decode(const uint8_t *buf, size_t len, const qhx_image_limits *lim,
                            const char *label, qhx_image *out, qhx_error *err) {
    if (!out) return qhx_fail(err, QHX_E_ARG, "image: no output");
    memset(out, 0, sizeof *out);
    if (!label) label = "image";
    qhx_image_limits dl = qhx_image_default_limits();
    if (!lim) lim = &dl;
    if (!buf && len) return qhx_fail(err, QHX_E_ARG, "%s: no data", label);
    int orientation = 1;
    qhx_status rc;
    static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (len >= 8 && !memcmp(buf, png_sig, 8))
        rc = decode_png(buf, len, lim, label, out, &orientation, err);
    else if (len >= 3 && buf[0] == 0xff && buf[1] == 0xd8 && buf[2] == 0xff)
        rc = decode_jpeg(buf, len, lim, label, out, &orientation, err);
    else
        return qhx_fail(err, QHX_E_FORMAT, "%s: not a PNG or JPEG file (%zu bytes)", label, len);
    if (rc) return rc;
    if ((rc = apply_orientation(out, orientation, err))) qhx_image_deinit(out);
    return rc;
}

qhx_status qhx_image_load(const char *path, const qhx_image_limits *lim, qhx_image *out,
                          qhx_error *err) {
    if (out) memset(out, 0, sizeof *out);
    char *data = NULL;
    size_t n = 0;
    qhx_status rc = qhx_file_read_all(path, ENCODED_MAX_BYTES, &data, &n, err);
    if (rc) return rc;
    rc = qhx_image_decode((const uint8_t *)data, n, lim, path, out, err);
    qhx_free(data);
    return rc;
}
