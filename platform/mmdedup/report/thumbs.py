"""The report's thumbnails: pictures and video keyframes as data: URIs, made here."""

from __future__ import annotations

import base64
import hashlib
import io
from pathlib import Path
from typing import Any

import numpy as np

from ..config import Settings
from ..extract.image import ImageError, load_image
from ..extract.video import VideoError, video_frames
from ..input.items import InputError, read_file

THUMB_SIDE = 160  # pixels, the longer side of a thumbnail
THUMB_QUALITY = 75  # JPEG
KEYFRAMES = 3  # per video, spread over the frames kept (content-sampled, so they differ)
KEYFRAME_SCAN = 60  # kept frames decoded to choose them from (about the first minute)


class Thumbnails:
    """Data-URI thumbnails of an item's pictures and video keyframes. Each file is read
    and decoded once per report however many pairs show it; a file that is gone, changed
    or undecodable becomes a placeholder with the reason, never an error."""

    def __init__(self, settings: Settings, root: Path | None) -> None:
        self.settings = settings
        self.root = root
        self.cache: dict[tuple[str, Path, str], dict[str, Any]] = {}

    def of(self, item: dict[str, Any], limit: int) -> list[dict[str, Any]]:
        """Up to `limit` views [{"label", "uris", "error", "note"}], pictures first."""
        views = [self.asset(a, item["source"]) for a in item["assets"] if a["role"] != "html"]
        views += [self.asset(a, item["source"]) for a in item["assets"] if a["role"] == "html"]
        return views[:limit]

    def asset(self, asset: dict[str, Any], source: str | None) -> dict[str, Any]:
        path = self.resolve(asset["path"], source)
        key = (asset["role"], path, asset["sha256"])
        if key not in self.cache:
            self.cache[key] = self._make(asset, path)
        return self.cache[key]

    def resolve(self, rel: str, source: str | None) -> Path:
        """Where an asset is now: relative paths are relative to the manifest's folder or
        the ingested folder (the item's source), to `root` for items ingested from
        Python, else to the working directory (as ingest resolved them)."""
        path = Path(rel)
        if path.is_absolute():
            return path
        if source and source != "api":
            base = Path(source)
            return (base if base.is_dir() else base.parent) / path
        return (self.root or Path.cwd()) / path

    def _make(self, asset: dict[str, Any], path: Path) -> dict[str, Any]:
        view = {"label": f"{asset['role']}: {asset['path']}", "uris": [], "error": None, "note": None}
        try:
            data = read_file(path, asset["path"], self.settings)
            if hashlib.sha256(data).hexdigest() != asset["sha256"]:
                view["note"] = "the file changed since it was ingested"
            if asset["role"] == "image":
                view["uris"] = [_jpeg_uri(load_image(data, self.settings.max_image_pixels,
                                                     draft_side=THUMB_SIDE))]
            elif asset["role"] == "video":
                frames = video_frames(data, max_frames=KEYFRAME_SCAN, keep_images=True,
                                      image_size=THUMB_SIDE, max_bytes=self.settings.max_file_bytes,
                                      max_seconds=self.settings.max_video_seconds)
                images = frames.images or []
                picks = np.unique(np.linspace(0, len(images) - 1, KEYFRAMES).round().astype(int))
                view["uris"] = [_jpeg_uri(images[i]) for i in picks] if images else []
        except (InputError, ImageError, VideoError) as exc:
            view["error"] = str(exc)
        return view


def _jpeg_uri(image: Any) -> str:
    image = image.convert("RGB")
    image.thumbnail((THUMB_SIDE, THUMB_SIDE))
    buf = io.BytesIO()
    image.save(buf, format="JPEG", quality=THUMB_QUALITY)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


__all__ = ["Thumbnails"]
