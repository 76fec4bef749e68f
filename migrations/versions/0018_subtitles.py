"""Subtitles: the words of an item's video (items.subtitles), which the text signal reads.

Revision ID: 0018
Revises: 0017
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("items", sa.Column("subtitles", sa.Text(), nullable=True))


def downgrade() -> None:
    # Plain ALTER TABLE, also on SQLite (3.35 on): a batch would copy `items` into a new
    # table and drop the old one, and with foreign keys on, that drop cascades to every
    # signature, asset and pair.
    op.execute("ALTER TABLE items DROP COLUMN subtitles")
