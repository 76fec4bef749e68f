"""Per-signal scores -> one fused score -> a kind of match.

Every signal arrives already calibrated to the common scale (the tier thresholds mean the
same for each). The fused score is the larger of
- the weighted mean over the signals both items have (weights renormalised over them), and
- the best single *content* signal (one that reads a medium: text, semantic text, image,
  video),
so one strong content match (the same body text, the same picture) is never drowned by a
missing or weak other signal, while a structural signal such as `dom` (pages built from
one template) only ever moves the mean: alone it never makes two items duplicates.

A signal weighted 0 does not count: neither in the mean nor as the best content signal,
nor in the kind of match; a pair is scored by its other signals. A pair whose content
signals all weigh 0 scores 0, since what is left of it (structure) never decides alone.

Which signals carry content, and what kind of match each makes, comes from the signals
themselves (signals/registry.py builds a `Fusion`); nothing here names a signal.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Collection, Mapping

# A "same-item" match needs each medium the two items share to score at least this. It is
# a point of the common scale (the default medium tier, 80% estimated precision), not a
# tier: a pair's kind is stored with it, and a threshold that follows the configurable
# tiers would leave the stored kinds disagreeing with the tiers once they change.
SAME_ITEM_SCORE = 0.8


@dataclass(frozen=True)
class Fusion:
    """Weights, and for each content signal the medium it reads and the kind it names."""

    weights: Mapping[str, float]
    media: Mapping[str, str]  # content signal -> medium ("semantic" reads the "text")
    kinds: Mapping[str, str]  # content signal -> kind of a match it carries

    def fuse(self, signals: Mapping[str, float | None]) -> float:
        return fuse(signals, self.weights, self.media)

    def with_weights(self, weights: Mapping[str, float]) -> Fusion:
        return replace(self, weights=dict(weights))

    def kind(self, signals: Mapping[str, float | None], threshold: float = SAME_ITEM_SCORE) -> str:
        """Which content carried the match: its signal's kind ("text-reuse", "paraphrase",
        ...), or "same-item" when the two items share more than one medium and each of
        them matches at or above threshold."""
        content = {k: v for k, v in signals.items()
                   if k in self.media and v is not None and self.weights.get(k, 0) > 0}
        media: dict[str, float] = {}
        for k, v in content.items():
            media[self.media[k]] = max(media.get(self.media[k], 0.0), v)
        if len(media) > 1 and all(v >= threshold for v in media.values()):
            return "same-item"
        best = max(content, key=lambda k: content[k], default=None)
        return self.kinds[best] if best is not None else "text-reuse"


def fuse(signals: Mapping[str, float | None], weights: Mapping[str, float],
         content: Collection[str]) -> float:
    had = [k for k, v in signals.items() if v is not None]
    present = {k: signals[k] for k in had if weights.get(k, 0) > 0}
    if not present:
        return 0.0
    if any(k in content for k in had) and not any(k in content for k in present):
        return 0.0  # its content signals all weigh 0: structure alone never decides
    total = sum(weights[k] for k in present)
    mean = sum(weights[k] * v for k, v in present.items()) / total
    best_content = max((v for k, v in present.items() if k in content), default=0.0)
    return max(mean, best_content)
