/* test_image: decoding against Pillow's output (tests/data/image, made by make_images.py),
 * resampling against Pillow's Image.resize, smart_resize against Python's formula (values
 * computed with Python's round), normalisation values, and the merge-window patch order. */
#include "t.h"

#include "core/alloc.h"
#include "core/file.h"
#include "image/image.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *data_path(const char *name) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/image/%s", QHX_TEST_DATA, name);
    return buf;
}

static uint8_t *read_raw(const char *name, size_t *n) {
    char *d = NULL;
    qhx_error err;
    if (qhx_file_read_all(data_path(name), 1 << 24, &d, n, &err)) {
        fprintf(stderr, "cannot read %s: %s\n", name, err.msg);
        return NULL;
    }
    return (uint8_t *)d;
}

/* Decode NAME.{png,jpg} and compare with NAME.rgb / NAME.txt from Pillow. */
static void check_decode(const char *file) {
    char base[256], tmp[300];
    snprintf(base, sizeof base, "%s", file);
    *strrchr(base, '.') = 0;
    qhx_image img;
    qhx_error err;
    qhx_status rc = qhx_image_load(data_path(file), NULL, &img, &err);
    CHECK_EQ(rc, QHX_OK);
    if (rc) { fprintf(stderr, "%s: %s\n", file, err.msg); return; }
    snprintf(tmp, sizeof tmp, "%s.txt", base);
    size_t n;
    char *txt = (char *)read_raw(tmp, &n);
    int w = 0, h = 0;
    if (txt) sscanf(txt, "%d %d", &w, &h);
    qhx_free(txt);
    CHECK_EQ(img.width, w);
    CHECK_EQ(img.height, h);
    snprintf(tmp, sizeof tmp, "%s.rgb", base);
    uint8_t *want = read_raw(tmp, &n);
    if (want && n == (size_t)(img.width * img.height * 3)) {
        size_t bad = 0;
        for (size_t i = 0; i < n; i++) bad += want[i] != img.rgb[i];
        if (bad) fprintf(stderr, "%s: %zu of %zu bytes differ from Pillow\n", file, bad, n);
        CHECK_EQ(bad, 0);
    } else {
        CHECK(0 && "size mismatch with Pillow");
    }
    qhx_free(want);
    qhx_image_deinit(&img);
}

static void test_decode(void) {
    static const char *files[] = {
        "rgb8.png", "rgba8.png", "gray8.png", "gray_alpha8.png", "palette4.png", "gray1.png",
        "gray2.png", "gray4.png", "gray16.png", "rgb16.png", "rgba16.png", "rgb.jpg", "gray.jpg",
        "cmyk.jpg", "exif2.jpg", "exif3.jpg", "exif4.jpg", "exif5.jpg", "exif6.jpg", "exif7.jpg",
        "exif8.jpg", "exif6p.png",
        /* Pillow reads a CMYK JPEG without an Adobe marker as Adobe CMYK too, and honours the
         * orientation in PNG text chunks ("Raw profile type exif": tEXt, zTXt, iTXt, before or
         * after the image data) and in XMP (attribute and element forms; with an eXIf lacking
         * the tag) */
        "cmyk_noadobe.jpg", "exif_text.png", "exif_ztxt.png", "exif_itxt.png", "exif_late.png", "xmp_attr.png",
        "xmp_elem.png", "exif_xmp.png",
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) check_decode(files[i]);
}

static void test_decode_errors(void) {
    qhx_image img;
    qhx_error err;
    static const uint8_t junk[] = "hello world";
    CHECK_EQ(qhx_image_decode(junk, sizeof junk, NULL, "junk", &img, &err), QHX_E_FORMAT);
    CHECK_CONTAINS(err.msg, "not a PNG or JPEG");
    CHECK(img.rgb == NULL);
    size_t n;
    uint8_t *png = read_raw("rgb8.png", &n);
    if (!png) { CHECK(0); return; }
    /* A cap below the image size: refused from the header. */
    qhx_image_limits lim = {8, 8, 1 << 20};
    CHECK_EQ(qhx_image_decode(png, n, &lim, "rgb8.png", &img, &err), QHX_E_LIMIT);
    CHECK_CONTAINS(err.msg, "rgb8.png");
    lim.max_width = lim.max_height = 100;
    lim.max_bytes = 13 * 7 * 3 - 1;
    CHECK_EQ(qhx_image_decode(png, n, &lim, "rgb8.png", &img, &err), QHX_E_LIMIT);
    /* Truncations fail cleanly. Like PIL, a file cut after the compressed pixels (inside the
     * last IDAT's checksum, its CRC or IEND: the last 20 bytes here) may still decode. */
    for (size_t cut = 0; cut < n; cut += 3) {
        qhx_status rc = qhx_image_decode(png, cut, NULL, "cut", &img, &err);
        CHECK(rc != QHX_OK || cut >= n - 20);
        CHECK((rc != QHX_OK) == (img.rgb == NULL));
        qhx_image_deinit(&img);
    }
    qhx_free(png);
    uint8_t *jpg = read_raw("rgb.jpg", &n);
    if (!jpg) { CHECK(0); return; }
    CHECK_EQ(qhx_image_decode(jpg, n - 40, NULL, "rgb.jpg", &img, &err), QHX_E_FORMAT);
    CHECK_CONTAINS(err.msg, "truncated");
    for (size_t cut = 0; cut < n; cut += 13) {
        qhx_status rc = qhx_image_decode(jpg, cut, NULL, "cut", &img, &err);
        CHECK(rc != QHX_OK);
        CHECK(img.rgb == NULL);
    }
    qhx_free(jpg);
}

/* Pillow mode reproduces Image.resize bit for bit; torch mode differs by at most 1 (weights of
 * other precision) on few values. */
static void test_resize(void) {
    qhx_image src;
    qhx_error err;
    if (qhx_image_load(data_path("resize_src.png"), NULL, &src, &err)) { CHECK(0); return; }
    static const int sizes[][2] = {{64, 32}, {16, 48}, {20, 20}, {37, 9}, {5, 23}};
    for (int f = 0; f < 2; f++) {
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            int W = sizes[s][0], H = sizes[s][1];
            char name[64];
            snprintf(name, sizeof name, "resize_%s_%dx%d.rgb", f ? "bilinear" : "bicubic", W, H);
            size_t n;
            uint8_t *want = read_raw(name, &n);
            qhx_image r, t;
            qhx_resample flt = f ? QHX_RESAMPLE_BILINEAR : QHX_RESAMPLE_BICUBIC;
            CHECK_EQ(qhx_image_resize(&src, W, H, flt, QHX_RESIZE_PILLOW, &r, &err), QHX_OK);
            CHECK_EQ(qhx_image_resize(&src, W, H, flt, QHX_RESIZE_TORCH, &t, &err), QHX_OK);
            if (want && r.rgb && t.rgb && n == (size_t)W * H * 3) {
                size_t bad = 0, tdiff = 0;
                int tmax = 0;
                for (size_t i = 0; i < n; i++) {
                    bad += want[i] != r.rgb[i];
                    int d = abs((int)t.rgb[i] - (int)r.rgb[i]);
                    tdiff += d != 0;
                    if (d > tmax) tmax = d;
                }
                if (bad) fprintf(stderr, "%s: %zu of %zu values differ from Pillow\n", name, bad, n);
                CHECK_EQ(bad, 0);
                CHECK(tmax <= 1);
                CHECK(tdiff * 10 <= n);
            } else {
                CHECK(0 && "resize reference missing");
            }
            qhx_free(want);
            qhx_image_deinit(&r);
            qhx_image_deinit(&t);
        }
    }
    /* Same size: an exact copy. */
    qhx_image same;
    CHECK_EQ(qhx_image_resize(&src, src.width, src.height, QHX_RESAMPLE_BICUBIC, QHX_RESIZE_TORCH, &same, &err), QHX_OK);
    CHECK(same.rgb && !memcmp(same.rgb, src.rgb, (size_t)src.width * src.height * 3));
    qhx_image_deinit(&same);
    qhx_image_deinit(&src);
}

static void test_smart_resize(void) {
    /* {H, W, min_pixels, max_pixels, expected h, expected w}: from the Python reference
     * formula (round half to even): 80/32 = 2.5 -> 2, 112/32 = 3.5 -> 4, 400/32 = 12.5 -> 12,
     * 1040/32 = 32.5 -> 32. */
    static const int64_t cases[][6] = {
        {512, 512, 65536, 16777216, 512, 512},   {80, 400, 65536, 16777216, 128, 576},
        {112, 400, 65536, 16777216, 160, 512},   {48, 1000, 65536, 16777216, 64, 1184},
        {400, 80, 65536, 16777216, 576, 128},    {240, 1040, 65536, 16777216, 256, 1024},
        {720, 1280, 65536, 16777216, 704, 1280}, {1080, 1920, 65536, 16777216, 1088, 1920},
        {4000, 6000, 65536, 16777216, 3328, 4992}, {100, 150, 65536, 16777216, 224, 320},
        {1, 1, 65536, 16777216, 256, 256},       {7, 3, 65536, 16777216, 416, 192},
        {300, 17, 65536, 16777216, 1088, 64},    {5000, 30, 65536, 16777216, 4992, 32},
        {33, 6000, 65536, 16777216, 32, 6016},   {2000, 10, 65536, 16777216, 3648, 32},
        {512, 512, 1024, 1048576, 512, 512},     {80, 400, 1024, 1048576, 64, 384},
        {112, 400, 1024, 1048576, 128, 384},     {48, 1000, 1024, 1048576, 64, 992},
        {400, 80, 1024, 1048576, 384, 64},       {240, 1040, 1024, 1048576, 256, 1024},
        {720, 1280, 1024, 1048576, 704, 1280},   {1080, 1920, 1024, 1048576, 768, 1344},
        {4000, 6000, 1024, 1048576, 832, 1248},  {100, 150, 1024, 1048576, 96, 160},
        {1, 1, 1024, 1048576, 32, 32},           {7, 3, 1024, 1048576, 64, 32},
        {300, 17, 1024, 1048576, 288, 32},       {5000, 30, 1024, 1048576, 4992, 32},
        {33, 6000, 1024, 1048576, 32, 6016},     {2000, 10, 1024, 1048576, 480, 32},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t h = -1, w = -1;
        qhx_error err;
        CHECK_EQ(qhx_smart_resize(cases[i][0], cases[i][1], 32, cases[i][2], cases[i][3], &h, &w, &err), QHX_OK);
        if (h != cases[i][4] || w != cases[i][5])
            fprintf(stderr, "smart_resize(%lld, %lld): got %lldx%lld\n", (long long)cases[i][0],
                    (long long)cases[i][1], (long long)h, (long long)w);
        CHECK_EQ(h, cases[i][4]);
        CHECK_EQ(w, cases[i][5]);
    }
    int64_t h, w;
    qhx_error err;
    CHECK_EQ(qhx_smart_resize(10, 2001, 32, 1024, 1048576, &h, &w, &err), QHX_E_ARG);
    CHECK_CONTAINS(err.msg, "aspect ratio");
    CHECK_EQ(qhx_smart_resize(0, 10, 32, 1024, 1048576, &h, &w, &err), QHX_E_ARG);
}

/* Pixel (x, y) of channel c gets a value that encodes (x, y, c); every patch value is then
 * checked against the layout of spec §2.6. */
static void test_patches(void) {
    qhx_image img = {64, 96, NULL}; /* width 64, height 96 */
    img.rgb = qhx_malloc(64 * 96 * 3);
    for (int y = 0; y < 96; y++)
        for (int x = 0; x < 64; x++)
            for (int c = 0; c < 3; c++) img.rgb[(y * 64 + x) * 3 + c] = (uint8_t)((x * 7 + y * 13 + c * 101) & 255);
    qhx_image_prep prep = qhx_image_prep_default();
    prep.min_pixels = 1024;
    qhx_image_patches p;
    qhx_error err;
    CHECK_EQ(qhx_image_preprocess(&img, &prep, &p, &err), QHX_OK);
    CHECK_EQ(p.grid_t, 1);
    CHECK_EQ(p.grid_h, 6);
    CHECK_EQ(p.grid_w, 4);
    CHECK_EQ(p.n_patches, 24);
    CHECK_EQ(p.patch_dim, 1536);
    int bad = 0;
    for (int64_t n = 0; n < p.n_patches && p.data; n++) {
        int64_t win = n / 4, ih = (n / 2) % 2, iw = n % 2;
        int64_t pr = (win / 2) * 2 + ih, pc = (win % 2) * 2 + iw; /* gw / 2 = 2 windows per row */
        for (int c = 0; c < 3; c++)
            for (int t = 0; t < 2; t++)
                for (int py = 0; py < 16; py++)
                    for (int px = 0; px < 16; px++) {
                        int y = (int)pr * 16 + py, x = (int)pc * 16 + px;
                        int u = (x * 7 + y * 13 + c * 101) & 255;
                        float want = ((float)u - 127.5f) / 127.5f;
                        float got = p.data[n * 1536 + c * 512 + t * 256 + py * 16 + px];
                        bad += memcmp(&want, &got, 4) != 0;
                    }
    }
    CHECK_EQ(bad, 0);
    qhx_image_patches_deinit(&p);
    /* The normalised values of spec §2.4, bit for bit. */
    img.width = img.height = 64;
    img.rgb[0] = 0; img.rgb[1] = 1; img.rgb[2] = 128; img.rgb[3] = 255;
    CHECK_EQ(qhx_image_preprocess(&img, &prep, &p, &err), QHX_OK);
    if (p.data) {
        uint32_t u[4];
        memcpy(&u[0], &p.data[0], 4);        /* R of (0,0) = 0 */
        memcpy(&u[1], &p.data[512], 4);      /* G of (0,0) = 1 */
        memcpy(&u[2], &p.data[1024], 4);     /* B of (0,0) = 128 */
        memcpy(&u[3], &p.data[1], 4);        /* R of (1,0) = 255 */
        CHECK_EQ(u[0], 0xBF800000u);
        CHECK_EQ(u[1], 0xBF7DFDFEu);
        CHECK_EQ(u[2], 0x3B808081u);
        CHECK_EQ(u[3], 0x3F800000u);
    }
    qhx_image_patches_deinit(&p);
    qhx_image_deinit(&img);
}

static void test_prep_config(void) {
    qhx_image_prep p;
    qhx_error err;
    char path[4096];
    snprintf(path, sizeof path, "%s/fixtures/parity/qwen3vl-tiny-f32/preprocessor_config.json", QHX_DATA_DIR);
    CHECK(qhx_path_is_file(path)); /* the fixture is in the tree: its absence is a failure */
    if (!qhx_path_is_file(path)) return;
    CHECK_EQ(qhx_image_prep_load(path, &p, &err), QHX_OK);
    CHECK_EQ(p.min_pixels, 1024);
    CHECK_EQ(p.max_pixels, 1048576);
    CHECK_EQ(p.patch_size, 16);
    CHECK_EQ(p.merge_size, 2);
    CHECK_EQ(p.resample, QHX_RESAMPLE_BICUBIC);
    CHECK_NEAR(p.image_std[2], 0.5, 0);
}

int main(void) {
    test_decode();
    test_decode_errors();
    test_resize();
    test_smart_resize();
    test_patches();
    test_prep_config();
    return t_done("test_image");
}
