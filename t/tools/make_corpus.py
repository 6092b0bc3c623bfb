#!/usr/bin/python3
"""A corpus for the tokenizer tests, made here, the same every time:

    make_corpus.py SRCDIR OUT.jsonl MEGABYTES

JSON Lines of {"text": ...} records (and OUT.txt, the same texts one after
the other): English prose and manual pages from SRCDIR (the project's own
README, man pages and C sources), code, numbers and dates, whitespace runs
(spaces, tabs, blank lines, trailing spaces), contractions in any case,
emoji (with modifiers and joiners), and text in several scripts
(Cyrillic, Greek, Arabic, Hebrew, Devanagari, Thai, Chinese, Japanese,
Korean), mixed within records, to MEGABYTES of UTF-8.
"""

import glob
import json
import os
import random
import sys

SCRIPTS = [
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία.",
    "نص حكيم له سر قاطع وذو شأن عظيم مكتوب على ثوب أخضر ومغلف بجلد أزرق.",
    "דג סקרן שט בים מאוכזב ולפתע מצא חברה.",
    "ऋषियों को सताने वाले दुष्ट राक्षसों के राजा रावण का सर्वनाश करने वाले विष्णुवतार भगवान श्रीराम।",
    "เป็นมนุษย์สุดประเสริฐเลิศคุณค่า กว่าบรรดาฝูงสัตว์เดรัจฉาน",
    "我能吞下玻璃而不伤身体。天地玄黄，宇宙洪荒。",
    "いろはにほへと ちりぬるを わかよたれそ つねならむ。カタカナ、漢字、ひらがな。",
    "다람쥐 헌 쳇바퀴에 타고파. 키스의 고유조건은 입술끼리 만나야 하고.",
]
EMOJI = ["😀", "🎉", "👍🏽", "👩‍💻", "🇫🇷", "❤️", "🚀", "🧪", "☕", "🐍"]
CONTRACTIONS = ["don't", "I'LL", "we're", "She'd", "they've", "it's", "I'm", "You'Ve", "O'Neil"]


def chunks(texts, rng, n):
    for _ in range(n):
        t = rng.choice(texts)
        if len(t) < 200:
            yield t
            continue
        a = rng.randrange(0, len(t) - 100)
        yield t[a:a + rng.randrange(100, 2000)]


def record(rng, prose, code):
    parts = []
    for _ in range(rng.randrange(1, 6)):
        kind = rng.randrange(8)
        if kind == 0:
            parts.extend(chunks(prose, rng, 1))
        elif kind == 1:
            parts.extend(chunks(code, rng, 1))
        elif kind == 2:
            parts.append(" ".join(str(rng.randrange(10 ** rng.randrange(1, 12)))
                                  for _ in range(rng.randrange(1, 12))))
            parts.append("%04d-%02d-%02d 3.14159 1e-5 0x%x 42%% $1,234.56" %
                         (rng.randrange(1900, 2100), rng.randrange(1, 13), rng.randrange(1, 29),
                          rng.randrange(1 << 32)))
        elif kind == 3:
            parts.append(rng.choice([" " * rng.randrange(1, 20), "\t" * rng.randrange(1, 5),
                                     "\n" * rng.randrange(1, 5), "  \n \t\n", "end.   \n"]))
        elif kind == 4:
            parts.append(" ".join(rng.choice(EMOJI) for _ in range(rng.randrange(1, 8))))
        elif kind == 5:
            parts.append(" ".join(rng.sample(SCRIPTS, rng.randrange(1, 4))))
        elif kind == 6:
            parts.append(" ".join(rng.choice(CONTRACTIONS) for _ in range(rng.randrange(1, 8))))
        else:
            parts.append(rng.choice(SCRIPTS) + " mixed with English and 123 " + rng.choice(EMOJI))
    return rng.choice(["", " ", "\n"]).join(parts)


def main(src, out, megabytes):
    rng = random.Random(1337)
    # special tokens written in text ("<|endoftext|>" in the manual) are
    # text to stork prep (as tiktoken's encode_ordinary), but js-tiktoken
    # refuses them and a Hugging Face tokenizer takes them for the token:
    # the corpus leaves them out (t/train/tokenizer.bats checks them apart)
    prose = [open(p, encoding="utf-8", errors="replace").read().replace("<|", "< |")
             for p in [os.path.join(src, "README.md")] + sorted(glob.glob(os.path.join(src, "man", "*.[0-9]")))]
    code = [open(p, encoding="utf-8", errors="replace").read()
            for p in sorted(glob.glob(os.path.join(src, "lib", "*.c")))[:40]]
    limit, size = float(megabytes) * 1e6, 0
    with open(out, "w", encoding="utf-8") as f, open(out[:-6] + ".txt", "w", encoding="utf-8") as t:
        while size < limit:
            text = record(rng, prose, code)
            if not text:
                continue
            f.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
            t.write(text)
            size += len(text.encode("utf-8"))


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
