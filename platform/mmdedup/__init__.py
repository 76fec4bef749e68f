"""mmdedup: near-duplicate detection for text, web pages, images and video.

    from mmdedup import Platform
    with Platform.open("./.mmdedup") as p:
        p.ingest("corpus/manifest.jsonl")
        p.clusters()
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

# Loaded when first asked for, so that `mmdedup --help` and a command that needs little
# do not import the whole platform (the store, every signal, numpy and scipy) to start.
_EXPORTS = {"Platform": ".api", "IngestReport": ".pipeline.ingest", "Item": ".input.items",
            "InputError": ".input.items"}

__all__ = ["Platform", "Item", "IngestReport", "InputError"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'mmdedup' has no attribute {name!r}")
    value = getattr(import_module(_EXPORTS[name], __name__), name)
    globals()[name] = value
    return value
