"""Items written without their candidate search: the ray engine writes a run's chunks,
then searches and scores their items on its workers; this table holds the items whose
search has not committed yet (schema.Unsearched).

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "unsearched",
        sa.Column("signal", sa.String(length=64), nullable=False),
        sa.Column("item_pk", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.ForeignKeyConstraint(["item_pk"], ["items.pk"], name=op.f("fk_unsearched_item_pk_items"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("signal", "item_pk", name=op.f("pk_unsearched")),
    )


def downgrade() -> None:
    op.drop_table("unsearched")
