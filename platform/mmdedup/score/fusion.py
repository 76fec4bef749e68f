"""Per-signal scores -> one fused score -> a tier.

Every signal arrives already calibrated to the common scale (the tier thresholds mean the
same for each). The fused score is the larger of
- the weighted mean over the signals both items have (weights renormalised over them), and
- the best single *content* signal (text, semantic text, image, video),
so one strong content match (the same body text, the same picture) is never drowned by a
missing or weak other signal, while a structural signal such as `dom` (pages built from
one template) only ever moves the mean: alone it never makes two items duplicates.
"""

from __future__ import annotations

from typing import Mapping

# Each content signal, and the medium it reads (semantic text reads the text).
MODALITY = {"text": "text", "semantic": "text", "image": "image", "video": "video"}
CONTENT_SIGNALS = tuple(MODALITY)


def fuse(signals: Mapping[str, float | None], weights: Mapping[str, float]) -> float:
    present = {k: v for k, v in signals.items() if v is not None and weights.get(k, 0) > 0}
    if not present:
        return 0.0
    total = sum(weights[k] for k in present)
    mean = sum(weights[k] * v for k, v in present.items()) / total
    best_content = max((v for k, v in present.items() if k in CONTENT_SIGNALS), default=0.0)
    return max(mean, best_content)


def match_kind(signals: Mapping[str, float | None], threshold: float) -> str:
    """Which content carried the match: "text-reuse", "paraphrase" (the embedding, not the
    words), "image-reuse", "video-reuse", or "same-item" when the two items share more
    than one medium and each of them matches at or above threshold."""
    content = {k: v for k, v in signals.items() if k in CONTENT_SIGNALS and v is not None}
    media: dict[str, float] = {}
    for k, v in content.items():
        media[MODALITY[k]] = max(media.get(MODALITY[k], 0.0), v)
    if len(media) > 1 and all(v >= threshold for v in media.values()):
        return "same-item"
    best = max(content, key=lambda k: content[k], default="text")
    return "paraphrase" if best == "semantic" else f"{best}-reuse"
