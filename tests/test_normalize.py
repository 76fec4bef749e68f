from mmdedup.extract.text import normalize, text_hash


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
