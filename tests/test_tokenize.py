"""Tokenising: mixed Chinese, English and numbers into words, stop words dropped, width,
case, markup and links ignored; the fast paths held to the definition (the word regex over
`clean(text)`, jieba for Han runs); the tokenizer version naming its parts."""

from __future__ import annotations

import random

from mmdedup.extract import normalize as normalize_mod
from mmdedup.extract import tokens as tokens_mod
from mmdedup.extract.normalize import clean
from mmdedup.extract.tokens import tokenize, tokenize_many, tokenizer_version


def test_tokenize_mixed_chinese_english_numbers_and_stop_words() -> None:
    tokens = tokenize("我在北京大学学习Machine Learning和深度学习，准确率达到98.5%，共1,000人。It's the best!")
    for expected in ("北京大学", "machine", "learning", "深度", "学习", "98.5", "1,000", "best"):
        assert expected in tokens, (expected, tokens)
    for stop in ("在", "和", "the", "it's", "，", "%", " "):
        assert stop not in tokens, (stop, tokens)
    assert tokenize("2024年5月3日") == ["2024", "年", "5", "月", "3", "日"]
    kept = tokenize("it is the best", drop_stop_words=False)
    assert kept == ["it", "is", "the", "best"]
    assert tokenize_many(["北京大学", ""]) == [["北京大学"], []]


def reference_tokenize(text: str, drop_stop_words: bool = True) -> list[str]:
    """The definition: `_TOKEN` over `clean(text)`, jieba for Han runs (the old loop)."""
    tokens: list[str] = []
    for match in tokens_mod._TOKEN.finditer(clean(text)):
        han = match.group("han")
        tokens.extend(tokens_mod._cut_han(han) if han is not None else [match.group()])
    return [t for t in tokens if t not in tokens_mod.STOP_WORDS] if drop_stop_words else tokens


def test_tokenize_fast_paths_equal_the_definition() -> None:
    rng = random.Random(12)
    pieces = list("abcXYZ019 ..,,::''`\t\n-_!?\"()<>&;/@") + [
        "it's", "1,000", "3.14", "12:30", "don't", "u.s.", "...", " www.x.com ", "a@b.co", "http://x.y/z",
        "ＷＷＷ.x.com", "ｈｔｔｐ：／／a.b", "&amp;", "&eacute;", "<p>", "</p>", "é", "中文", "北京大学", "，", "。",
        "Ａ", "ｉ", "’", "“", "\u00a0", "\u3000", "\u2028", "\x1c", "٣", "²", "ß", "\u0301", "İ", "ſ", "K",
        "Ω", "😀", "\U00020001", "the", "is", "not",
    ]
    ascii_pieces = list("ab1 2.,:'' \t") + ["it's", "1,000", "3.14", "e.g."]
    for i in range(6000):
        pool = ascii_pieces if i % 3 == 0 else pieces
        text = "".join(rng.choice(pool) for _ in range(rng.randint(0, 30)))
        for drop in (True, False):
            assert tokenize(text, drop_stop_words=drop) == reference_tokenize(text, drop), repr(text)
    english = " ".join(["The committee's budget (1,000 items) was approved on 12:30, i.e. at noon;",
                        "it's the \u201cbest\u201d plan \u2014 costs fell 3.5% to $2.10!"] * 20)
    assert tokenize(english) == reference_tokenize(english)


def test_tokenize_ignores_width_case_markup_and_links() -> None:
    a = tokenize("Ａｐｐｌｅ发布了新款ｉＰｈｏｎｅ，详情见 https://apple.com/cn?utm=1")
    b = tokenize("<p>apple 发布了 新款 iPhone,</p> 详情见 http://apple.com.cn/x")
    assert a == b
    assert "iphone" in a


def test_tokenizer_version_is_stable_and_names_its_parts() -> None:
    import jieba

    v = tokenizer_version()
    assert v == tokenizer_version() == tokens_mod.TOKENIZER_VERSION
    assert v.startswith(f"jieba-{jieba.__version__}+dict-")
    dict_hash = v.split("+dict-")[1].split("+")[0]
    assert len(dict_hash) == 8 and int(dict_hash, 16) >= 0
    for part in (normalize_mod.NORMALIZER_VERSION, normalize_mod.CLEANER_VERSION, tokens_mod.STOP_WORDS_VERSION):
        assert part in v
