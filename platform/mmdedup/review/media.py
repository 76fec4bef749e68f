"""An item's pictures and video keyframes, read back from where they were ingested: what
the review screen draws in the terminal and the report embeds in its page.

The store keeps each file's path and sha256, not its bytes, so both read the file again:
relative paths resolve against the manifest's folder or the ingested folder (the item's
source), else `root` (items ingested from Python), else the working directory, as ingest
resolved them. A file that is gone or undecodable is a view with its reason, never an
error; one that changed since it was ingested is shown with a note saying so.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..config import Settings
from ..extract.image import ImageError, load_image
from ..extract.video import VideoError, video_frames
from ..input.items import InputError, read_file, stored_file

KEYFRAMES = 3  # per video, spread over the frames kept (content-sampled, so they differ)
KEYFRAME_SCAN = 60  # kept frames decoded to choose them from (about the first minute)


@dataclass
class MediaView:
    """One asset as shown: its pictures (one for a picture, keyframes for a video)."""

    label: str  # "image: img/x.jpg"
    role: str
    images: list[Any] = field(default_factory=list)  # RGB PIL images, longer side <= side
    error: str | None = None
    note: str | None = None


class AssetMedia:
    """Pictures of stored assets at most `side` pixels on their longer side. Each file is
    read and decoded once however often it is asked for."""

    def __init__(self, settings: Settings, root: Path | None, side: int,
                 keyframes: int = KEYFRAMES) -> None:
        self.settings = settings
        self.root = root
        self.side = side
        self.keyframes = keyframes
        self.cache: dict[tuple[str, Path, str], MediaView] = {}

    def of(self, item: dict[str, Any], limit: int) -> list[MediaView]:
        """Up to `limit` views of an item ({"source", "assets": [{"role", "path",
        "sha256"}]}), pictures and videos first, pages last."""
        assets = item["assets"]
        ordered = [a for a in assets if a["role"] != "html"] + [a for a in assets if a["role"] == "html"]
        return [self.asset(a, item.get("source")) for a in ordered[:limit]]

    def asset(self, asset: dict[str, Any], source: str | None) -> MediaView:
        path = self.resolve(asset["path"], source)
        key = (asset["role"], path, asset["sha256"])
        if key not in self.cache:
            self.cache[key] = self._make(asset, path)
        return self.cache[key]

    def resolve(self, rel: str, source: str | None) -> Path:
        """Where an asset is now (see the module's docstring)."""
        return stored_file(rel, source, self.root)

    def _make(self, asset: dict[str, Any], path: Path) -> MediaView:
        view = MediaView(f"{asset['role']}: {asset['path']}", asset["role"])
        try:
            data = read_file(path, asset["path"], self.settings)
            if hashlib.sha256(data).hexdigest() != asset["sha256"]:
                view.note = "the file changed since it was ingested"
            if asset["role"] == "image":
                view.images = [_fit(load_image(data, self.settings.max_image_pixels,
                                               draft_side=self.side), self.side)]
            elif asset["role"] == "video":
                frames = video_frames(data, max_frames=KEYFRAME_SCAN, keep_images=True,
                                      image_size=self.side, max_bytes=self.settings.max_file_bytes,
                                      max_seconds=self.settings.max_video_seconds)
                images = frames.images or []
                if images:
                    picks = np.unique(np.linspace(0, len(images) - 1, self.keyframes).round().astype(int))
                    view.images = [_fit(images[i], self.side) for i in picks]
        except (InputError, ImageError, VideoError) as exc:
            view.error = str(exc)
        return view


def _fit(image: Any, side: int) -> Any:
    image = image.convert("RGB")
    image.thumbnail((side, side))
    return image


__all__ = ["AssetMedia", "MediaView", "KEYFRAMES", "KEYFRAME_SCAN"]
