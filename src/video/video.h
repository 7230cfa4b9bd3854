/* video/video.h: the host side of video input. Decode a video file with FFmpeg's libraries as a
 * stream (a few frames in memory at a time), sample frames and turn them into the Qwen3-VL patch
 * matrix as transformers' Qwen3VLVideoProcessor does with its default reader (torchcodec):
 *
 *   probe     one demux pass over the packets of the best video stream: the frame count, the
 *             first and last timestamps (hence the average frame rate), the rotation;
 *   sample    np.linspace(0, n - 1, k).round() with k from the sampling frame rate, clamped to
 *             [min_frames, max_frames] and to n;
 *   decode    frames in presentation order; the sampled ones converted to RGB24 by libswscale
 *             (bilinear flags, the frame's colour matrix and range), rotated as the metadata says;
 *   resize    the video smart_resize (area over all sampled frames, temporal factor), then the
 *             torch uint8 antialiased resampler of image/resize.c, frame by frame;
 *   patchify  rescale + normalise as the image path, the last frame repeated to a multiple of
 *             the temporal patch, rows (t, merge windows), columns (c, frame in pair, py, px).
 *
 * Without FFmpeg at build time (QHX_HAVE_FFMPEG unset) every decoding call fails with one line
 * saying so; the pure functions (sampling, smart_resize, timestamps) are always there.
 * docs/vision.md ("Video") has the pipeline and what is bit-exact. */
#ifndef QHX_VIDEO_H
#define QHX_VIDEO_H

#include "core/status.h"
#include "image/image.h"

#include <stdbool.h>
#include <stdint.h>

/* Whether this build decodes video (built with FFmpeg's libraries). */
bool qhx_video_available(void);

/* video_preprocessor_config.json of a Qwen3-VL checkpoint, over Qwen3VLVideoProcessor's
 * defaults. The image fields (patch, merge, temporal patch, mean, std, rescale, resample) have
 * the image processor's meaning; min_pixels / max_pixels (size.shortest_edge / longest_edge)
 * bound the pixels of ALL sampled frames together, not one frame. */
typedef struct qhx_video_prep {
    qhx_image_prep img;   /* min_pixels 131072 (128·32²), max_pixels 786432 (768·32²) */
    double fps;           /* frames sampled per second of video: 2 */
    int64_t num_frames;   /* > 0: sample exactly this many (rounded to the temporal patch) */
    int64_t min_frames;   /* 4 */
    int64_t max_frames;   /* 768 */
    bool do_sample_frames;
} qhx_video_prep;

qhx_video_prep qhx_video_prep_default(void);

/* Read a video_preprocessor_config.json over the defaults; fields as HF names them. A field of
 * the wrong type or out of range is an error naming it. */
qhx_status qhx_video_prep_load(const char *path, qhx_video_prep *out /* OUT */, qhx_error *err);

/* Caps checked before anything large is allocated. */
typedef struct qhx_video_limits {
    int64_t max_side;      /* frame width / height: 8192 */
    int64_t max_packets;   /* frames in the stream: 1,000,000 */
    int64_t max_frames;    /* frames sampled: 768 */
    size_t max_bytes;      /* the patch matrix: 1 GiB */
} qhx_video_limits;

qhx_video_limits qhx_video_default_limits(void);

/* What the probe found: the stream as torchcodec's exact-mode scan reports it. */
typedef struct qhx_video_meta {
    int64_t width, height;        /* displayed size: after the rotation */
    int64_t n_frames;             /* packets of the stream (its frames) */
    double begin, end;            /* seconds: smallest pts, largest pts + duration */
    double fps;                   /* n_frames / (end - begin), or the header's rate */
    double duration;              /* end - begin */
    int rotation;                 /* 0, 90, 180, 270: clockwise turn applied to the frames */
    char codec[32];
} qhx_video_meta;

/* Which frames to take: Qwen3VLVideoProcessor.sample_frames. prep->num_frames > 0 takes that
 * many (rounded half to even to the temporal patch); else k = int(n / fps_meta * prep->fps),
 * clamped to [min_frames, max_frames] and to n. Indices np.linspace(0, n - 1, k), rounded half
 * to even. idx (cap,) OUT; *k OUT. QHX_E_ARG for n < 1; QHX_E_LIMIT when k > cap. */
qhx_status qhx_video_sample(int64_t n_frames, double fps_meta, const qhx_video_prep *prep, int64_t cap,
                            int64_t *idx /* OUT */, int64_t *k /* OUT */, qhx_error *err);

/* The video smart_resize of transformers' video_processing_qwen3_vl: the area bounds apply to
 * t_bar · h · w with t_bar the frame count rounded to the temporal factor; sides below `factor`
 * are first scaled up (truncated to int). QHX_E_ARG for num_frames < temporal_factor. */
qhx_status qhx_video_smart_resize(int64_t num_frames, int64_t height, int64_t width, int64_t temporal_factor,
                                  int64_t factor, int64_t min_pixels, int64_t max_pixels, int64_t *out_h /* OUT */,
                                  int64_t *out_w /* OUT */, qhx_error *err);

/* The processor's prompt timestamps (Qwen3VLProcessor._calculate_timestamps): the sampled
 * indices padded with the last one to a multiple of tp, idx / fps, the mean of the first and
 * last of each group. ts (ceil(k / tp),) OUT. */
void qhx_video_timestamps(const int64_t *idx, int64_t k, double fps, int64_t tp, double *ts /* OUT */);

/* Format one timestamp as the processor writes it: "<%.1f seconds>" (Python's format: round half
 * to even on the double's exact value, which printf also does). */
int qhx_video_timestamp_text(double t, char *buf, size_t cap);

/* The processor's output for one video. */
typedef struct qhx_video_patches {
    int64_t grid_t, grid_h, grid_w; /* temporal groups, patches per axis before the merge */
    int64_t n_patches, patch_dim;   /* grid_t · grid_h · grid_w, 3 · tp · P² */
    float *data;                    /* owned, [n_patches, patch_dim] */
    int64_t n_sampled;              /* frames sampled (before the repeat to the temporal patch) */
    int64_t *indices;               /* owned, (n_sampled,) frame indices */
    double *timestamps;             /* owned, (grid_t,) seconds, as the prompt writes them */
    qhx_video_meta meta;
    double decode_ms;               /* probing, demuxing, decoding and converting to RGB */
    double preprocess_ms;           /* resizing, normalising and patching the sampled frames */
} qhx_video_patches;

/* Where a video comes from: a file, or bytes in memory (buf, len; label names it in messages). */
typedef struct qhx_video_src {
    const char *path;
    const void *buf;
    size_t len;
    const char *label;
} qhx_video_src;

/* As qhx_video_preprocess_file, from a file or from bytes. */
qhx_status qhx_video_preprocess(const qhx_video_src *src, const qhx_video_prep *prep, const qhx_video_limits *lim,
                                qhx_video_patches *out /* OUT */, qhx_error *err);

/* What the processor will make of a probed video, without decoding a frame: the sampled indices,
 * the grid and the timestamps (out->data NULL). Its grid fixes the video's tokens in the prompt,
 * so a caller can choose the sampling parameters before paying for the decoding. label names the
 * video in messages. Failures as qhx_video_preprocess. */
qhx_status qhx_video_plan(const qhx_video_meta *meta, const qhx_video_prep *prep, const qhx_video_limits *lim,
                          const char *label, qhx_video_patches *out /* OUT */, qhx_error *err);

/* qhx_video_preprocess for a source already probed (meta from qhx_video_probe_src of it). */
qhx_status qhx_video_preprocess_probed(const qhx_video_src *src, const qhx_video_meta *meta, const qhx_video_prep *prep,
                                       const qhx_video_limits *lim, qhx_video_patches *out /* OUT */, qhx_error *err);

/* Probe, sample, decode, resize and patchify the file at path (lim NULL: defaults). One line per
 * failure naming the file: QHX_E_IO (cannot open), QHX_E_FORMAT (not a video, no video stream,
 * corrupt, no frames, a sampled frame that does not decode), QHX_E_LIMIT (caps),
 * QHX_E_UNSUPPORTED (no FFmpeg in this build). On failure *out is zeroed. */
qhx_status qhx_video_preprocess_file(const char *path, const qhx_video_prep *prep, const qhx_video_limits *lim,
                                     qhx_video_patches *out /* OUT */, qhx_error *err);

void qhx_video_patches_deinit(qhx_video_patches *p); /* NULL / zeroed allowed */

/* The stream's metadata only (one demux pass, no decoding). */
qhx_status qhx_video_probe(const char *path, const qhx_video_limits *lim, qhx_video_meta *out /* OUT */,
                           qhx_error *err);
qhx_status qhx_video_probe_src(const qhx_video_src *src, const qhx_video_limits *lim, qhx_video_meta *out /* OUT */,
                               qhx_error *err);

/* Decode the frames idx (k,) (ascending, repeats allowed) to RGB as the processor's reader does
 * and hand each to fn, in order; memory is one decoded frame and one RGB frame. For the
 * developer tools that compare the reader with torchcodec. */
typedef qhx_status (*qhx_video_frame_fn)(void *ctx, int64_t slot, const qhx_image *rgb, qhx_error *err);
qhx_status qhx_video_decode_frames(const char *path, const qhx_video_limits *lim, const int64_t *idx, int64_t k,
                                   qhx_video_frame_fn fn, void *ctx, qhx_error *err);
qhx_status qhx_video_decode_frames_src(const qhx_video_src *src, const qhx_video_limits *lim, const int64_t *idx,
                                       int64_t k, qhx_video_frame_fn fn, void *ctx, qhx_error *err);

#endif
