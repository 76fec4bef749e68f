"""Pictures in the terminal: half-block thumbnails for the review screen.

Each character cell shows two pixels, one above the other: the upper half block (▀) in
the upper pixel's colour on the lower pixel's colour. A cell is about twice as tall as it
is wide, so each half is about square and a picture keeps its proportions. Colours are
24-bit; rich brings them down to what the terminal has (256 or 16 colours). Where the
output has no colour at all, each cell is a character of a grey ramp instead.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from PIL import Image
from rich.color import Color
from rich.style import Style
from rich.text import Text

UPPER_HALF = "\u2580"  # ▀
GREY_RAMP = " .:-=+*#%@"  # dark to light
GAP = 1  # columns between pictures side by side


def half_blocks(image: Any, cols: int, rows: int, colour: bool = True) -> list[Text]:
    """One Text per terminal row: `image` fitted into cols x rows cells, proportions kept."""
    if cols < 1 or rows < 1:
        return []
    width, height = image.size
    scale = min(cols / width, 2 * rows / height)
    w = max(1, min(cols, round(width * scale)))
    h = max(2, min(2 * rows, 2 * round(height * scale / 2)))
    pixels = np.asarray(image.convert("RGB").resize((w, h), Image.Resampling.BOX), np.uint8)
    lines = []
    for top, bottom in zip(pixels[0::2], pixels[1::2]):
        line = Text(no_wrap=True, overflow="crop", end="")
        if colour:
            for up, down in zip(top.tolist(), bottom.tolist()):
                line.append(UPPER_HALF, Style(color=Color.from_rgb(*up), bgcolor=Color.from_rgb(*down)))
        else:
            grey = (top.astype(np.float32) + bottom) @ np.array([0.299, 0.587, 0.114], np.float32) / 2
            line.append("".join(GREY_RAMP[int(g * len(GREY_RAMP) / 256)] for g in grey))
        lines.append(line)
    return lines


def side_by_side(images: Sequence[Any], cols: int, rows: int, colour: bool = True) -> list[Text]:
    """Pictures in one strip (a video's keyframes, an item's pictures), each given an
    equal share of the width, top-aligned."""
    if not images:
        return []
    each = (cols - GAP * (len(images) - 1)) // len(images)
    if each < 2:
        images, each = images[:1], cols
    blocks = [half_blocks(im, each, rows, colour) for im in images]
    height = max(len(b) for b in blocks)
    out = []
    for r in range(height):
        line = Text(no_wrap=True, overflow="crop", end="")
        for k, block in enumerate(blocks):
            if k:
                line.append(" " * GAP)
            width = block[0].cell_len if block else 0
            line.append_text(block[r] if r < len(block) else Text(" " * width))
        out.append(line)
    return out


__all__ = ["half_blocks", "side_by_side", "UPPER_HALF", "GREY_RAMP"]
