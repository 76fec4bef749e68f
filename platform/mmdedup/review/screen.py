"""`mmdedup review`: a reviewer's pass over the review queue in the terminal.

Each screen shows one pair: the two items side by side (title, text, files), the words
that differ highlighted, their pictures and a strip of each video's keyframes drawn in the
terminal (pictures.py; on a terminal only), the per-signal scores and the fused score,
tier and kind, and the keys: d duplicate, n distinct, u unsure, s skip, z undo, o the pair
in the HTML report (opened in a browser where there is a display, else its path shown),
q quit. Keys are read one at a time when standard input is a terminal (cbreak mode,
restored on exit); otherwise one line each (its first character), so a session can be
scripted: `printf 'd\\nn\\nq\\n' | mmdedup review`. The queue logic (order, claims, undo,
resume) is in queue.py and session.py.

Differing words: both texts are cut into the project tokenizer's tokens (jieba words for
Chinese, folded case and width), aligned in order with difflib, and the tokens outside
the matching blocks are marked; a passage the other text holds too (a run of at least
`MOVED_RUN` tokens, anywhere) is not marked, so moved paragraphs are not shown as
changes. Long texts are cut to what fits the terminal, starting a little before the first
difference when it would not be on screen.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import tempfile
import webbrowser
from contextlib import contextmanager
from difflib import SequenceMatcher
from pathlib import Path
from typing import IO, Any, Callable, Iterator

from rich import box
from rich.cells import get_character_cell_size
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from ..signals.registry import listed_names
from ..terminal import printable
from .display import display_tokens
from .media import AssetMedia, MediaView
from .pictures import side_by_side
from .session import ReviewSession
from .view import PairView

KEYS = {"d": "duplicate", "n": "distinct", "u": "unsure", "s": "skip", "z": "undo", "q": "quit"}
KEY_LINE = "  ".join(f"[{k}] {v}" for k, v in KEYS.items())
REPORT_KEY = "o"
# With a report writer: the key that shows the pair in the HTML report, before quit.
REPORT_KEY_LINE = KEY_LINE.replace("[q]", f"[{REPORT_KEY}] report  [q]")
PICTURE_SIDE = 128  # pixels the pictures are decoded to (a terminal shows fewer)
VIDEO_KEYFRAMES = 4  # in a video's strip
MAX_PICTURES = 3  # of an item's pictures, side by side
# Writes the HTML report of the pair (a, b) to a path: Platform.pair_report.
PairReport = Callable[[str, str, Path], Any]
HIGHLIGHT = "bold black on yellow"
MOVED_RUN = 4  # a shared run of this many tokens is a moved passage, not a change
MAX_DIFF_TOKENS = 5000  # past this many tokens a text is not diffed (nor shown)


def run_review(session: ReviewSession, *, limit: int | None = None, stdin: IO[str] | None = None,
               stdout: IO[str] | None = None, pair_report: PairReport | None = None) -> int:
    """Run a review session until the queue is empty, `limit` decisions are made or the
    reviewer quits; the pairs it still holds are released on the way out. With
    `pair_report`, the o key writes the pair's HTML report and opens it."""
    console = Console(file=stdout or sys.stdout, highlight=False, emoji=False)
    keys = KeyReader(stdin or sys.stdin)
    interactive = console.is_terminal and keys.is_tty
    media = AssetMedia(session.settings, None, PICTURE_SIDE, VIDEO_KEYFRAMES) if console.is_terminal else None
    reports = _Reports(pair_report) if pair_report is not None else None
    message, ended = "", "quit"
    with _exit_on_signals(), session, keys:
        if interactive:
            console.set_alt_screen(True)
        try:
            while True:
                if limit is not None and session.labelled >= limit:
                    ended = "limit"
                    break
                view = session.current()
                if view is None:
                    ended = "empty"
                    break
                draw(console, view, session, message, interactive, media, reports is not None)
                key = keys.read()
                if not interactive:
                    console.print()
                if key in ("q", "\x04", "\x1b"):  # q, Ctrl-D, Esc
                    break
                message = reports.show(view) if reports and key.lower() == REPORT_KEY else act(session, key)
        except KeyboardInterrupt:
            pass
        finally:
            if interactive:
                console.set_alt_screen(False)
        left = session.remaining()
    console.print(printable(summary(session, ended, left)), highlight=False, markup=False,
                  soft_wrap=True)
    return 0


def act(session: ReviewSession, key: str) -> str:
    """Apply one key; the message for the next screen."""
    action = KEYS.get(key.lower()) if key else None
    if action in ("duplicate", "distinct", "unsure"):
        view = session.decide(action)
        return f"{view.a['id']} ~ {view.b['id']}: {action}"
    if action == "skip":
        view = session.skip()
        return f"skipped {view.a['id']} ~ {view.b['id']}"
    if action == "undo":
        done = session.undo()
        if done is None:
            return "nothing to undo in this session"
        return f"undone: {done.ids[0]} ~ {done.ids[1]}: {done.decision}"
    return f"unknown key {key!r}" if key else ""


def summary(session: ReviewSession, ended: str, left: int) -> str:
    c = session.counts
    text = (f"{session.reviewer}: {session.labelled} labelled this session "
            f"({c['duplicate']} duplicate, {c['distinct']} distinct, {c['unsure']} unsure)")
    skipped = len(session.set_aside) + len(session.skipped)
    if skipped:
        text += f", {skipped} skipped"
    if ended == "empty":
        return text + "; the review queue is empty."
    stop = "stopped at --limit" if ended == "limit" else "quit"
    return (text + f"; {stop} with {left} pairs left in the queue. "
            "`mmdedup review` goes on from there.")


# --- the screen ------------------------------------------------------------------------


def draw(console: Console, view: PairView, session: ReviewSession, message: str,
         interactive: bool, media: AssetMedia | None = None, report_key: bool = False) -> None:
    width, height = console.size
    if interactive:
        console.clear()
    pictures = None
    if media is not None:
        pictures = tuple(media.of({"source": v["source"], "assets": v["media"]}, 8)
                         for v in (view.a, view.b))
    console.print(screen(view, session.reviewer, session.remaining(), session.labelled,
                         message, width, height, pictures,
                         colour=console.color_system is not None and not console.no_color,
                         keys=REPORT_KEY_LINE if report_key else KEY_LINE))
    if not interactive:
        console.print("key? ", end="")
        console.file.flush()


def screen(view: PairView, reviewer: str, left: int, labelled: int, message: str,
           width: int, height: int,
           pictures: tuple[list[MediaView], list[MediaView]] | None = None, *,
           colour: bool = True, keys: str = KEY_LINE) -> Group:
    """Everything one screen shows, fitted to width x height. `pictures`: each item's
    files read back (media.py), drawn as half-block thumbnails."""
    header = Text.assemble(("mmdedup review", "bold"), f"  reviewer {printable(reviewer)}  ·  "
                           f"{left} to go  ·  {labelled} labelled this session")
    assets = max(len(view.a["assets"]), len(view.b["assets"]))
    shown_assets = min(assets, 3)
    column = max(10, (width - 7) // 2)
    drawn = pictures is not None and any(v.images or v.error for side in pictures for v in side)
    has_text = bool(view.a["text"].strip() or view.b["text"].strip())
    rows = height - 17 - shown_assets  # what the texts and pictures share
    picture_rows = 0
    if drawn:  # pictures alone take what there is; beside texts, about half
        picture_rows = min(24, max(3, rows - 1)) if not has_text else min(16, max(3, (height - 20) // 2))
    lines = max(3, rows - (picture_rows + 1 if drawn else 0))
    text_a, text_b = marked_texts(view.a["text"], view.b["text"], column, lines)

    sides = Table(box=box.ROUNDED, expand=True, show_lines=True, padding=(0, 1))
    sides.add_column(Text(printable(view.a["id"]), style="bold cyan"), ratio=1, overflow="fold")
    sides.add_column(Text(printable(view.b["id"]), style="bold cyan"), ratio=1, overflow="fold")
    if view.a["title"] or view.b["title"]:
        sides.add_row(Text(_safe(view.a["title"]), style="bold"),
                      Text(_safe(view.b["title"]), style="bold"))
    if has_text or not drawn:
        sides.add_row(text_a, text_b)
    if drawn:
        sides.add_row(*(picture_cell(side, column - 2, picture_rows, colour) for side in pictures))
    if assets:
        sides.add_row(*(Text(_assets(v["assets"], shown_assets), style="dim")
                        for v in (view.a, view.b)))

    listed = listed_names()
    names = [*listed] + sorted(k for k in view.signals if k not in listed)
    scores = Table(box=box.SIMPLE_HEAD, padding=(0, 1), show_edge=False)
    for name in names:
        scores.add_column(name, justify="right")
    for name in ("fused", "tier", "kind"):
        scores.add_column(name, style="bold" if name == "fused" else None)
    scores.add_row(*[_score(view.signals.get(n)) for n in names],
                   f"{view.score:.3f}", str(view.tier), view.kind)
    why = "  ".join(f"{signal}: " + ", ".join(f"{k} {_num(v)}" for k, v in figures.items())
                    for signal, figures in view.details.items() if isinstance(figures, dict))
    parts: list[Any] = [header, sides, scores]
    if why:
        parts.append(Text(why, style="dim", overflow="ellipsis", no_wrap=True))
    parts.append(Text(keys, style="bold"))
    parts.append(Text(printable(message) or " ", style="italic"))
    return Group(*parts)


def picture_cell(views: list[MediaView], cols: int, rows: int, colour: bool) -> Text:
    """An item's pictures side by side, then its video's keyframes as a strip (the rows
    shared between the two), then what could not be shown and why."""
    pictures = [im for v in views if v.role == "image" for im in v.images][:MAX_PICTURES]
    keyframes = [im for v in views if v.role == "video" for im in v.images]
    strips = [s for s in (pictures, keyframes) if s]
    out: list[Text] = []
    for strip in strips:
        out += side_by_side(strip, cols, max(2, rows // len(strips)), colour)
    for v in views:
        if v.error or v.note:
            out.append(Text(_safe(f"{v.label}: {v.error or v.note}"), style="dim"))
    return Text("\n").join(out) if out else Text("-", style="dim")


def marked_texts(a: str, b: str, width: int, lines: int) -> tuple[Text, Text]:
    """Both texts with the words that differ highlighted, each cut to about width x lines."""
    a, b = _safe(a), _safe(b)
    tokens_a, tokens_b = display_tokens(a, MAX_DIFF_TOKENS), display_tokens(b, MAX_DIFF_TOKENS)
    changed_a, changed_b = differing([t[2] for t in tokens_a], [t[2] for t in tokens_b])
    return (_fit(a, tokens_a, changed_a, width, lines),
            _fit(b, tokens_b, changed_b, width, lines))


def differing(a: list[str], b: list[str]) -> tuple[list[bool], list[bool]]:
    """Which tokens of a and of b differ: outside difflib's matching blocks, and not in a
    run of MOVED_RUN tokens that the other text holds somewhere."""
    changed_a, changed_b = [False] * len(a), [False] * len(b)
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            changed_a[i1:i2] = [True] * (i2 - i1)
            changed_b[j1:j2] = [True] * (j2 - j1)
    _unmark_moved(a, changed_a, b)
    _unmark_moved(b, changed_b, a)
    return changed_a, changed_b


def _unmark_moved(keys: list[str], changed: list[bool], other: list[str]) -> None:
    k = MOVED_RUN
    grams = {tuple(other[i:i + k]) for i in range(len(other) - k + 1)}
    for i in range(len(keys) - k + 1):
        if any(changed[i:i + k]) and tuple(keys[i:i + k]) in grams:
            changed[i:i + k] = [False] * k


def _fit(text: str, tokens: list[tuple[int, int, str]], changed: list[bool], width: int,
         lines: int) -> Text:
    """The part of `text` that fits, as a Text with runs of changed tokens highlighted."""
    first = next((t[0] for t, c in zip(tokens, changed) if c), None)
    start = 0
    if first is not None and _rows(text, 0, first, width) > lines // 2:
        # Start a few rows above the first difference, at a token.
        before = [t[0] for t in tokens if t[0] <= first]
        start = before[-1]
        for offset in reversed(before):
            if _rows(text, offset, first, width) > max(1, lines // 4):
                break
            start = offset
    end = _cut(text, start, width, max(1, lines - 1))
    out = Text()
    if start > 0:
        out.append("… ", style="dim")
    spans = _spans(tokens, changed)
    at = start
    for s, e in spans:
        if e <= start or s >= end:
            continue
        s, e = max(s, start), min(e, end)
        out.append(text[at:s])
        out.append(text[s:e], style=HIGHLIGHT)
        at = e
    out.append(text[at:end])
    if end < len(text):
        out.append(f" … [+{len(text) - end} characters]", style="dim")
    return out


def _spans(tokens: list[tuple[int, int, str]], changed: list[bool]) -> list[tuple[int, int]]:
    """Character spans of runs of consecutive changed tokens (the spaces and punctuation
    between two changed tokens are marked too)."""
    runs: list[tuple[int, int]] = []
    previous_changed = False
    for (s, e, _), c in zip(tokens, changed):
        if c and previous_changed:
            runs[-1] = (runs[-1][0], e)
        elif c:
            runs.append((s, e))
        previous_changed = c
    return runs


def _rows(text: str, start: int, end: int, width: int) -> int:
    """Terminal rows text[start:end] takes at this width (character wrap: an estimate)."""
    rows, column = 1, 0
    for char in text[start:end]:
        if char == "\n":
            rows, column = rows + 1, 0
            continue
        size = get_character_cell_size(char)
        if column + size > width:
            rows, column = rows + 1, 0
        column += size
    return rows


def _cut(text: str, start: int, width: int, lines: int) -> int:
    """The end offset of the part of text from `start` that fits in `lines` rows, moved
    back to a space when one is near (word wrap takes a little more than this)."""
    rows, column = 1, 0
    limit = int(lines * 0.9) or 1
    for at in range(start, len(text)):
        char = text[at]
        if char == "\n":
            rows, column = rows + 1, 0
        else:
            size = get_character_cell_size(char)
            if column + size > width:
                rows, column = rows + 1, 0
            column += size
        if rows > limit:
            space = text.rfind(" ", start, at)
            return space if space > at - width // 2 else at
    return len(text)


def _safe(text: str) -> str:
    """The text as the screen shows it: newlines kept, control characters as escapes."""
    return printable(text.replace("\r\n", "\n"), lines=True).rstrip()


def _assets(assets: list[str], shown: int) -> str:
    lines = [printable(a) for a in assets[:shown]]
    if len(assets) > shown:
        lines.append(f"… {len(assets) - shown} more files")
    return "\n".join(lines) or "-"


def _score(value: Any) -> str:
    return "-" if value is None else f"{value:.2f}"


def _num(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


# --- the pair in the HTML report -------------------------------------------------------


class _Reports:
    """The o key: the pair's HTML report written to a folder of this session's own (made
    on first use) and opened in a browser where there is a display to show it; else, and
    over SSH, where a text browser would take over this terminal, the path is shown."""

    def __init__(self, write: PairReport) -> None:
        self.write = write
        self.folder: Path | None = None

    def show(self, view: PairView) -> str:
        if self.folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix="mmdedup-review-"))
        path = self.folder / f"pair-{view.key[0]}-{view.key[1]}.html"
        try:
            self.write(view.a["id"], view.b["id"], path)
        except (OSError, ValueError, KeyError) as exc:
            return _safe(f"the report could not be written: {exc}")
        where = _safe(str(path))
        if _display() and _open(path):
            return f"report of this pair opened in the browser: {where}"
        return f"report of this pair: {where} (open it in a browser)"


def _display() -> bool:
    """Whether a graphical browser could show a page (BROWSER names one explicitly)."""
    return bool(os.environ.get("BROWSER") or os.environ.get("DISPLAY")
                or os.environ.get("WAYLAND_DISPLAY") or sys.platform in ("darwin", "win32"))


def _open(path: Path) -> bool:
    try:
        return bool(webbrowser.open(path.as_uri()))
    except webbrowser.Error:
        return False


# --- keys ------------------------------------------------------------------------------


class KeyReader:
    """Single keys from a terminal (cbreak mode: no Enter, no echo, Ctrl-C still
    interrupts), else the first character of each line; end of input reads as quit."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        try:
            self.fd: int | None = stream.fileno() if stream.isatty() else None
        except (AttributeError, OSError, ValueError):
            self.fd = None
        self._saved: Any = None

    @property
    def is_tty(self) -> bool:
        return self.fd is not None

    def __enter__(self) -> KeyReader:
        if self.fd is not None:
            import termios
            import tty

            self._saved = termios.tcgetattr(self.fd)
            tty.setcbreak(self.fd)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None and self._saved is not None:
            import termios

            termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)
            self._saved = None

    def read(self) -> str:
        if self.fd is None:
            line = self.stream.readline()
            return line.strip()[:1] if line else "q"
        data = os.read(self.fd, 1)
        if not data:
            return "q"
        if data == b"\x1b":  # an escape sequence (arrow keys): swallow the rest
            if select.select([self.fd], [], [], 0.05)[0]:
                os.read(self.fd, 32)
                return ""
            return "\x1b"
        if data[0] >= 0x80:  # the rest of a UTF-8 character
            while select.select([self.fd], [], [], 0.01)[0] and len(data) < 4:
                data += os.read(self.fd, 1)
        return data.decode("utf-8", errors="replace")


@contextmanager
def _exit_on_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP (the terminal closed) end the session the way q does, so its
    claims are released and the terminal restored."""
    def stop(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    saved = {}
    try:
        for sig in (signal.SIGTERM, signal.SIGHUP):
            saved[sig] = signal.signal(sig, stop)
    except (ValueError, AttributeError):  # not the main thread, or no such signal
        pass
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
