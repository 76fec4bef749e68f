"""Review claims: the pairs reviewers' sessions hold, so two reviewers never get one pair.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

BigKey = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "review_claims",
        sa.Column("a_pk", BigKey, nullable=False),
        sa.Column("b_pk", BigKey, nullable=False),
        sa.Column("reviewer", sa.String(length=128), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["a_pk"], ["items.pk"], name=op.f("fk_review_claims_a_pk_items"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["b_pk"], ["items.pk"], name=op.f("fk_review_claims_b_pk_items"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("a_pk", "b_pk", name=op.f("pk_review_claims")),
    )
    with op.batch_alter_table("review_claims") as batch_op:
        batch_op.create_index(batch_op.f("ix_review_claims_expires_at"), ["expires_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("review_claims") as batch_op:
        batch_op.drop_index(batch_op.f("ix_review_claims_expires_at"))
    op.drop_table("review_claims")
