"""Writes tests/data/text/corpus.json: the golden-id corpus, strings grouped by category.

Hand-written strings plus a few systematic families (whitespace runs, digit runs, emoji
sequences). Deterministic; rerun only to change the corpus, then rerun make_golden.py.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent

PROSE = [
    "Hello world",
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "It's a truth universally acknowledged, that a single man in possession of a good fortune, must be in want of a wife.",
    "I'm sure you'll see they've done what we'd expect.",
    "DON'T SHOUT. I CAN'T HEAR YOU'RE SAYING IT'S LOUD.",
    "Mr. Smith went to Washington D.C. on Jan. 5th, 2021.",
    "e.g. i.e. etc. vs. a.m. p.m.",
    "\"Quoted text,\" she said, 'and single quotes.'",
    "Hyphen-ated words and em—dashes – en dashes…",
    "What? Really!? No way!!!",
    "a",
    "A",
    " ",
    "",
    "  leading spaces",
    "trailing spaces  ",
    " leading and trailing ",
    "word",
    " word",
    "UPPERCASE lowercase MiXeD CaSe",
    "camelCaseIdentifier and snake_case_identifier and kebab-case-identifier",
    "The year 1999 was followed by 2000, then 2001.",
    "Prices: $5.99, €10, £3.50, ¥100, ₹75.",
    "Email me at someone@example.com or visit https://example.org/path?q=1&r=2#frag",
    "Once upon a time, in a land far, far away, there lived a small llama who loved to read.",
    "Tokenization is the process of breaking text into smaller pieces called tokens.",
    "She sells sea shells by the sea shore.",
    "To be, or not to be: that is the question.",
    "Hello\nWorld",
    "Paragraph one.\n\nParagraph two.",
    "Lists:\n- one\n- two\n- three",
    "1. First\n2. Second\n3. Third",
    "# Heading\n\nSome **bold** and *italic* and `code`.",
    "> a quote\n> continued",
    "| a | b |\n|---|---|\n| 1 | 2 |",
    "He said \"hi\" and left.",
    "don't won't can't shouldn't it's we're they've I'd you'll",
    "'s 't 're 've 'm 'll 'd",
    "'S 'T 'RE 'VE 'M 'LL 'D",
]

CODE = [
    "def f(x):\n    return x * 2\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}",
    "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); return 0; }",
    "import numpy as np\narr = np.zeros((3, 4), dtype=np.float32)",
    "const x = () => { return [1, 2, 3].map(v => v ** 2); };",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;",
    "<div class=\"container\"><p>Hello</p></div>",
    "{\"key\": \"value\", \"list\": [1, 2.5, null, true], \"nested\": {\"a\": {}}}",
    "if x == 1 and y != 2 or not z:\n    pass\nelif x <= 3:\n    ...",
    "a+=1; b-=2; c*=3; d/=4; e%=5; f**=6; g//=7; h>>=1; i<<=2; j&=k; l|=m; n^=o",
    "fn main() -> Result<(), Box<dyn Error>> { Ok(()) }",
    "x = lambda a, *args, **kwargs: (a, args, kwargs)",
    "    indented four\n        indented eight\n\t\ttabbed twice",
    "#!/bin/bash\nset -euo pipefail\necho \"$HOME\" | grep -v '^#' > /dev/null 2>&1",
    "matrix[i][j] = matrix[i-1][j-1] + cost;  // dynamic programming",
    "/* block comment */ // line comment\n# python comment\n-- sql comment",
    "@decorator\nclass Foo(Bar, metaclass=Meta):\n    __slots__ = ('a', 'b')",
    "regex = r'^(?P<name>[A-Za-z_]\\w*)\\s*=\\s*(\\d+)$'",
    "0x1F 0b1010 0o777 1e-10 3.14159 -42 +7 1_000_000",
    "print(f\"{value!r:>10}\")",
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<root attr='x'/>",
    "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n-old\n+new",
    "$ ls -la ~/.config && cd ..",
    "tokens = tokenizer.encode(text, add_special=True)",
    "} } } ] ] ) ) ;;; ::: ,,, ...",
]

WHITESPACE = [
    " " * n for n in (2, 3, 4, 5, 8, 16, 33)
] + [
    "\t", "\t\t", "\t\t\t\t", "\n", "\n\n", "\n\n\n", "\n\n\n\n\n\n", "\r\n", "\r\n\r\n", "\r", "\v\f",
    " \n", "\n ", " \n ", "  \n  ", "\t \n \t", "a  b", "a   b", "a    b", "a\tb", "a\t\tb", "a\nb", "a\n\nb",
    "a \n b", "word   \n\n   word", "\u00a0non-breaking\u00a0space", "ideographic\u3000space",
    "thin\u2009space and hair\u200aspace", "zero\u200bwidth\u200bspace", "line\u2028separator",
    "paragraph\u2029separator", "  \t  \t  ", " \r\n \r\n ", "end with newline\n", "\nstart with newline",
]

CJK = [
    "日本語のテキスト", "你好，世界！", "中文分词测试：我们今天去公园散步。", "한국어 텍스트입니다.",
    "東京タワーは1958年に完成しました。", "カタカナとひらがなと漢字", "繁體中文與简体中文",
    "我爱自然语言处理", "안녕하세요 세계", "ｆｕｌｌｗｉｄｔｈ　ＡＢＣ　１２３", "「引用」『二重引用』【括弧】",
    "混合 mixed 文本 text 123", "𠮷野家 (a rare kanji outside the BMP)", "龍龖龘", "ｶﾀｶﾅ half-width",
]

EMOJI = [
    "😀", "😀😃😄😁", "I ❤️ llamas 🦙", "👍🏽 thumbs up with skin tone", "👨‍👩‍👧‍👦 family",
    "🏳️‍🌈 flag", "🇯🇵🇺🇸🇫🇷 flags", "👩🏾‍💻 technologist", "❤", "❤️", "☺️☹️", "✅❌⚠️",
    "🧑‍🤝‍🧑", "1️⃣ 2️⃣ #️⃣", "emoji at end 🎉", "🎉 emoji at start", "🙈🙉🙊" * 3, "🫠🫡🫶 newer emoji",
]

ACCENTS = [
    "café naïve résumé façade", "Crème brûlée à la française", "Ångström Øresund Ærø", "straße Fußgänger Größe",
    "São Paulo, João, ação", "Dvořák Čapek Šťastný", "Zażółć gęślą jaźń", "İstanbul ığdır şişli",
    "e\u0301 (e + combining acute)", "a\u0300\u0301\u0302\u0303 stacked marks", "n\u0303 vs ñ",
    "Z\u0351\u0352a\u0353\u0354l\u0355\u0356g\u0357o\u0358 zalgo", "Ελληνικά: Καλημέρα κόσμε", "Русский текст: Привет, мир!",
    "Українська: Ґґ Єє Її", "ﬁ ﬂ ligatures", "Ω ≠ Ω (ohm vs omega)", "x² + y³ = z⁴", "½ ¼ ¾ ⅓",
    "Vietnamese: Tiếng Việt có dấu", "हिन्दी पाठ", "ภาษาไทย", "ქართული", "Հայերեն",
]

RTL = [
    "مرحبا بالعالم", "שלום עולם", "English then عربي then English", "עברית עם ניקוד: שָׁלוֹם",
    "\u202eRLO override\u202c", "\u200fRLM mark", "\u200eLRM mark", "فارسی: سلام دنیا", "اردو: ہیلو",
    "Numbers in Arabic: ١٢٣٤٥٦٧٨٩٠", "(parentheses) in עברית (סוגריים)",
]

CONTROL = [
    "\x00", "null\x00byte", "bell\x07", "backspace\x08", "escape\x1b[31mred\x1b[0m", "\x01\x02\x03",
    "delete\x7f", "\x1f unit separator", "\u0085 next line", "\ufeffBOM at start", "\ufffd replacement char",
    "soft\u00adhyphen", "zero\u200dwidth\u200cjoiners", "\u2060word joiner", "private use \ue000\uf8ff",
    "noncharacter \ufdd0 \uffff",
]

DIGITS = [
    "0", "12", "123", "1234", "12345", "123456", "1234567", "12345678901234567890",
    "3.141592653589793238462643383279", "1,000,000", "1 000 000", "-0.000001", "2024-01-15T12:34:56Z",
    "+1 (555) 123-4567", "0000000000", "9" * 50, "a1b2c3d4e5", "v1.2.3-beta.4", "١٢٣ ٤٥٦", "೧೨೩ ௧௨௩",
    "Ⅻ Ⅳ ⅸ roman numerals", "①②③ circled", "version 2.0.0 released on 3/4/2025",
]

SPECIAL = [
    "<|im_end|>", "<|im_start|>user\nhi<|im_end|>", "text <|im_end|> more text", "<|endoftext|>",
    "<s>", "</s>", "<s> hello </s>", "<unk>", "<start_of_turn>user\nhi<end_of_turn>", "<|eot_id|>",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>", "[INST] hello [/INST]", "<<SYS>>\nsys\n<</SYS>>",
    "<|user|>\nhi<|end|>\n<|assistant|>", "<|im_end", "|im_end|>", "<<|im_end|>>", "<|im_end|><|im_end|>",
    "<repo_name>", "<filename>test.py", "<0x41>", "<pad>", "<|system|>", "<think>reasoning</think>",
    "<|fim_prefix|>a<|fim_suffix|>b<|fim_middle|>", "<mask>", "[CLS] [SEP]",
]

MIXED = [
    "Mixed: English, 日本語, العربية, emoji 🎉, code `x=1`, and numbers 42.",
    "The 🦙 llama (Lama glama) is a domesticated South American camelid.",
    "naïve café 😊 — “smart quotes” ‘single’ «guillemets» „low“",
    "Tabs\tand\tnewlines\nmixed  with   spaces    everywhere.",
    "URL: https://例え.jp/パス?クエリ=値",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz" * 3,
    "!!!???...,,,;;;:::'''\"\"\"```~~~",
    "The end.",
    "ÀÁÂÃÄÅÆÇÈÉÊËÌÍÎÏÐÑÒÓÔÕÖ×ØÙÚÛÜÝÞßàáâãäåæçèéêëìíîïðñòóôõö÷øùúûüýþÿ",
    "¡¢£¤¥¦§¨©ª«¬®¯°±²³´µ¶·¸¹º»¼½¾¿",
    "\\ backslash / slash | pipe _ underscore ^ caret ~ tilde ` backtick",
    "nested (parens [brackets {braces <angles>}])",
    "'quoted' \"double\" `back` «angle» ‹single›",
    "Ünïcödé tëxt wïth dïäcrïtïcs",
]


def corpus() -> dict[str, list[str]]:
    return {"prose": PROSE, "code": CODE, "whitespace": WHITESPACE, "cjk": CJK, "emoji": EMOJI,
            "accents": ACCENTS, "rtl": RTL, "control": CONTROL, "digits": DIGITS, "special": SPECIAL,
            "mixed": MIXED}


if __name__ == "__main__":
    c = corpus()
    n = sum(len(v) for v in c.values())
    (HERE / "corpus.json").write_text(json.dumps(c, ensure_ascii=True, indent=1) + "\n")
    print(f"{n} strings in {len(c)} categories")
