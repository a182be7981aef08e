"""Texts and conversations the tokenizer tests run on: ASCII, whitespace runs, digits, code, accents,
CJK, emoji (multi-codepoint, skin tones, ZWJ sequences) and special tokens written in the text."""

from __future__ import annotations

TEXTS = [
    "Hello world",
    "  leading spaces,\ttabs and\n\nnewlines\r\n",
    "12345 and 2024-05-01, pi = 3.14159, 1,000,000",
    "Emoji 😀👍🏽 family 👨‍👩‍👧 flags 🇫🇷🇯🇵 keycap 1️⃣",
    "中文文本，日本語のテキスト、한국어 텍스트",
    "naïve café, Ωmega, Straße, ﬁ ligature, e\u0301 combining",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "def f(x):\n    return x ** 2  # square\n\nprint(f(3))",
    "it's I'm they'll We'VE don't",
    "x" * 300,
    "",
    "   ",
    "Mixed: العربية עברית русский ελληνικά हिन्दी",
]

CONVERSATIONS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [
        {"role": "system", "content": "You answer in one word."},
        {"role": "user", "content": "Color of the sky?"},
    ],
    [
        {"role": "user", "content": "Hi 😀"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Tell me about Straße and 東京."},
    ],
]
