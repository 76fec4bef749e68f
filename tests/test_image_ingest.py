"""Items with pictures through ingest and query: copies found mirrored, re-compressed and
bordered; bad pictures recorded with their reason while the batch goes on."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageEnhance, ImageOps
from skimage import data

from mmdedup import Platform


def save(img: Image.Image, path: Path, **kw) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path, **kw)
    return path.name


@pytest.fixture
def pictures(tmp_path: Path) -> Path:
    folder = tmp_path / "img"
    astro = Image.fromarray(data.astronaut())
    coffee = Image.fromarray(data.coffee())
    save(astro, folder / "astro.png")
    save(astro.resize((256, 256)), folder / "astro-small.jpg", quality=25)
    save(ImageOps.mirror(astro), folder / "astro-mirror.png")
    save(ImageOps.expand(astro, border=60, fill=(0, 0, 0)), folder / "astro-border.png")
    save(coffee, folder / "coffee.png")
    frames = [Image.fromarray(data.chelsea()), Image.fromarray(data.rocket()[:300, :451])]
    frames[0].save(folder / "anim.gif", save_all=True, append_images=frames[1:], duration=100)
    buf = io.BytesIO()
    coffee.save(buf, format="JPEG")
    (folder / "truncated.jpg").write_bytes(buf.getvalue()[:400])
    (folder / "empty.png").write_bytes(b"")
    (folder / "text.png").write_text("not a picture at all")
    return folder


def test_copies_found_bad_pictures_recorded(platform: Platform, pictures: Path) -> None:
    report = platform.ingest(pictures)
    reasons = {f["key"]: f["reason"] for f in platform.failures()}
    assert reasons == {"truncated.jpg": "corrupt_image", "empty.png": "empty_content",
                       "text.png": "not_an_image"}
    assert report.new == 6
    pairs = {tuple(sorted((p["a"], p["b"]))): p for p in platform.pairs("weak")}
    for copy in ("astro-small.jpg", "astro-mirror.png", "astro-border.png"):
        pair = pairs[tuple(sorted(("astro.png", copy)))]
        assert pair["kind"] == "image-reuse" and pair["signals"]["image"] >= 0.8, pair
    assert not any("coffee.png" in key or "anim.gif" in key for key in pairs)


def test_query_by_picture(platform: Platform, pictures: Path, tmp_path: Path) -> None:
    platform.ingest(pictures)
    probe = tmp_path / "probe.jpg"
    Image.fromarray(data.astronaut()).rotate(90, expand=True).save(probe, quality=40)
    results = platform.query(image=probe, k=10)
    assert {r["id"] for r in results} == {"astro.png", "astro-small.jpg", "astro-mirror.png",
                                          "astro-border.png"}
    assert all(r["signals"]["image"] >= 0.8 for r in results)
    with pytest.raises(ValueError, match="cannot be read"):
        platform.query(image=pictures / "text.png")


def test_picture_and_caption_fuse(platform: Platform, tmp_path: Path) -> None:
    """The same picture with a different caption is image reuse; the same caption with a
    different picture is text reuse; neither is drowned by the other signal."""
    folder = tmp_path / "posts"
    save(Image.fromarray(data.astronaut()), folder / "a.png")
    save(Image.fromarray(data.coffee()), folder / "c.png")
    caption = "Astronaut portrait released by the space agency for the anniversary of the mission."
    platform.ingest([
        {"id": "p1", "text": caption, "images": ["a.png"]},
        {"id": "p2", "text": "A cup of coffee on a saucer, photographed in the morning light today.",
         "images": ["a.png"]},
        {"id": "p3", "text": caption, "images": ["c.png"]},
    ], root=folder)
    pairs = {tuple(sorted((p["a"], p["b"]))): p for p in platform.pairs("weak")}
    assert pairs[("p1", "p2")]["kind"] == "image-reuse" and pairs[("p1", "p2")]["tier"] == "strong"
    assert pairs[("p1", "p3")]["kind"] == "text-reuse" and pairs[("p1", "p3")]["tier"] == "strong"
    assert ("p2", "p3") not in pairs
    assert np.isclose(pairs[("p1", "p3")]["signals"]["image"], 0.0, atol=0.25)


def _pair_set(platform: Platform) -> dict[tuple[str, str], tuple[str, float]]:
    return {tuple(sorted((p["a"], p["b"]))): (p["tier"], round(p["signals"]["image"], 6))
            for p in platform.pairs("weak")}


def test_pictures_of_an_older_version_signed_again(home: Path, db_url: str, pictures: Path,
                                                   tmp_path: Path, monkeypatch) -> None:
    """A store whose pictures were signed by an earlier release (here: every code zero,
    under another version) ends, once opened by this one, with the pairs a fresh ingest
    makes; a picture whose file is gone is reported and keeps nothing from the old codes."""
    from mmdedup.signals.image import RESIGN_SOURCE, ImageSignal

    with Platform.open(tmp_path / "fresh", None) as fresh:
        fresh.ingest(pictures)
        want = _pair_set(fresh)
    assert want  # (the copies of the astronaut pair up)

    current = ImageSignal.extract

    def zero(codes):  # noqa: ANN001, ANN202
        return None if codes is None else type(codes)(codes.scales * 0, codes.dhash * 0,
                                                      codes.errors)

    with monkeypatch.context() as old:
        old.setattr(ImageSignal, "version", lambda self: "img0-an-earlier-release")
        old.setattr(ImageSignal, "extract", lambda self, items: [zero(c) for c in current(self, items)])
        with Platform.open(home, db_url) as before:
            before.ingest(pictures)
            stale = _pair_set(before)
    assert stale != want  # zero codes pair every picture with every other

    (pictures / "coffee.png").rename(tmp_path / "coffee-moved.png")
    with Platform.open(home, db_url) as after:
        image = after.signal("image")
        assert image.catch_up()
        assert set(image.resign_failures) == {"coffee.png"}
        assert image.resign_failures["coffee.png"][0] == "missing_file"
        got = _pair_set(after)
        failures = [f for f in after.failures() if f["source"] == RESIGN_SOURCE]
    assert {k: v for k, v in got.items() if "coffee.png" not in k} == \
        {k: v for k, v in want.items() if "coffee.png" not in k}
    assert not any("coffee.png" in k for k in got)  # its stale codes are never compared
    assert [(f["key"], f["reason"]) for f in failures] == [("coffee.png", "missing_file")]


def test_a_picture_changed_since_ingest_is_not_signed_again_from_its_new_bytes(
        home: Path, db_url: str, pictures: Path, monkeypatch) -> None:
    """Re-signing reads the file ingested; when its bytes are not the ones stored (sha256),
    it is reported as changed and its old codes are never compared, the rest are signed."""
    from mmdedup.signals.image import RESIGN_SOURCE, ImageSignal

    with monkeypatch.context() as old:
        old.setattr(ImageSignal, "version", lambda self: "img0-an-earlier-release")
        with Platform.open(home, db_url) as before:
            before.ingest(pictures)
    # The same name, other content: another photo where the astronaut was.
    save(Image.fromarray(data.camera()).convert("RGB"), pictures / "astro-small.jpg", quality=25)
    with Platform.open(home, db_url) as after:
        image = after.signal("image")
        assert image.catch_up()
        assert {k: v[0] for k, v in image.resign_failures.items()} == {"astro-small.jpg": "changed_file"}
        got = _pair_set(after)
        failures = [(f["key"], f["reason"]) for f in after.failures() if f["source"] == RESIGN_SOURCE]
    assert failures == [("astro-small.jpg", "changed_file")]
    assert not any("astro-small.jpg" in k for k in got)
    assert ("astro-mirror.png", "astro.png") in got  # the unchanged copies pair again


def test_a_picture_only_ingest_never_reads_a_tf_idf_table(home: Path, db_url: str, pictures: Path,
                                                          monkeypatch) -> None:
    """Pictures pay for no text model: the text signal's version is named from the
    active models' rows, and its signer (the TF-IDF table) loads only to sign a text."""
    import mmdedup.signals.text as text_signal

    def no_table(session):  # noqa: ANN001, ANN202
        raise AssertionError("a TF-IDF table was read for pictures")

    monkeypatch.setattr(text_signal, "load_tfidf", no_table)
    with Platform.open(home, db_url) as p:
        assert p.ingest(pictures).new == 6
        assert p.pairs("weak")
    monkeypatch.undo()
    with Platform.open(home, db_url) as p:  # and a text after them is signed as ever
        p.ingest([{"id": "t", "text": "a caption for the astronaut " * 5},
                  {"id": "u", "text": "a caption for the astronaut " * 5 + "again"}])
        assert any(x["kind"] == "text-reuse" for x in p.pairs("weak"))


def _slide(seed: int) -> Image.Image:
    """A flat graphic: a vertical gradient under a few filled shapes, as slides and
    diagrams are made."""
    rng = np.random.default_rng(seed)
    top, bottom = rng.integers(0, 256, 3), rng.integers(0, 256, 3)
    ramp = np.linspace(0.0, 1.0, 480)[:, None, None]
    img = Image.fromarray(np.broadcast_to(top + (bottom - top) * ramp, (480, 640, 3)).astype(np.uint8))
    draw = ImageDraw.Draw(img)
    for _ in range(6):
        x, y = rng.integers(0, 480), rng.integers(0, 360)
        w, h = rng.integers(40, 200, 2)
        box = (int(x), int(y), int(x + w), int(y + h))
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)(box, fill=colour)
    return img


def test_edited_copies_of_a_flat_graphic_found(platform: Platform, tmp_path: Path) -> None:
    """A slide or diagram reposted smaller and re-compressed, mirrored, or greyed is paired
    with its original at medium or above; another slide made the same way is not paired
    with it at medium or above."""
    folder = tmp_path / "slides"
    slide = _slide(3)
    save(slide, folder / "slide.png")
    save(slide.resize((320, 240), Image.Resampling.LANCZOS), folder / "small.jpg", quality=40)
    save(ImageOps.mirror(slide), folder / "mirror.png")
    save(ImageOps.grayscale(slide), folder / "grey.jpg", quality=85)
    save(_slide(4), folder / "other.png")
    platform.ingest(folder)
    pairs = {tuple(sorted((p["a"], p["b"]))): p for p in platform.pairs("weak")}
    for copy in ("small.jpg", "mirror.png", "grey.jpg"):
        pair = pairs.get(tuple(sorted(("slide.png", copy))))
        assert pair is not None and pair["tier"] in ("medium", "strong"), (copy, pair)
    other = pairs.get(("other.png", "slide.png"))
    assert other is None or other["tier"] == "weak", other


def test_a_slide_in_other_colours_is_weak_and_a_vivid_copy_strong(platform: Platform, tmp_path: Path) -> None:
    """The same layout in another colour theme shares every code with the slide (pHash
    reads brightness alone): it is shown weak, for a person to judge, with the reason in
    its details, never merged; a copy with its colours made more vivid is still merged."""
    folder = tmp_path / "themes"
    slide = _slide(5)
    y, cb, cr = slide.convert("YCbCr").split()
    save(slide, folder / "slide.png")
    save(Image.merge("YCbCr", (y, cr, cb)).convert("RGB"), folder / "theme.png")
    save(ImageEnhance.Color(slide).enhance(1.5), folder / "vivid.jpg", quality=90)
    platform.ingest(folder)
    pairs = {tuple(sorted((p["a"], p["b"]))): p for p in platform.pairs("weak")}
    vivid = pairs[("slide.png", "vivid.jpg")]
    assert vivid["tier"] == "strong" and vivid["details"]["image"]["tone_apart"] == 0.0, vivid
    theme = pairs.get(("slide.png", "theme.png"))
    assert theme is not None and theme["tier"] == "weak", theme
    assert theme["details"]["image"]["tone_apart"] == 1.0
