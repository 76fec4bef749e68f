"""CLIP vectors (open_clip): what a picture shows, beyond what its pixels hash to.

Perceptual hashes find copies of one picture; they miss a heavier crop, a re-shot scene,
a screenshot of the picture inside a page, and they cannot answer a text query ("a red
rocket on a launch pad"). CLIP embeds images and texts in one space where those are
close. It is a heavy model, so it is optional in every sense:

- Which model: the [clip] section of the model registry (models/registry.toml, shipped as
  mmdedup.registry; or the file named by $MMDEDUP_MODEL_REGISTRY): an open_clip `model`
  name, a `pretrained` tag, and optionally a local `checkpoint` file (absolute, or relative
  to the registry file's folder). A checkpoint wins over the tag; the tag then only lends
  its preprocessing (mean, std, interpolation), and the weights' sha256 names the version.
- Where weights live: $MMDEDUP_MODEL_CACHE; else the `cache` folder beside the registry
  when that is writable (models/cache/ in a checkout, git-ignored); else
  ~/.cache/mmdedup/models ($XDG_CACHE_HOME respected). A tag's weights are looked up
  there first (the Hugging Face cache layout open_clip downloads into), so a machine that
  downloaded once, or was handed the folder, never touches the network again.
- Loading is lazy (first encode) and never fakes: when weights cannot be had (offline and
  not cached, no checkpoint, a file that does not fit the model, open_clip not
  installed) every call raises one `EncoderUnavailable` whose one-line message says why
  and how to turn CLIP on; callers switch the signal off with that message and
  everything else goes on. What can be told without torch (packages installed, the
  registry, the checkpoint file, any weights in the cache when downloads are off) is
  checked before torch and open_clip are imported: importing them takes seconds and over
  a gigabyte. With $HF_HUB_OFFLINE set no download is tried at all: an offline machine
  that does not say so waits out the hub client's retries (about 45 s) once per process.

Vectors are float32, L2-normalised, so a dot product is the cosine.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from PIL import Image

from .image import ImageError, load_picture
from .registry import EncoderUnavailable, cache_dir, registry_dir, registry_entry, registry_file

# mmdedup's side: decoding (EXIF, alpha on white, at image.WORK_SIDE), batching. clip2:
# pictures decoded at work size (a JPEG drafted to it), as ingest decodes them.
CLIP_CODE_VERSION = "clip2"
BATCH_SIZE = 32


@dataclass(frozen=True)
class ClipSpec:
    """The [clip] section of the registry, paths resolved."""

    model: str
    pretrained: str | None
    checkpoint: Path | None
    registry: str  # where the spec came from, for messages
    # An open_clip model config (JSON, named after the model) for an architecture
    # open_clip does not ship: registered in each process that loads the model.
    config: Path | None = None


def load_spec(section: str = "clip") -> ClipSpec:
    """Read the [clip] section; a missing or malformed registry is EncoderUnavailable."""
    name, res = registry_file()
    cfg = registry_entry(section)
    if not isinstance(cfg.get("model"), str) or not cfg["model"]:
        raise EncoderUnavailable(f"model registry {name} has no [{section}] section with a "
                                 'model name (e.g. model = "ViT-B-32")')
    pretrained = cfg.get("pretrained") or None
    checkpoint = cfg.get("checkpoint") or None
    config = cfg.get("config") or None
    for key, value in (("pretrained", pretrained), ("checkpoint", checkpoint), ("config", config)):
        if value is not None and not isinstance(value, str):
            raise EncoderUnavailable(f"model registry {name}: [{section}] {key} must be a string")

    def local(value: str | None) -> Path | None:
        if not value:
            return None
        path = Path(value).expanduser()
        return path if path.is_absolute() else registry_dir(res) / path

    return ClipSpec(cfg["model"], pretrained, local(checkpoint), name, local(config))


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _offline() -> bool:
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return True
    try:
        from huggingface_hub import constants

        return bool(constants.is_offline_mode())
    except Exception:  # noqa: BLE001 - no hub client: only the env var can say
        return False


def _advice(spec: ClipSpec) -> str:
    """How to turn CLIP on: the two settings that give it weights."""
    return (f"to turn it on, set download = true under [signals.clip] in the store's "
            f"config.toml (fetches the weights once), or checkpoint = FILE under [clip] "
            f"in {spec.registry}")


def _no_download(spec: ClipSpec, allow_download: bool) -> str:
    """Why a tag's weights were not fetched, naming only what is actually set."""
    missing = f"no {spec.model}/{spec.pretrained} weights in {cache_dir()}"
    if not allow_download:
        return f"{missing} and download = false; {_advice(spec)}"
    return (f"{missing} and HF_HUB_OFFLINE is set; to turn it on, unset it for one run "
            f"(fetches the weights once), or set checkpoint = FILE under [clip] in {spec.registry}")


WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")


def _cache_has_weights(cache: Path) -> bool:
    """Whether the model cache holds any weights file at all (a URL's file at its top, or
    a hub snapshot): when it holds none, no tag can load from it, and that is known
    without importing open_clip to ask which file the tag names."""
    try:
        candidates = [*cache.glob("*"), *cache.glob("models--*/snapshots/*/*")]
    except OSError:
        return False
    return any(p.name.endswith(WEIGHT_SUFFIXES) for p in candidates)


def _installed(name: str) -> bool:
    """Whether `name` can be imported, without importing it."""
    if name in sys.modules:
        return sys.modules[name] is not None
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _checkpoint_missing(spec: ClipSpec) -> str:
    return (f"checkpoint {spec.checkpoint} (under [clip] in {spec.registry}) does not exist; "
            f"to turn it on, point it at an open_clip weights file for {spec.model}")


def _brief(exc: BaseException, limit: int = 160) -> str:
    """An exception in one short line (a failed state-dict load lists every key)."""
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class ClipEncoder:
    """CLIP image and text encoder named by the registry, loaded on first use.

    `device` defaults to CUDA when torch sees a GPU, else the CPU. Thread-safe loading; a
    failed load is remembered and raised again (EncoderUnavailable) without retrying, so
    an offline batch pays the failure once. A re-run (new process) tries again."""

    def __init__(self, spec: ClipSpec | None = None, *, device: str | None = None,
                 batch_size: int = BATCH_SIZE, allow_download: bool = True) -> None:
        self._spec = spec
        # Off in ingest by default: an offline machine would otherwise wait out the hub
        # client's retries before the signal could be switched off.
        self.allow_download = allow_download
        self._device = device
        self.batch_size = batch_size
        self._lock = threading.Lock()
        self._loaded: tuple[Any, Any, Any] | None = None  # model, preprocess, tokenizer
        self._failure: EncoderUnavailable | None = None
        self._version: str | None = None
        self.dim: int | None = None

    @property
    def spec(self) -> ClipSpec:
        if self._spec is None:
            self._spec = load_spec()
        return self._spec

    @property
    def device(self) -> str:
        if self._device is None:
            import torch

            self._device = "cuda" if torch.cuda.is_available() else "cpu"
        return self._device

    @property
    def version(self) -> str:
        """Names the vectors: model, and the pretrained tag or the checkpoint's sha256 prefix.
        Vectors of different versions are never compared."""
        if self._version is None:
            spec = self.spec
            if spec.checkpoint is not None:
                if not spec.checkpoint.is_file():
                    raise self._fail(_checkpoint_missing(spec))
                weights = "sha256:" + file_sha256(spec.checkpoint)[:16]
            elif spec.pretrained:
                weights = spec.pretrained
            else:
                raise self._fail(f"[clip] in {spec.registry} names neither pretrained nor "
                                 f"checkpoint; set one of them")
            self._version = f"{CLIP_CODE_VERSION}|{spec.model}|{weights}"
        return self._version

    # --- loading -----------------------------------------------------------------------

    def _fail(self, message: str) -> EncoderUnavailable:
        self._failure = EncoderUnavailable(f"CLIP signal off: {message}")
        return self._failure

    def load(self) -> None:
        """Load the model now (encode_* call this); EncoderUnavailable when it cannot be.
        What can be told without torch is checked first (`precheck`), so a machine
        without weights never pays for importing torch and open_clip (seconds, and over
        a gigabyte) only to learn that."""
        if self._loaded is not None:
            return
        with self._lock:
            if self._loaded is not None:
                return
            if self._failure is not None:
                raise self._failure
            try:
                self.precheck()
                self._loaded = self._load()
            except EncoderUnavailable as exc:
                self._failure = exc
                raise

    def precheck(self) -> None:
        """EncoderUnavailable when the model surely cannot load, judged from what costs
        nothing to look at: whether the packages are installed, the registry, whether the
        checkpoint file exists, and, for a tag that may not be downloaded, whether the
        model cache holds any weights file at all."""
        missing = [name for name in ("torch", "open_clip") if not _installed(name)]
        if missing:
            raise self._fail(f"{' and '.join(missing)} not installed; to turn it on, "
                             "install the ml extra: pip install 'mmdedup[ml]'")
        try:
            spec = self.spec
        except EncoderUnavailable as exc:
            raise self._fail(str(exc)) from exc
        self.version  # noqa: B018 - refuses a missing checkpoint, or no weights named
        if spec.checkpoint is None and not _cache_has_weights(cache_dir()) and (
                not self.allow_download or _offline()):
            raise self._fail(_no_download(spec, self.allow_download))

    def _load(self) -> tuple[Any, Any, Any]:
        try:
            import open_clip
            import torch  # noqa: F401
        except ImportError as exc:
            raise self._fail(f"open_clip/torch cannot be imported ({_brief(exc)}); to turn it "
                             "on, install the ml extra: pip install 'mmdedup[ml]'") from exc
        spec = self.spec
        version = self.version
        if spec.config is not None:
            if not spec.config.is_file():
                raise self._fail(f"no model config at {spec.config} (config under [clip] in "
                                 f"{spec.registry})")
            open_clip.add_model_config(spec.config)
        if open_clip.get_model_config(spec.model) is None:
            raise self._fail(f"unknown open_clip model {spec.model!r} in {spec.registry}; "
                             "open_clip.list_models() lists the known ones")
        tag_cfg = open_clip.get_pretrained_cfg(spec.model, spec.pretrained) if spec.pretrained else {}
        if spec.checkpoint is not None:
            weights = str(spec.checkpoint)
        elif not tag_cfg:
            known = ", ".join(open_clip.list_pretrained_tags_by_model(spec.model)) or "none"
            raise self._fail(f"open_clip has no pretrained tag {spec.pretrained!r} for "
                             f"{spec.model} (known: {known}); fix it under [clip] in {spec.registry}")
        else:
            weights = self._tag_weights(open_clip, tag_cfg)
        pp = {k: tag_cfg[k] for k in ("mean", "std", "interpolation", "resize_mode") if k in tag_cfg}
        try:
            model, _, preprocess = open_clip.create_model_and_transforms(
                spec.model, pretrained=weights, device=self.device,
                force_quick_gelu=bool(tag_cfg.get("quick_gelu", False)),
                image_mean=pp.get("mean"), image_std=pp.get("std"),
                image_interpolation=pp.get("interpolation"),
                image_resize_mode=pp.get("resize_mode"),
                require_pretrained=True,
            )
            tokenizer = open_clip.get_tokenizer(spec.model, cache_dir=str(cache_dir()))
        except Exception as exc:  # noqa: BLE001 - a bad file fails in many ways
            raise self._fail(f"weights {weights} could not be loaded into {spec.model} "
                             f"({_brief(exc)}); point checkpoint under [clip] in "
                             f"{spec.registry} at weights for {spec.model}") from exc
        model.eval()
        self.dim = int(_output_dim(model))
        self._version = version
        return model, preprocess, tokenizer

    def _tag_weights(self, open_clip: Any, cfg: dict) -> str:
        """Local path of a pretrained tag's weights: from the cache, else downloaded."""
        spec, cache = self.spec, cache_dir()
        local = _cached_tag_weights(cfg, cache)
        if local:
            return local
        if not self.allow_download or _offline():
            raise self._fail(_no_download(spec, self.allow_download))
        try:
            cache.mkdir(parents=True, exist_ok=True)
            path = open_clip.download_pretrained(cfg, cache_dir=str(cache))
        except Exception as exc:  # noqa: BLE001 - network, disk, hub errors
            raise self._fail(f"{spec.model}/{spec.pretrained} weights could not be downloaded "
                             f"into {cache} ({_brief(exc)}); to turn it on, download on a "
                             f"machine with network access and copy that folder, or set "
                             f"checkpoint = FILE under [clip] in {spec.registry}") from exc
        if not path or not Path(path).is_file():
            raise self._fail(f"no weights file for {spec.model}/{spec.pretrained}; "
                             f"{_advice(spec)}")
        return str(path)

    # --- encoding ----------------------------------------------------------------------

    def encode_images(self, images: Sequence[Image.Image]) -> np.ndarray:
        """float32 (n, dim), unit rows: one vector per picture (RGB; see image.load_image)."""
        self.load()
        model, preprocess, _ = self._loaded
        import torch

        out = np.zeros((len(images), self.dim), np.float32)
        with torch.inference_mode():
            for start in range(0, len(images), self.batch_size):
                chunk = images[start : start + self.batch_size]
                x = torch.stack([preprocess(im.convert("RGB")) for im in chunk]).to(self.device)
                out[start : start + len(chunk)] = model.encode_image(x).float().cpu().numpy()
        return _unit(out)

    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        """float32 (n, dim), unit rows, in the images' space: for text-to-image queries.
        Texts are cut at the model's context length (77 tokens for CLIP)."""
        self.load()
        model, _, tokenizer = self._loaded
        import torch

        out = np.zeros((len(texts), self.dim), np.float32)
        with torch.inference_mode():
            for start in range(0, len(texts), self.batch_size):
                chunk = list(texts[start : start + self.batch_size])
                tokens = tokenizer(chunk).to(self.device)
                out[start : start + len(chunk)] = model.encode_text(tokens).float().cpu().numpy()
        return _unit(out)

    def encode_image_bytes(self, blobs: Sequence[bytes], max_pixels: int
                           ) -> tuple[np.ndarray, list[ImageError | None]]:
        """(float32 (n, dim), errors): vectors of encoded images, decoded as the hashes
        decode them; a row whose image failed is zeros, with its ImageError beside it."""
        self.load()
        pictures, errors = [], []
        for data in blobs:
            try:
                pictures.append(load_picture(data, max_pixels))
                errors.append(None)
            except ImageError as exc:
                errors.append(exc)
        out = np.zeros((len(blobs), self.dim), np.float32)
        ok = [i for i, e in enumerate(errors) if e is None]
        if ok:
            out[ok] = self.encode_images(pictures)
        return out, errors


def _output_dim(model: Any) -> int:
    visual = getattr(model, "visual", None)
    dim = getattr(visual, "output_dim", None)
    if dim is None:
        proj = getattr(model, "text_projection", None)
        dim = proj.shape[-1] if proj is not None else None
    if dim is None:
        raise EncoderUnavailable("CLIP signal off: cannot tell the model's embedding size")
    return int(dim)


def _unit(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return (x / np.where(norms > 0, norms, 1.0)).astype(np.float32)


def _cached_tag_weights(cfg: dict, cache: Path) -> str | None:
    """The tag's weights file if already in `cache` (hub layout, or a URL's file name)."""
    hub = cfg.get("hf_hub") or ""
    if hub:
        try:
            from huggingface_hub import try_to_load_from_cache
        except ImportError:
            return None
        # open_clip's form: "org/repo/filename", or "org/repo/" for its default file name.
        repo, filename = os.path.split(hub)
        names = [filename] if filename else [
            "open_clip_model.safetensors", "open_clip_pytorch_model.bin"]
        if filename.endswith((".bin", ".pth")):
            names.insert(0, filename[:-4] + ".safetensors")
        for name in names:
            try:
                found = try_to_load_from_cache(repo, name, cache_dir=str(cache))
            except Exception:  # noqa: BLE001
                found = None
            if isinstance(found, str) and Path(found).is_file():
                return found
        return None
    url = cfg.get("url") or ""
    if url:
        local = cache / os.path.basename(url)
        return str(local) if local.is_file() else None
    return None


_default: ClipEncoder | None = None


def default_encoder(*, allow_download: bool) -> ClipEncoder:
    """The process's one encoder of the registry's model (loaded on first use);
    `allow_download` is the configured Settings.clip_download."""
    global _default
    if _default is None:
        _default = ClipEncoder(allow_download=allow_download)
    return _default
