"""Pairs no longer store their tier: it is derived from the score and the tiers in force.

A tier written when a pair was scored went stale as soon as the tiers changed (config,
environment, a fitted fusion model): the stored pairs kept the old tiers while new ones
got the new tiers. Pairs are now read with their tier computed from the score, so the
(tier, score) index gives way to one on the score, which the tier filters are ranges of.

Downgrading puts the column back filled from the scores with the default tiers of the
release that stored them (0.9, 0.8, 0.7; a store's own tiers live in its config, which
a migration does not read); pairs below 0.7 get no tier, as that release wrote none.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("pairs") as batch_op:
        batch_op.drop_index("ix_pairs_tier_score")
        batch_op.drop_column("tier")
        batch_op.create_index("ix_pairs_score", ["score"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("pairs") as batch_op:
        batch_op.drop_index("ix_pairs_score")
        batch_op.add_column(sa.Column("tier", sa.String(length=8), nullable=True))
        batch_op.create_index("ix_pairs_tier_score", ["tier", "score"], unique=False)
    op.execute("UPDATE pairs SET tier = CASE WHEN score >= 0.9 THEN 'strong' "
               "WHEN score >= 0.8 THEN 'medium' WHEN score >= 0.7 THEN 'weak' END")
