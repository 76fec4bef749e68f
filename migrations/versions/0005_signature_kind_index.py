"""An index on signatures (kind, version, item_pk).

Loading or counting every signature of one kind and version (index rebuilds, the cache
stamps checked when a store opens, "is there any CLIP vector") scanned the whole table:
its primary key starts with the item. At 100,000 items that was about 15 ms a statement.
item_pk comes last so that the lookups of some items' signatures of one kind and version
(every pair scored) seek it too: with (kind, version) alone, SQLite's planner took the
shorter index and read every signature of the kind instead of the items asked for.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_signatures_kind_version", "signatures", ["kind", "version", "item_pk"])


def downgrade() -> None:
    op.drop_index("ix_signatures_kind_version", table_name="signatures")
