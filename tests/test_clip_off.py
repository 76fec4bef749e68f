"""CLIP off where its weights are not on the machine: an ingest, with pictures or without,
never imports torch or open_clip to find that out, and says why once, on a line of its own
above the progress bar, with how to turn CLIP on. Run in a fresh interpreter, since
other tests load torch into this one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from PIL import Image
from skimage import data

SCRIPT = """
import json, sys
from mmdedup import Platform

home, folder = sys.argv[1], sys.argv[2]
seen = {}
with Platform.open(home) as p:
    p.ingest([{"id": "t1", "text": "The council approved the budget on Tuesday."},
              {"id": "t2", "text": "On Tuesday the council approved the budget."}], progress=True)
    seen["text"] = sorted(m for m in ("torch", "open_clip") if m in sys.modules)
    p.ingest(folder, progress=True)
    p.ingest([{"id": "again", "images": [folder + "/a.png"]}], progress=True)
    seen["pictures"] = sorted(m for m in ("torch", "open_clip") if m in sys.modules)
    seen["off"] = p.signal("clip").off_reason
    seen["image_pairs"] = sum(1 for x in p.pairs("weak") if x["signals"].get("image"))
print(json.dumps(seen))
"""


TAG = '[clip]\nmodel = "ViT-B-32"\npretrained = "laion2b_s34b_b79k"\n'


def run_ingest(tmp_path: Path, env_extra: dict[str, str], config: str = "",
               registry_body: str = TAG) -> tuple[dict, str]:
    folder = tmp_path / "pics"
    folder.mkdir()
    Image.fromarray(data.astronaut()).save(folder / "a.png")
    Image.fromarray(data.astronaut()).crop((10, 10, 500, 500)).save(folder / "a-crop.jpg")
    registry = tmp_path / "registry.toml"
    registry.write_text(registry_body)
    home = tmp_path / "home"
    home.mkdir()
    if config:
        (home / "config.toml").write_text(config)
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    env.update(MMDEDUP_MODEL_REGISTRY=str(registry), MMDEDUP_MODEL_CACHE=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join(sys.path), **env_extra)
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(home), str(folder)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def said(stderr: str) -> list[str]:
    """The CLIP lines as the terminal ends up showing them: each line's text after the
    bar's last carriage return (what is left once the bar redraws)."""
    return [line.rsplit("\r", 1)[-1] for line in stderr.split("\n") if "CLIP signal off" in line]


def test_pictures_without_weights_never_import_torch_and_say_so_once(tmp_path: Path) -> None:
    seen, stderr = run_ingest(tmp_path, {})
    assert seen["text"] == [] and seen["pictures"] == []
    assert seen["image_pairs"] >= 1  # the other signals work as ever
    lines = said(stderr)
    assert len(lines) == 1, stderr
    line = lines[0]
    assert line.startswith("CLIP signal off: ") and line == seen["off"]  # a line of its own
    assert "download = true under [signals.clip]" in line and "checkpoint = FILE" in line
    assert "download = false" in line and str(tmp_path / "cache") in line
    assert "HF_HUB_OFFLINE" not in line  # not set, so not the cause
    assert len(line) < 400


def test_offline_machine_is_named_as_the_cause(tmp_path: Path) -> None:
    seen, stderr = run_ingest(tmp_path, {"HF_HUB_OFFLINE": "1"}, "[signals.clip]\ndownload = true\n")
    assert seen["pictures"] == []
    [line] = said(stderr)
    assert "HF_HUB_OFFLINE is set" in line and "download = false" not in line


def test_missing_checkpoint_is_named_without_importing_torch(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.pt"
    seen, stderr = run_ingest(tmp_path, {}, registry_body=f'[clip]\nmodel = "ViT-B-32"\ncheckpoint = "{missing}"\n')
    assert seen["pictures"] == []
    [line] = said(stderr)
    assert f"checkpoint {missing}" in line and "does not exist" in line
