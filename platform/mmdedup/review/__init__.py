"""review layer: reviewers' labels on pairs and the review queue they work through.

labels.py records labels and reads the decisions in force, and imports and exports them;
queue.py orders the queue and holds the claims that keep two reviewers off one pair;
view.py is what a reviewer is shown of a pair; session.py is one reviewer's pass (skip,
undo, resume); screen.py is that pass in the terminal (`mmdedup review`, imported on
its own: it needs rich); display.py cuts texts into the tokens the report and the screen
mark; media.py reads an item's pictures and video keyframes back for the screen and the
report, and pictures.py draws them in the terminal.

The package exports the engine the API drives (not the screen).
"""

from .labels import (
    DECISIONS,
    ImportReport,
    RowError,
    decisions_in_force,
    import_labels,
    iter_labels,
    label_pair,
    write_labels,
)
from .queue import check_tiers, claim, peek_queue, queue_select, release
from .session import Done, ReviewSession
from .view import PairView

__all__ = ["DECISIONS", "Done", "ImportReport", "PairView", "ReviewSession", "RowError", "check_tiers",
           "claim", "decisions_in_force", "import_labels", "iter_labels", "label_pair",
           "peek_queue", "queue_select", "release", "write_labels"]
