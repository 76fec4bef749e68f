"""The model registry: which encoder each signal uses and where its weights come from.

models/registry.toml ships inside the package (mmdedup.registry); a deployment points
MMDEDUP_MODEL_REGISTRY at its own copy to change models without touching the code.
"""

from __future__ import annotations

import os
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any


class EncoderUnavailable(RuntimeError):
    """An encoder's package or weights cannot be had here; its signal is off."""


def registry_path() -> Path:
    override = os.environ.get("MMDEDUP_MODEL_REGISTRY")
    if override:
        return Path(override)
    return Path(str(resources.files("mmdedup.registry") / "registry.toml"))


def registry_entry(section: str) -> dict[str, Any]:
    path = registry_path()
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except OSError as exc:
        raise EncoderUnavailable(f"model registry {path} cannot be read: {exc}") from exc
    if section not in data:
        raise EncoderUnavailable(f"model registry {path} has no [{section}] section")
    return dict(data[section])


def cache_dir() -> Path:
    """Where downloaded or exported weights go (git-ignored models/cache by default)."""
    return Path(os.environ.get("MMDEDUP_MODEL_CACHE") or "models/cache")
