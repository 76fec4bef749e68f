"""Picture ingest end to end against a plain imagehash.phash loop over the same files.

mmdedup: `mmdedup ingest FOLDER` of N JPEG photos (scikit-image's sample photos, cropped,
scaled and re-encoded at about 1 megapixel) into a fresh SQLite store, every code the
image signal computes and every database write included, CLIP off (no weights here).
Baseline, in the same run: `imagehash.phash(Image.open(path))` for every file, nothing
else; and, where the imagededup package is installed, its `PHash().encode_images` over the
folder (a deduplication tool's own pHash pass, its imports included). Each is timed in a
process of its own, wall and CPU seconds.

    python scripts/bench/picture_ingest_speed.py [--n 500]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).parent))
from timing import child_seconds  # noqa: E402

BASELINE = """
import sys
from pathlib import Path
import imagehash
from PIL import Image
for path in sorted(Path(sys.argv[1]).glob("*.jpg")):
    imagehash.phash(Image.open(path))
"""

IMAGEDEDUP = """
import sys
from imagededup.methods import PHash
PHash(verbose=False).encode_images(image_dir=sys.argv[1])
"""


def make_photos(folder: Path, n: int, seed: int = 0) -> None:
    from skimage import data  # (a test extra: the benchmark's photos)

    rng = np.random.default_rng(seed)
    sources = [data.astronaut(), data.coffee(), data.chelsea(), data.rocket()]
    for i in range(n):
        src = Image.fromarray(sources[i % len(sources)]).convert("RGB")
        w, h = src.size
        left, top = int(rng.integers(0, w // 5)), int(rng.integers(0, h // 5))
        crop = src.crop((left, top, left + int(w * 0.8), top + int(h * 0.8)))
        crop.resize((1200, 900)).save(folder / f"p{i:05d}.jpg", quality=int(rng.integers(70, 95)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=500)
    args = parser.parse_args()
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        photos = Path(tmp) / "photos"
        photos.mkdir()
        make_photos(photos, args.n)
        base = child_seconds([sys.executable, "-c", BASELINE, str(photos)], env=env)
        rows = [("imagehash.phash loop", base)]
        try:
            import importlib.util
            if importlib.util.find_spec("imagededup") is not None:
                rows.append(("imagededup PHash().encode_images",
                             child_seconds([sys.executable, "-c", IMAGEDEDUP, str(photos)], env=env)))
        except ImportError:
            pass
        ours = child_seconds([sys.executable, "-m", "mmdedup", "--home", str(Path(tmp) / "home"),
                              "ingest", "--no-progress", str(photos)], env=env)
    print(f"| what ({args.n} JPEG photos, 1200x900) | wall s | CPU s | pictures/s (CPU) | ratio |")
    print("|---|---|---|---|---|")
    for name, (wall, cpu) in (*rows, ("mmdedup ingest, CLIP off", ours)):
        print(f"| {name} | {wall:.2f} | {cpu:.2f} | {args.n / cpu:.0f} | {base[1] / cpu:.2f}x |")


if __name__ == "__main__":
    main()
