"""Pages: the site each counts for, so that a site's earlier pages are found again when
its side matter starts to recur (signals/dom.py).

Pages stored before this revision have no site: they keep the main text they have.

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ALTER TABLE, also on SQLite: a batch would copy `items` into a new table, and
    # dropping the old one takes the rows that cascade from it (signatures, pairs) along.
    op.add_column("items", sa.Column("page_site", sa.String(length=255), nullable=True))
    op.create_index("ix_items_page_site", "items", ["page_site", "pk"])


def downgrade() -> None:
    op.drop_index("ix_items_page_site", table_name="items")
    op.execute("ALTER TABLE items DROP COLUMN page_site")
