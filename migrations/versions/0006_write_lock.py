"""The store's write counter and each signature's write number; job locks leave the table.

Writers take the store's write lock (store/locks.py) and number their writes; an index
catches up with the signatures written after the last write it saw. The `job_locks` table
goes: a retrain's lock is now one that dies with its process (an advisory lock on
PostgreSQL, a file lock on SQLite) instead of a row that outlived a killed run.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    store_state = op.create_table(
        "store_state",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("value", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_store_state")),
    )
    op.bulk_insert(store_state, [{"name": "writes", "value": 0}])
    op.add_column("signatures", sa.Column("seq", sa.BigInteger(), server_default="0", nullable=False))
    op.create_index("ix_signatures_kind_version_seq", "signatures", ["kind", "version", "seq"])
    op.drop_table("job_locks")


def downgrade() -> None:
    op.create_table(
        "job_locks",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("holder", sa.String(length=255), nullable=False),
        sa.Column("acquired_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_job_locks")),
    )
    op.drop_index("ix_signatures_kind_version_seq", table_name="signatures")
    with op.batch_alter_table("signatures") as batch:
        batch.drop_column("seq")
    op.drop_table("store_state")
