"""Adaptive thresholds: each medium tier cut-off computed for a pair kind, kept as its
history (schema.AdaptedThreshold).

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "adapted_thresholds",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("through_pk", sa.BigInteger(), nullable=False),
        sa.Column("pairs", sa.Integer(), nullable=False),
        sa.Column("mean", sa.Float(), nullable=False),
        sa.Column("std", sa.Float(), nullable=False),
        sa.Column("cutoff", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_adapted_thresholds")),
    )
    op.create_index(op.f("ix_adapted_thresholds_kind"), "adapted_thresholds", ["kind"])


def downgrade() -> None:
    op.drop_index(op.f("ix_adapted_thresholds_kind"), table_name="adapted_thresholds")
    op.drop_table("adapted_thresholds")
