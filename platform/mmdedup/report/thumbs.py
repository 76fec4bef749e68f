"""The report's thumbnails: pictures and video keyframes as data: URIs, made here."""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

from ..config import Settings
from ..review.media import KEYFRAMES, AssetMedia

THUMB_SIDE = 160  # pixels, the longer side of a thumbnail
THUMB_QUALITY = 75  # JPEG

__all__ = ["Thumbnails", "KEYFRAMES", "THUMB_SIDE"]


class Thumbnails:
    """Data-URI thumbnails of an item's pictures and video keyframes (review/media.py
    reads and decodes them: once per report however many pairs show them; a file that is
    gone, changed or undecodable becomes a placeholder with the reason, never an error)."""

    def __init__(self, settings: Settings, root: Path | None) -> None:
        self.media = AssetMedia(settings, root, THUMB_SIDE)
        self.uris: dict[int, list[str]] = {}

    def of(self, item: dict[str, Any], limit: int) -> list[dict[str, Any]]:
        """Up to `limit` views [{"label", "uris", "error", "note"}], pictures first."""
        out = []
        for view in self.media.of(item, limit):
            if id(view) not in self.uris:
                self.uris[id(view)] = [_jpeg_uri(image) for image in view.images]
            out.append({"label": view.label, "uris": self.uris[id(view)], "error": view.error,
                        "note": view.note})
        return out


def _jpeg_uri(image: Any) -> str:
    buf = io.BytesIO()
    image.save(buf, format="JPEG", quality=THUMB_QUALITY)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
