"""Text chosen to break a byte-level BPE tokenizer (unicode, emoji, whitespace runs, special
tokens), shared by the tests of every GPT-2 tokenizer the project ships: tokenizer.json
(test_hf_tokenizer.py) and the browser's JavaScript one (test_web_tokenizer.py)."""

HARD = [
    "hello everyone",
    "  leading, trailing   \n\t tabs\r\nand CRLF\r\n\r\n\n\n   ",
    "I'll, you've, we're, she'd, it's, 'Tis, O'ER, rock'n'roll -- 12345 3.14159 1,000,000",
    "Emoji: 🎭🤖👍🏽 family 👨‍👩‍👧 flags 🇫🇷🇯🇵 keycap 1️⃣",
    "CJK: 你好，世界。こんにちは 안녕하세요; Arabic ١٢٣ مرحبا; Devanagari नमस्ते",
    "Accents: naïve café, Ægir, Œuvre, ß, Ωmega, ﬁ ligature, Å (combining), e\u0301",
    "zero width\u200b\u200c\u200d\ufeff nbsp\u00a0\u2003em-space \u3000 ideographic",
    "code:\n    def f(x):\n\treturn x**2  # ♥\n" * 3,
    "<|endoftext|>Pericles<|endoftext|> <|endoftext|>\n<|endoftext|><|endoftext|>",
    " " * 1000 + "x" + "\n" * 500 + "y" + "\t " * 300,
    "a" * 5000,
    "".join(chr(c) for c in range(32, 1200)),
    "",
]
