"""The `video` signal: keyframe hashes of an item's video, matched in temporal order.

The signature keeps each sampled frame's time and four pHashes, each also of the mirror
image: the frame's, its inset's (bars that are not uniform, a picture in picture cut
off) and two of its centre (a cropped copy's frame lands near one), and the pHashes of
crops anchored on a grid from corner to corner (an off-centre crop's frame lands near
one). The Hamming index holds the four codes of every frame (id pk * 4096 + k); a new
video's codes and anchored crops, as they are and mirrored, are searched in it (a stored
source is found by a new cropped copy through its centre codes, a stored cropped copy by
a new source through the source's anchored crops), and an item whose frames are hit at
least `min_frame_hits` times becomes a candidate; the alignment in `video_match` then
decides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Sequence

import numpy as np

from ..config import Calibration, Knots, Number, SignalSettings, setting
from ..extract.video import ANCHORS, VIDEO_VERSION, VideoFrames, video_match
from ..index.hamming import HammingIndex
from ..index.slots import entry_ids
from ..input.items import LoadedItem
from .base import Signal

MAX_FRAMES = 4096  # entry ids per item in the index (pk * 4096 + k): 4 codes a kept frame
# A packed signature: times, then codes, inset and two centre codes, as is and mirrored,
# then the anchored crops' codes, as is and mirrored.
ROWS = 9 + 2 * len(ANCHORS)


@dataclass(frozen=True)
class VideoSettings(SignalSettings):
    weight: float = 0.3
    # The aligned share of frames -> score (true copies align >= 0.89 in the benchmark,
    # different videos of the same photos <= 0.34); fitted by
    # `python scripts/calibrate_signals.py --seed 1`.
    calibration: Calibration = setting((
        (0.0, 0.0), (0.39, 0.1), (0.617, 0.5), (0.73, 0.7), (0.786, 0.8), (0.843, 0.9),
        (1.0, 1.0)), Knots(0, 1))
    # Frames sampled on content (about 1 a second plus scene cuts) match within this
    # radius; a stored video is a candidate once this many of a new video's frames hit it.
    frame_radius: int = setting(12, Number(int, 0, 64))
    min_frame_hits: int = setting(2, Number(int, lo=1))
    LEGACY: ClassVar = {"video_calibration": "calibration", "video_frame_radius": "frame_radius",
                        "video_min_frame_hits": "min_frame_hits"}


class VideoSignal(Signal[VideoFrames, VideoSettings]):
    name = "video"
    settings_type = VideoSettings
    medium = "video"
    kind = "video-reuse"
    listed = True
    exact_parts = ("video",)
    index_parts: ClassVar = {"frames": HammingIndex.load}

    def version(self) -> str:
        return VIDEO_VERSION

    def extract(self, items: Sequence[LoadedItem]) -> list[VideoFrames | None]:
        return [li.video if li.video is not None and len(li.video) else None for li in items]

    @staticmethod
    def pack(frames: VideoFrames) -> bytes:
        return np.concatenate([frames.times.astype("<f8").view("<u8"), frames.codes.astype("<u8"),
                               frames.mirrored.astype("<u8"), frames.inner.astype("<u8"),
                               frames.inner_mirrored.astype("<u8"), frames.centre.astype("<u8"),
                               frames.centre_mirrored.astype("<u8"), frames.centre2.astype("<u8"),
                               frames.centre2_mirrored.astype("<u8"), frames.anchored.astype("<u8").ravel(),
                               frames.anchored_mirrored.astype("<u8").ravel()]).tobytes()

    @staticmethod
    def unpack(blob: bytes) -> VideoFrames:
        raw = np.frombuffer(blob, "<u8").reshape(ROWS, -1)
        n = raw.shape[1]
        return VideoFrames(times=raw[0].view("<f8").astype(np.float64), codes=raw[1].astype(np.uint64),
                           mirrored=raw[2].astype(np.uint64), crops=np.zeros((n, 4), np.float32),
                           duration=float(raw[0].view("<f8")[-1]) if n else 0.0, width=0, height=0,
                           fps=0.0, decoded=n, blank=0, inner=raw[3].astype(np.uint64),
                           inner_mirrored=raw[4].astype(np.uint64), centre=raw[5].astype(np.uint64),
                           centre_mirrored=raw[6].astype(np.uint64), centre2=raw[7].astype(np.uint64),
                           centre2_mirrored=raw[8].astype(np.uint64),
                           anchored=raw[9:9 + len(ANCHORS)].astype(np.uint64),
                           anchored_mirrored=raw[9 + len(ANCHORS):].astype(np.uint64))

    def new_index(self) -> HammingIndex:
        return HammingIndex()

    def index_add(self, index: HammingIndex, pks: np.ndarray, values: list[VideoFrames]) -> None:
        for pk, frames in zip(pks.tolist(), values):
            codes = frames.views().ravel()  # every frame's code, then inset, then centre codes
            ids = entry_ids(pk, MAX_FRAMES, len(codes))
            index.add(ids, codes[: len(ids)])

    def index_remove(self, index: HammingIndex, pks: np.ndarray) -> None:
        if len(index):  # (every id a chunk's items could own is thousands each: not for nothing)
            index.remove(entry_ids(pks, MAX_FRAMES))

    def search(self, index: HammingIndex, values: list[VideoFrames]) -> tuple[np.ndarray, np.ndarray]:
        rows, found = [], []
        for row, frames in enumerate(values):
            hits = index.search(np.concatenate([frames.views().ravel(), frames.views(True).ravel(),
                                                frames.anchored.ravel(), frames.anchored_mirrored.ravel()]),
                                self.config.frame_radius)
            owners, counts = np.unique(hits.ids // MAX_FRAMES, return_counts=True)
            owners = owners[counts >= self.config.min_frame_hits]
            rows.append(np.full(len(owners), row, np.int64))
            found.append(owners.astype(np.int64))
        return np.concatenate(rows), np.concatenate(found)

    def similarity(self, a: list[VideoFrames], b: list[VideoFrames]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        matches = [video_match(x, y, self.config.frame_radius) for x, y in zip(a, b)]
        aligned = np.array([m.score for m in matches], np.float64)
        return aligned, {"aligned": aligned, "mirrored": np.array([m.mirrored for m in matches], bool)}
