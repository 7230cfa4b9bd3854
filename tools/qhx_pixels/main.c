/* qhx_pixels: a developer tool that writes what qhexrt's image preprocessing gives the vision
 * tower, so that it can be compared with Hugging Face's image processors
 * (tests/hf/image_compare.py does).
 *
 *   qhx_pixels --image FILE [--config preprocessor_config.json] [--resize torch|pillow]
 *              --out PIXELS.f32 [--decoded RGB.u8]
 *
 * PIXELS.f32: float32 little-endian [n_patches, patch_dim], the pixel_values rows (merge-window
 * order). RGB.u8: the decoded image before any resampling, uint8 [height, width, 3].
 * stdout: one line "grid_t grid_h grid_w n_patches patch_dim width height". */
#include "image/image.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(FILE *f, int rc) {
    fprintf(f, "usage: qhx_pixels --image FILE [--config preprocessor_config.json] "
               "[--resize torch|pillow] --out PIXELS.f32 [--decoded RGB.u8]\n");
    return rc;
}

static int write_all(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "qhx_pixels: cannot write %s\n", path);
        return 1;
    }
    size_t w = fwrite(p, 1, n, f);
    if (fclose(f) != 0 || w != n) {
        fprintf(stderr, "qhx_pixels: short write to %s\n", path);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *image = NULL, *config = NULL, *out = NULL, *decoded = NULL, *resize = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return usage(stdout, 0);
        if (i + 1 >= argc) return usage(stderr, 2);
        const char *o = argv[i], *v = argv[++i];
        if (!strcmp(o, "--image")) image = v;
        else if (!strcmp(o, "--config")) config = v;
        else if (!strcmp(o, "--out")) out = v;
        else if (!strcmp(o, "--decoded")) decoded = v;
        else if (!strcmp(o, "--resize")) resize = v;
        else return usage(stderr, 2);
    }
    if (!image || !out) return usage(stderr, 2);

    qhx_error err = {0};
    qhx_image_prep prep = qhx_image_prep_default();
    if (config && qhx_image_prep_load(config, &prep, &err) != QHX_OK) {
        fprintf(stderr, "qhx_pixels: %s\n", err.msg);
        return 1;
    }
    if (resize) {
        if (!strcmp(resize, "torch")) prep.resize_mode = QHX_RESIZE_TORCH;
        else if (!strcmp(resize, "pillow")) prep.resize_mode = QHX_RESIZE_PILLOW;
        else return usage(stderr, 2);
    }
    qhx_image img;
    if (qhx_image_load(image, NULL, &img, &err) != QHX_OK) {
        fprintf(stderr, "qhx_pixels: %s\n", err.msg);
        return 1;
    }
    int rc = 0;
    if (decoded) rc = write_all(decoded, img.rgb, (size_t)(img.width * img.height * 3));
    qhx_image_patches p;
    if (!rc && qhx_image_preprocess(&img, &prep, &p, &err) != QHX_OK) {
        fprintf(stderr, "qhx_pixels: %s\n", err.msg);
        rc = 1;
    } else if (!rc) {
        rc = write_all(out, p.data, (size_t)(p.n_patches * p.patch_dim) * sizeof(float));
        if (!rc)
            printf("%lld %lld %lld %lld %lld %lld %lld\n", (long long)p.grid_t, (long long)p.grid_h,
                   (long long)p.grid_w, (long long)p.n_patches, (long long)p.patch_dim,
                   (long long)img.width, (long long)img.height);
        qhx_image_patches_deinit(&p);
    }
    qhx_image_deinit(&img);
    return rc;
}
