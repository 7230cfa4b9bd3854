/* qhx_pixels: a developer tool that writes what qhexrt's image preprocessing gives the vision
 * tower, so that it can be compared with Hugging Face's image processors
 * (tests/hf/image_compare.py does).
 *
 *   qhx_pixels --image FILE [--config preprocessor_config.json] [--resize torch|pillow]
 *              --out PIXELS.f32 [--decoded RGB.u8]
 *
 * PIXELS.f32: float32 little-endian [n_patches, patch_dim], the pixel_values rows (merge-window
 * order). RGB.u8: the decoded image before any resampling, uint8 [height, width, 3].
 * stdout: one line "grid_t grid_h grid_w n_patches patch_dim width height".
 *
 *   qhx_pixels --video FILE [--config video_preprocessor_config.json] [--fps F] [--num-frames N]
 *              [--max-frames N] --out PIXELS.f32 [--decoded FRAMES.u8]
 *
 * PIXELS.f32: pixel_values_videos; FRAMES.u8: the sampled frames as the reader gives them (RGB,
 * rotated, before resampling), uint8 [k, height, width, 3]. stdout: the grid line as above, then
 * "frames n fps begin end rotation", "indices i0 i1 ...", "timestamps t0 t1 ..." (%.17g). */
#include "image/image.h"
#include "video/video.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(FILE *f, int rc) {
    fprintf(f, "usage: qhx_pixels --image FILE [--config preprocessor_config.json] "
               "[--resize torch|pillow] --out PIXELS.f32 [--decoded RGB.u8]\n"
               "       qhx_pixels --video FILE [--config video_preprocessor_config.json] [--fps F] "
               "[--num-frames N] [--max-frames N] --out PIXELS.f32 [--decoded FRAMES.u8]\n");
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

/* The sampled frames, appended to one file as the reader hands them over. */
static qhx_status dump_frame(void *ctx, int64_t slot, const qhx_image *rgb, qhx_error *err) {
    (void)slot;
    FILE *f = ctx;
    size_t n = (size_t)(rgb->width * rgb->height * 3);
    if (fwrite(rgb->rgb, 1, n, f) != n) return qhx_fail(err, QHX_E_IO, "short write of the frames");
    return QHX_OK;
}

static int video_main(const char *video, const char *config, const char *out, const char *decoded, const char *fps,
                      const char *num_frames, const char *max_frames) {
    qhx_error err = {0};
    qhx_video_prep prep = qhx_video_prep_default();
    if (config && qhx_video_prep_load(config, &prep, &err) != QHX_OK) {
        fprintf(stderr, "qhx_pixels: %s\n", err.msg);
        return 1;
    }
    if (fps) prep.fps = atof(fps);
    if (num_frames) prep.num_frames = atoll(num_frames);
    if (max_frames) prep.max_frames = atoll(max_frames);
    qhx_video_patches p;
    if (qhx_video_preprocess_file(video, &prep, NULL, &p, &err) != QHX_OK) {
        fprintf(stderr, "qhx_pixels: %s\n", err.msg);
        return 1;
    }
    int rc = write_all(out, p.data, (size_t)(p.n_patches * p.patch_dim) * sizeof(float));
    if (!rc && decoded) {
        FILE *f = fopen(decoded, "wb");
        if (!f || qhx_video_decode_frames(video, NULL, p.indices, p.n_sampled, dump_frame, f, &err) != QHX_OK) {
            fprintf(stderr, "qhx_pixels: %s\n", f ? err.msg : "cannot write the frames");
            rc = 1;
        }
        if (f && fclose(f) != 0) rc = 1;
    }
    if (!rc) {
        printf("%lld %lld %lld %lld %lld %lld %lld\n", (long long)p.grid_t, (long long)p.grid_h, (long long)p.grid_w,
               (long long)p.n_patches, (long long)p.patch_dim, (long long)p.meta.width, (long long)p.meta.height);
        printf("frames %lld %.17g %.17g %.17g %d\n", (long long)p.meta.n_frames, p.meta.fps, p.meta.begin, p.meta.end,
               p.meta.rotation);
        printf("indices");
        for (int64_t i = 0; i < p.n_sampled; i++) printf(" %lld", (long long)p.indices[i]);
        printf("\ntimestamps");
        for (int64_t i = 0; i < p.grid_t; i++) printf(" %.17g", p.timestamps[i]);
        printf("\n");
    }
    qhx_video_patches_deinit(&p);
    return rc;
}

int main(int argc, char **argv) {
    const char *video = NULL, *fps = NULL, *num_frames = NULL, *max_frames = NULL;
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
        else if (!strcmp(o, "--video")) video = v;
        else if (!strcmp(o, "--fps")) fps = v;
        else if (!strcmp(o, "--num-frames")) num_frames = v;
        else if (!strcmp(o, "--max-frames")) max_frames = v;
        else return usage(stderr, 2);
    }
    if (video && out && !image) return video_main(video, config, out, decoded, fps, num_frames, max_frames);
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
