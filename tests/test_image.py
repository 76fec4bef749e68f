"""Images: decoding untrusted bytes, border trimming, perceptual codes, dihedral queries."""

from __future__ import annotations

import io
import random
import struct
import sys
import time
import zlib
from pathlib import Path

import imagehash
import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageEnhance

from mmdedup.config import Settings
from mmdedup.extract import image as mi
from mmdedup.extract.simhash import hamming
from mmdedup.score.calibration import calibrate
from mmdedup.signals.image import ImageSettings, ImageSignal

SETTINGS = Settings()
IMAGE = ImageSettings()
MAX_PIXELS = SETTINGS.max_image_pixels  # as the ingest passes it

skdata = pytest.importorskip("skimage.data")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts" / "bench"))
from image_quality import edit  # noqa: E402  (the image bench's edits)
from image_tiers import flat_graphic  # noqa: E402  (its generated flat graphics)


def photo(name: str = "astronaut", side: int = 256) -> Image.Image:
    a = getattr(skdata, name)()
    im = Image.fromarray(a).convert("RGB")
    scale = side / max(im.size)
    return im.resize((round(im.width * scale), round(im.height * scale)), Image.LANCZOS)


def encode(img: Image.Image, fmt: str = "PNG", **kw) -> bytes:
    buf = io.BytesIO()
    img.save(buf, fmt, **kw)
    return buf.getvalue()


def codes(*blobs: bytes) -> mi.ImageCodes:
    out = mi.image_codes(list(blobs), MAX_PIXELS)
    assert all(e is None for e in out.errors), out.errors
    return out


def bits(a, b) -> int:
    return int(hamming(np.uint64(a), np.uint64(b)))


def imagehash_code(img: Image.Image) -> int:
    return int(str(imagehash.phash(img)), 16)


def png_bytes(arr: np.ndarray, depth: int, colour_type: int, size: tuple[int, int] | None = None) -> bytes:
    """A PNG written by hand, so 16-bit channels and lying headers can be made."""
    def chunk(tag: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + tag + body + struct.pack(">I", zlib.crc32(tag + body))

    h, w = arr.shape[:2]
    dtype = ">u2" if depth == 16 else "u1"
    raw = b"".join(b"\x00" + arr[y].astype(dtype).tobytes() for y in range(h))
    width, height = size or (w, h)
    ihdr = struct.pack(">IIBBBBB", width, height, depth, colour_type, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw))
            + chunk(b"IEND", b""))


# --- decoding -------------------------------------------------------------------------


def test_zero_bytes_is_not_an_image():
    with pytest.raises(mi.ImageError) as err:
        mi.load_image(b"", MAX_PIXELS)
    assert err.value.reason == "not_an_image"


def test_garbage_is_not_an_image():
    with pytest.raises(mi.ImageError) as err:
        mi.load_image(b"this is a text file, not a picture\n" * 10, MAX_PIXELS)
    assert err.value.reason == "not_an_image"


def test_truncated_jpeg_is_corrupt():
    data = encode(photo(), "JPEG", quality=90)
    with pytest.raises(mi.ImageError) as err:
        mi.load_image(data[: len(data) // 2], MAX_PIXELS)
    assert err.value.reason == "corrupt_image"


def test_damaged_png_is_corrupt():
    data = bytearray(encode(photo()))
    mid = len(data) // 2
    data[mid : mid + 64] = bytes(64)  # zeros over compressed pixels (and their CRC no longer fits)
    with pytest.raises(mi.ImageError) as err:
        mi.load_image(bytes(data), MAX_PIXELS)
    assert err.value.reason == "corrupt_image"


def test_decompression_bomb_refused_before_decoding():
    # 74 bytes that declare a 100000 x 100000 canvas (10 gigapixels, 30 GB as RGB).
    bomb = png_bytes(np.zeros((1, 1, 3), np.uint8), 8, 2, size=(100_000, 100_000))
    assert len(bomb) < 200
    start = time.perf_counter()
    with pytest.raises(mi.ImageError) as err:
        mi.load_image(bomb, MAX_PIXELS)
    assert err.value.reason == "too_large"
    assert "pixels" in err.value.detail
    assert time.perf_counter() - start < 1.0


def test_pixel_limit_is_the_callers():
    data = encode(photo(side=100))
    mi.load_image(data, max_pixels=100 * 100)
    with pytest.raises(mi.ImageError) as err:
        mi.load_image(data, max_pixels=5_000)
    assert err.value.reason == "too_large"


@pytest.mark.parametrize("fmt", ["GIF", "PNG", "WEBP"])  # GIF, APNG, animated WebP
def test_animation_gives_its_first_frame(fmt):
    first, second = photo("astronaut", 128), photo("coffee", 128).resize((128, 128))
    data = encode(first, fmt, save_all=True, append_images=[second], duration=100, loop=0)
    assert Image.open(io.BytesIO(data)).n_frames == 2
    got = codes(data, encode(first, fmt), encode(second, fmt))
    assert bits(got.phash[0, 0], got.phash[1, 0]) <= 2
    assert bits(got.phash[0, 0], got.phash[2, 0]) > 16


def test_cmyk_jpeg_converts_to_the_same_picture():
    rgb = photo("chelsea")
    cmyk = encode(rgb.convert("CMYK"), "JPEG", quality=95)
    assert Image.open(io.BytesIO(cmyk)).mode == "CMYK"
    pic = mi.load_image(cmyk, MAX_PIXELS)
    assert pic.mode == "RGB"
    got = codes(cmyk, encode(rgb))
    assert bits(got.phash[0, 0], got.phash[1, 0]) <= 4


def test_16bit_grey_png_is_scaled_not_clipped():
    grey8 = np.asarray(photo("camera").convert("L"))
    data = png_bytes(grey8.astype(np.uint16) * 257, 16, 0)
    assert Image.open(io.BytesIO(data)).mode.startswith("I;16")
    pic = np.asarray(mi.load_image(data, MAX_PIXELS))
    # Pillow's own convert("L") clips 16-bit values at 255: an all-white picture.
    assert np.abs(pic[..., 0].astype(int) - grey8).max() <= 1
    got = codes(data, encode(Image.fromarray(grey8)))
    assert bits(got.phash[0, 0], got.phash[1, 0]) <= 2


def test_16bit_rgb_png_decodes():
    rgb8 = np.asarray(photo("coffee"))
    data = png_bytes(rgb8.astype(np.uint16) * 257, 16, 2)
    pic = np.asarray(mi.load_image(data, MAX_PIXELS))
    assert np.abs(pic.astype(int) - rgb8).max() <= 1


def test_float_tiff_is_scaled():
    grey = np.asarray(photo("camera").convert("L")).astype(np.float32) / 255.0
    data = encode(Image.fromarray(grey, "F"), "TIFF")
    pic = np.asarray(mi.load_image(data, MAX_PIXELS))[..., 0]
    assert pic.max() > 200 and abs(int(pic.mean()) - int(grey.mean() * 255)) <= 1


def test_rgba_png_flattened_onto_white():
    arr = np.zeros((64, 64, 4), np.uint8)  # black everywhere ...
    arr[:, :32, 3] = 255  # ... opaque on the left half, fully transparent on the right
    pic = np.asarray(mi.load_image(encode(Image.fromarray(arr, "RGBA")), MAX_PIXELS))
    assert (pic[:, :32] == 0).all() and (pic[:, 32:] == 255).all()


def test_palette_with_transparency_flattened_onto_white():
    im = Image.new("P", (20, 20), 0)
    im.putpalette([0, 0, 0, 255, 0, 0] + [0] * (256 * 3 - 6))
    ImageDraw.Draw(im).rectangle((0, 0, 9, 19), fill=1)
    im.info["transparency"] = 0
    pic = np.asarray(mi.load_image(encode(im, "PNG", transparency=0), MAX_PIXELS))
    assert (pic[:, :10] == [255, 0, 0]).all() and (pic[:, 10:] == 255).all()


def test_exif_rotated_jpeg_is_upright():
    upright = photo("rocket")
    stored = upright.transpose(Image.Transpose.ROTATE_90)  # what a sideways phone wrote
    exif = Image.Exif()
    exif[0x0112] = 6  # Orientation: rotate 90 degrees clockwise to view
    sideways = encode(stored, "JPEG", quality=92, exif=exif.tobytes())
    pic = mi.load_image(sideways, MAX_PIXELS)
    assert pic.size == upright.size
    got = codes(sideways, encode(upright, "JPEG", quality=92))
    assert bits(got.phash[0, 0], got.phash[1, 0]) <= 2
    # Without the EXIF step the stored (sideways) pixels give a far code.
    assert bits(imagehash_code(stored), imagehash_code(upright)) > 16


def test_batch_goes_on_past_bad_images():
    good = encode(photo())
    got = mi.image_codes([good, b"", b"garbage" * 20, good], MAX_PIXELS)
    assert [e.reason if e else None for e in got.errors] == [None, "not_an_image", "not_an_image", None]
    assert got.ok.tolist() == [True, False, False, True]
    assert got.phash[0, 0] == got.phash[3, 0] != 0
    dist = mi.image_distance(got, got)
    assert dist[0, 3] == 0
    assert (dist[1] == 64).all() and (dist[:, 2] == 64).all()  # a failed image is near nothing



def test_a_large_batch_is_hashed_in_chunks_with_the_same_codes():
    """A batch longer than HASH_CHUNK (its pictures' thumbnails hashed a chunk at a time, so
    a large batch fits in memory) gives each picture the codes it gets alone, bad ones
    included wherever they fall."""
    pics = [encode(photo(name, 96)) for name in ("astronaut", "camera", "coffee")]
    batch = [b"" if i % 17 == 5 else pics[i % 3] for i in range(mi.HASH_CHUNK * 2 + 7)]
    got = mi.image_codes(batch, MAX_PIXELS)
    alone = mi.image_codes(pics, MAX_PIXELS)
    for i, data in enumerate(batch):
        if not data:
            assert not got.ok[i] and not got.scales[i].any()
            continue
        assert (got.scales[i] == alone.scales[i % 3]).all()
        assert (got.anchored[i] == alone.anchored[i % 3]).all() and got.dhash[i, 0] == alone.dhash[i % 3, 0]

# --- borders --------------------------------------------------------------------------


def pad(img: Image.Image, box: tuple[int, int, int, int], colour) -> Image.Image:
    left, top, right, bottom = box
    out = Image.new("RGB", (img.width + left + right, img.height + top + bottom), colour)
    out.paste(img, (left, top))
    return out


@pytest.mark.parametrize("box,colour", [
    ((30, 30, 30, 30), (255, 255, 255)),  # white padding all round
    ((0, 60, 0, 60), (0, 0, 0)),  # letterbox bars
    ((12, 0, 40, 20), (200, 180, 40)),  # uneven coloured frame
])
def test_border_padding_trimmed(box, colour):
    pic = photo("coffee")
    padded = encode(pad(pic, box, colour), "JPEG", quality=85)
    plain = encode(pic, "JPEG", quality=85)
    got = codes(padded, plain)
    assert bits(got.phash[0, 0], got.phash[1, 0]) <= 4
    trimmed = mi.border_box(mi.load_image(padded, MAX_PIXELS))
    want = (box[0], box[1], box[0] + pic.width, box[1] + pic.height)
    assert max(abs(a - b) for a, b in zip(trimmed, want)) <= 8
    # Untrimmed, the padding alone moves the plain pHash far (the test can fail).
    raw = [imagehash_code(Image.open(io.BytesIO(b))) for b in (padded, plain)]
    assert bits(*raw) > 12


def test_natural_picture_not_trimmed():
    for name in ("astronaut", "chelsea", "coffee", "clock", "coins"):
        pic = photo(name)
        assert mi.border_box(pic) == (0, 0, *pic.size), name


def test_trim_never_empties():
    blank = Image.new("RGB", (50, 40), (255, 255, 255))
    assert mi.trim_borders(blank).size == (50, 40)
    dot = blank.copy()
    dot.putpixel((25, 20), (0, 0, 0))  # content smaller than TRIM_MIN_SIDE
    assert mi.trim_borders(dot).size == (50, 40)
    tiny = Image.new("RGB", (3, 2), (9, 9, 9))
    assert mi.trim_borders(tiny).size == (3, 2)
    got = mi.image_codes([encode(blank), encode(tiny)], MAX_PIXELS)
    assert got.ok.all()


# --- codes ----------------------------------------------------------------------------


def test_phash_bits_are_imagehash_phash():
    for name in ("astronaut", "chelsea", "camera"):
        pic = photo(name, 300)
        grey = pic.convert("L")
        d8 = mi.phash_codes([grey])[0]
        assert int(d8[0]) == imagehash_code(pic)
        for k, op in enumerate(mi.PIL_DIHEDRAL):
            assert bits(d8[k], imagehash_code(pic if op is None else pic.transpose(op))) <= 2, (name, k)
        dh = mi.dhash_codes([grey])[0]
        for k, op in enumerate(mi.PIL_DIHEDRAL):
            want = int(str(imagehash.dhash(pic if op is None else pic.transpose(op))), 16)
            assert bits(dh[k], want) <= 2, (name, k)


def test_thumbnails_are_pillows_lanczos_resize():
    """The codes' thumbnails are made as matrix products; they must be the thumbnails
    Pillow's Lanczos resize makes of the trimmed picture, its centres and its anchored
    regions (but for a rare
    pixel one grey level off, where the rounding falls the other way), so the codes keep imagehash's pHash and dHash."""
    for name, size in (("astronaut", (601, 437)), ("chelsea", (333, 500)), ("camera", (97, 64))):
        grey = photo(name, 512).resize(size).convert("L")
        padded = Image.new("L", (size[0] + 40, size[1] + 20), 0)
        padded.paste(grey, (25, 5))
        box = mi.border_box(padded)
        trimmed = padded.crop(box)
        scales, anchored, wide, tall = mi._thumbnails(np.asarray(padded), box)
        got = [*scales, *anchored.reshape(-1, 32, 32), wide, tall]
        want = [mi.centre_region(trimmed, f).resize((32, 32), Image.Resampling.LANCZOS)
                for f in mi.SCALES]
        tw, th = trimmed.size
        for cols, rows in mi.ANCHORS:  # the regions kept from a corner or an edge
            for f in mi.SCALES[1:]:
                (x0, x1, _), (y0, y1, _) = mi._span(tw, f, cols), mi._span(th, f, rows)
                want.append(trimmed.crop((x0, y0, x1, y1)).resize((32, 32), Image.Resampling.LANCZOS))
        want += [trimmed.resize((9, 8), Image.Resampling.LANCZOS),
                 trimmed.resize((8, 9), Image.Resampling.LANCZOS)]
        for g, w in zip(got, want):
            assert g.shape == np.asarray(w).shape
            diff = np.abs(g - np.asarray(w, np.float64))
            assert diff.max() <= 1 and (diff > 0).mean() <= 0.01, name
        c = mi.codes_of([padded.convert("RGB")])
        assert bits(c.phash[0, 0], imagehash_code(trimmed)) <= 2, name


def test_mirror_and_rotation_found_by_dihedral_query():
    pic = photo("astronaut")
    stored = codes(encode(pic))
    for op in (Image.Transpose.FLIP_LEFT_RIGHT, Image.Transpose.ROTATE_90, Image.Transpose.ROTATE_180):
        query = codes(encode(pic.transpose(op), "JPEG", quality=80))
        assert bits(query.phash[0, 0], stored.phash[0, 0]) > 16  # plain codes are far ...
        assert mi.image_distance(query, stored)[0, 0] <= 4  # ... the eight-way query finds it
        assert calibrate(mi.image_distance(query, stored)[0, 0], IMAGE.calibration) >= 0.9


def strong(dist: float) -> bool:
    return float(calibrate(dist, IMAGE.calibration)) >= SETTINGS.tier_strong


def medium(dist: float) -> bool:
    return float(calibrate(dist, IMAGE.calibration)) >= SETTINGS.tier_medium


@pytest.mark.parametrize("name", ["rocket", "coffee"])
def test_scale_chain_finds_a_crop(name):
    """A crop lines up with its original one scale along the chain: the whole pictures'
    codes are far apart, the aligned centres close enough to merge."""
    pic = photo(name, 400)
    w, h = pic.size
    cut = (0.06, 0.03, 0.03, 0.06)
    cropped = pic.crop((int(w * cut[0]), int(h * cut[1]), w - int(w * cut[2]), h - int(h * cut[3])))
    got = codes(encode(pic), encode(cropped, "JPEG", quality=85))
    full_only = mi.image_distance(got.take([1]), got.take([0]), centre=False)[0, 0]
    chain = mi.image_distance(got.take([1]), got.take([0]))[0, 0]
    assert not medium(full_only) and strong(chain)
    # symmetric: the crop stored first, the full picture as the query
    assert strong(mi.image_distance(got.take([0]), got.take([1]))[0, 0])


@pytest.mark.parametrize("name,cut", [
    ("rocket", (0.10, 0.0, 0.0, 0.10)), ("coffee", (0.06, 0.03, 0.03, 0.06)),
    ("chelsea", (0.0, 0.0, 0.0, 0.12)), ("astronaut", (0.10, 0.0, 0.0, 0.0)),
])
def test_one_sided_crop_pairs_both_ways(name, cut):
    """A crop from one side or one corner (a caption bar cut off the bottom, 10% off the
    left and the bottom) keeps that edge of the picture: the chain anchored there lines
    up with the original's, whichever of the two is stored first, and the search finds
    the pair from the later picture's side."""
    pic = photo(name, 400)
    w, h = pic.size
    cropped = pic.crop((int(w * cut[0]), int(h * cut[1]), w - int(w * cut[2]), h - int(h * cut[3])))
    got = codes(encode(pic), encode(cropped, "JPEG", quality=85))
    assert not medium(mi.image_distance(got.take([1]), got.take([0]), centre=False)[0, 0])
    signal = ImageSignal.__new__(ImageSignal)
    signal.config = IMAGE
    for stored, query in ((0, 1), (1, 0)):
        assert strong(mi.image_distance(got.take([query]), got.take([stored]))[0, 0])
        index = signal.new_index()
        signal.index_add(index, np.array([7]), [got.take([stored])])
        rows, found = signal.search(index, [got.take([query])])
        assert found.tolist() == [7]


@pytest.mark.parametrize("name,cut,mirror", [
    ("chelsea", (0.03, 0.10, 0.09, 0.02), False), ("clock", (0.045, 0.0, 0.075, 0.12), False),
    ("moon", (0.035, 0.015, 0.085, 0.105), False), ("clock", (0.045, 0.0, 0.075, 0.12), True),
])
def test_crop_cut_unevenly_pairs_strong(name, cut, mirror):
    """A 12% crop whose cut is split unevenly between the sides (3% off the left, 9% off
    the right) lines up with neither the centre chain nor a corner's: the chains placed
    between them (`PLACES`) do, whichever picture is stored first, as posted or mirrored."""
    pic = photo(name, 400)
    w, h = pic.size
    cropped = pic.crop((int(w * cut[0]), int(h * cut[1]), w - int(w * cut[2]), h - int(h * cut[3])))
    if mirror:
        cropped = cropped.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    got = codes(encode(pic), encode(cropped, "JPEG", quality=85))
    centre = mi._chain_distance(got.scales[1:], got.scales[:1, :, 0])[0, 0]
    corners = mi._anchored_distance(got.scales[1:, 0], got.anchored[1:], got.scales[:1, 0, 0],
                                    got.anchored[:1, :, :, 0], mi.INDEXED_ANCHORS)[0, 0]
    assert not strong(min(centre, corners))  # neither the centre nor a corner lines up ...
    for stored, query in ((0, 1), (1, 0)):  # ... the places between them do, both ways
        assert strong(mi.image_distance(got.take([query]), got.take([stored]))[0, 0])


@pytest.mark.parametrize("name,edit_name,seed", [
    ("astronaut", "crop5", 0), ("astronaut", "crop5", 1), ("rocket", "crop5", 1),
    ("coins", "crop5", 0), ("coins", "crop5", 1), ("coffee", "crop5", 0),
    ("astronaut", "rotate3", 0), ("chelsea", "rotate3", 0), ("coins", "rotate3", 0),
    ("camera", "rotate3", 0),
])
def test_mild_edits_of_a_photo_pair_strong(name, edit_name, seed):
    """A 5% crop (split at random between the sides) and a 3-degree rotation (black
    corners) of a photo are merged with it, whichever side is stored first."""
    pic = photo(name)
    got = codes(encode(pic), edit(pic, edit_name, random.Random(seed)))
    assert strong(mi.image_distance(got.take([1]), got.take([0]))[0, 0])
    assert strong(mi.image_distance(got.take([0]), got.take([1]))[0, 0])


@pytest.mark.parametrize("a,b", [(96, 203), (95, 239)])
def test_flat_graphics_apart_but_their_copies_found(a, b):
    """Two different low-detail pictures (shapes on flat or gradient backgrounds) that
    one pair of codes brings within 8 bits (the best of the whole pictures' and their
    centres' codes, which the image signal once scored alone: strong) are not paired at
    medium; an edited copy (cropped, rotated, watermarked, padded) still is."""
    pics = [flat_graphic(random.Random(k)) for k in (a, b)]
    blobs = [encode(p, "JPEG", quality=90) for p in pics]
    edits = ("crop5", "rotate3", "watermark", "border")
    copies = [edit(pics[0], e, random.Random(1)) for e in edits]
    got = codes(*blobs, *copies)
    one_pair = mi.hamming(got.scales[0][[0, -1], None, :], got.scales[1][None, [0, -1], 0, None])
    assert one_pair.min() <= 8  # one pair of codes collides
    apart = mi.image_distance(got.take([0, 1]), got.take([0, 1]))
    assert not medium(min(apart[0, 1], apart[1, 0])), apart
    found = mi.image_distance(got.take(range(2, 2 + len(edits))), got.take([0]))[:, 0]
    assert all(medium(d) for d in found), dict(zip(edits, found))


def recoloured(pic: Image.Image) -> Image.Image:
    """The same brightness everywhere in other colours: the picture's Cb and Cr swapped."""
    y, cb, cr = pic.convert("YCbCr").split()
    return Image.merge("YCbCr", (y, cr, cb)).convert("RGB")


@pytest.mark.parametrize("name", ["coffee", "retina", "rocket", "astronaut"])
def test_alike_in_grey_but_not_in_colour_not_merged(name):
    """pHash reads brightness alone: a picture and one of the same brightness in other
    colours (a layout in another colour theme) share their codes. Their colours part
    them: no closer than the weak band, never merged unseen."""
    pic = photo(name)
    got = codes(encode(pic, "JPEG", quality=90), encode(recoloured(pic), "JPEG", quality=90))
    assert mi.image_distance(got.take([1]), got.take([0]), centre=False)[0, 0] <= 4  # the codes agree
    for q, s in ((1, 0), (0, 1)):
        d = mi.image_distance(got.take([q]), got.take([s]))[0, 0]
        assert d >= mi.TONE_FLOOR and not medium(d), d


def test_a_nearly_flat_picture_is_not_merged_with_a_detailed_one():
    """pHash compares each coefficient with their median, so a picture whose contrast is
    almost gone keeps the codes of the detailed one; a flat picture (a sky, a blank
    slide) is not a copy of a detailed one."""
    pic = photo("chelsea")
    got = codes(encode(pic), encode(ImageEnhance.Contrast(pic).enhance(0.15)))
    assert mi.image_distance(got.take([1]), got.take([0]), centre=False)[0, 0] <= 8  # the codes agree
    assert got.contrast[0] > mi.CONTRAST_APART * got.contrast[1]
    assert not medium(mi.image_distance(got.take([1]), got.take([0]))[0, 0])


@pytest.mark.parametrize("name", ["coffee", "retina", "rocket", "chelsea", "astronaut"])
def test_colour_edits_of_a_photo_stay_strong(name):
    """A copy whose saturation, contrast or white balance was changed, or made grey, is
    still merged with its original: its colour grid is compared at the gain that fits
    best, a grey copy has no colour to compare, and its contrast is within a factor."""
    pic = photo(name)

    def warm(p: Image.Image) -> Image.Image:
        a = np.asarray(p).astype(np.float64) * (1.1, 1.0, 0.9)
        return Image.fromarray(np.clip(a, 0, 255).astype(np.uint8))

    edits = {"saturation 0.6": ImageEnhance.Color(pic).enhance(0.6),
             "saturation 1.6": ImageEnhance.Color(pic).enhance(1.6),
             "contrast 1.5": ImageEnhance.Contrast(pic).enhance(1.5),
             "contrast 0.6": ImageEnhance.Contrast(pic).enhance(0.6),
             "warm": warm(pic), "grey": pic.convert("L")}
    got = codes(encode(pic, "JPEG", quality=90), *(encode(e, "JPEG", quality=85) for e in edits.values()))
    assert not mi.tone_apart(got.take(range(1, len(edits) + 1)), got.take([0])).any()
    found = mi.image_distance(got.take(range(1, len(edits) + 1)), got.take([0]))[:, 0]
    assert all(strong(d) for d in found), dict(zip(edits, found))


def test_tone_of_a_grey_picture_is_colourless():
    """A grey picture (an L JPEG, or colour planes all at grey) carries zero chroma, so it
    never parts from a colour copy by colour."""
    pic = photo("coffee")
    got = codes(encode(pic.convert("L"), "JPEG"), encode(pic.convert("L").convert("RGB"), "PNG"))
    assert np.abs(got.chroma).max() < 1.0
    assert np.isfinite(got.contrast).all() and (got.contrast > 0).all()


def test_unrelated_photos_far_apart():
    names = ("astronaut", "camera", "chelsea", "coffee", "coins", "rocket", "clock", "moon", "page")
    got = codes(*(encode(photo(n)) for n in names))
    dist = mi.image_distance(got, got)
    off = ~np.eye(len(names), dtype=bool)
    assert dist[off].min() > IMAGE.radius, dist
    assert (np.diag(dist) == 0).all()
    sim = calibrate(dist, IMAGE.calibration)
    assert sim[off].max() < 0.7 and (np.diag(sim) == 1.0).all()


def test_recompressed_and_resized_copies_match():
    pic = photo("chelsea", 400)
    variants = [encode(pic.resize((200, 133)), "JPEG", quality=70), encode(pic, "JPEG", quality=20),
                encode(pic.convert("L"))]
    got = codes(encode(pic), *variants)
    assert (mi.image_distance(got.take([1, 2, 3]), got.take([0]))[:, 0] <= 4).all()


def test_stored_codes_round_trip():
    got = codes(encode(photo()), encode(photo("coffee")))
    blob = ImageSignal.pack(got)  # what the store keeps: all eight variants of each code, and the tone
    k = len(mi.SCALES)
    assert len(blob) == 2 * (k + len(mi.ANCHORS) * (k - 1) + 2) * 8 * 8
    back = ImageSignal.unpack(blob)
    for name in ("scales", "anchored", "dhash", "chroma", "contrast"):
        assert np.array_equal(getattr(back, name), getattr(got, name)), name
    assert np.array_equal(mi.image_distance(got, back), mi.image_distance(got, got))


def test_calibration_tiers():
    def score(bits: int) -> float:
        return float(calibrate(bits, IMAGE.calibration))

    # image_distance is a mean of three even distances: steps of 2/3 of a bit
    assert score(0) == 1.0
    assert score(32 / 3) >= 0.9  # strong: where mild edits of photos land
    assert score(34 / 3) < 0.8  # the next step, where different flat graphics gather: weak
    # 13 is weak; from 13 1/3 different tiles outnumber copies 6 to 1, and different
    # photos start at 14 2/3: no tier
    assert score(13) >= 0.7 and score(40 / 3) < 0.7 and score(44 / 3) < 0.7
    assert score(40) == 0.0
