"""mmdedup: near-duplicate detection for text, web pages, images and video.

    from mmdedup import Platform
    with Platform.open("./.mmdedup") as p:
        p.ingest("corpus/manifest.jsonl")
        p.clusters()
"""

from .api import Platform
from .pipeline.ingest import IngestReport
from .input.items import InputError, Item

__all__ = ["Platform", "Item", "IngestReport", "InputError"]
__version__ = "0.1.0"
