/* Fuzz target: image decoding from arbitrary bytes (PNG and JPEG), then the preprocessing of
 * whatever decoded, under small caps so a hostile header cannot make the run slow. */
#include "image/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    qhx_image img;
    qhx_error err;
    qhx_image_limits lim = {4096, 4096, (size_t)1 << 22};
    if (qhx_image_decode(data, size, &lim, "fuzz", &img, &err) == QHX_OK) {
        volatile uint8_t sink = img.rgb[img.width * img.height * 3 - 1]; /* must be in bounds */
        (void)sink;
        qhx_image_prep prep = qhx_image_prep_default();
        prep.min_pixels = 32 * 32;
        prep.max_pixels = 64 * 64;
        qhx_image_patches p;
        if (qhx_image_preprocess(&img, &prep, &p, &err) == QHX_OK) qhx_image_patches_deinit(&p);
        qhx_image_deinit(&img);
    }
    return 0;
}
