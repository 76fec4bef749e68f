"""Text normalisation: width, punctuation, case and whitespace folded so trivially different
copies are one text (`normalize`, `text_hash`), and `clean`, which also takes markup,
entities, links and e-mail addresses out before tokenising."""

from mmdedup.extract.normalize import clean, normalize, text_hash


def test_width_punctuation_case_and_space_fold_to_one_text() -> None:
    variants = [
        "Apple 发布了新款 iPhone，售价 5999 元起。",
        "ＡＰＰＬＥ发布了新款ｉＰｈｏｎｅ,售价５９９９元起.",
        "apple  发布了 新款 iphone , 售价 5999 元起 .",
    ]
    hashes = {text_hash(v) for v in variants[:2]}
    assert len(hashes) == 1
    assert normalize(variants[0]) == "apple发布了新款iphone,售价5999元起."


def test_quotes_dashes_and_invisible_characters() -> None:
    assert normalize("“Hello” — it’s\u200b here…") == normalize('"hello" - it\'s here...')


def test_different_words_stay_different() -> None:
    assert text_hash("不予批准") != text_hash("给予批准")
    assert text_hash("approved") != text_hash("rejected")


def test_empty_text_has_no_hash() -> None:
    assert text_hash("") is None
    assert text_hash(" \u3000\n ") is None
    assert text_hash(None) is None


def test_whitespace_collapse_shortcut_equals_split_and_join() -> None:
    """Single-spaced ASCII texts are returned as they are; anything else is split and
    joined: the result is always that of str.split (which also splits at \\x1c-\\x1f)."""
    import random

    from mmdedup.extract.normalize import _collapse_whitespace

    rng = random.Random(0)
    alphabet = " ab.\t\n\r\x0b\x0c\x1c\x1f\xa0\u3000é中"
    texts = ["", " ", "a b", "a  b", " a", "a ", "a\tb", "a\x1cb", "x" * 200]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(5000)]
    for text in texts:
        assert _collapse_whitespace(text) == " ".join(text.split()), repr(text)


def test_clean_removes_urls_emails_markup_and_decodes_entities() -> None:
    raw = (
        "<html><head><style>p {color: red}</style><script>var x = 1;</script></head>"
        "<body><p>Caf&eacute; &amp; Bar</p> see https://example.com/a?b=1&c=2 or "
        "www.example.org/x, mail <a href='mailto:x@y.com'>Boss@Example.COM</a>.<br/>"
        "看这里http://t.cn/abc中文 and a < b > c</body></html>"
    )
    out = clean(raw)
    for gone in ("http", "example", "www", "@", "<", "color", "var x", "&amp;", "href", "t.cn"):
        assert gone not in out.replace("a < b > c", ""), gone
    assert "café & bar" in out
    assert "看这里中文" in out
    assert "a < b > c" in out  # comparison signs in text are not tags
