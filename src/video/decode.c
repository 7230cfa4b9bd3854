/* video/decode: the reader. FFmpeg's libavformat / libavcodec / libswscale (the system's shared
 * libraries, as torchcodec uses them), read the way transformers' default video reader
 * (torchcodec's VideoDecoder in exact seek mode) reads a file:
 *
 *   - the stream is the best video stream (av_find_best_stream);
 *   - an exact scan of its packets gives the frame count (packets without the discard flag), the
 *     first timestamp (smallest pts, or dts without one) and the end (largest pts + duration);
 *     the average frame rate is count / (end - begin), the header's rate when that is empty;
 *   - frame i is the i-th frame the decoder outputs (presentation order);
 *   - YUV -> RGB24 by libswscale with SWS_BILINEAR at the same size, the frame's colour matrix
 *     and range (sws_setColorspaceDetails), full-range output.
 *
 * Only one decoded frame and one RGB frame are alive at a time. Built without FFmpeg
 * (QHX_HAVE_FFMPEG unset), every entry point fails with one line saying so. */
#include "video/video.h"

#include "core/alloc.h"

#include <string.h>

/* The decoder's bounds (the preprocessing takes them through qhx_video_preprocess). */
qhx_video_limits qhx_video_default_limits(void) {
    qhx_video_limits l = {.max_side = 8192, .max_packets = 1000000, .max_frames = 768, .max_bytes = (size_t)1 << 30};
    return l;
}

#if QHX_HAVE_FFMPEG

#include <errno.h>
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/display.h>
#include <libavutil/imgutils.h>
#include <libavutil/log.h>
#include <libswscale/swscale.h>
#include <math.h>
#include <stdio.h>

bool qhx_video_available(void) { return true; }

/* An open file: the container, the chosen stream and its decoder. */
typedef struct reader {
    AVFormatContext *fmt;
    AVCodecContext *dec;
    AVIOContext *io;   /* bytes in memory: the reading context over mem */
    const uint8_t *mem;
    size_t mem_len, mem_pos;
    int stream;
    const char *path; /* the name in messages */
} reader;

static void reader_close(reader *r) {
    avcodec_free_context(&r->dec);
    avformat_close_input(&r->fmt);
    if (r->io) {
        av_freep(&r->io->buffer);
        avio_context_free(&r->io);
    }
}

static int mem_read(void *opaque, uint8_t *buf, int n) {
    reader *r = opaque;
    size_t left = r->mem_len - r->mem_pos;
    if (left == 0) return AVERROR_EOF;
    size_t k = (size_t)n < left ? (size_t)n : left;
    memcpy(buf, r->mem + r->mem_pos, k);
    r->mem_pos += k;
    return (int)k;
}

static int64_t mem_seek(void *opaque, int64_t off, int whence) {
    reader *r = opaque;
    if (whence & AVSEEK_SIZE) return (int64_t)r->mem_len;
    int64_t base = (whence & 3) == SEEK_CUR ? (int64_t)r->mem_pos : (whence & 3) == SEEK_END ? (int64_t)r->mem_len : 0;
    int64_t to = base + off;
    if (to < 0 || to > (int64_t)r->mem_len) return AVERROR(EINVAL);
    r->mem_pos = (size_t)to;
    return to;
}

/* The container over bytes in memory: a reading context of our own. */
static int open_mem(reader *r) {
    uint8_t *buf = av_malloc(4096);
    if (!buf) return AVERROR(ENOMEM);
    r->io = avio_alloc_context(buf, 4096, 0, r, mem_read, NULL, mem_seek);
    if (!r->io) {
        av_free(buf);
        return AVERROR(ENOMEM);
    }
    r->fmt = avformat_alloc_context();
    if (!r->fmt) return AVERROR(ENOMEM);
    r->fmt->pb = r->io;
    r->fmt->flags |= AVFMT_FLAG_CUSTOM_IO;
    return avformat_open_input(&r->fmt, NULL, NULL, NULL); /* frees fmt on failure */
}

static const char *averr(int e, char *buf, size_t cap) {
    av_strerror(e, buf, cap);
    return buf;
}

static qhx_status reader_open(reader *r, const qhx_video_src *src, const qhx_video_limits *lim, qhx_error *err) {
    memset(r, 0, sizeof *r);
    const char *path = src->label ? src->label : src->path ? src->path : "video";
    r->path = path;
    r->stream = -1;
    char eb[128];
    av_log_set_level(AV_LOG_QUIET); /* errors come back as one line each, not on stderr */
    int e;
    if (src->buf) {
        if (!src->len) return qhx_fail(err, QHX_E_FORMAT, "%s: no bytes", path);
        r->mem = src->buf;
        r->mem_len = src->len;
        e = open_mem(r);
    } else {
        FILE *probe = fopen(src->path, "rb");
        if (!probe) return qhx_fail(err, QHX_E_IO, "%s: cannot open: %s", path, strerror(errno));
        fclose(probe);
        e = avformat_open_input(&r->fmt, src->path, NULL, NULL);
    }
    if (e < 0) {
        reader_close(r);
        return qhx_fail(err, QHX_E_FORMAT, "%s: not a video file FFmpeg can read (%s)", path, averr(e, eb, sizeof eb));
    }
    if ((e = avformat_find_stream_info(r->fmt, NULL)) < 0) {
        reader_close(r);
        return qhx_fail(err, QHX_E_FORMAT, "%s: corrupt video: %s", path, averr(e, eb, sizeof eb));
    }
    const AVCodec *codec = NULL;
    e = av_find_best_stream(r->fmt, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
    if (e == AVERROR_DECODER_NOT_FOUND) {
        reader_close(r);
        return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: no decoder for its video codec in this FFmpeg", path);
    }
    if (e < 0) {
        reader_close(r);
        return qhx_fail(err, QHX_E_FORMAT, "%s: no video stream", path);
    }
    r->stream = e;
    AVStream *st = r->fmt->streams[e];
    if (st->codecpar->width < 1 || st->codecpar->height < 1 || st->codecpar->width > lim->max_side ||
        st->codecpar->height > lim->max_side) {
        qhx_status rc = st->codecpar->width < 1 || st->codecpar->height < 1 ? QHX_E_FORMAT : QHX_E_LIMIT;
        qhx_fail(err, rc, "%s: frame size %dx%d is outside 1..%lld per side", path, st->codecpar->width,
                 st->codecpar->height, (long long)lim->max_side);
        reader_close(r);
        return rc;
    }
    r->dec = avcodec_alloc_context3(codec);
    if (!r->dec) {
        reader_close(r);
        return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory for the decoder", path);
    }
    if ((e = avcodec_parameters_to_context(r->dec, st->codecpar)) < 0 || (e = avcodec_open2(r->dec, codec, NULL)) < 0) {
        reader_close(r);
        return qhx_fail(err, QHX_E_FORMAT, "%s: cannot open the %s decoder (%s)", path, codec->name, averr(e, eb, sizeof eb));
    }
    return QHX_OK;
}

/* The clockwise rotation that turns the stored frames upright, from the display matrix (as the
 * ffmpeg command's autorotate reads it): 0, 90, 180 or 270. */
static int stream_rotation(const AVStream *st) {
    const int32_t *m = (const int32_t *)av_stream_get_side_data(st, AV_PKT_DATA_DISPLAYMATRIX, NULL);
    if (!m) return 0;
    double theta = -av_display_rotation_get(m); /* counterclockwise in the matrix */
    if (!isfinite(theta)) return 0;
    theta -= 360 * floor(theta / 360 + 0.9 / 360);
    int r = (int)lround(theta / 90) * 90 % 360;
    return r < 0 ? r + 360 : r;
}

static qhx_status scan(reader *r, const qhx_video_limits *lim, qhx_video_meta *m, qhx_error *err) {
    AVStream *st = r->fmt->streams[r->stream];
    AVPacket *pkt = av_packet_alloc();
    if (!pkt) return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", r->path);
    int64_t n = 0, lo = INT64_MAX, hi = INT64_MIN;
    char eb[128];
    qhx_status rc = QHX_OK;
    for (;;) {
        int e = av_read_frame(r->fmt, pkt);
        if (e == AVERROR_EOF) break;
        if (e < 0) {
            rc = qhx_fail(err, QHX_E_FORMAT, "%s: corrupt or truncated video: %s", r->path, averr(e, eb, sizeof eb));
            break;
        }
        if (pkt->stream_index == r->stream && !(pkt->flags & AV_PKT_FLAG_DISCARD)) {
            int64_t ts = pkt->pts == AV_NOPTS_VALUE ? pkt->dts : pkt->pts;
            if (ts != AV_NOPTS_VALUE) {
                if (ts < lo) lo = ts;
                if (ts + pkt->duration > hi) hi = ts + pkt->duration;
            }
            if (++n > lim->max_packets) {
                rc = qhx_fail(err, QHX_E_LIMIT, "%s: more than %lld frames", r->path, (long long)lim->max_packets);
                av_packet_unref(pkt);
                break;
            }
        }
        av_packet_unref(pkt);
    }
    av_packet_free(&pkt);
    if (rc) return rc;
    if (n == 0) return qhx_fail(err, QHX_E_FORMAT, "%s: the video stream holds no frames", r->path);
    memset(m, 0, sizeof *m);
    m->n_frames = n;
    double header_fps = st->avg_frame_rate.den ? av_q2d(st->avg_frame_rate) : 0;
    if (lo != INT64_MAX && hi > lo) {
        /* pts * num / den in double, in that order (torchcodec's ptsToSeconds): pts * av_q2d()
         * rounds differently (12288 / 10240 s would be 1.2000000000000002, not 1.2) */
        m->begin = (double)lo * st->time_base.num / st->time_base.den;
        m->end = (double)hi * st->time_base.num / st->time_base.den;
    }
    m->duration = m->end - m->begin;
    m->fps = m->end != m->begin ? (double)n / (m->end - m->begin) : header_fps;
    m->rotation = stream_rotation(st);
    bool turned = m->rotation == 90 || m->rotation == 270;
    m->width = turned ? st->codecpar->height : st->codecpar->width;
    m->height = turned ? st->codecpar->width : st->codecpar->height;
    snprintf(m->codec, sizeof m->codec, "%s", avcodec_get_name(st->codecpar->codec_id));
    if (!(m->fps > 0) || !isfinite(m->fps)) m->fps = 0; /* the sampler falls back as HF does */
    return QHX_OK;
}

qhx_status qhx_video_probe(const char *path, const qhx_video_limits *lim, qhx_video_meta *out, qhx_error *err) {
    qhx_video_src src = {.path = path};
    return qhx_video_probe_src(&src, lim, out, err);
}

qhx_status qhx_video_probe_src(const qhx_video_src *src, const qhx_video_limits *lim, qhx_video_meta *out,
                               qhx_error *err) {
    if (!src || (!src->path && !src->buf) || !out) return qhx_fail(err, QHX_E_ARG, "video probe: no file");
    qhx_video_limits L = lim ? *lim : qhx_video_default_limits();
    reader r;
    qhx_status rc = reader_open(&r, src, &L, err);
    if (rc) return rc;
    rc = scan(&r, &L, out, err);
    reader_close(&r);
    return rc;
}

/* Turn `in` clockwise by rot degrees into out (its buffer owned by the caller, sized w*h*3). */
static void rotate_rgb(const uint8_t *in, int64_t w, int64_t h, int rot, uint8_t *out) {
    int64_t ow = rot == 180 ? w : h;
    for (int64_t y = 0; y < h; y++)
        for (int64_t x = 0; x < w; x++) {
            int64_t ox, oy;
            if (rot == 90) { ox = h - 1 - y; oy = x; }
            else if (rot == 180) { ox = w - 1 - x; oy = h - 1 - y; }
            else { ox = y; oy = w - 1 - x; } /* 270 */
            memcpy(out + (oy * ow + ox) * 3, in + (y * w + x) * 3, 3);
        }
}

/* The state of one decoding pass. */
typedef struct pass {
    reader r;
    struct SwsContext *sws;
    int sws_w, sws_h, sws_fmt;
    uint8_t *rgb, *turned;
    int rotation;
    const int64_t *idx;
    int64_t k, next, frame_no;
    qhx_video_frame_fn fn;
    void *ctx;
} pass;

/* A decoded frame: convert and hand over if it is sampled (once per slot that names it). */
static qhx_status take_frame(pass *p, AVFrame *fr, qhx_error *err) {
    int64_t i = p->frame_no++;
    if (p->next >= p->k || p->idx[p->next] != i) return QHX_OK;
    int w = fr->width, h = fr->height;
    if (w < 1 || h < 1 || fr->format < 0)
        return qhx_fail(err, QHX_E_FORMAT, "%s: frame %lld has no picture", p->r.path, (long long)i);
    if (!p->sws || w != p->sws_w || h != p->sws_h || fr->format != p->sws_fmt) {
        sws_freeContext(p->sws);
        qhx_free(p->rgb);
        qhx_free(p->turned);
        p->turned = NULL;
        p->sws = sws_getContext(w, h, fr->format, w, h, AV_PIX_FMT_RGB24, SWS_BILINEAR, NULL, NULL, NULL);
        /* slack after the last row: libswscale's SIMD converters may store a few bytes past a
         * row's end (the next row's start, rewritten after) */
        p->rgb = qhx_malloc((size_t)w * (size_t)h * 3 + 256);
        if (p->rotation) p->turned = qhx_malloc((size_t)w * (size_t)h * 3);
        if (!p->sws || !p->rgb || (p->rotation && !p->turned))
            return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: cannot convert frames of %s to RGB", p->r.path,
                            av_get_pix_fmt_name(fr->format) ? av_get_pix_fmt_name(fr->format) : "?");
        p->sws_w = w;
        p->sws_h = h;
        p->sws_fmt = fr->format;
    }
    int cs = fr->colorspace == AVCOL_SPC_UNSPECIFIED ? SWS_CS_DEFAULT : (int)fr->colorspace;
    sws_setColorspaceDetails(p->sws, sws_getCoefficients(cs), fr->color_range == AVCOL_RANGE_JPEG,
                             sws_getCoefficients(SWS_CS_DEFAULT), 1, 0, 1 << 16, 1 << 16);
    uint8_t *dst[4] = {p->rgb, NULL, NULL, NULL};
    int stride[4] = {w * 3, 0, 0, 0};
    if (sws_scale(p->sws, (const uint8_t *const *)fr->data, fr->linesize, 0, h, dst, stride) != h)
        return qhx_fail(err, QHX_E_FORMAT, "%s: frame %lld could not be converted to RGB", p->r.path, (long long)i);
    qhx_image img = {.width = w, .height = h, .rgb = p->rgb};
    if (p->rotation) {
        rotate_rgb(p->rgb, w, h, p->rotation, p->turned);
        img.rgb = p->turned;
        if (p->rotation != 180) { img.width = h; img.height = w; }
    }
    while (p->next < p->k && p->idx[p->next] == i) {
        qhx_status rc = p->fn(p->ctx, p->next, &img, err);
        if (rc) return rc;
        p->next++;
    }
    return QHX_OK;
}

/* Receive every frame the decoder has ready. */
static qhx_status drain(pass *p, AVFrame *fr, qhx_error *err) {
    char eb[128];
    for (;;) {
        int e = avcodec_receive_frame(p->r.dec, fr);
        if (e == AVERROR(EAGAIN) || e == AVERROR_EOF) return QHX_OK;
        if (e < 0)
            return qhx_fail(err, QHX_E_FORMAT, "%s: corrupt video: frame %lld: %s", p->r.path, (long long)p->frame_no,
                            averr(e, eb, sizeof eb));
        qhx_status rc = take_frame(p, fr, err);
        av_frame_unref(fr);
        if (rc) return rc;
        if (p->next >= p->k) return QHX_OK;
    }
}

qhx_status qhx_video_decode_frames(const char *path, const qhx_video_limits *lim, const int64_t *idx, int64_t k,
                                   qhx_video_frame_fn fn, void *ctx, qhx_error *err) {
    qhx_video_src src = {.path = path};
    return qhx_video_decode_frames_src(&src, lim, idx, k, fn, ctx, err);
}

qhx_status qhx_video_decode_frames_src(const qhx_video_src *src, const qhx_video_limits *lim, const int64_t *idx,
                                       int64_t k, qhx_video_frame_fn fn, void *ctx, qhx_error *err) {
    if (!src || (!src->path && !src->buf) || !idx || k < 1 || !fn)
        return qhx_fail(err, QHX_E_ARG, "video decode: nothing to decode");
    const char *path = src->label ? src->label : src->path ? src->path : "video";
    for (int64_t i = 1; i < k; i++)
        if (idx[i] < idx[i - 1]) return qhx_fail(err, QHX_E_ARG, "video decode: frame indices must ascend");
    qhx_video_limits L = lim ? *lim : qhx_video_default_limits();
    pass p = {.idx = idx, .k = k, .fn = fn, .ctx = ctx};
    qhx_status rc = reader_open(&p.r, src, &L, err);
    if (rc) return rc;
    p.rotation = stream_rotation(p.r.fmt->streams[p.r.stream]);
    AVPacket *pkt = av_packet_alloc();
    AVFrame *fr = av_frame_alloc();
    char eb[128];
    if (!pkt || !fr) { rc = qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", path); goto done; }
    while (p.next < k) {
        int e = av_read_frame(p.r.fmt, pkt);
        if (e == AVERROR_EOF) break;
        if (e < 0) { rc = qhx_fail(err, QHX_E_FORMAT, "%s: corrupt or truncated video: %s", path, averr(e, eb, sizeof eb)); goto done; }
        if (pkt->stream_index != p.r.stream) { av_packet_unref(pkt); continue; }
        e = avcodec_send_packet(p.r.dec, pkt);
        av_packet_unref(pkt);
        if (e < 0 && e != AVERROR(EAGAIN)) {
            rc = qhx_fail(err, QHX_E_FORMAT, "%s: corrupt video: frame %lld: %s", path, (long long)p.frame_no, averr(e, eb, sizeof eb));
            goto done;
        }
        if ((rc = drain(&p, fr, err))) goto done;
    }
    if (p.next < k) { /* flush the decoder's delayed frames */
        avcodec_send_packet(p.r.dec, NULL);
        if ((rc = drain(&p, fr, err))) goto done;
    }
    if (p.next < k)
        rc = qhx_fail(err, QHX_E_FORMAT, "%s: frame %lld could not be decoded (the stream gave %lld frames)", path,
                      (long long)idx[p.next], (long long)p.frame_no);
done:
    av_frame_free(&fr);
    av_packet_free(&pkt);
    sws_freeContext(p.sws);
    qhx_free(p.rgb);
    qhx_free(p.turned);
    reader_close(&p.r);
    return rc;
}

#else /* no FFmpeg */

bool qhx_video_available(void) { return false; }

static qhx_status no_ffmpeg(qhx_error *err) { return qhx_fail(err, QHX_E_UNSUPPORTED, "video: this build has no FFmpeg"); }

qhx_status qhx_video_probe(const char *path, const qhx_video_limits *lim, qhx_video_meta *out, qhx_error *err) {
    (void)path, (void)lim;
    if (out) memset(out, 0, sizeof *out);
    return no_ffmpeg(err);
}

qhx_status qhx_video_probe_src(const qhx_video_src *src, const qhx_video_limits *lim, qhx_video_meta *out,
                               qhx_error *err) {
    (void)src, (void)lim;
    if (out) memset(out, 0, sizeof *out);
    return no_ffmpeg(err);
}

qhx_status qhx_video_decode_frames(const char *path, const qhx_video_limits *lim, const int64_t *idx, int64_t k,
                                   qhx_video_frame_fn fn, void *ctx, qhx_error *err) {
    (void)path, (void)lim, (void)idx, (void)k, (void)fn, (void)ctx;
    return no_ffmpeg(err);
}

qhx_status qhx_video_decode_frames_src(const qhx_video_src *src, const qhx_video_limits *lim, const int64_t *idx,
                                       int64_t k, qhx_video_frame_fn fn, void *ctx, qhx_error *err) {
    (void)src, (void)lim, (void)idx, (void)k, (void)fn, (void)ctx;
    return no_ffmpeg(err);
}

#endif
