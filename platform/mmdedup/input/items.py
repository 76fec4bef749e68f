"""Items, and loading them: files read and checked, media decoded once, exact keys.

Every way input can be wrong becomes an `InputError` with a short machine-readable reason
and a sentence for people; the ingest records it and goes on with the rest of the batch.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from ..config import Settings
from ..extract.image import ImageCodes, ImageError, codes_of, load_picture
from ..extract.normalize import text_hash
from ..extract.subtitles import SubtitleError, parse_subtitles, stream_subtitles
from ..extract.video import VideoError, VideoFrames, video_frames
from ..extract.web import PageError, PageSignals, extract_page

TEXT_EXTENSIONS = {".txt", ".md", ".text"}
HTML_EXTENSIONS = {".html", ".htm", ".xhtml"}
IMAGE_EXTENSIONS = {".jpg", ".jpeg", ".png", ".gif", ".webp", ".bmp", ".tif", ".tiff"}
VIDEO_EXTENSIONS = {".mp4", ".m4v", ".mov", ".webm", ".mkv", ".avi", ".mpg", ".mpeg", ".ts", ".flv"}
MEDIA_TYPES = {
    ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".png": "image/png", ".gif": "image/gif",
    ".webp": "image/webp", ".bmp": "image/bmp", ".tif": "image/tiff", ".tiff": "image/tiff",
    ".mp4": "video/mp4", ".m4v": "video/mp4", ".mov": "video/quicktime", ".webm": "video/webm",
    ".mkv": "video/x-matroska", ".avi": "video/x-msvideo", ".mpg": "video/mpeg",
    ".mpeg": "video/mpeg", ".ts": "video/mp2t", ".flv": "video/x-flv",
    ".html": "text/html", ".htm": "text/html", ".xhtml": "application/xhtml+xml",
}
MANIFEST_FIELDS = {"id", "title", "text", "html", "images", "video", "subtitles", "meta"}
SUBTITLE_EXTENSIONS = {".srt", ".vtt"}
MAX_ID_CHARS = 512  # the id column's size
# Python reads and writes no longer integer (sys.int_info.default_max_str_digits).
MAX_INT_DIGITS = 4300
_INT_LIMIT = 10**MAX_INT_DIGITS


class InputError(Exception):
    """Why one input item cannot be ingested; `reason` is stable for scripts to match on."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        # Extraction workers send errors back pickled; the default would call
        # __init__ with the one formatted message.
        return (InputError, (self.reason, self.detail))


@dataclass
class Item:
    """One piece of content as a user hands it in; paths are relative to the manifest."""

    id: str
    title: str | None = None
    text: str | None = None
    html: str | None = None
    images: list[str] = field(default_factory=list)
    video: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    subtitles: str | None = None  # an .srt or .vtt file of the video's words

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Item:
        """Validate the manifest shape; unknown keys are refused rather than ignored."""
        if not isinstance(data, dict):
            raise InputError("malformed_json", f"expected a JSON object, got {type(data).__name__}")
        raw_id = data.get("id")
        if isinstance(raw_id, int) and not isinstance(raw_id, bool):
            raw_id = str(raw_id)
        if not isinstance(raw_id, str) or not raw_id.strip():
            raise InputError("missing_id", "the item has no \"id\" (a non-empty string)")
        unknown = set(data) - MANIFEST_FIELDS
        if unknown:
            raise InputError("invalid_field", f"unknown field(s): {', '.join(sorted(unknown))}")
        for name in ("title", "text", "html", "video", "subtitles"):
            if data.get(name) is not None and not isinstance(data[name], str):
                raise InputError("invalid_field", f"\"{name}\" must be a string")
        subtitles = data.get("subtitles")
        if subtitles is not None and Path(subtitles).suffix.lower() not in SUBTITLE_EXTENSIONS:
            raise InputError("invalid_field", "\"subtitles\" must name an .srt or .vtt file")
        images = data.get("images") or []
        if isinstance(images, str):
            images = [images]
        if not isinstance(images, list) or not all(isinstance(p, str) for p in images):
            raise InputError("invalid_field", "\"images\" must be a list of paths")
        meta = data.get("meta") or {}
        if not isinstance(meta, dict):
            raise InputError("invalid_field", "\"meta\" must be a JSON object")
        return cls(
            id=raw_id,
            title=data.get("title"),
            text=data.get("text"),
            html=data.get("html"),
            images=list(images),
            video=data.get("video"),
            meta=meta,
            subtitles=subtitles,
        )


_SURROGATE = re.compile("[\ud800-\udfff]")


def check_item(item: Item, max_meta_depth: int) -> None:
    """Refuse values no store can hold alike: ids over the id column, lone surrogates
    (no UTF-8 encoder writes them), NUL (PostgreSQL refuses it) in any string, and meta
    that is not plain JSON: NaN and Infinity, integers Python will not print, non-string
    keys, nesting past `max_meta_depth`. Checked before anything is written, so each is
    a failure row on SQLite and PostgreSQL alike, never an aborted chunk."""
    _check_id(item.id)
    fields = [("title", item.title), ("text", item.text), ("html", item.html),
              ("video", item.video), ("subtitles", item.subtitles)] + [(f"images[{i}]", p) for i, p in enumerate(item.images)]
    for name, value in fields:
        if isinstance(value, str):
            _check_string(name, value)
    _check_meta(item.meta, max_meta_depth)


def storable_id(item_id: object) -> bool:
    """Whether the store can be asked about this id (what `check_item` lets through)."""
    try:
        _check_id(item_id)
    except InputError:
        return False
    return True


def _check_id(item_id: object) -> None:
    if not isinstance(item_id, str) or not item_id.strip():
        raise InputError("missing_id", "the item has no id (a non-empty string)")
    if len(item_id) > MAX_ID_CHARS:
        raise InputError("invalid_field", f"id is {len(item_id)} characters, over {MAX_ID_CHARS}")
    _check_string("id", item_id)


def _check_string(name: str, value: str) -> None:
    if (nul := value.find("\x00")) >= 0:
        raise InputError("nul_character", f"{name} holds a NUL character (U+0000) at "
                         f"position {nul}")
    if not value.isascii() and (bad := _SURROGATE.search(value)):
        raise InputError("invalid_unicode", f"{name} holds a lone surrogate "
                         f"U+{ord(bad.group()):04X} at position {bad.start()}")


def _check_meta(meta: Any, max_depth: int) -> None:
    """Every value of `meta` JSON, walked without recursion (a hostile depth must not
    exhaust the stack before it is refused)."""
    stack: list[tuple[Any, int, str]] = [(meta, 1, "meta")]
    while stack:
        value, depth, where = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > max_depth:
                raise InputError("too_deep", f"{where}: nested more than {max_depth} levels "
                                 "(max_meta_depth)")
            if isinstance(value, dict):
                for key, inner in value.items():
                    if not isinstance(key, str):
                        raise InputError("invalid_field", f"{where}: a key is a "
                                         f"{type(key).__name__}, not a string")
                    _check_string(f"{where} key", key)
                    stack.append((inner, depth + 1, f"{where}.{key}"[:200]))
            else:
                stack.extend((inner, depth + 1, f"{where}[{i}]"[:200]) for i, inner in enumerate(value))
        elif isinstance(value, str):
            _check_string(where, value)
        elif isinstance(value, bool) or value is None:
            continue
        elif isinstance(value, int):
            if abs(value) >= _INT_LIMIT:
                raise InputError("bad_number", f"{where}: an integer of over {MAX_INT_DIGITS} digits")
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise InputError("bad_number", f"{where}: {value} is not a JSON number")
        else:
            raise InputError("invalid_field", f"{where}: a {type(value).__name__} is not a JSON value")


@dataclass
class Entry:
    """One record read from a source: an item to load, or a failure found while reading.

    `key` names the record in failure rows: the item id where known, else the manifest line.
    `line`: the manifest line of an item read from one.
    """

    key: str
    item: Item | None = None
    error: InputError | None = None
    line: int | None = None


@dataclass
class LoadedAsset:
    role: str  # html | image | video
    position: int
    path: str  # as the user wrote it
    abs_path: Path
    sha256: str
    size: int
    media_type: str
    data: bytes  # the file's bytes while the item loads; empty once it is loaded
    # Set where the media are decoded: a picture's or video's canvas, a video's seconds.
    width: int | None = None
    height: int | None = None
    duration: float | None = None


@dataclass
class LoadedItem:
    """An item whose files were read and checked, with its exact-duplicate keys."""

    item: Item
    assets: list[LoadedAsset]
    text_hash: str | None
    content_key: str
    fingerprint: str
    page: PageSignals | None = None
    # The page's main text once blocks repeated across its site are dropped (set at ingest).
    main_text: str | None = None
    images: ImageCodes | None = None
    video: VideoFrames | None = None
    # Token hashes of the signal text, where extraction could make them (not for pages).
    tokens: np.ndarray | None = None
    # The decoded pictures, kept (with the video's keyframe images) only when a signal
    # that reads pixels is on (CLIP): decoded once, shared by every signal.
    pictures: list[Any] | None = None
    # Signals' values extracted where the item was loaded ({signal name: value}): a
    # cluster's workers run `Signal.worker_extract` (CLIP's vectors) and send these, not
    # the pixels.
    extracted: dict[str, Any] = field(default_factory=dict)
    # The words of its video: the subtitles file the manifest names, else the video's
    # own subtitle stream.
    subtitles: str | None = None

    @property
    def signal_text(self) -> str:
        """What the text signal reads: the item's text, else its page's main text, with
        its video's subtitles after it; else its title."""
        return text_for_signals(self.item.title, self.item.text, self.main_text, self.subtitles)


def text_for_signals(title: str | None, text: str | None, page_text: str | None,
                     subtitles: str | None = None) -> str:
    """Subtitles join the body rather than stand in for it: two re-posts of a clip with
    the same caption and the same subtitles match on both, and a video alone is matched
    on what is said in it."""
    body = next((c for c in (text, page_text) if c and c.strip()), None)
    if subtitles and subtitles.strip():
        return f"{body}\n{subtitles}" if body else subtitles
    if body:
        return body
    return title if title and title.strip() else ""


# --- loading ---------------------------------------------------------------------------


def resolve_path(rel: str, root: Path | None) -> Path:
    """The file a manifest or folder path names, symbolic links followed; refuses paths
    that leave the manifest's folder (or the folder ingested), through a link or not."""
    if not rel:
        raise InputError("missing_file", "an empty path")
    _check_string("the path", rel)
    try:
        if root is None:
            return Path(rel).resolve()
        base = root.resolve()
        path = (base / rel).resolve()
    except RuntimeError as exc:  # Python 3.11's resolve() on a symbolic link loop
        raise InputError("symlink_loop", f"{rel}: a loop of symbolic links") from exc
    except OSError as exc:
        raise InputError("unreadable_file", f"{rel}: {exc.strerror or exc}") from exc
    if not path.is_relative_to(base):
        raise InputError("path_escape", f"{rel} leads outside the folder {base}")
    return path


def read_file(path: Path, rel: str, settings: Settings) -> bytes:
    if not path.exists():
        raise InputError("missing_file", f"{rel}: no such file")
    if not path.is_file():
        raise InputError("unreadable_file", f"{rel}: not a regular file")
    try:
        size = path.stat().st_size
        if size > settings.max_file_bytes:
            raise InputError("too_large", f"{rel}: {size} bytes, over the limit of "
                             f"{settings.max_file_bytes}")
        with path.open("rb") as fh:
            data = fh.read(settings.max_file_bytes + 1)
    except OSError as exc:
        raise InputError("unreadable_file", f"{rel}: {exc.strerror or exc}") from exc
    if len(data) > settings.max_file_bytes:
        raise InputError("too_large", f"{rel}: over the limit of {settings.max_file_bytes} bytes")
    if not data:
        raise InputError("empty_content", f"{rel}: the file is empty")
    return data


def read_text_file(path: Path, rel: str, settings: Settings) -> str:
    data = read_file(path, rel, settings)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError("invalid_utf8", f"{rel}: not valid UTF-8 at byte {exc.start}") from exc


def input_bytes(item: Item, root: Path | None) -> int:
    """About what loading the item holds in memory: its text and the size of each file
    it names (0 for one that cannot be found: loading will say why)."""
    size = len(item.text or "") + len(item.title or "")
    for rel in [item.html, *item.images, item.video, item.subtitles]:
        if rel:
            try:
                size += resolve_path(rel, root).stat().st_size
            except (InputError, OSError):
                pass
    return size


@dataclass
class ReadItem:
    """An item whose files are read and checked, with its fingerprint: enough to tell
    whether the store holds it unchanged, before anything is decoded or tokenised."""

    item: Item
    assets: list[LoadedAsset]
    fingerprint: str
    subtitles: str | None = None  # the words of the subtitles file the item names


def load_item(item: Item, root: Path | None, settings: Settings, *, keep_pixels: bool = False) -> LoadedItem:
    """Read and check every file the item names, decode its media once, and compute its
    exact-duplicate keys (`read_item`, then `finish_item`)."""
    return finish_item(read_item(item, root, settings), settings, keep_pixels=keep_pixels)


def read_item(item: Item, root: Path | None, settings: Settings) -> ReadItem:
    """Check the item and read its files; its fingerprint covers everything the user gave
    (title, text, meta, each file's path and bytes), so a changed title or meta updates
    the stored item too."""
    check_item(item, settings.max_meta_depth)
    if item.text is not None and len(item.text) > settings.max_text_chars:
        raise InputError("too_large", f"text is {len(item.text)} characters, over the limit "
                         f"of {settings.max_text_chars}")
    specs = ([("html", 0, item.html)] if item.html else []) + [
        ("image", i, p) for i, p in enumerate(item.images)
    ] + ([("video", 0, item.video)] if item.video else [])
    assets = []
    for role, position, rel in specs:
        path = resolve_path(rel, root)
        data = read_file(path, rel, settings)
        ext = path.suffix.lower()
        media_type = MEDIA_TYPES.get(ext, "application/octet-stream")
        assets.append(LoadedAsset(role, position, rel, path, hashlib.sha256(data).hexdigest(),
                                  len(data), media_type, data))
    parts = [item.title, item.text, item.meta, [(a.role, a.path, a.sha256) for a in assets]]
    subtitles = None
    if item.subtitles:
        if not item.video:
            raise InputError("invalid_field", "\"subtitles\" are a video's: the item has no \"video\"")
        path = resolve_path(item.subtitles, root)
        raw = read_text_file(path, item.subtitles, settings)
        try:
            subtitles = parse_subtitles(raw, item.subtitles)
        except SubtitleError as exc:
            raise InputError(exc.reason, f"{item.subtitles}: {exc.detail}") from exc
        parts.append(["subtitles", item.subtitles, _sha256(raw)])  # (items without keep their fingerprint)
    fingerprint = _sha256(_fingerprint_json(parts))
    return ReadItem(item, assets, fingerprint, subtitles)


def finish_item(read: ReadItem, settings: Settings, *, keep_pixels: bool = False) -> LoadedItem:
    """Decode a read item's media once and compute its exact-duplicate keys.
    `keep_pixels`: keep the decoded pictures and the video's keyframe images for the
    signals that read pixels. The files' bytes are let go once decoded: nothing after
    loading reads them, and a chunk of loaded items is held until it commits."""
    item, assets = read.item, read.assets
    clip = next((a for a in assets if a.role == "video"), None)
    subtitles = read.subtitles
    if subtitles is None and clip is not None:
        subtitles = stream_subtitles(clip.data)
    try:
        images, decoded, video = _decode_media(assets, settings, keep_pixels)
    except _Unreadable as bad:
        raise InputError(bad.error.reason, f"{bad.asset.path}: {bad.error.detail}") from bad.error
    page = None
    html = next((a for a in assets if a.role == "html"), None)
    if html is not None:
        try:
            page = extract_page(html.data, max_bytes=settings.max_file_bytes,
                                max_chars=settings.max_page_chars, max_depth=settings.max_page_depth)
        except PageError as exc:
            raise InputError(exc.reason, f"{html.path}: {exc.detail}") from exc
        except Exception as exc:  # noqa: BLE001 - a page the extractor chokes on fails alone
            raise InputError("page_error", f"{html.path}: {type(exc).__name__}: {exc}") from exc
        if not page.text.strip() and not (item.text or "").strip() and len(assets) == 1:
            raise InputError("empty_content", f"{html.path}: the page has no main text")
    body_hash = (text_hash(item.text) or text_hash(page.text if page else None) or text_hash(subtitles)
                 or text_hash(item.title))
    if body_hash is None and not assets:
        raise InputError("empty_content", "the item has no text, html, images or video")
    parts = [f"text:{body_hash or ''}"] + sorted(f"{a.role}:{a.sha256}" for a in assets)
    content_key = _sha256("\n".join(parts))
    for asset in assets:
        asset.data = b""
    return LoadedItem(item, assets, body_hash, content_key, read.fingerprint, page, images=images,
                      video=video, pictures=decoded, subtitles=subtitles)


_ENCODER = json.JSONEncoder(sort_keys=True, ensure_ascii=False, default=str)


def _json(value: object) -> str:
    return _ENCODER.encode(value)


# What json.dumps(ensure_ascii=False) escapes in a string: quotes, backslashes, controls.
_JSON_ESCAPED = bytes(range(32)) + b'"\\'


def _fingerprint_json(parts: list) -> str:
    """`_json(parts)`, the same string, without encoding a long ASCII text that needs no
    escapes (most do not) character by character: the encoder spent ~25 us on a 400-word
    text, a quarter of loading it. A JSON list is its items' JSON joined by ", "."""
    encoded = []
    for part in parts:
        if isinstance(part, str) and len(part) > 64 and part.isascii():
            data = part.encode("ascii")
            if len(data.translate(None, _JSON_ESCAPED)) == len(data):
                encoded.append(f'"{part}"')
                continue
        encoded.append(_json(part))
    return "[" + ", ".join(encoded) + "]"


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def probe_item(text: str | None, image: bytes | None, video: bytes | None, settings: Settings,
               *, keep_pixels: bool = False) -> LoadedItem:
    """A query's probe as a loaded item that is never stored: its picture and video
    decoded as an ingest decodes them, so every signal extracts from it what it would from
    an item. A probe that cannot be read is a ValueError saying which part and why."""
    assets = [LoadedAsset(role, 0, "<query>", Path("<query>"), "", len(data), "", data)
              for role, data in (("image", image), ("video", video)) if data is not None]
    try:
        images, decoded, frames = _decode_media(assets, settings, keep_pixels)
    except _Unreadable as bad:
        raise ValueError(f"the query {bad.asset.role} cannot be read: {bad.error}") from bad.error
    return LoadedItem(Item(id="<query>", text=text), assets, text_hash(text), "", "", images=images,
                      video=frames, pictures=decoded)


def stored_file(rel: str, source: str | None, root: Path | None = None) -> Path:
    """Where a stored asset's file is now, as ingest resolved it: an absolute path as is; a
    relative one against the manifest's folder or the folder ingested (the item's source),
    else (items ingested from Python, source "api") `root`, by default the working
    directory."""
    path = Path(rel)
    if path.is_absolute():
        return path
    if source and source != "api":
        base = Path(source)
        return (base if base.is_dir() else base.parent) / path
    return (root or Path.cwd()) / path


def read_stored_picture(rel: str, source: str | None, sha256: str, settings: Settings) -> Any:
    """A stored picture read again from its file and decoded as ingest decodes it for the
    codes (`load_picture(codes=True)`), or an
    `InputError`: the file is gone or unreadable ("missing_file", ...), its bytes are not
    the ones ingested ("changed_file"), or it no longer decodes."""
    data = read_file(stored_file(rel, source), rel, settings)
    if hashlib.sha256(data).hexdigest() != sha256:
        raise InputError("changed_file", f"{rel}: the file changed since it was ingested")
    try:
        return load_picture(data, settings.max_image_pixels, codes=True)
    except ImageError as exc:
        raise InputError(exc.reason, f"{rel}: {exc.detail}") from exc


def canvas_size(data: bytes) -> tuple[int, int]:
    """A picture's width and height as its file declares them (the header only: the
    decoded picture may be a reduced draft)."""
    with Image.open(io.BytesIO(data)) as im:
        return im.size


class _Unreadable(Exception):
    """A picture or video that cannot be decoded, and which asset it was."""

    def __init__(self, asset: LoadedAsset, error: ImageError | VideoError) -> None:
        super().__init__(str(error))
        self.asset = asset
        self.error = error


def _decode_media(assets: list[LoadedAsset], settings: Settings, keep_pixels: bool
                  ) -> tuple[ImageCodes | None, list[Any] | None, VideoFrames | None]:
    """(picture codes, the decoded pictures if `keep_pixels`, video frames) of an item's
    assets, each decoded once here, before anything is written, so a bad one fails its
    item (`_Unreadable`)."""
    images, decoded = None, None
    pictures = [a for a in assets if a.role == "image"]
    if pictures:
        planes, decoded = [], []
        for asset in pictures:
            try:
                planes.append(load_picture(asset.data, settings.max_image_pixels, codes=True))
                if keep_pixels:  # CLIP reads colour: a second decode, only when it is on
                    decoded.append(load_picture(asset.data, settings.max_image_pixels))
            except ImageError as error:
                raise _Unreadable(asset, error) from error
            asset.width, asset.height = canvas_size(asset.data)
        images = codes_of(planes, [None] * len(planes))
    video = None
    clip = next((a for a in assets if a.role == "video"), None)
    if clip is not None:
        try:
            video = video_frames(clip.data, max_seconds=settings.max_video_seconds,
                                 max_bytes=settings.max_file_bytes, keep_images=keep_pixels)
        except VideoError as error:
            raise _Unreadable(clip, error) from error
        clip.width, clip.height, clip.duration = video.width, video.height, video.duration
    return images, decoded if keep_pixels else None, video
