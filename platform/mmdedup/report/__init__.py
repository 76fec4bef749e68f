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

Results are plain dicts; `write_report` returns the summary it rendered. gather.py reads
what the page shows from the store, thumbs.py makes the thumbnails, html.py renders,
write.py puts them together into the file. `write_pair_report` renders one pair on a page
of its own (the review screen's o key).
"""

from .write import DEFAULT_MAX_CLUSTERS, DEFAULT_MAX_PAIRS, write_pair_report, write_report

__all__ = ["write_report", "write_pair_report", "DEFAULT_MAX_PAIRS", "DEFAULT_MAX_CLUSTERS"]
