"""Deletion and time: labels outlive their items, a log of deleted signatures for the
indexes, each item's content class and time, and where a followed stream got to.

A label's pk columns become nullable and SET NULL on delete (they were CASCADE), with the
deleted item's id and the pair's signal scores kept beside them; `deletions` lists each
signature that went with a deleted item (schema.Deletion). Items get `class_name` and
`item_time`; a stored item's time is when it was ingested, and it has no class.
`stream_cursors` holds a followed file's position (schema.StreamCursor).

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

_PK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "deletions",
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("item_pk", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("version_id", sa.Integer(), nullable=False),
        sa.Column("signed_seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("seq", "item_pk", "kind", name=op.f("pk_deletions")),
    )
    op.create_index("ix_deletions_version_seq", "deletions", ["version_id", "seq"])
    op.create_table(
        "stream_cursors",
        sa.Column("source", sa.String(length=1024), nullable=False),
        sa.Column("inode", sa.BigInteger(), nullable=False),
        sa.Column("offset", sa.BigInteger(), nullable=False),
        sa.Column("line", sa.BigInteger(), nullable=False),
        sa.Column("out_bytes", sa.BigInteger(), nullable=False),
        sa.Column("last_lines", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("source", name=op.f("pk_stream_cursors")),
    )
    op.add_column("items", sa.Column("class_name", sa.String(length=64), nullable=True))
    op.add_column("items", sa.Column("item_time", sa.DateTime(timezone=True), nullable=True))
    op.execute("UPDATE items SET item_time = created_at")
    op.create_index("ix_items_class_time", "items", ["class_name", "item_time"])
    with op.batch_alter_table("labels") as batch:
        for side in ("a", "b"):
            batch.drop_constraint(op.f(f"fk_labels_{side}_pk_items"), type_="foreignkey")
            batch.alter_column(f"{side}_pk", existing_type=_PK, nullable=True)
            batch.create_foreign_key(op.f(f"fk_labels_{side}_pk_items"), "items", [f"{side}_pk"], ["pk"],
                                     ondelete="SET NULL")
        batch.add_column(sa.Column("a_deleted_id", sa.String(length=512), nullable=True))
        batch.add_column(sa.Column("b_deleted_id", sa.String(length=512), nullable=True))
        batch.add_column(sa.Column("deleted_signals", sa.JSON(), nullable=True))


def downgrade() -> None:
    # Labels about deleted items cannot point at an item again: they go.
    op.execute("DELETE FROM labels WHERE a_pk IS NULL OR b_pk IS NULL")
    with op.batch_alter_table("labels") as batch:
        batch.drop_column("deleted_signals")
        batch.drop_column("b_deleted_id")
        batch.drop_column("a_deleted_id")
        for side in ("a", "b"):
            batch.drop_constraint(op.f(f"fk_labels_{side}_pk_items"), type_="foreignkey")
            batch.alter_column(f"{side}_pk", existing_type=_PK, nullable=False)
            batch.create_foreign_key(op.f(f"fk_labels_{side}_pk_items"), "items", [f"{side}_pk"], ["pk"],
                                     ondelete="CASCADE")
    op.drop_index("ix_items_class_time", table_name="items")
    # Plain ALTER TABLE, also on SQLite (3.35 on): a batch would copy `items` into a new
    # table and drop the old one, and with foreign keys on, that drop cascades to every
    # signature, asset and pair.
    op.execute("ALTER TABLE items DROP COLUMN item_time")
    op.execute("ALTER TABLE items DROP COLUMN class_name")
    op.drop_table("stream_cursors")
    op.drop_index("ix_deletions_version_seq", table_name="deletions")
    op.drop_table("deletions")
