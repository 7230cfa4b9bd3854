#!/usr/bin/env python3
"""Goldens for the Qwen3.5 tokenizer (tests/data/fixtures/tokenizer/qwen3_5), made with the
Hugging Face `tokenizers` library.

    python tests/hf/qwen3_5_tokenizer_golden.py           # writes golden.jsonl beside tokenizer.json
    python tests/hf/qwen3_5_tokenizer_golden.py --check   # re-encodes, compares with the stored file

Run in the HF environment (scripts/hf_env.sh; any tokenizers wheel >= 0.20 reads the file).

The texts: the 200 of ../qwen3/golden.jsonl (same names, categories and order), then cases for
what Qwen3.5 changes or adds (names q35_<category>_NNN):
  marks       combining marks: inside a letter run now ([\\p{L}\\p{M}]+), after digits,
              punctuation and spaces, stacked, enclosing, Hebrew points, Arabic harakat;
  indic       Indic, Thai, Lao, Khmer, Myanmar, Tibetan and Sinhala clusters (vowel signs,
              viramas, nuktas, tone marks inside words);
  added       the 7 audio / TTS added tokens Qwen3.5 has beyond Qwen3's 26, near misses, a chat
              turn with an image;
  inline      the special: false added tokens (<think>, <tool_call>, <|fim_*|>, <tool_response>,
              <|repo_name|>, <|file_sep|>) inside words and code, next to spaces and newlines;
  reach       the 31 tokens whose merge the released merges.txt has beyond a rank-restricted
              rebuild (" является", "人力资源", " المصري", ...), in words and sentences;
  vocab_tail  words whose ids lie above Qwen3's vocabulary, the last 40 vocab entries;
  utf8        unusual but valid UTF-8.
Line format of ../qwen3/README.md: name, category, text, ids = encode(text,
add_special_tokens=False), tokens, decoded = decode(ids, skip_special_tokens=False), roundtrip;
U+0000-U+001F, '"', '\\', U+0085, U+2028, U+2029 and U+FEFF escaped, all else raw UTF-8.
add_special_tokens=True is checked to give the same ids on every line.
"""
import argparse
import json
import os
import sys

from tokenizers import Tokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIX = os.path.join(ROOT, "tests", "data", "fixtures", "tokenizer")
HERE = os.path.join(FIX, "qwen3_5")

EXTRA = [
    ("marks", "e\u0301cole"),                        # NFC composes; no bare mark left
    ("marks", "q\u0301 x\u0308y"),                    # marks NFC cannot compose: stay in the letter run
    ("marks", "नमस्ते दुनिया, हिन्दी"),               # Devanagari vowel signs and virama are \p{M}
    ("marks", "ก่อน น้ำ ที่ไหน"),                     # Thai tone marks and vowels
    ("marks", "தமிழ் മലയാളം ಕನ್ನಡ"),
    ("marks", "a\u0300\u0301\u0302\u0303\u0304b"),   # stacked marks
    ("marks", "Z\u0351\u0354a\u0350l\u0352g\u0353o zalgo"),
    ("marks", "\u0301 leading mark, 5\u0301 after digit, !\u0301 after punct"),
    ("marks", "x\u20dd \u20e3 1\ufe0f\u20e3 #\ufe0f\u20e3"),  # enclosing marks, keycaps
    ("marks", "\u05e9\u05c1\u05b8\u05dc\u05d5\u05b9\u05dd"),  # Hebrew points
    ("marks", "\u0627\u064e\u0644\u0652\u0639\u064e\u0631\u064e\u0628\u0650\u064a\u064e\u0651\u0629"),  # Arabic harakat
    ("marks", "Tie\u0323\u0302ng Vie\u0323\u0302t co\u0301 da\u0302\u0301u"),
    ("marks", "don\u0301't it's WE'\u0301LL"),
    ("marks", "\u200d\u200c\u034f joiners and CGJ"),
    ("marks", "ŋ\u030a\u0325 ɡ\u0303ɑ\u0330 word\u0336s stru\u0336ck thr\u0336ough"),  # IPA, strike-through
    ("marks", "abc\u0301def\u0327ghi j\u0323\u0307k Ǹ\u0316\u0317"),        # marks in the middle of a word
    ("marks", "ﬁ\u0301 Ω\u0308 \u212b\u0301 \uf900\u0301 \u1100\u1161\u11a8\u0301"),  # NFC before the marks join
    ("marks", "co-op\u0301eration 3rd\u0302 _x\u0303_ 'x\u0304'"),
    ("indic", "বাংলা ভাষা আমার মাতৃভাষা। ক্ষ্ম"),                       # Bengali, conjuncts
    ("indic", "ਪੰਜਾਬੀ ਭਾਸ਼ਾ ਗੁਰਮੁਖੀ ਲਿਪੀ"),                            # Gurmukhi, nukta
    ("indic", "ગુજરાતી ભાષા અને લિપિ"),
    ("indic", "తెలుగు భాష ద్రావిడ కుటుంబం"),
    ("indic", "ಕನ್ನಡ ಭಾಷೆ ಮತ್ತು ಲಿಪಿ ಶ್ರೀ"),
    ("indic", "മലയാളം ഭാഷ ക്ഷ ന്‍ ൽ"),                                # chillu, ZWJ
    ("indic", "ଓଡ଼ିଆ ଭାଷା සිංහල භාෂාව"),                              # Odia nukta, Sinhala
    ("indic", "क़िला ज़रूर फ़िल्म ड़ ढ़ क्‍ष क्‌ष"),                  # nukta, ZWJ/ZWNJ after virama
    ("indic", "संस्कृतम् ॐ नमः शिवाय ।। १२३४ ॥"),
    ("indic", "กรุงเทพมหานคร อมรรัตนโกสินทร์ มหินทรายุธยา"),
    ("indic", "เก่ง ๆ น้ำใจ ฯลฯ ๑๒๓ ไม่ได้ครับ"),
    ("indic", "ພາສາລາວ ສະບາຍດີ ភាសាខ្មែរ សួស្តី"),                    # Lao, Khmer
    ("indic", "မြန်မာဘာသာ မင်္ဂလာပါ བོད་ཡིག་ བཀྲ་ཤིས་"),            # Myanmar, Tibetan
    ("indic", "हिन्दी123 ภาษา!ไทย தமிழ்_x"),                          # clusters next to digits and punctuation
    ("added", "<|audio_start|>x<|audio_end|>"),
    ("added", "<tts_pad><tts_text_bos>hello<tts_text_eod><tts_text_bos_single><|audio_pad|>"),
    ("added", "<|audio_start|<|audio_start|>> <tts_pad <TTS_PAD> <|audio_pad|>\u0301"),
    ("added", "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>What?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"),
    ("added", "ab<|audio_start|>cd<|audio_pad|><|audio_pad|>ef<|audio_end|>gh <tts_text_eod>\n<tts_pad> "),
    ("added", "<|endoftext|><|endoftext|> <|im_end|>\n\n<|box_start|>(1,2)<|box_end|><|quad_start|><|quad_end|>"),
    ("inline", "foo<think>bar</think>baz"),
    ("inline", "x<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>y"),
    ("inline", "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"),
    ("inline", "<|fim_prefix|>def f(x):\n    <|fim_suffix|>\n    return y<|fim_middle|>y = x<|fim_pad|>"),
    ("inline", "<|repo_name|>org/repo\n<|file_sep|>src/a.c\nint a;<|file_sep|>b.py"),
    ("inline", " <tool_response> spaced </tool_response>  \n<tool_response>\n{\"ok\": true}\n</tool_response>"),
    ("inline", "no<think>space</think>\u0301 mark, 12<think>34 и<think>слово"),
    ("inline", "<think <think>> </think </ think> <THINK> <tool_call <tool_call>"),
    ("reach", "人力资源 人力资源和社会保障部 人力资源和社会保障"),
    ("reach", "Это является важным. Они являются частью. Он появляется и появляются."),
    ("reach", "треб учеб судеб популяр препар ожида подска вляется вляются"),
    ("reach", " треб учебник судебный популярный препарат ожидание подсказка элементов элементы сверху"),
    ("reach", "المصري المصدر نسب نسبة الإسبانية أخرى وهناك مقتل سكري"),
    ("reach", "Kami melanjutkan; dilanjutkan anjutkan. สัมผัส สัมภาษณ์ いっぱい いっぱいです"),
    ("vocab_tail", "人力资源 开发区 高质量发展 数字经济"),
    ("vocab_tail", "ありがとうございます よろしくお願いします"),
    ("vocab_tail", "안녕하세요 감사합니다 대한민국"),
    ("vocab_tail", "Привет, как дела? Ελληνικά γλώσσα"),
    ("utf8", "\U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466 \U0001F3F3\ufe0f\u200d\U0001F308 \U0001F1EF\U0001F1F5"),
    ("utf8", "\U00010348\U0001D11E\U0001F600\U000E0041\U0010FFFD \uFFFD \uFFFF \u0000\u0007\u001b[0m"),
    ("utf8", "\u00a0\u2009\u202f\u3000 spaces \u2028\u2029\u0085 breaks \ufeff bom"),
    ("utf8", "  \t\n\n\r\n   \t  trailing   "),
    ("utf8", "ＡＢＣ１２３ ﬁﬂ ① ½ ² Ⅻ ٣ ۴ ७"),
]


def tail_text(tok):
    """The last 40 vocab entries (ids 248004-248043), decoded and joined by spaces and no space."""
    words = [tok.decode([i]) for i in range(248004, 248044)]
    return [" ".join(words[:20]), "".join(words[20:])]


def esc(s):
    j = json.dumps(s, ensure_ascii=False)
    for ch, e in (("\u0085", "\\u0085"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029"), ("\ufeff", "\\ufeff")):
        j = j.replace(ch, e)
    return j


def lines(tok):
    cases = []
    with open(os.path.join(FIX, "qwen3", "golden.jsonl"), encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            cases.append((d["name"], d["category"], d["text"]))
    counts = {}
    for cat, text in EXTRA + [("vocab_tail", t) for t in tail_text(tok)]:
        k = counts.get(cat, 0)
        counts[cat] = k + 1
        cases.append(("q35_%s_%03d" % (cat, k), "q35_" + cat, text))
    out = []
    for name, cat, text in cases:
        enc = tok.encode(text, add_special_tokens=False)
        assert tok.encode(text, add_special_tokens=True).ids == enc.ids, name
        dec = tok.decode(enc.ids, skip_special_tokens=False)
        out.append("{" + ",".join([
            '"name":' + esc(name), '"category":' + esc(cat), '"text":' + esc(text),
            '"ids":' + json.dumps(enc.ids, separators=(",", ":")),
            '"tokens":' + "[" + ",".join(esc(t) for t in enc.tokens) + "]",
            '"decoded":' + esc(dec), '"roundtrip":' + ("true" if dec == text else "false")]) + "}\n")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare with the stored golden.jsonl, write nothing")
    a = ap.parse_args()
    import tokenizers
    tok = Tokenizer.from_file(os.path.join(HERE, "tokenizer.json"))
    out = lines(tok)
    path = os.path.join(HERE, "golden.jsonl")
    if a.check:
        with open(path, encoding="utf-8", newline="") as f:
            stored = f.readlines()
        bad = sum(1 for x, y in zip(stored, out) if x != y) + abs(len(stored) - len(out))
        print("qwen3_5 goldens: %d lines, %d differ (tokenizers %s)" % (len(out), bad, tokenizers.__version__))
        sys.exit(1 if bad else 0)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.writelines(out)
    print("golden.jsonl: %d lines (tokenizers %s)" % (len(out), tokenizers.__version__))


if __name__ == "__main__":
    main()
