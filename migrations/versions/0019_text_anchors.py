"""Text anchors: in how many texts each winnowed word k-gram appears (text_anchors), so
that passages repeated across many texts leave their signatures.

Revision ID: 0019
Revises: 0018
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "text_anchors",
        sa.Column("anchor", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("texts", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("anchor", name=op.f("pk_text_anchors")),
    )


def downgrade() -> None:
    op.drop_table("text_anchors")
