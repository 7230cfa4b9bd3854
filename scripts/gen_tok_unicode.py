#!/usr/bin/env python3
"""Generate src/text/tok_unicode_data.c: the Unicode tables of the tokenizer's NFC step.

The reference tokenizer normalizes with Unicode 9.0.0 tables (the Rust crate
unicode-normalization-alignments 0.1.12), so qhexrt
  - skips NFC on text that cannot change (a quick-check bitmap), and
  - treats every code point assigned after Unicode 9.0 as inert (no decomposition,
    combining class 0, no composition), as the reference does.

It also lists the letters, numbers and marks of Unicode 16.0 that were assigned after
Unicode 12.1: the reference's regex engine (Oniguruma) knows Unicode 16.0 categories, while
PCRE2 10.42 (Debian 12) knows 14.0; the pre-tokenizer adds these ranges to \p{L}, \p{N}
and \p{M} so that both agree.

Sources: the system utf8proc (via ctypes) for decompositions and combining classes,
Perl's Unicode::UCD for the code points present in Unicode 9.0 and 12.1, and a Java
runtime with Unicode 16.0 tables (JDK 24 or 25; $JAVA, default "java") for the 16.0
general categories. Normalization data of already-assigned code points never changes
between Unicode versions (stability policy), so utf8proc's newer data restricted to the
9.0 set is the 9.0 data.

Usage: JAVA=/path/to/jdk25/bin/java python3 scripts/gen_tok_unicode.py > src/text/tok_unicode_data.c
"""
import ctypes
import os
import subprocess
import sys
import tempfile

LIMIT = 0x30000  # no code point at or above this decomposes or has a non-zero class

up = ctypes.CDLL("libutf8proc.so.2")
up.utf8proc_get_property.restype = ctypes.POINTER(ctypes.c_int16 * 2)
up.utf8proc_get_property.argtypes = [ctypes.c_int32]
up.utf8proc_decompose_char.restype = ctypes.c_ssize_t
up.utf8proc_decompose_char.argtypes = [ctypes.c_int32, ctypes.POINTER(ctypes.c_int32),
                                       ctypes.c_ssize_t, ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
up.utf8proc_unicode_version.restype = ctypes.c_char_p
up.utf8proc_version.restype = ctypes.c_char_p
UTF8PROC_DECOMPOSE = 1 << 4
UTF8PROC_COMPOSE = 1 << 3
UTF8PROC_STABLE = 1 << 1


def ccc(cp):
    return up.utf8proc_get_property(cp).contents[1]


buf = (ctypes.c_int32 * 32)()
last = ctypes.c_int(0)


def decomp(cp):
    n = up.utf8proc_decompose_char(cp, buf, 32, UTF8PROC_DECOMPOSE, ctypes.byref(last))
    assert 0 < n <= 32
    return list(buf[:n])


def nfc_char(cp):
    arr = (ctypes.c_int32 * 32)(*decomp(cp))
    n = len(decomp(cp))
    # reorder + compose, as utf8proc_normalize_utf32 does
    up.utf8proc_normalize_utf32.restype = ctypes.c_ssize_t
    up.utf8proc_normalize_utf32.argtypes = [ctypes.POINTER(ctypes.c_int32), ctypes.c_ssize_t, ctypes.c_int]
    m = up.utf8proc_normalize_utf32(arr, n, UTF8PROC_COMPOSE | UTF8PROC_STABLE)
    return list(arr[:m])


def present_in(version):
    perl = ('use Unicode::UCD qw(prop_invlist); my @l = prop_invlist("In=%s");'
            'print join(" ", @l), "\\n";' % version)
    inv = [int(x) for x in subprocess.check_output(["perl", "-e", perl]).split()]
    if len(inv) % 2:
        inv.append(0x110000)
    return [(inv[i], inv[i + 1] - 1) for i in range(0, len(inv), 2)]


ranges9 = present_in("9.0")
ranges12 = present_in("12.1")

JAVA_SRC = """
public class Cat16 { public static void main(String[] a) {
  if (Character.getType(0x16D67) != Character.OTHER_LETTER || Character.getType(0x10940) != Character.UNASSIGNED)
    throw new RuntimeException("this Java runtime does not have Unicode 16.0 tables");
  StringBuilder sb = new StringBuilder();
  for (int cp = 0; cp < 0x110000; cp++) {
    switch (Character.getType(cp)) {
    case Character.UPPERCASE_LETTER: case Character.LOWERCASE_LETTER: case Character.TITLECASE_LETTER:
    case Character.MODIFIER_LETTER: case Character.OTHER_LETTER: sb.append('L'); break;
    case Character.DECIMAL_DIGIT_NUMBER: case Character.LETTER_NUMBER: case Character.OTHER_NUMBER: sb.append('N'); break;
    case Character.NON_SPACING_MARK: case Character.ENCLOSING_MARK: case Character.COMBINING_SPACING_MARK: sb.append('M'); break;
    default: sb.append('-');
    }
  }
  System.out.print(sb);
} }
"""
with tempfile.TemporaryDirectory() as td:
    src = os.path.join(td, "Cat16.java")
    open(src, "w").write(JAVA_SRC)
    cat16 = subprocess.check_output([os.environ.get("JAVA", "java"), src]).decode()
assert len(cat16) == 0x110000


def in_ranges(cp, _r):
    lo, hi = 0, len(_r)
    while lo < hi:
        mid = (lo + hi) // 2
        if _r[mid][1] < cp:
            lo = mid + 1
        elif _r[mid][0] > cp:
            hi = mid
        else:
            return True
    return False


def in9(cp):
    return in_ranges(cp, ranges9)


maybe = set()
for cp in range(LIMIT):
    if 0xD800 <= cp <= 0xDFFF or not in9(cp):
        continue
    if ccc(cp) != 0:
        maybe.add(cp)
    d = decomp(cp)
    if d != [cp]:
        if nfc_char(cp) != [cp]:
            maybe.add(cp)          # NFC_Quick_Check = No
        for c in d[1:]:
            maybe.add(c)           # may compose with what precedes it
for cp in list(maybe):
    assert in9(cp), hex(cp)
    assert cp >= 0x300, hex(cp)

# Two-level bitmap: stage1[cp >> 8] -> block, stage2[block] = 256 bits.
blocks = []
stage1 = []
for hi in range(LIMIT >> 8):
    bits = bytearray(32)
    for lo in range(256):
        if (hi << 8 | lo) in maybe:
            bits[lo >> 3] |= 1 << (lo & 7)
    b = bytes(bits)
    if b not in blocks:
        blocks.append(b)
    stage1.append(blocks.index(b))
assert len(blocks) < 256

# Letters, numbers, marks of Unicode 16.0 not present in Unicode 12.1, as PCRE2 class text.
extra = {}
for cls in "LNM":
    cps = [cp for cp in range(0x110000) if cat16[cp] == cls and not in_ranges(cp, ranges12)]
    rs = []
    for cp in cps:
        if rs and rs[-1][1] == cp - 1:
            rs[-1][1] = cp
        else:
            rs.append([cp, cp])
    extra[cls] = rs

# Bitmap of all those code points, for choosing the faster pattern on text without them.
EXTRA_LIMIT = 0x40000
extra_set = set()
for cls in "LNM":
    for a, b in extra[cls]:
        assert b < EXTRA_LIMIT, hex(b)
        extra_set.update(range(a, b + 1))
xblocks, xstage1 = [], []
for hi in range(EXTRA_LIMIT >> 8):
    bits = bytearray(32)
    for lo in range(256):
        if (hi << 8 | lo) in extra_set:
            bits[lo >> 3] |= 1 << (lo & 7)
    bb = bytes(bits)
    if bb not in xblocks:
        xblocks.append(bb)
    xstage1.append(xblocks.index(bb))
assert len(xblocks) < 256

out = sys.stdout
out.write("/* tok_unicode_data: Unicode tables for the tokenizer's NFC step (generated; do not edit).\n")
out.write(" * Made by scripts/gen_tok_unicode.py from utf8proc %s (Unicode %s), Perl Unicode::UCD and\n"
          " * Java's Unicode 16.0 tables.\n"
          % (up.utf8proc_version().decode(), up.utf8proc_unicode_version().decode()))
out.write(" * %d code points may change under NFC; %d ranges were assigned in Unicode 9.0. */\n"
          % (len(maybe), len(ranges9)))
out.write('#include "text/tok_internal.h"\n\n')
out.write("#define NFC_LIMIT 0x%X\n\n" % LIMIT)
out.write("static const uint8_t nfc_stage1[%d] = {\n" % len(stage1))
for i in range(0, len(stage1), 24):
    out.write("    " + ", ".join(str(x) for x in stage1[i:i + 24]) + ",\n")
out.write("};\n\n")
out.write("static const uint8_t nfc_stage2[%d][32] = {\n" % len(blocks))
for b in blocks:
    out.write("    {" + ", ".join("0x%02x" % x for x in b) + "},\n")
out.write("};\n\n")
out.write("static const uint32_t assigned_9_0[%d][2] = {\n" % len(ranges9))
for i in range(0, len(ranges9), 6):
    out.write("    " + " ".join("{0x%X, 0x%X}," % r for r in ranges9[i:i + 6]) + "\n")
out.write("};\n\n")
for cls in "LNM":
    out.write("/* \\p{%s} of Unicode 16.0 beyond Unicode 12.1: %d ranges */\n" % (cls, len(extra[cls])))
    out.write("const char qhx_tok_extra_%s[] =\n" % cls)
    items = ["\\\\x{%X}" % a if a == b else "\\\\x{%X}-\\\\x{%X}" % (a, b) for a, b in extra[cls]]
    for i in range(0, len(items), 5):
        out.write('    "' + "".join(items[i:i + 5]) + '"\n')
    out.write(";\n\n")
out.write("static const uint8_t extra_stage1[%d] = {\n" % len(xstage1))
for i in range(0, len(xstage1), 24):
    out.write("    " + ", ".join(str(x) for x in xstage1[i:i + 24]) + ",\n")
out.write("};\n\n")
out.write("static const uint8_t extra_stage2[%d][32] = {\n" % len(xblocks))
for bb in xblocks:
    out.write("    {" + ", ".join("0x%02x" % x for x in bb) + "},\n")
out.write("};\n\n")
out.write("""int qhx_tok_unicode_extra(uint32_t cp) {
    if (cp >= 0x%X) return 0;
    const uint8_t *blk = extra_stage2[extra_stage1[cp >> 8]];
    return (blk[(cp & 0xff) >> 3] >> (cp & 7)) & 1;
}

""" % EXTRA_LIMIT)
out.write("""int qhx_tok_nfc_maybe(uint32_t cp) {
    if (cp >= NFC_LIMIT) return 0;
    const uint8_t *blk = nfc_stage2[nfc_stage1[cp >> 8]];
    return (blk[(cp & 0xff) >> 3] >> (cp & 7)) & 1;
}

int qhx_tok_unicode9_assigned(uint32_t cp) {
    size_t lo = 0, hi = sizeof assigned_9_0 / sizeof assigned_9_0[0];
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (assigned_9_0[mid][1] < cp) lo = mid + 1;
        else if (assigned_9_0[mid][0] > cp) hi = mid;
        else return 1;
    }
    return 0;
}
""")
