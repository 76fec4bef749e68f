"""The retraining job: TF-IDF, word weights and fusion from the store and the labels.

Idempotent: each model is recomputed from what the store holds (document frequencies from
the stored texts, word weights and fusion from the labels in force), and a model
equal to the active one changes nothing, so a second run with no new labels or texts
re-signs nothing. One run at a time, across machines: the job holds a lock that lives as
long as its process (store/locks.py); a second run waits or exits with `LockBusy`.

A run cut short (killed, a lost connection) is finished by the next: texts signed under
superseded models are signed again, and pairs scored by models no longer in force (their
`model_version`) are re-scored first thing. Models are made active under the store's
write lock, so an ingest running beside a retrain scores each chunk with the models in
force when it writes, and what it wrote before is among the pairs the retrain re-scores.

Every run is recorded as a model version of kind "retrain" naming the versions it made
active and the ones before them; a rollback re-activates the ones before and re-signs and
re-scores, so the scores are the previous run's again.
"""

from __future__ import annotations

import zlib
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Callable, Mapping, Protocol

import numpy as np
from sqlalchemy.orm import Session, sessionmaker

from ..config import Settings, SignalSettings
from ..input.items import text_for_signals
from ..review.labels import decisions_in_force, deleted_pair_decisions
from ..score.fusion import Fusion
from ..score.windows import class_and_time, seconds_of
from ..signals.scorer import in_windows
from ..signals.text import WORDS_KIND, freeze, load_word_weights
from ..store.db import activate_version
from ..store.items import items_to_time, set_class_times, set_state, state, texts_of
from ..store.locks import job_lock, take_write_lock
from ..store.models import active_row, active_version, count_versions, versions_before
from ..store.pairs import delete_pairs, pair_tiers, pairs_after, stale_pairs
from ..store.schema import utcnow
from . import weights as word_weights
from .fusion_fit import FusionModel, fit_from_settings

RUN_KIND = "retrain"
FUSION_KIND = "fusion"
LOCK_NAME = "retrain"
# What the stored items' classes and times, and the stored pairs, were last made to agree
# with (`Job._apply_windows`): checksums of those settings, in `store_state`.
FIELDS_STATE, WINDOWS_STATE = "time_fields", "windows"


class TextModels(Protocol):
    """What the job needs of the text stage (kept abstract: learn/ sits below the stages)."""

    def count_frequencies(self) -> tuple[np.ndarray, np.ndarray, int]: ...

    def reload(self) -> bool: ...  # re-read active models; True if the signer changed

    def resign_all(self) -> int: ...  # how many pairs were scored again


@dataclass
class RetrainReport:
    versions: dict[str, tuple[str, str]] = field(default_factory=dict)  # kind -> (before, after)
    labels: Counter[str] = field(default_factory=Counter)
    words_moved: list[tuple[str, float, float]] = field(default_factory=list)
    fusion: dict | None = None
    resigned: bool = False
    resumed_pairs: int = 0  # left on superseded models by an earlier run cut short
    rescored_pairs: int = 0
    tier_changes: Counter[tuple[str, str]] = field(default_factory=Counter)
    rolled_back: bool = False
    windowed: dict[str, int] = field(default_factory=dict)  # items given a new class or time, pairs deleted

    @property
    def changed(self) -> bool:
        return any(a != b for a, b in self.versions.values())

    def as_dict(self) -> dict:
        """Plain JSON for a scheduler's log."""
        return {"rolled_back": self.rolled_back, "changed": self.changed,
                "versions": {k: {"before": a, "after": b} for k, (a, b) in self.versions.items()},
                "labels": dict(self.labels), "fusion": self.fusion,
                "words_moved": [{"word": w, "before": a, "after": b} for w, a, b in self.words_moved],
                "resigned": self.resigned, "resumed_pairs": self.resumed_pairs, "windowed": self.windowed,
                "rescored_pairs": self.rescored_pairs,
                "tier_changes": [{"from": a, "to": b, "pairs": n}
                                 for (a, b), n in sorted(self.tier_changes.items())]}

    def summary(self) -> str:
        if self.rolled_back:
            lines = ["rollback: models of the run before the last retrain restored"]
        else:
            lines = ["retrain: labels in force: " + (", ".join(
                f"{k} {v}" for k, v in sorted(self.labels.items())) or "none")]
        if any(self.windowed.values()):
            lines.append(f"  windows: {self.windowed['items']} items given their class and time from "
                         f"class_field and time_field, {self.windowed['pairs']} pairs outside their window deleted")
        if self.resumed_pairs:
            lines.append(f"  finished an earlier run cut short: {self.resumed_pairs} pairs "
                         "re-scored under the models in force")
        for kind, (a, b) in self.versions.items():
            lines.append(f"  {kind}: {a} -> {b}" if a != b else f"  {kind}: {a} (unchanged)")
        if self.words_moved:
            lines.append("  words moved most: " + ", ".join(
                f"{w} {a:.2f}->{b:.2f}" for w, a, b in self.words_moved[:10]))
        if self.fusion:
            lines.append(f"  fusion: {self.fusion.get('reason', '')}")
        if not self.changed and not self.resigned and not self.rescored_pairs and not self.tier_changes:
            lines.append("  nothing changed: no item re-signed, no pair re-scored")
            return "\n".join(lines)
        lines.append(f"  items re-signed: {'all texts' if self.resigned else 'none'}; "
                     f"pairs re-scored: {self.rescored_pairs}")
        moves = [f"{a}->{b} {n}" for (a, b), n in sorted(self.tier_changes.items()) if a != b]
        lines.append("  pairs whose tier changed: " + (", ".join(moves) if moves else "none"))
        return "\n".join(lines)


# --- models in force -------------------------------------------------------------------


def active_fusion(session: Session) -> FusionModel | None:
    row = active_row(session, FUSION_KIND)
    return FusionModel.from_params(row.params) if row is not None else None


def with_fusion(settings: Settings, model: FusionModel | None,
                kinds: Mapping[str, type[SignalSettings]]) -> Settings:
    """The settings scoring runs with: the fitted weights and tiers where a fit exists
    (`kinds`: each signal's settings class, by name). A fit keeps weak at the configured
    tier and only ever raises strong above it, so the tiers configured now still hold
    there when they changed after the fit."""
    if model is None or not model.fitted:
        return settings
    strong = max(model.strong, settings.tier_strong)
    medium = min(max(model.medium, settings.tier_weak), strong)
    return replace(settings.with_weights(model.weights, kinds), tier_strong=strong,
                   tier_medium=medium, tier_weak=settings.tier_weak)


# --- the job ---------------------------------------------------------------------------


class Scorer(Protocol):
    """Scores pairs with the models in force: writing them (call) or not (signals_of);
    `settings` holds the tiers in force."""

    settings: Settings

    def __call__(self, session: Session, pairs: np.ndarray) -> int: ...

    def signals_of(self, session: Session, pairs: np.ndarray) -> list[dict[str, float]]: ...

    def version(self) -> str: ...  # what a pair scored now is stamped with


RESCORE_BATCH = 5000


@dataclass
class Job:
    sessions: sessionmaker[Session]
    settings: Settings  # as configured (not the fitted fusion)
    text: TextModels
    scorer: Scorer
    fusion: Fusion  # the configured weights: the prior of a fit
    on_models_changed: Callable[[], None]  # the caller re-reads the fusion model

    def run(self, wait_seconds: float = 0.0) -> RetrainReport:
        with job_lock(self.sessions.kw["bind"], LOCK_NAME, wait_seconds):
            return self._retrain()

    def rollback(self, wait_seconds: float = 0.0) -> RetrainReport:
        with job_lock(self.sessions.kw["bind"], LOCK_NAME, wait_seconds):
            return self._rollback()

    def _retrain(self) -> RetrainReport:
        report = RetrainReport()
        report.windowed = self._apply_windows()
        tiers_before = self._tiers()
        # What an earlier run left half done: texts signed under superseded models, pairs
        # scored by models no longer in force.
        self.on_models_changed()
        self._apply(report)
        report.resumed_pairs, report.rescored_pairs = report.rescored_pairs + self._rescore_stale(), 0
        with self.sessions() as session:
            before = {k: active_version(session, k) for k in ("tfidf", WORDS_KIND, FUSION_KIND)}
            old_words = load_word_weights(session)

        keys, df, n_docs = self.text.count_frequencies()
        report.labels = self._labels_in_force()
        new_words = word_weights.learn(self._labelled_texts(), self.settings)
        report.words_moved = word_weights.moved(old_words, new_words)
        with self.sessions.begin() as session:
            take_write_lock(session)
            if n_docs >= self.settings.tfidf_min_docs:
                freeze(session, keys, df, n_docs)
            if new_words.version != old_words.version:
                word_weights.activate(session, new_words, {"labels": dict(report.labels)})
        self._apply(report)  # new text models first: fusion is fitted on their scores

        fusion = fit_from_settings(self._labelled_signals(), self.settings, self.fusion)
        report.fusion = {"reason": fusion.reason, **fusion.metrics}
        with self.sessions.begin() as session:
            take_write_lock(session)
            activate_version(session, FUSION_KIND, fusion.version if fusion.fitted else None,
                             fusion.as_params())
            after = {k: active_version(session, k) for k in before}
            if after != before:
                _record_run(session, before, after)
        self.on_models_changed()
        report.versions = {k: (before[k] or "default", after[k] or "default") for k in before}
        report.rescored_pairs += self._rescore_stale()
        report.tier_changes = _tier_changes(tiers_before, self._tiers())
        return report

    def _rollback(self) -> RetrainReport:
        report = RetrainReport(rolled_back=True)
        with self.sessions.begin() as session:
            take_write_lock(session)
            run = active_row(session, RUN_KIND)
            if run is None:
                raise LookupError("no retrain to roll back")
            previous, current = run.params["before"], run.params["after"]
            for kind, version in previous.items():
                activate_version(session, kind, version)
            run.active = False
            run.params = {**run.params, "rolled_back": True}
            _reactivate_previous_run(session, run.pk)
            report.versions = {k: (current[k] or "default", previous[k] or "default") for k in previous}
        tiers_before = self._tiers()
        self.on_models_changed()
        self._apply(report)
        report.rescored_pairs += self._rescore_stale()
        report.tier_changes = _tier_changes(tiers_before, self._tiers())
        return report

    def _apply(self, report: RetrainReport) -> None:
        if self.text.reload():
            report.rescored_pairs += self.text.resign_all()
            report.resigned = True

    def _apply_windows(self) -> dict[str, int]:
        """What a change of `class_field`, `time_field` or `windows` means for what is
        stored: each item's class and time read again from its meta, then the pairs the
        windows no longer let be compared (exact ones too) deleted; each only when its
        settings changed since it last ran (a checksum in `store_state`). Windows made
        wider apply to items ingested after: pairs never compared are not searched for."""
        s, done = self.settings, {"items": 0, "pairs": 0}
        fields = zlib.crc32(f"{s.class_field}\0{s.time_field}".encode())
        limits = zlib.crc32(repr(sorted((c, w.window) for c, w in s.windows.items())).encode())
        with self.sessions() as session:
            fields_done, limits_done = state(session, FIELDS_STATE), state(session, WINDOWS_STATE)
        if fields_done != fields and (fields_done is not None or s.class_field or s.time_field):
            done["items"] = self._retime_items(fields)
            limits_done = None  # (the times moved: every pair is looked at again)
        if limits_done != limits:
            done["pairs"] = self._drop_pairs_outside_windows(limits)
        return done

    def _retime_items(self, mark: int) -> int:
        """Every item's class and time from its meta under the settings in force, a batch
        a transaction; `mark` recorded at the end. Returns how many changed."""
        s, after, moved = self.settings, 0, 0
        while True:
            with self.sessions.begin() as session:
                take_write_lock(session)
                rows = items_to_time(session, after, RESCORE_BATCH)
                changed = [(pk, *made) for pk, meta, created, name, moment in rows
                           if (made := class_and_time(meta, s.class_field, s.time_field, created))[0] != name
                           or seconds_of(made[1]) != seconds_of(moment)]
                set_class_times(session, changed)
                if not rows:
                    set_state(session, FIELDS_STATE, mark)
                    return moved
            moved += len(changed)
            after = rows[-1][0]

    def _drop_pairs_outside_windows(self, mark: int) -> int:
        """Delete the stored pairs the windows do not let be compared, a batch a
        transaction; `mark` recorded at the end. Returns how many went."""
        after, dropped = (-1, -1), 0
        while self.settings.windowed:
            with self.sessions.begin() as session:
                take_write_lock(session)
                batch = pairs_after(session, after, RESCORE_BATCH)
                if not len(batch):
                    break
                outside = batch[~in_windows(session, self.settings, batch)]
                delete_pairs(session, [tuple(p) for p in outside.tolist()])
            dropped += len(outside)
            after = tuple(batch[-1].tolist())
        with self.sessions.begin() as session:
            take_write_lock(session)
            set_state(session, WINDOWS_STATE, mark)
        return dropped

    def _labels_in_force(self) -> Counter[str]:
        with self.sessions() as session:
            return Counter(decisions_in_force(session).values())

    def _labelled_texts(self) -> list[tuple[str, str, bool]]:
        with self.sessions() as session:
            decisions = decisions_in_force(session)
            pks = sorted({pk for pair in decisions for pk in pair})
            texts = {pk: text_for_signals(*parts) for pk, *parts in texts_of(session, pks)}
        return [(texts[a], texts[b], d == "duplicate") for (a, b), d in sorted(decisions.items())
                if texts.get(a, "").strip() and texts.get(b, "").strip()]

    def _labelled_signals(self) -> list[tuple[dict[str, float], bool]]:
        """Each labelled pair's signal scores and decision; a pair that lost an item to a
        deletion counts with the scores it had then."""
        with self.sessions() as session:
            decisions = decisions_in_force(session)
            pairs = np.array(sorted(decisions), np.int64).reshape(-1, 2)
            values = self.scorer.signals_of(session, pairs)
            gone = deleted_pair_decisions(session)
        return [(v, decisions[(int(a), int(b))] == "duplicate")
                for (a, b), v in zip(pairs.tolist(), values) if v] + [(v, d == "duplicate") for v, d in gone]

    def _rescore_stale(self) -> int:
        """Score again every pair scored by other models than those in force (exact pairs
        never change), a batch a transaction under the write lock, so a run killed here
        leaves the rest for the next run to find. Returns how many were re-scored."""
        done, after = 0, (-1, -1)
        while True:
            with self.sessions.begin() as session:
                take_write_lock(session)
                batch = stale_pairs(session, self.scorer.version(), after, RESCORE_BATCH)
                if not len(batch):
                    return done
                self.scorer(session, batch)
            done += len(batch)
            after = tuple(batch[-1].tolist())

    def _tiers(self) -> dict[tuple[int, int], str]:
        """Each pair's tier under the tiers in force now (a fitted fusion model's)."""
        with self.sessions() as session:
            return pair_tiers(session, self.scorer.settings.tier_thresholds)


def _tier_changes(before: dict, after: dict) -> Counter[tuple[str, str]]:
    return Counter((before.get(k, "none"), after.get(k, "none")) for k in set(before) | set(after)
                   if before.get(k) != after.get(k))


def _record_run(session: Session, before: dict, after: dict) -> None:
    n = count_versions(session, RUN_KIND)
    activate_version(session, RUN_KIND, f"run{n + 1}-{utcnow():%Y%m%dT%H%M%S}",
                     {"before": before, "after": after})


def _reactivate_previous_run(session: Session, pk: int) -> None:
    """After a rollback, the run before the rolled-back one is the one a further rollback
    undoes."""
    for row in versions_before(session, RUN_KIND, pk):
        if not row.params.get("rolled_back"):
            row.active = True
            return
