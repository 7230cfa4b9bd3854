#!/usr/bin/python3
"""Regenerate the image decode/resize test data (needs Pillow and numpy; not run by the tests).

Writes small PNG/JPEG files covering the color types, bit depths and EXIF orientations the
decoder handles, and next to each NAME.{png,jpg} a NAME.rgb: the RGB8 bytes that Pillow gives
for Image.open + ImageOps.exif_transpose + convert("RGB") (the Hugging Face loading path), with
a one-line NAME.txt "width height". For resampling, resize_src.png is resized with Pillow's
Image.resize (BICUBIC and BILINEAR) to a few sizes: resize_<filter>_<W>x<H>.rgb.

    /usr/bin/python3 tests/data/image/make_images.py tests/data/image
"""
import os
import struct
import sys
import zlib

import numpy as np
from PIL import Image, ImageOps

out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(1234)


def png_raw(path, w, h, color_type, depth, rows, plte=None, trns=None):
    """Write a PNG by hand (filter 0) so every color type / bit depth can be covered."""
    def chunk(t, d):
        c = struct.pack(">I", len(d)) + t + d
        return c + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    data = b"".join(b"\0" + r for r in rows)
    s = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, color_type, 0, 0, 0))
    if plte is not None:
        s += chunk(b"PLTE", plte)
    if trns is not None:
        s += chunk(b"tRNS", trns)
    s += chunk(b"IDAT", zlib.compress(data)) + chunk(b"IEND", b"")
    open(path, "wb").write(s)


def pack_bits(vals, depth):
    """Pack a row of samples of `depth` bits, MSB first."""
    bits = "".join(format(int(v), "0%db" % depth) for v in vals)
    bits += "0" * (-len(bits) % 8)
    return bytes(int(bits[i:i + 8], 2) for i in range(0, len(bits), 8))


def strip_jpeg_marker(b, marker):
    """The JPEG bytes b without its segments of the given marker (up to the scan)."""
    out, i = bytearray(b[:2]), 2
    while b[i + 1] != 0xDA:
        n = 2 + (b[i + 2] << 8 | b[i + 3])
        if b[i + 1] != marker:
            out += b[i:i + n]
        i += n
    return bytes(out + b[i:])


def raw_profile(exif_bytes):
    """ImageMagick's "Raw profile type exif" text: a name line, a length line, then hex lines."""
    h = exif_bytes.hex()
    return "\nexif\n%8d\n" % len(exif_bytes) + "\n".join(h[i:i + 72] for i in range(0, len(h), 72)) + "\n"


def move_text_after_idat(path, key):
    b = open(path, "rb").read()
    chunks, i = [], 8
    while i < len(b):
        n = struct.unpack(">I", b[i:i + 4])[0]
        chunks.append(b[i:i + 12 + n])
        i += 12 + n
    moved = [c for c in chunks if c[4:8] in (b"tEXt", b"zTXt", b"iTXt") and c[8:8 + len(key)] == key]
    rest = [c for c in chunks if c not in moved]
    end = rest.pop()  # IEND
    open(path, "wb").write(b[:8] + b"".join(rest + moved + [end]))


def png_text_orientations(img):
    from PIL import PngImagePlugin
    ex = Image.Exif()
    ex[0x0112] = 6
    exif = b"Exif\0\0" + ex.tobytes()
    cases = {
        "exif_text.png": lambda p: p.add_text("Raw profile type exif", raw_profile(exif)),
        "exif_ztxt.png": lambda p: p.add_text("Raw profile type exif", raw_profile(ex.tobytes()), zip=True),
        "exif_itxt.png": lambda p: p.add_itxt("Raw profile type exif", raw_profile(exif), zip=True),
        "xmp_attr.png": lambda p: p.add_itxt("XML:com.adobe.xmp",
                                             '<x:xmpmeta><rdf:Description tiff:Orientation="8"/></x:xmpmeta>'),
        "xmp_elem.png": lambda p: p.add_text("XML:com.adobe.xmp",
                                             "<x:xmpmeta><tiff:Orientation>3</tiff:Orientation></x:xmpmeta>"),
    }
    for name, add in cases.items():
        info = PngImagePlugin.PngInfo()
        add(info)
        img.save(os.path.join(out, name), pnginfo=info)
    # an eXIf chunk without an Orientation tag leaves the XMP to decide
    noor = Image.Exif()
    noor[0x010F] = "maker"
    info = PngImagePlugin.PngInfo()
    info.add_itxt("XML:com.adobe.xmp", '<rdf:Description tiff:Orientation="5"/>')
    img.save(os.path.join(out, "exif_xmp.png"), pnginfo=info, exif=noor.tobytes())
    # a raw profile after the image data
    info = PngImagePlugin.PngInfo()
    info.add_text("Raw profile type exif", raw_profile(exif))
    img.save(os.path.join(out, "exif_late.png"), pnginfo=info)
    move_text_after_idat(os.path.join(out, "exif_late.png"), b"Raw profile type exif")


def expect(name):
    path = os.path.join(out, name)
    im = Image.open(path)
    im = ImageOps.exif_transpose(im)
    im = im.convert("RGB")
    base = os.path.splitext(path)[0]
    open(base + ".rgb", "wb").write(im.tobytes())
    open(base + ".txt", "w").write("%d %d\n" % im.size)


def main():
    w, h = 13, 7
    rgb = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    Image.fromarray(rgb, "RGB").save(os.path.join(out, "rgb8.png"))
    rgba = rng.integers(0, 256, (5, 9, 4), dtype=np.uint8)
    Image.fromarray(rgba, "RGBA").save(os.path.join(out, "rgba8.png"))
    gray = rng.integers(0, 256, (6, 7), dtype=np.uint8)
    Image.fromarray(gray, "L").save(os.path.join(out, "gray8.png"))
    la = rng.integers(0, 256, (4, 6, 2), dtype=np.uint8)
    Image.fromarray(la, "LA").save(os.path.join(out, "gray_alpha8.png"))
    pal = Image.fromarray(rng.integers(0, 16, (6, 10), dtype=np.uint8), "P")
    pal.putpalette(list(rng.integers(0, 256, 48, dtype=np.uint8)))
    pal.info["transparency"] = 3
    pal.save(os.path.join(out, "palette4.png"), transparency=3)
    for depth in (1, 2, 4):
        vals = rng.integers(0, 1 << depth, (5, 11))
        png_raw(os.path.join(out, "gray%d.png" % depth), 11, 5, 0, depth, [pack_bits(r, depth) for r in vals])
    g16 = rng.integers(0, 600, (4, 5)).astype(">u2")  # mostly above 255: PIL clips
    png_raw(os.path.join(out, "gray16.png"), 5, 4, 0, 16, [r.tobytes() for r in g16])
    c16 = rng.integers(0, 65536, (3, 4, 3)).astype(">u2")
    png_raw(os.path.join(out, "rgb16.png"), 4, 3, 2, 16, [r.tobytes() for r in c16])
    ca16 = rng.integers(0, 65536, (3, 5, 4)).astype(">u2")
    png_raw(os.path.join(out, "rgba16.png"), 5, 3, 6, 16, [r.tobytes() for r in ca16])

    src = Image.fromarray(rng.integers(0, 256, (11, 17, 3), dtype=np.uint8), "RGB")
    src.save(os.path.join(out, "rgb.jpg"), quality=92)
    Image.fromarray(rng.integers(0, 256, (9, 10), dtype=np.uint8), "L").save(os.path.join(out, "gray.jpg"), quality=90)
    Image.fromarray(rng.integers(0, 256, (8, 8, 4), dtype=np.uint8), "CMYK").save(os.path.join(out, "cmyk.jpg"), quality=95)
    for o in (2, 3, 4, 5, 6, 7, 8):
        ex = Image.Exif()
        ex[0x0112] = o
        src.save(os.path.join(out, "exif%d.jpg" % o), quality=92, exif=ex.tobytes())
    ex = Image.Exif()
    ex[0x0112] = 6
    Image.fromarray(rgb, "RGB").save(os.path.join(out, "exif6p.png"), exif=ex.tobytes())

    # a CMYK JPEG without its Adobe marker: Pillow still reads it as Adobe's inverted CMYK
    cmyk = open(os.path.join(out, "cmyk.jpg"), "rb").read()
    open(os.path.join(out, "cmyk_noadobe.jpg"), "wb").write(strip_jpeg_marker(cmyk, 0xEE))
    # EXIF orientation in PNG text chunks and XMP, which Pillow honours too
    png_text_orientations(Image.fromarray(rgb, "RGB"))

    for f in sorted(os.listdir(out)):
        if f.endswith((".png", ".jpg")) and not f.startswith("resize_"):
            expect(f)

    rs = Image.fromarray(rng.integers(0, 256, (23, 37, 3), dtype=np.uint8), "RGB")
    rs.save(os.path.join(out, "resize_src.png"))
    for name, flt in (("bicubic", Image.BICUBIC), ("bilinear", Image.BILINEAR)):
        for (W, H) in ((64, 32), (16, 48), (20, 20), (37, 9), (5, 23)):
            r = rs.resize((W, H), flt)
            open(os.path.join(out, "resize_%s_%dx%d.rgb" % (name, W, H)), "wb").write(r.tobytes())


main()
