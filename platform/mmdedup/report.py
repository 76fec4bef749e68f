"""The HTML report: one self-contained page a reviewer opens offline.

It shows what the store concluded and why: a summary, a histogram of fused scores per
tier, the duplicate clusters with thumbnails of their members, and the review queue (the
medium pairs no reviewer has decided yet), each pair with its per-signal scores and the
two texts side by side, shared passages highlighted.

Self-contained means one file and nothing fetched: thumbnails are data: URIs made here
(Pillow for pictures, the first keyframes PyAV decodes for videos), the CSS is inline, the
histogram is inline SVG, there is no script, and a Content-Security-Policy forbids loading
anything else, so a report mailed around or opened years later shows the same thing.
Item text is untrusted input: every string is escaped before it reaches the page.

Results are plain dicts; `write_report` returns the summary it rendered.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import json
import re
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from .config import TIERS, Settings
from .extract.image import ImageError, load_image
from .extract.tokens import tokenize
from .extract.video import VideoError, video_frames
from .items import InputError, read_file, text_for_signals
from .learn.feedback import queue_select
from .store.schema import Asset, Pair, utcnow
from .store.schema import Item as ItemRow

# Colours are exact so a screenshot test can find them.
TIER_COLOURS = {"strong": "#c0392b", "medium": "#e67e22", "weak": "#2e86c1"}
MARK_COLOUR = "#ffe066"

THUMB_SIDE = 160  # pixels, the longer side of a thumbnail
THUMB_QUALITY = 75  # JPEG
KEYFRAMES = 3  # per video, spread over the frames kept (content-sampled, so they differ)
KEYFRAME_SCAN = 60  # kept frames decoded to choose them from (about the first minute)
MAX_THUMBS = 4  # per item in a pair; cluster members show one
MAX_MEMBERS = 12  # members shown per cluster
MAX_TEXT_CHARS = 20_000  # of each text shown side by side
SNIPPET_CHARS = 200  # of a cluster member's text
MIN_SHARED_TOKENS = 4  # a shared passage is a run of at least this many tokens
HIST_BIN = 0.01  # histogram bin width on the fused score
DEFAULT_MAX_PAIRS = 200
DEFAULT_MAX_CLUSTERS = 100


def write_report(out: Path, sessions: sessionmaker[Session], settings: Settings,
                 clusters: list[dict[str, Any]], *, max_pairs: int = DEFAULT_MAX_PAIRS,
                 max_clusters: int = DEFAULT_MAX_CLUSTERS,
                 root: str | Path | None = None) -> dict[str, Any]:
    """Render the report to `out` (written whole, then renamed, so a reader never sees
    half a page) and return its summary. `clusters` are Platform.clusters() lines;
    `root` resolves relative asset paths of items ingested from Python (as ingest's)."""
    if max_pairs < 0 or max_clusters < 0:
        raise ValueError("--max-pairs and --max-clusters must not be negative")
    with sessions() as session:
        data = gather(session, settings, clusters, max_pairs, max_clusters)
    page = render(data, settings, Thumbnails(settings, Path(root) if root else None))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(out)
    return {"path": str(out), **data["summary"]}


# --- gathering -------------------------------------------------------------------------


def gather(session: Session, settings: Settings, clusters: list[dict[str, Any]],
           max_pairs: int, max_clusters: int) -> dict[str, Any]:
    """Everything the page shows, read in a handful of queries, as plain dicts."""
    histogram, tier_counts = score_histogram(session, settings)
    queue_total, queue = review_queue(session, max_pairs)
    # Largest groups first: they are where a wrong merge costs most.
    shown = sorted(clusters, key=lambda c: -len(c["members"]))[:max_clusters]
    wanted = {m for c in shown for m in c["members"][:MAX_MEMBERS]}
    wanted |= {p[side] for p in queue for side in ("a", "b")}
    return {
        "summary": {
            "items": session.scalar(select(func.count()).select_from(ItemRow)) or 0,
            "pairs": tier_counts,
            "clusters": len(clusters), "clusters_shown": len(shown),
            "review_queue": queue_total, "review_shown": len(queue),
            "generated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        },
        "histogram": histogram,
        "clusters": shown,
        "queue": queue,
        "items": load_items(session, wanted),
    }


def score_histogram(session: Session, settings: Settings) -> tuple[dict[str, Any], dict[str, int]]:
    """Counts of fused scores per bin and tier, and pairs per tier. Scores are streamed
    and binned in numpy, not binned in SQL: CAST(x AS INTEGER) truncates on SQLite but
    rounds on PostgreSQL, and floor() is not in every SQLite build."""
    lo = np.floor(settings.tier_weak / HIST_BIN + 1e-9) * HIST_BIN
    bins = max(1, int(round((1.0 - lo) / HIST_BIN)))
    counts = {tier: np.zeros(bins, np.int64) for tier in TIERS}
    result = session.execute(select(Pair.tier, Pair.score).execution_options(yield_per=50_000))
    for part in result.partitions():
        tiers = np.array([t for t, _ in part], dtype=object)
        scores = np.array([s for _, s in part], dtype=np.float64)
        index = np.clip(np.floor((scores - lo) / HIST_BIN + 1e-9).astype(np.int64), 0, bins - 1)
        for tier in TIERS:
            counts[tier] += np.bincount(index[tiers == tier], minlength=bins)
    tier_counts = {tier: int(c.sum()) for tier, c in counts.items()}
    return {"lo": float(lo), "width": HIST_BIN,
            "counts": {t: c.tolist() for t, c in counts.items()}}, tier_counts


def review_queue(session: Session, limit: int) -> tuple[int, list[dict[str, Any]]]:
    """(how many, the first `limit`) medium pairs no reviewer has decided, most uncertain
    first: the highest scores, nearest the line where pairs merge without a reviewer.
    This is feedback's queue as a whole (no one reviewer's view): a pair counts as decided
    once it has a duplicate or distinct label ('unsure' leaves it in the queue), as the
    clusters read labels, and pairs a session holds are still shown."""
    queue = queue_select(None, ("medium",), utcnow())
    total = session.scalar(select(func.count()).select_from(queue.order_by(None).subquery())) or 0
    rows = session.scalars(queue.with_only_columns(Pair).limit(limit)).all()
    ids = dict(session.execute(select(ItemRow.pk, ItemRow.id).where(
        ItemRow.pk.in_({pk for p in rows for pk in (p.a_pk, p.b_pk)}))).all())
    return total, [{"a": ids[p.a_pk], "b": ids[p.b_pk], "score": round(p.score, 4),
                    "tier": p.tier, "kind": p.kind, "signals": p.signals,
                    "details": p.details or {}} for p in rows]


def load_items(session: Session, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The shown items with the text the text signal reads and their stored assets."""
    rows = session.scalars(select(ItemRow).where(ItemRow.id.in_(list(ids)))).all()
    by_pk = {r.pk: {"id": r.id, "title": r.title or "",
                    "text": text_for_signals(r.title, r.text, r.page_text),
                    "source": r.source, "assets": []} for r in rows}
    for a in session.scalars(select(Asset).where(Asset.item_pk.in_(list(by_pk)))
                             .order_by(Asset.item_pk, Asset.role, Asset.position)):
        by_pk[a.item_pk]["assets"].append({"role": a.role, "path": a.path, "sha256": a.sha256})
    return {item["id"]: item for item in by_pk.values()}


# --- thumbnails ------------------------------------------------------------------------


class Thumbnails:
    """Data-URI thumbnails of an item's pictures and video keyframes. Each file is read
    and decoded once per report however many pairs show it; a file that is gone, changed
    or undecodable becomes a placeholder with the reason, never an error."""

    def __init__(self, settings: Settings, root: Path | None) -> None:
        self.settings = settings
        self.root = root
        self.cache: dict[tuple[str, Path, str], dict[str, Any]] = {}

    def of(self, item: dict[str, Any], limit: int) -> list[dict[str, Any]]:
        """Up to `limit` views [{"label", "uris", "error", "note"}], pictures first."""
        views = [self.asset(a, item["source"]) for a in item["assets"] if a["role"] != "html"]
        views += [self.asset(a, item["source"]) for a in item["assets"] if a["role"] == "html"]
        return views[:limit]

    def asset(self, asset: dict[str, Any], source: str | None) -> dict[str, Any]:
        path = self.resolve(asset["path"], source)
        key = (asset["role"], path, asset["sha256"])
        if key not in self.cache:
            self.cache[key] = self._make(asset, path)
        return self.cache[key]

    def resolve(self, rel: str, source: str | None) -> Path:
        """Where an asset is now: relative paths are relative to the manifest's folder or
        the ingested folder (the item's source), to `root` for items ingested from
        Python, else to the working directory (as ingest resolved them)."""
        path = Path(rel)
        if path.is_absolute():
            return path
        if source and source != "api":
            base = Path(source)
            return (base if base.is_dir() else base.parent) / path
        return (self.root or Path.cwd()) / path

    def _make(self, asset: dict[str, Any], path: Path) -> dict[str, Any]:
        view = {"label": f"{asset['role']}: {asset['path']}", "uris": [], "error": None, "note": None}
        try:
            data = read_file(path, asset["path"], self.settings)
            if hashlib.sha256(data).hexdigest() != asset["sha256"]:
                view["note"] = "the file changed since it was ingested"
            if asset["role"] == "image":
                view["uris"] = [_jpeg_uri(load_image(data, self.settings.max_image_pixels,
                                                     draft_side=THUMB_SIDE))]
            elif asset["role"] == "video":
                frames = video_frames(data, max_frames=KEYFRAME_SCAN, keep_images=True,
                                      image_size=THUMB_SIDE, max_bytes=self.settings.max_file_bytes,
                                      max_seconds=self.settings.max_video_seconds)
                images = frames.images or []
                picks = np.unique(np.linspace(0, len(images) - 1, KEYFRAMES).round().astype(int))
                view["uris"] = [_jpeg_uri(images[i]) for i in picks] if images else []
        except (InputError, ImageError, VideoError) as exc:
            view["error"] = str(exc)
        return view


def _jpeg_uri(image: Any) -> str:
    image = image.convert("RGB")
    image.thumbnail((THUMB_SIDE, THUMB_SIDE))
    buf = io.BytesIO()
    image.save(buf, format="JPEG", quality=THUMB_QUALITY)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


# --- shared passages -------------------------------------------------------------------

_WORD_RUN = re.compile(r"[^\W_]+")


def display_tokens(text: str, limit: int | None = None) -> list[tuple[int, int, str]]:
    """(start, end, key) of each token of `text` (the first `limit` of them), offsets into
    the text as shown.

    The keys are the project tokenizer's tokens (folded case, width and punctuation;
    jieba words for Chinese), so two texts share a passage exactly where the text signal
    saw shared words; the offsets let the original, unfolded text be marked. The report
    and the review screen both mark texts with these."""
    tokens: list[tuple[int, int, str]] = []
    for run in _WORD_RUN.finditer(text):
        start = run.start()
        tokens.extend((start + s, start + e, key) for s, e, key in _run_tokens(run.group()))
        if limit is not None and len(tokens) >= limit:
            break
    return tokens[:limit]


@lru_cache(maxsize=1 << 16)
def _run_tokens(run: str) -> tuple[tuple[int, int, str], ...]:
    """Tokens of one run of word characters. The tokenizer only folds characters, so
    its tokens tile the run; where folding changed a length (a ligature, say), the run
    stays one token."""
    words = tokenize(run, drop_stop_words=False)
    if sum(map(len, words)) != len(run):
        return ((0, len(run), "".join(words) or run.casefold()),)
    spans, at = [], 0
    for word in words:
        spans.append((at, at + len(word), word))
        at += len(word)
    return tuple(spans)


def shared_spans(a: list[tuple[int, int, str]], b: list[tuple[int, int, str]],
                 k: int = MIN_SHARED_TOKENS) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Character spans of each text covered by runs of at least k tokens that the other
    text holds too, in any order. Shared k-token shingles rather than an in-order diff
    (difflib): a repost with shuffled paragraphs shares every paragraph, and an in-order
    alignment would mark only one of them; this is also linear in the texts' length."""
    return _covered(a, _grams(b, k), k), _covered(b, _grams(a, k), k)


def _grams(tokens: list[tuple[int, int, str]], k: int) -> set[tuple[str, ...]]:
    keys = [t[2] for t in tokens]
    return {tuple(keys[i:i + k]) for i in range(len(keys) - k + 1)}


def _covered(tokens: list[tuple[int, int, str]], other: set[tuple[str, ...]],
             k: int) -> list[tuple[int, int]]:
    """Spans of the runs of tokens joined by shared k-grams: two neighbours are in one
    passage only when one shared k-gram holds both, so two shared paragraphs that merely
    follow each other stay two passages."""
    keys = [t[2] for t in tokens]
    marked = np.zeros(len(tokens), bool)
    joined = np.zeros(len(tokens), bool)  # token i and i + 1 are in one shared k-gram
    for i in range(len(keys) - k + 1):
        if tuple(keys[i:i + k]) in other:
            marked[i:i + k] = True
            joined[i:i + k - 1] = True
    spans, i = [], 0
    while i < len(tokens):
        if marked[i]:
            j = i
            while joined[j]:
                j += 1
            spans.append((tokens[i][0], tokens[j][1]))
            i = j + 1
        else:
            i += 1
    return spans


def marked_html(text: str, spans: list[tuple[int, int]]) -> str:
    """The text escaped, each span wrapped in <mark>."""
    out, done = [], 0
    for start, end in spans:
        out.append(_e(text[done:start]))
        out.append(f"<mark>{_e(text[start:end])}</mark>")
        done = end
    out.append(_e(text[done:]))
    return "".join(out)


# --- rendering -------------------------------------------------------------------------


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


CSS = f"""
body {{ font: 14px/1.45 system-ui, sans-serif; margin: 24px; color: #222; background: #fff; }}
h1 {{ font-size: 22px; margin: 0 0 8px; }} h2 {{ font-size: 18px; margin: 28px 0 8px; }}
.muted {{ color: #666; }} .capped {{ background: #fdf2e9; padding: 4px 8px; }}
table {{ border-collapse: collapse; }} td, th {{ padding: 2px 10px 2px 0; text-align: left; }}
.tier {{ color: #fff; padding: 0 6px; border-radius: 3px; }}
{"".join(f".tier-{t} {{ background: {c}; }} " for t, c in TIER_COLOURS.items())}
mark {{ background: {MARK_COLOUR}; color: inherit; }}
.cluster, .pair {{ border: 1px solid #ccc; border-radius: 6px; padding: 10px; margin: 12px 0; }}
.members {{ display: flex; flex-wrap: wrap; gap: 10px; }}
.member {{ width: 180px; font-size: 12px; }} .member .title {{ font-weight: 600; }}
.thumbs {{ display: flex; flex-wrap: wrap; gap: 4px; margin: 4px 0; }}
.thumbs img {{ max-width: {THUMB_SIDE}px; max-height: {THUMB_SIDE}px; display: block; }}
.missing {{ width: {THUMB_SIDE}px; min-height: 60px; border: 2px dashed #999; color: #555;
  font-size: 11px; padding: 4px; box-sizing: border-box; overflow-wrap: anywhere; }}
.note {{ font-size: 11px; color: #a04000; }}
.sides {{ display: grid; grid-template-columns: 1fr 1fr; gap: 12px; }}
.text {{ white-space: pre-wrap; overflow-wrap: anywhere; background: #fafafa; padding: 6px;
  border: 1px solid #eee; max-height: 420px; overflow: auto; }}
"""


def render(data: dict[str, Any], settings: Settings, thumbs: Thumbnails) -> str:
    """The whole page."""
    items, s = data["items"], data["summary"]
    clusters = "".join(cluster_html(c, items, thumbs) for c in data["clusters"])
    pairs = "".join(pair_html(p, items, thumbs, settings) for p in data["queue"])
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src data:; style-src 'unsafe-inline'">
<title>mmdedup report</title><style>{CSS}</style></head><body>
<h1>mmdedup report</h1>
<p class="muted">generated {_e(s["generated"])}</p>
<h2 id="summary">Summary</h2>{summary_html(s, settings)}
<h2 id="histogram">Fused scores per tier</h2>{histogram_svg(data["histogram"], settings)}
<h2 id="clusters">Clusters</h2>
{capped_note(s["clusters_shown"], s["clusters"], "clusters, largest first", "--max-clusters")}
{clusters or '<p class="muted">No clusters.</p>'}
<h2 id="review">Review queue</h2>
<p class="muted">Medium pairs no reviewer has decided, highest score (nearest to merging) first.</p>
{capped_note(s["review_shown"], s["review_queue"], "pairs", "--max-pairs")}
{pairs or '<p class="muted">The review queue is empty.</p>'}
</body></html>
"""


def summary_html(s: dict[str, Any], settings: Settings) -> str:
    thresholds = {"strong": settings.tier_strong, "medium": settings.tier_medium,
                  "weak": settings.tier_weak}
    rows = [("items", s["items"]), ("clusters", s["clusters"]),
            ("pairs awaiting review", s["review_queue"])]
    rows += [(f'{tier_badge(t)} pairs (score &ge; {thresholds[t]:g})', s["pairs"][t]) for t in TIERS]
    return "<table>" + "".join(f"<tr><th>{label}</th><td>{n:,}</td></tr>" for label, n in rows) + "</table>"


def tier_badge(tier: str | None) -> str:
    return f'<span class="tier tier-{_e(tier)}">{_e(tier)}</span>'


def capped_note(shown: int, total: int, what: str, option: str) -> str:
    """Say when the page holds fewer than the store has, and which option shows more."""
    if shown >= total:
        return ""
    return (f'<p class="capped">Showing {shown:,} of {total:,} {_e(what)} '
            f"(raise {_e(option)} to see more).</p>")


def histogram_svg(hist: dict[str, Any], settings: Settings) -> str:
    """Stacked bars of fused-score counts per bin, one colour per tier, with the tier
    thresholds drawn; inline SVG so it is crisp at any zoom and needs nothing loaded."""
    width, height, left, bottom, top = 720, 220, 44, 34, 12
    plot_w, plot_h = width - left - 12, height - bottom - top
    counts = hist["counts"]
    bins = len(next(iter(counts.values())))
    totals = np.sum([counts[t] for t in TIERS], axis=0)
    peak = int(totals.max(initial=0))
    bar_w = plot_w / bins
    parts = [f'<svg width="{width}" height="{height}" '
             f'role="img" aria-label="histogram of fused scores per tier">']
    if peak == 0:
        parts.append(f'<text x="{left}" y="{top + plot_h / 2}">No pairs yet.</text>')
    for i in range(bins):
        base = 0
        lo = hist["lo"] + i * hist["width"]
        for tier in reversed(TIERS):  # weak at the bottom
            n = counts[tier][i]
            if not n:
                continue
            h, y = n / peak * plot_h, top + plot_h - (base + n) / peak * plot_h
            parts.append(f'<rect x="{left + i * bar_w + 1:.1f}" y="{y:.1f}" width="{bar_w - 2:.1f}" '
                         f'height="{h:.1f}" fill="{TIER_COLOURS[tier]}"><title>{lo:.2f}-'
                         f'{lo + hist["width"]:.2f} {tier}: {n}</title></rect>')
            base += n

    def x_of(score: float) -> float:
        return left + (score - hist["lo"]) / (bins * hist["width"]) * plot_w

    for v in (settings.tier_medium, settings.tier_strong):
        parts.append(f'<line x1="{x_of(v):.1f}" x2="{x_of(v):.1f}" y1="{top}" y2="{top + plot_h}" '
                     f'stroke="#555" stroke-dasharray="4 3"/>')
    axis_y = top + plot_h
    parts.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{axis_y}" y2="{axis_y}" stroke="#333"/>')
    for step in range(0, bins + 1, max(1, bins // 6)):
        v = hist["lo"] + step * hist["width"]
        parts.append(f'<text x="{x_of(v):.1f}" y="{axis_y + 16}" font-size="11" '
                     f'text-anchor="middle">{v:.2f}</text>')
    parts.append(f'<text x="{left - 6}" y="{top + 10}" font-size="11" text-anchor="end">{peak}</text>'
                 f'<text x="{left - 6}" y="{axis_y}" font-size="11" text-anchor="end">0</text>')
    for k, tier in enumerate(TIERS):
        x = left + 8 + k * 90
        parts.append(f'<rect x="{x}" y="{height - 12}" width="10" height="10" fill="{TIER_COLOURS[tier]}"/>'
                     f'<text x="{x + 14}" y="{height - 3}" font-size="11">{tier}</text>')
    return "".join(parts) + "</svg>"


def cluster_html(cluster: dict[str, Any], items: dict[str, dict[str, Any]],
                 thumbs: Thumbnails) -> str:
    members = cluster["members"]
    shown = "".join(member_html(items[m], thumbs, m == cluster["canonical"])
                    for m in members[:MAX_MEMBERS] if m in items)
    more = (f'<p class="muted">and {len(members) - MAX_MEMBERS:,} more members</p>'
            if len(members) > MAX_MEMBERS else "")
    return (f'<div class="cluster"><div><b>{_e(cluster["canonical"])}</b> '
            f'<span class="muted">{len(members):,} members</span></div>'
            f'<div class="members">{shown}</div>{more}</div>')


def member_html(item: dict[str, Any], thumbs: Thumbnails, canonical: bool) -> str:
    text = item["text"]
    snippet = text[:SNIPPET_CHARS] + ("…" if len(text) > SNIPPET_CHARS else "")
    return (f'<div class="member">{thumbs_html(thumbs.of(item, 1), 1)}'
            f'<div class="id">{_e(item["id"])}{" (canonical)" if canonical else ""}</div>'
            f'<div class="title">{_e(item["title"])}</div><div>{_e(snippet)}</div></div>')


def thumbs_html(views: list[dict[str, Any]], per_view: int = KEYFRAMES) -> str:
    """Images for what could be shown, a dashed placeholder with the reason for the rest."""
    parts = []
    for v in views:
        if v["error"]:
            parts.append(f'<div class="missing">{_e(v["label"])}<br>{_e(v["error"])}</div>')
        for uri in v["uris"][:per_view]:
            parts.append(f'<img src="{uri}" alt="{_e(v["label"])}" title="{_e(v["label"])}">')
        if v["note"]:
            parts.append(f'<div class="note">{_e(v["label"])}: {_e(v["note"])}</div>')
        if not v["error"] and not v["uris"]:
            parts.append(f'<div class="muted">{_e(v["label"])}</div>')
    return f'<div class="thumbs">{"".join(parts)}</div>' if parts else ""


def pair_html(pair: dict[str, Any], items: dict[str, dict[str, Any]], thumbs: Thumbnails,
              settings: Settings) -> str:
    a, b = items[pair["a"]], items[pair["b"]]
    text_a, text_b = (t["text"][:MAX_TEXT_CHARS] for t in (a, b))
    spans_a, spans_b = shared_spans(display_tokens(text_a), display_tokens(text_b))
    sides = "".join(
        f'<div><div class="id"><b>{_e(item["id"])}</b> {_e(item["title"])}</div>'
        f'{thumbs_html(thumbs.of(item, MAX_THUMBS))}'
        f'<div class="text">{marked_html(text, spans)}</div>'
        f'{_cut_note(item["text"])}</div>'
        for item, text, spans in ((a, text_a, spans_a), (b, text_b, spans_b)))
    return (f'<div class="pair"><div><b>{_e(pair["a"])}</b> &harr; <b>{_e(pair["b"])}</b> '
            f'score {pair["score"]:.3f} {tier_badge(pair["tier"])} {_e(pair["kind"])}</div>'
            f'{signals_html(pair, settings)}<div class="sides">{sides}</div></div>')


def _cut_note(text: str) -> str:
    if len(text) <= MAX_TEXT_CHARS:
        return ""
    return f'<div class="note">showing the first {MAX_TEXT_CHARS:,} of {len(text):,} characters</div>'


def signals_html(pair: dict[str, Any], settings: Settings) -> str:
    """Every known signal with its calibrated score ('-' where either item lacks it) and
    the raw figures behind it: the "why" of the fused score."""
    names = list(settings.fusion_weights) + [n for n in pair["signals"] if n not in settings.fusion_weights]
    rows = []
    for name in names:
        value = pair["signals"].get(name)
        details = pair["details"].get(name) or {}
        why = ", ".join(f"{_e(k)} {_e(_fmt(v))}" for k, v in details.items())
        rows.append(f'<tr><td>{_e(name)}</td><td>{"-" if value is None else f"{value:.3f}"}</td>'
                    f'<td class="muted">{why}</td></tr>')
    return f'<table class="signals"><tr><th>signal</th><th>score</th><th>details</th></tr>{"".join(rows)}</table>'


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return value if isinstance(value, str) else json.dumps(value)


__all__ = ["write_report", "gather", "render", "display_tokens", "shared_spans", "marked_html",
           "DEFAULT_MAX_PAIRS", "DEFAULT_MAX_CLUSTERS", "TIER_COLOURS", "MARK_COLOUR"]
