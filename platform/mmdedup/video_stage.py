"""Items with a video at ingest: frame codes stored and indexed, candidates proposed, and
the `video` signal for pairs.

The signature (kind "video") keeps each sampled frame's time, pHash and mirrored pHash.
The Hamming index holds one entry per frame (id pk * 4096 + frame); a new video's frames,
as they are and mirrored, are searched in it, and an item whose frames are hit at least
`video_min_frame_hits` times becomes a candidate; the alignment in `video_similarity`
then decides.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from sqlalchemy.orm import Session

from .config import Settings
from .extract.video import VIDEO_VERSION, VideoFrames, video_match
from .index.hamming import HammingIndex
from .index.slots import entry_ids
from .items import LoadedItem
from .score.pairs import SignalValues
from .index.cache import load_cached, save_cached, signature_stamp
from .store.db import load_signatures, replace_signatures

KIND = "video"
MAX_FRAMES = 4096  # frame ids per item in the index (pk * 4096 + frame)


def pack(frames: VideoFrames) -> bytes:
    return np.concatenate([frames.times.astype("<f8").view("<u8"), frames.codes.astype("<u8"),
                           frames.mirrored.astype("<u8")]).tobytes()


def unpack(blob: bytes) -> VideoFrames:
    raw = np.frombuffer(blob, "<u8").reshape(3, -1)
    n = raw.shape[1]
    return VideoFrames(times=raw[0].view("<f8").astype(np.float64), codes=raw[1].astype(np.uint64),
                       mirrored=raw[2].astype(np.uint64), crops=np.zeros((n, 4), np.float32),
                       duration=float(raw[0].view("<f8")[-1]) if n else 0.0, width=0, height=0,
                       fps=0.0, decoded=n, blank=0)


class VideoStage:
    def __init__(self, home: Path, sessions, settings: Settings) -> None:  # noqa: ANN001
        self.folder = home / "index"
        self.sessions = sessions
        self.settings = settings
        self._index: HammingIndex | None = None

    def index(self, session: Session) -> HammingIndex:
        if self._index is None:
            saved = load_cached(self.folder, "video", signature_stamp(session, KIND, VIDEO_VERSION),
                                {"frames": HammingIndex.load})
            if saved is not None:
                self._index = saved["frames"]
            else:
                self._index = HammingIndex()
                for pk, value in load_signatures(session, KIND, VIDEO_VERSION).items():
                    self._add(pk, unpack(value))
        return self._index

    def _add(self, pk: int, frames: VideoFrames) -> None:
        ids = entry_ids(pk, MAX_FRAMES, len(frames))
        self._index.add(ids, frames.codes[: len(ids)])

    def candidates(self, session: Session, frames: VideoFrames) -> np.ndarray:
        index = self.index(session)
        hits = index.search(np.concatenate([frames.codes, frames.mirrored]), self.settings.video_frame_radius)
        owners, counts = np.unique(hits.ids // MAX_FRAMES, return_counts=True)
        return owners[counts >= self.settings.video_min_frame_hits]

    def on_chunk(self, session: Session, changed: list[tuple[int, LoadedItem]]) -> np.ndarray | None:
        index = self.index(session)
        index.remove(entry_ids([pk for pk, _ in changed], MAX_FRAMES))
        videos = [(pk, li.video) for pk, li in changed if li.video is not None and len(li.video)]
        if not videos:
            return None
        replace_signatures(session, KIND, VIDEO_VERSION, ((pk, pack(frames)) for pk, frames in videos), fresh=True)
        for pk, frames in videos:
            self._add(pk, frames)
        pairs = [np.stack([np.full(len(o), pk), o], axis=1)
                 for pk, frames in videos if len(o := self.candidates(session, frames))]
        return np.concatenate(pairs) if pairs else None

    def after_chunk(self) -> None:
        pass

    def finish(self) -> None:
        if self._index is not None:
            with self.sessions() as session:
                save_cached(self.folder, "video", signature_stamp(session, KIND, VIDEO_VERSION),
                            {"frames": self._index})

    def query(self, frames: VideoFrames) -> dict[int, float]:
        with self.sessions() as session:
            pks = self.candidates(session, frames).tolist()
            stored = load_frames(session, pks)
        return {pk: float(self.calibrate(video_match(frames, theirs, self.settings.video_frame_radius).score))
                for pk, theirs in stored.items()}

    def calibrate(self, similarity: float | np.ndarray) -> np.ndarray:
        xs, ys = zip(*self.settings.video_calibration)
        return np.interp(similarity, xs, ys)


def load_frames(session: Session, pks: list[int]) -> dict[int, VideoFrames]:
    return {pk: unpack(v) for pk, v in load_signatures(session, KIND, VIDEO_VERSION, pks).items()}


def video_signal(stage: VideoStage):  # noqa: ANN201
    """The `video` signal of pairs: the ordered share of frames one video finds in the other."""

    def signal(session: Session, a: np.ndarray, b: np.ndarray) -> SignalValues:
        frames = load_frames(session, np.unique(np.concatenate([a, b])).tolist())
        values = np.full(len(a), np.nan)
        raw = np.zeros(len(a))
        mirrored = np.zeros(len(a), bool)
        for i, (x, y) in enumerate(zip(a.tolist(), b.tolist())):
            if x in frames and y in frames:
                match = video_match(frames[x], frames[y], stage.settings.video_frame_radius)
                raw[i], mirrored[i] = match.score, match.mirrored
                values[i] = float(stage.calibrate(match.score))
        return SignalValues(values, {"aligned": raw, "mirrored": mirrored})

    return signal
