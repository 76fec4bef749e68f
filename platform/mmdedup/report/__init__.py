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

The package itself holds only the report's default size, which the command's help shows
without loading what renders it.
"""

# How many pairs of the review queue and how many clusters a report shows by default.
DEFAULT_MAX_PAIRS = 200
DEFAULT_MAX_CLUSTERS = 100

__all__ = ["DEFAULT_MAX_PAIRS", "DEFAULT_MAX_CLUSTERS"]
