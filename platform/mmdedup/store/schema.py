"""The SQL schema: the source of truth every index and report is rebuilt from.

Items carry an integer surrogate key (`pk`) next to the user's string `id`: FAISS and LSH
indexes address items by int64, and pairs/labels stay small. The naming convention makes
constraint names deterministic, which Alembic's batch mode on SQLite needs to alter them.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# BigInteger keys on PostgreSQL, but SQLite only auto-increments an INTEGER PRIMARY KEY.
BigPK = BigInteger().with_variant(Integer(), "sqlite")


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Digest(TypeDecorator):
    """A SHA-256 digest: its hex string in Python (what the code compares and shows), its
    32 bytes in the database, half of what the hex takes, three times an item."""

    impl = LargeBinary(32)
    cache_ok = True

    def load_dialect_impl(self, dialect: Any) -> Any:
        # SQLite keeps the 64-character declaration of older stores: a declared type there
        # is only an affinity (a BLOB is kept as it is under any), and declaring it anew
        # would copy the whole items table, which SQLite does only with foreign keys off.
        return dialect.type_descriptor(String(64) if dialect.name == "sqlite" else LargeBinary(32))

    def process_bind_param(self, value: str | None, dialect: Any) -> bytes | None:
        if value is None:
            return None
        try:
            return bytes.fromhex(value)
        except (TypeError, ValueError):
            raise ValueError(f"a digest is a SHA-256 in hexadecimal, not {value!r}") from None

    def process_result_value(self, value: bytes | None, dialect: Any) -> str | None:
        return digest_hex(value)


def digest_hex(value: bytes | None) -> str | None:
    """A stored digest as the code holds it (also for rows read through the driver)."""
    return None if value is None else bytes(value).hex()


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


class Item(Base):
    """One piece of content as the user named it; `content_key` is its exact-duplicate key."""

    __tablename__ = "items"
    __table_args__ = (Index("ix_items_class_time", "class_name", "item_time"), Index("ix_items_time", "item_time"),
                      Index("ix_items_page_site", "page_site", "pk"))

    pk: Mapped[int] = mapped_column(BigPK, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(512), unique=True)
    title: Mapped[str | None] = mapped_column(Text)
    text: Mapped[str | None] = mapped_column(Text)
    # For page items: the main text extracted from the HTML (template and blocks repeated
    # across the site removed) and its publication date; the text signal reads it when
    # the item has no text of its own.
    page_text: Mapped[str | None] = mapped_column(Text)
    page_date: Mapped[str | None] = mapped_column(String(32))
    # The words of its video's subtitles (a file the manifest names, or the video's
    # subtitle stream); the text signal reads them after the item's text.
    subtitles: Mapped[str | None] = mapped_column(Text)
    # The site a page counts for in the block frequencies (signals/dom.py `site_of`): its
    # pages stored earlier are found again when lines of the site start to recur.
    page_site: Mapped[str | None] = mapped_column(String(255))
    meta: Mapped[dict[str, Any]] = mapped_column(default=dict)
    # sha256 of the normalised text, and of everything the item holds (text + asset bytes);
    # looked up through the `exact` signatures' index (signals/exact_keys.py), not SQL's.
    text_hash: Mapped[str | None] = mapped_column(Digest)
    content_key: Mapped[str] = mapped_column(Digest)
    fingerprint: Mapped[str] = mapped_column(Digest)
    status: Mapped[str] = mapped_column(String(16), default="ok")
    source: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # Its content class and time (pipeline/windows.py): which comparison window and
    # retention apply, and where in them it stands. Read from its meta when it is
    # ingested; its time is the ingest's where the meta gives none.
    class_name: Mapped[str | None] = mapped_column(String(64))
    item_time: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Asset(Base):
    """A file an item refers to, recorded by content so a changed file is a changed item."""

    __tablename__ = "assets"
    __table_args__ = (UniqueConstraint("item_pk", "role", "position"),)

    pk: Mapped[int] = mapped_column(BigPK, primary_key=True, autoincrement=True)
    item_pk: Mapped[int] = mapped_column(ForeignKey("items.pk", ondelete="CASCADE"), index=True)
    role: Mapped[str] = mapped_column(String(16))  # html | image | video
    position: Mapped[int] = mapped_column(Integer, default=0)
    path: Mapped[str] = mapped_column(Text)
    sha256: Mapped[str] = mapped_column(String(64), index=True)
    size: Mapped[int] = mapped_column(BigInteger)
    media_type: Mapped[str] = mapped_column(String(64))
    # A picture's or video's canvas in pixels, and a video's seconds decoded: which copy is
    # the fuller one (the canonical member of a cluster). None for pages, and for assets
    # stored before these were recorded.
    width: Mapped[int | None] = mapped_column(Integer)
    height: Mapped[int | None] = mapped_column(Integer)
    duration: Mapped[float | None] = mapped_column(Float)


class SignatureVersion(Base):
    """What made a signature (extractor, parameters, models), named once per kind.

    The version strings run to a few hundred characters (a TF-IDF model's, a tokenizer's);
    kept in every signature row and in the indexes over them they were a tenth of a
    store's bytes. A signature names its version by this small number instead."""

    __tablename__ = "signature_versions"
    __table_args__ = (UniqueConstraint("kind", "version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(64))
    version: Mapped[str] = mapped_column(String(255))


class Signature(Base):
    """A signature of one kind for one item, with the version of everything that made it."""

    __tablename__ = "signatures"
    # Every read names one version (store/signatures.py): all of it, what was written
    # since a write (an index catching up), or some items (by the primary key).
    __table_args__ = (Index("ix_signatures_version_seq", "version_id", "seq"),
                      Index("ix_signatures_version_evicted", "version_id", "evicted_seq"))

    item_pk: Mapped[int] = mapped_column(
        ForeignKey("items.pk", ondelete="CASCADE"), primary_key=True
    )
    kind: Mapped[str] = mapped_column(String(64), primary_key=True)
    version_id: Mapped[int] = mapped_column(ForeignKey("signature_versions.id"))
    value: Mapped[bytes] = mapped_column(LargeBinary)
    # The write (store/locks.py) that stored it: an index has seen every signature up to
    # the write it last caught up with, and reads only the newer ones.
    seq: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    # The write that took its item out of the candidate indexes, behind every class's
    # window (pipeline/windows.py `evict`); always a later write than `seq`. None: indexed.
    evicted_seq: Mapped[int | None] = mapped_column(BigInteger)


class Unsearched(Base):
    """An item whose signature a signal wrote without searching its candidate pairs: the
    ray engine writes a run's chunks, then searches and scores their items on its workers
    (pipeline/ingest.py). The row goes with the search's pairs, in one transaction, so a
    run cut short in between leaves its items here, and the next ingest searches them."""

    __tablename__ = "unsearched"

    signal: Mapped[str] = mapped_column(String(64), primary_key=True)
    item_pk: Mapped[int] = mapped_column(ForeignKey("items.pk", ondelete="CASCADE"), primary_key=True)


class Pair(Base):
    """A scored candidate pair, always stored with a_pk < b_pk, from `pair_floor` up. Its
    tier is derived from the score and the tiers in force when it is read (store/pairs.py),
    never stored: a stored copy would go stale when the tiers change."""

    __tablename__ = "pairs"
    __table_args__ = (Index("ix_pairs_score", "score"),)

    a_pk: Mapped[int] = mapped_column(ForeignKey("items.pk", ondelete="CASCADE"), primary_key=True)
    b_pk: Mapped[int] = mapped_column(
        ForeignKey("items.pk", ondelete="CASCADE"), primary_key=True, index=True
    )
    score: Mapped[float] = mapped_column(Float)
    kind: Mapped[str] = mapped_column(String(32))  # same-item | text-reuse | image-reuse | ...
    signals: Mapped[dict[str, Any]] = mapped_column(default=dict)
    # The raw measurements behind each signal (Jaccard estimates, Hamming distances): the "why".
    details: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    model_version: Mapped[str | None] = mapped_column(String(64))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Label(Base):
    """A reviewer's decision on a pair; the latest decision per pair is the one in force.

    Labels outlive their items: deleting an item (pipeline/delete.py) sets its side's pk
    to NULL and keeps its id in `a_deleted_id`/`b_deleted_id`, and the pair's signal
    scores at that moment in `deleted_signals`, what a retrain still fits fusion on."""

    __tablename__ = "labels"
    __table_args__ = (Index("ix_labels_pair", "a_pk", "b_pk"),)

    pk: Mapped[int] = mapped_column(BigPK, primary_key=True, autoincrement=True)
    a_pk: Mapped[int | None] = mapped_column(ForeignKey("items.pk", ondelete="SET NULL"))
    b_pk: Mapped[int | None] = mapped_column(ForeignKey("items.pk", ondelete="SET NULL"))
    decision: Mapped[str] = mapped_column(String(16))  # duplicate | distinct | unsure
    reviewer: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    a_deleted_id: Mapped[str | None] = mapped_column(String(512))
    b_deleted_id: Mapped[str | None] = mapped_column(String(512))
    deleted_signals: Mapped[dict[str, Any] | None] = mapped_column(JSON)


class Deletion(Base):
    """A signature that went with its deleted item, and the write that deleted it. An
    index caught up to an earlier write takes the item out (signals/base.py), and index
    files saved before the deletion stay usable: the signatures they counted are the ones
    still stored plus these."""

    __tablename__ = "deletions"
    __table_args__ = (Index("ix_deletions_version_seq", "version_id", "seq"),)

    seq: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    item_pk: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    kind: Mapped[str] = mapped_column(String(64), primary_key=True)
    version_id: Mapped[int] = mapped_column(Integer)
    signed_seq: Mapped[int] = mapped_column(BigInteger)  # the write that stored the signature
    evicted_seq: Mapped[int | None] = mapped_column(BigInteger)  # and the one that evicted it


class StreamCursor(Base):
    """How far a followed file has been ingested (pipeline/stream.py), written in the
    transaction of the micro-batch that read up to it: a stream killed and started again
    resumes after the last committed line. `out_bytes` and `last_lines`: the decision
    lines written to an --out file through that batch, and that batch's own, which a
    restart writes again if the kill came before they reached the file."""

    __tablename__ = "stream_cursors"

    source: Mapped[str] = mapped_column(String(1024), primary_key=True)
    inode: Mapped[int] = mapped_column(BigInteger)
    offset: Mapped[int] = mapped_column(BigInteger)
    line: Mapped[int] = mapped_column(BigInteger)
    out_bytes: Mapped[int] = mapped_column(BigInteger)
    last_lines: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ReviewClaim(Base):
    """A pair a reviewer's session holds while they look at it, so no other reviewer is
    shown it; released when they decide, skip or quit, and free again once `expires_at`
    has passed (a session that crashed). Keyed by the pair: one holder at a time."""

    __tablename__ = "review_claims"

    a_pk: Mapped[int] = mapped_column(ForeignKey("items.pk", ondelete="CASCADE"), primary_key=True)
    b_pk: Mapped[int] = mapped_column(ForeignKey("items.pk", ondelete="CASCADE"), primary_key=True)
    reviewer: Mapped[str] = mapped_column(String(128))
    claimed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)


class IngestRun(Base):
    __tablename__ = "ingest_runs"

    pk: Mapped[int] = mapped_column(BigPK, primary_key=True, autoincrement=True)
    source: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16), default="running")  # running | done
    counts: Mapped[dict[str, Any]] = mapped_column(default=dict)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Failure(Base):
    """An input that could not be ingested, with why; open until a later run retries it."""

    __tablename__ = "failures"
    __table_args__ = (Index("ix_failures_open", "source", "key", "resolved_at"),)

    pk: Mapped[int] = mapped_column(BigPK, primary_key=True, autoincrement=True)
    run_pk: Mapped[int] = mapped_column(ForeignKey("ingest_runs.pk", ondelete="CASCADE"))
    source: Mapped[str] = mapped_column(Text)
    # The item id where there is one, else "line N" of the manifest or the file's path.
    key: Mapped[str] = mapped_column(String(512))
    item_id: Mapped[str | None] = mapped_column(String(512))
    reason: Mapped[str] = mapped_column(String(32))
    detail: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    resolved_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class ModelVersion(Base):
    """A trained artefact (TF-IDF, fusion weights, word weights); `active` marks the one used."""

    __tablename__ = "model_versions"
    __table_args__ = (UniqueConstraint("kind", "version"),)

    pk: Mapped[int] = mapped_column(BigPK, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(32))
    version: Mapped[str] = mapped_column(String(64))
    params: Mapped[dict[str, Any]] = mapped_column(default=dict)
    active: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class WordWeight(Base):
    """A learned multiplier on a word's TF-IDF weight, per word-weight model version."""

    __tablename__ = "word_weights"

    model_pk: Mapped[int] = mapped_column(
        ForeignKey("model_versions.pk", ondelete="CASCADE"), primary_key=True
    )
    word: Mapped[str] = mapped_column(String(255), primary_key=True)
    weight: Mapped[float] = mapped_column(Float)


class DocFreq(Base):
    """How many documents hold a term, per TF-IDF model version.

    Terms are keyed by their 64-bit token hash (stored signed), the same key the stored
    token sequences use, so a refresh counts frequencies without re-tokenising any text.
    """

    __tablename__ = "doc_freqs"

    model_pk: Mapped[int] = mapped_column(
        ForeignKey("model_versions.pk", ondelete="CASCADE"), primary_key=True
    )
    term_hash: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    df: Mapped[int] = mapped_column(BigInteger)


class AdaptedThreshold(Base):
    """A medium tier cut-off that adaptive thresholds computed for one pair kind
    (pipeline/thresholds.py), from the scores of that kind's pairs among the items up to
    `through_pk`: the latest of each kind is in force, the rest is its history."""

    __tablename__ = "adapted_thresholds"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(64), index=True)
    through_pk: Mapped[int] = mapped_column(BigInteger)
    pairs: Mapped[int] = mapped_column(Integer)  # the scores it was computed from
    mean: Mapped[float] = mapped_column(Float)
    std: Mapped[float] = mapped_column(Float)
    cutoff: Mapped[float] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class StoreState(Base):
    """Named counters of the store; "writes" numbers the transactions that held the
    write lock (store/locks.py), and each signature carries the number of its write."""

    __tablename__ = "store_state"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[int] = mapped_column(BigInteger)


class WebSite(Base):
    """How many pages of a site have been ingested: the denominator of block frequencies."""

    __tablename__ = "web_sites"

    site: Mapped[str] = mapped_column(String(255), primary_key=True)
    pages: Mapped[int] = mapped_column(BigInteger)


class TextAnchor(Base):
    """A winnowed word k-gram (extract/winnowing.py) found in many recent texts, with that
    count: it marks a passage repeated across them (a site template), which leaves the
    texts' signatures."""

    __tablename__ = "text_anchors"

    anchor: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    texts: Mapped[int] = mapped_column(BigInteger)


class WebBlock(Base):
    """On how many pages of a site a text block (a normalised line of main text) appears;
    blocks on many of a site's pages are boilerplate the extractor kept."""

    __tablename__ = "web_blocks"

    site: Mapped[str] = mapped_column(String(255), primary_key=True)
    block_hash: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    pages: Mapped[int] = mapped_column(BigInteger)
