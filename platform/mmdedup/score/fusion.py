"""Per-signal scores -> one fused score -> a kind of match.

Every signal arrives already calibrated to the common scale (the tier thresholds mean the
same for each). The fused score is the larger of
- the weighted mean over the signals both items have (weights renormalised over them), and
- the best single *content* signal (one that reads a medium: text, semantic text, image,
  video),
so one strong content match (the same body text, the same picture) is never drowned by a
missing or weak other signal, while a structural signal such as `dom` (pages built from
one template) only ever moves the mean: alone it never makes two items duplicates.

A structural signal also never lifts a pair whose content disagrees: it counts only when
the best content signal is at least STRUCTURE_NEEDS; below that the pair scores what its
content signals alone give. Pages of one site share their template whatever their
articles say, so an identical DOM is no evidence about the text: were it to count, two
different short articles of one site (text 0.7, DOM 1.0) would be lifted into a tier
their texts never reach. Where the content already agrees, the template still tells that
the two are the same page crawled again, and may move the pair up within the tiers.

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
# The content score a pair needs before structural signals count (see above): the same
# point of the common scale, for the same reason (a stored score must not depend on the
# configurable tiers). Below it the content says "not the same", and the template cannot
# overrule that.
STRUCTURE_NEEDS = 0.8


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
    best_content = max((v for k, v in present.items() if k in content), default=0.0)
    if any(k in content for k in present) and best_content < STRUCTURE_NEEDS:
        present = {k: v for k, v in present.items() if k in content}  # structure does not count
    total = sum(weights[k] for k in present)
    mean = sum(weights[k] * v for k, v in present.items()) / total
    return max(mean, best_content)
