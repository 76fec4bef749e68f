"""The signals, in the order pairs list them and ingest runs them.

Adding a signal is one file in this folder (a `Signal` subclass) and one line here;
fusion, the pairs table, queries, the report and the review screen take their names,
weights and kinds from this list. `register` adds one at run time (a plugin, a test).
"""

from __future__ import annotations

from .base import Signal
from .clip import ClipSignal
from .dom import DomSignal
from .image import ImageSignal
from .semantic import SemanticSignal
from .text import TextSignal
from .video import VideoSignal

SIGNALS: list[type[Signal]] = [TextSignal, ImageSignal, VideoSignal, ClipSignal, SemanticSignal, DomSignal]


def register(signal: type[Signal]) -> None:
    """Add a signal class (replacing one of the same name)."""
    unregister(signal.name)
    SIGNALS.append(signal)


def unregister(name: str) -> None:
    SIGNALS[:] = [s for s in SIGNALS if s.name != name]


def settings_types() -> dict[str, type]:
    """Each signal's settings class by name, for reading `[signals.<name>]` tables."""
    return {s.name: s.settings_type for s in SIGNALS}


def listed_names() -> tuple[str, ...]:
    """The signals every pairs line and table shows, null where a pair lacks one."""
    return tuple(s.name for s in SIGNALS if s.listed)
