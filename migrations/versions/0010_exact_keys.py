"""Exact copies are looked up through `exact` signatures and their index, not through SQL
indexes over the items' content keys and text hashes.

Both are SHA-256 digests, random: each chunk's new keys land on as many B-tree pages, and
each commit writes every one of those pages again, a cost per item that grew with the
store. The indexes go; each item gets a 16-byte signature of kind `exact` (the first 64
bits of both digests, signals/exact_keys.py), which the ingest writes from now on.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import hashlib

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

KIND = "exact"
VERSION = "sha256-first64/1"  # signals/exact_keys.py VERSION
BATCH = 10_000


def _key64(digest: str | None) -> int:
    """signals/exact_keys.py key64, as it was when this migration was written."""
    if not digest:
        return 0
    try:
        return int(digest[:16], 16)
    except ValueError:
        return int.from_bytes(hashlib.sha256(digest.encode()).digest()[:8], "big")


def upgrade() -> None:
    conn = op.get_bind()
    with op.batch_alter_table("items") as batch:
        batch.drop_index("ix_items_content_key")
        batch.drop_index("ix_items_text_hash")
    items = sa.table("items", sa.column("pk", sa.BigInteger), sa.column("content_key", sa.String),
                     sa.column("text_hash", sa.String))
    versions = sa.table("signature_versions", sa.column("id", sa.Integer), sa.column("kind", sa.String),
                        sa.column("version", sa.String))
    signatures = sa.table("signatures", sa.column("item_pk", sa.BigInteger), sa.column("kind", sa.String),
                          sa.column("version_id", sa.Integer), sa.column("value", sa.LargeBinary),
                          sa.column("seq", sa.BigInteger))
    conn.execute(sa.delete(signatures).where(signatures.c.kind == KIND))
    vid = None  # (the version's row is made with the first signature: a new store has none)
    last = 0
    while True:
        rows = conn.execute(sa.select(items.c.pk, items.c.content_key, items.c.text_hash)
                            .where(items.c.pk > last).order_by(items.c.pk).limit(BATCH)).all()
        if not rows:
            break
        if vid is None:
            vid = conn.execute(sa.select(versions.c.id).where(versions.c.kind == KIND,
                                                              versions.c.version == VERSION)).scalar()
        if vid is None:
            vid = conn.execute(sa.insert(versions).values(kind=KIND, version=VERSION)
                               .returning(versions.c.id)).scalar_one()
        last = rows[-1][0]
        conn.execute(sa.insert(signatures), [
            {"item_pk": pk, "kind": KIND, "version_id": vid, "seq": 0,
             "value": _key64(content).to_bytes(8, "little") + _key64(text).to_bytes(8, "little")}
            for pk, content, text in rows])


def downgrade() -> None:
    conn = op.get_bind()
    conn.execute(sa.text("DELETE FROM signatures WHERE kind = :kind"), {"kind": KIND})
    with op.batch_alter_table("items") as batch:
        batch.create_index("ix_items_content_key", ["content_key"], unique=False)
        batch.create_index("ix_items_text_hash", ["text_hash"], unique=False)
