"""The model registry: which encoder each signal uses and where its weights come from.

models/registry.toml ships inside the package (mmdedup.registry); a deployment points
MMDEDUP_MODEL_REGISTRY at its own copy to change models without touching the code.
Weights live in $MMDEDUP_MODEL_CACHE; else the `cache` folder beside the registry when
that is writable (models/cache/ in a checkout, git-ignored); else ~/.cache/mmdedup/models.
"""

from __future__ import annotations

import importlib.resources
import os
import tomllib
from pathlib import Path
from typing import Any


class EncoderUnavailable(RuntimeError):
    """An encoder's package or weights cannot be had here, so its signal is off. The
    message says what to configure; it is meant to be shown to the user as is."""


def registry_file() -> tuple[str, Any]:
    """(name for messages, readable path-like) of the active model registry."""
    env = os.environ.get("MMDEDUP_MODEL_REGISTRY")
    if env:
        return env, Path(env)
    res = importlib.resources.files("mmdedup.registry") / "registry.toml"
    return str(res), res


def registry_entry(section: str) -> dict[str, Any]:
    """One section of the registry; a missing or malformed registry is EncoderUnavailable."""
    name, res = registry_file()
    try:
        data = tomllib.loads(res.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise EncoderUnavailable(f"model registry {name} not found (MMDEDUP_MODEL_REGISTRY "
                                 "names the file to use)") from exc
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise EncoderUnavailable(f"model registry {name} cannot be read: {exc}") from exc
    if not isinstance(data.get(section), dict):
        raise EncoderUnavailable(f"model registry {name} has no [{section}] section")
    return dict(data[section])


def registry_dir(res: Any) -> Path:
    """The folder relative paths in the registry are read from."""
    try:
        return Path(os.fspath(res)).parent
    except TypeError:  # a registry inside a zip: relative paths go by the current folder
        return Path.cwd()


def cache_dir() -> Path:
    env = os.environ.get("MMDEDUP_MODEL_CACHE")
    if env:
        return Path(env).expanduser()
    _, res = registry_file()
    try:
        beside = registry_dir(res) / "cache"
        if os.access(beside.parent, os.W_OK) and "site-packages" not in beside.parts:
            return beside
    except OSError:
        pass
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "mmdedup" / "models"
