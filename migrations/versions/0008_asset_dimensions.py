"""Assets record their canvas (width, height) and a video its duration, so a cluster's
canonical member can be the fuller copy (a larger picture, a longer video).

Assets stored before have none: they count as no size (an item whose files change is
stored anew, with them).

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("assets") as batch_op:
        batch_op.add_column(sa.Column("width", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("height", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("duration", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("assets") as batch_op:
        batch_op.drop_column("duration")
        batch_op.drop_column("height")
        batch_op.drop_column("width")
