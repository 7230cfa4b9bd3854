#!/usr/bin/env bash
# Regenerate the video test data from the test images with the `ffmpeg` command (Debian 12's
# ffmpeg 5.1; not run by the tests). Every clip is a slow pan over one of the photographs in
# tests/data/image/photos, a few KB each:
#
#   h264.mp4     H.264 (libx264, yuv420p) in MP4, 96x64, 10 frames at 5 fps
#   vp9.webm     VP9 (libvpx-vp9, yuv420p) in WebM, 80x48, 12 frames at 6 fps (no frame count
#                in the header: only a scan knows it)
#   mjpeg.avi    MJPEG (yuvj422p, full range) in AVI, 64x64, 8 frames at 4 fps
#   odd.mkv      H.264 4:4:4 in Matroska, odd size 45x31, 9 frames at 3 fps (resampled up)
#   rotate.mp4   H.264 in MP4, stored 96x64 with a 90-degree display rotation (rotate180.mp4,
#                rotate270.mp4: half and three-quarter turns)
#   vfr.mkv      H.264 in Matroska, variable frame rate: 8 frames at 0, .1, .2, .3, .4, .9, 1.4, 1.9 s
#   long.mp4     H.264 in MP4, 64x32, 100 frames at 25 fps (4 s: the 2 fps sampling picks 8)
#
# and, for the error paths: one.mp4 (a single frame: fewer than the temporal patch), audio.wav (no
# video stream), empty.avi (a video stream without frames), truncated.mp4 (h264.mp4 cut to
# 60 %), garbage.mp4 (random bytes).
#
#   bash tests/data/video/make.sh
set -euo pipefail
cd "$(dirname "$0")"
P=../image/photos
ff() { ffmpeg -hide_banner -loglevel error -y "$@"; }
pan() { echo "crop=iw/2:ih/2:x='n*iw/40':y='n*ih/60',scale=$1:$2"; }

ff -loop 1 -framerate 5 -i $P/chelsea.png -frames:v 10 -vf "$(pan 96 64)" -c:v libx264 -preset veryslow -crf 30 -pix_fmt yuv420p -bf 2 h264.mp4
ff -loop 1 -framerate 6 -i $P/coffee.png -frames:v 12 -vf "$(pan 80 48)" -c:v libvpx-vp9 -crf 45 -b:v 0 -pix_fmt yuv420p webm_tmp.webm
mv webm_tmp.webm vp9.webm
ff -loop 1 -framerate 4 -i $P/rocket.jpg -frames:v 8 -vf "$(pan 64 64)" -c:v mjpeg -q:v 12 -pix_fmt yuvj422p mjpeg.avi
ff -loop 1 -framerate 3 -i $P/hubble_deep_field.jpg -frames:v 9 -vf "$(pan 45 31)" -c:v libx264 -crf 30 -pix_fmt yuv444p odd.mkv
# ffmpeg 5.1 writes no display matrix from the command line: set the track header's matrix
# (a, b, c, d in 16.16) to a quarter turn clockwise (0, 1, -1, 0), as phones write it, to a half
# turn (-1, 0, 0, -1) and to three quarters (0, -1, 1, 0)
turn() { # OUT a b c d
  ff -loop 1 -framerate 5 -i $P/coffee.png -frames:v 6 -vf "$(pan 96 64)" -c:v libx264 -crf 30 -pix_fmt yuv420p "$1"
  python3 - "$@" <<'PY'
import struct, sys
path, a, b, c, d = sys.argv[1], *map(int, sys.argv[2:])
buf = bytearray(open(path, "rb").read())
i = buf.find(b"tkhd")
version = buf[i + 4]
m = i + 4 + 4 + (32 if version == 1 else 20) + 8 + 2 + 2 + 2 + 2
buf[m:m + 36] = struct.pack(">9i", a << 16, b << 16, 0, c << 16, d << 16, 0, 0, 0, 1 << 30)
open(path, "wb").write(buf)
PY
}
turn rotate.mp4 0 1 -1 0
turn rotate180.mp4 -1 0 0 -1
turn rotate270.mp4 0 -1 1 0
ff -loop 1 -framerate 10 -i $P/chelsea.png -frames:v 8 -vf "$(pan 64 48),setpts='if(lt(N,5),N*0.1,0.4+(N-4)*0.5)/TB'" -fps_mode vfr -c:v libx264 -crf 30 -pix_fmt yuv420p vfr.mkv
ff -loop 1 -framerate 25 -i $P/rocket.jpg -frames:v 100 -vf "$(pan 64 32)" -c:v libx264 -crf 35 -pix_fmt yuv420p long.mp4
ff -loop 1 -framerate 5 -i $P/chelsea.png -frames:v 1 -vf "$(pan 64 64)" -c:v libx264 -crf 30 -pix_fmt yuv420p one.mp4
ff -f lavfi -i "sine=frequency=440:duration=0.1" -c:a pcm_s16le -ar 8000 audio.wav
ff -f lavfi -i "color=c=red:s=32x32:d=1" -t 0 -c:v mjpeg empty.avi
head -c $(( $(stat -c %s h264.mp4) * 6 / 10 )) h264.mp4 > truncated.mp4
head -c 3000 /dev/urandom > garbage.mp4
ls -l
