"""The window's horizon: a signature records the write that took its item out of the
candidate indexes, when the item fell behind every class's window (pipeline/windows.py
`evict`); a deletion's log keeps it, so that index files saved before still count right.
Items get an index on their time alone: the horizon moves along it.

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("signatures", sa.Column("evicted_seq", sa.BigInteger(), nullable=True))
    op.create_index("ix_signatures_version_evicted", "signatures", ["version_id", "evicted_seq"])
    op.add_column("deletions", sa.Column("evicted_seq", sa.BigInteger(), nullable=True))
    op.create_index("ix_items_time", "items", ["item_time"])


def downgrade() -> None:
    # Plain ALTER TABLE, also on SQLite (3.35 on): a batch would copy the tables, and a
    # copy of `signatures`' parent would cascade (see 0014).
    op.drop_index("ix_items_time", table_name="items")
    op.execute("ALTER TABLE deletions DROP COLUMN evicted_seq")
    op.drop_index("ix_signatures_version_evicted", table_name="signatures")
    op.execute("ALTER TABLE signatures DROP COLUMN evicted_seq")
