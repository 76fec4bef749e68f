"""The report page rendered: HTML and CSS inline, the histogram as inline SVG, item
text escaped, shared passages marked."""

from __future__ import annotations

import html
import json
from typing import Any

import numpy as np

from ..config import TIERS, Settings
from ..review.display import display_tokens
from ..signals import registry
from .gather import MAX_MEMBERS
from .thumbs import KEYFRAMES, THUMB_SIDE, Thumbnails

# Colours are exact so a screenshot test can find them.
TIER_COLOURS = {"strong": "#c0392b", "medium": "#e67e22", "weak": "#2e86c1"}
MARK_COLOUR = "#ffe066"
MAX_THUMBS = 4  # per item in a pair; cluster members show one
MAX_TEXT_CHARS = 20_000  # of each text shown side by side
SNIPPET_CHARS = 200  # of a cluster member's text
MIN_SHARED_TOKENS = 4  # a shared passage is a run of at least this many tokens


# --- shared passages -------------------------------------------------------------------


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


def render_pair(pair: dict[str, Any], items: dict[str, dict[str, Any]], settings: Settings,
                thumbs: Thumbnails) -> str:
    """A page of one pair (what the review screen's o key opens), as the report shows it."""
    title = f"{pair['a']} ~ {pair['b']}"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src data:; style-src 'unsafe-inline'">
<title>mmdedup: {_e(title)}</title><style>{CSS}</style></head><body>
<h1>{_e(title)}</h1>
{pair_html(pair, items, thumbs, settings)}
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
    known = [s.name for s in registry.SIGNALS]
    names = known + [n for n in pair["signals"] if n not in known]
    rows = []
    for name in names:
        value = pair["signals"].get(name)
        details = pair.get("details", {}).get(name) or {}
        why = ", ".join(f"{_e(k)} {_e(_fmt(v))}" for k, v in details.items())
        rows.append(f'<tr><td>{_e(name)}</td><td>{"-" if value is None else f"{value:.3f}"}</td>'
                    f'<td class="muted">{why}</td></tr>')
    return f'<table class="signals"><tr><th>signal</th><th>score</th><th>details</th></tr>{"".join(rows)}</table>'


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return value if isinstance(value, str) else json.dumps(value)


__all__ = ["render", "render_pair", "shared_spans", "marked_html", "TIER_COLOURS", "MARK_COLOUR"]
