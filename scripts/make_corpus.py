"""Write fixtures/corpus.jsonl: the multilingual test corpus the differential tests encode.

Deterministic (seeded) mixes of our own phrases in many scripts, code, whitespace runs, emoji (with
ZWJ sequences and skin tones), combining marks, digits and random code points from many Unicode
blocks. Re-run only to change the corpus; the tests read the committed file.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

PHRASES = [
    "Hello world", "The quick brown fox jumps over the lazy dog.", "I'm sure you'll like it, won't you?",
    "IT'S A TEST'S END", "don't DON'T Don't", "e-mail: someone@example.com", "https://example.org/a?b=c&d=e",
    "Grüß Gott, schöne Grüße aus München!", "Ça va? Où est la bibliothèque?", "¿Dónde está el baño?",
    "Привет, как дела? Всё хорошо.", "Γειά σου Κόσμε", "שלום עולם", "مرحبا بالعالم", "नमस्ते दुनिया",
    "こんにちは世界、元気ですか？", "你好，世界！今天天气很好。", "안녕하세요 세계", "สวัสดีชาวโลก", "Xin chào thế giới",
    "Merhaba dünya, İstanbul'da ığdır", "Witaj świecie, zażółć gęślą jaźń", "Здраво свете", "ሰላም ልዑል",
    "გამარჯობა მსოფლიო", "Բարեւ աշխարհ", "வணக்கம் உலகம்", "ನಮಸ್ಕಾರ ಜಗತ್ತು", "ສະບາຍດີ", "မင်္ဂလာပါ",
    "Sawubona mhlaba", "Hej världen, åäö ÅÄÖ", "Ahoj světe, příliš žluťoučký kůň", "Helló világ, árvíztűrő",
    "नमस्ते, मेरा नाम है", "ওহে বিশ্ব", "ਸਤ ਸ੍ਰੀ ਅਕਾਲ", "Salam dünya", "Сәлем әлем", "Ñandú y pingüino",
]
CODE = [
    "def f(x):\n    return x ** 2  # square\n", "for (int i = 0; i < n; ++i) { a[i] += b[i]; }",
    "if x != None and y >= 3:\n\tprint(f\"{x!r} -> {y:08.3f}\")", "SELECT * FROM users WHERE id = 42;",
    "<div class=\"a\"><span>text</span></div>", "{\"key\": [1, 2, 3], \"nested\": {\"a\": null}}",
    "    indented\n        more\n\n\n", "x=1;y=2;z=x+y//3%4", "#include <stdio.h>\nint main(void){return 0;}",
    "fn main() { println!(\"{}\", 1_000_000); }", "$ ls -la | grep '^d' > out.txt 2>&1", "a\r\nb\r\n\r\nc",
    "λx. x + 1", "C:\\Users\\name\\file.txt", "// TODO(someone): fix this!!!", "    ", "\t\t\t", "\n\n\n\n",
]
EMOJI = ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "❤️", "🇩🇪", "🤖", "✨", "🎉🎉🎉", "☕", "🙏🏻", "🧑‍💻", "1️⃣", "©®™"]
COMBINING = ["e\u0301", "a\u0300\u0301\u0302", "n\u0303", "\u0915\u094d\u0937", "Z\u0351\u036b\u0343\u036a",
             "o\u0308\u0304", "\u05e9\u05c1\u05b8", "\u1100\u1161\u11a8", "i\u0307", "\u0627\u064b"]
NUMBERS = ["0", "7", "42", "123", "1234", "12345678", "3.14159", "1,000,000", "٣٤٥", "१२३", "½ ¾ ⅓", "2²³",
           "-0.5e-10", "0xDEADBEEF", "10:30", "2026-11-30", "①②③", "Ⅻ"]
SPACES = [" ", "  ", "   ", "\t", "\n", "\r\n", " \n ", "\u00a0", "\u3000", "\u2009", "\u200b", "\u2028", "\x0b", "\x0c",
          "\x1c", "\x85", " \t \n"]
BLOCKS = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x52F), (0x590, 0x6FF), (0x900, 0xDFF), (0xE00, 0xEFF),
          (0x1100, 0x11FF), (0x1E00, 0x1FFF), (0x2000, 0x2BFF), (0x3000, 0x30FF), (0x4E00, 0x4FFF),
          (0xAC00, 0xAD00), (0xFB00, 0xFFFD), (0x1F300, 0x1F6FF), (0x1D400, 0x1D7FF), (0x20000, 0x200FF),
          (0x0, 0x1F)]


def random_run(rng: random.Random) -> str:
    lo, hi = rng.choice(BLOCKS)
    return "".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 12))).replace("\ud800", "")


def make(n: int = 3600, seed: int = 20261130) -> list[str]:
    rng = random.Random(seed)
    pools = [PHRASES, CODE, EMOJI, COMBINING, NUMBERS, SPACES]
    out = [*PHRASES, *CODE, *EMOJI, *COMBINING, *NUMBERS, *SPACES]
    while len(out) < n:
        parts = []
        for _ in range(rng.randint(1, 6)):
            pick = rng.random()
            if pick < 0.15:
                parts.append(random_run(rng))
            else:
                parts.append(rng.choice(rng.choice(pools)))
            parts.append(rng.choice(["", " ", " ", "\n", ", ", ". ", "  ", "\t"]))
        text = "".join(parts)
        if rng.random() < 0.1:
            text = text.upper()
        out.append(text)
    return [s for s in dict.fromkeys(out) if not any(0xD800 <= ord(c) <= 0xDFFF for c in s)]


def main() -> None:
    target = Path(__file__).resolve().parent.parent / "fixtures" / "corpus.jsonl"
    texts = make()
    target.write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts), encoding="utf-8")
    print(f"wrote {len(texts)} strings to {target}")


if __name__ == "__main__":
    main()
