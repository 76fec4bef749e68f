"""Web pages: extracted main text and date on items, block frequencies per site.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("items") as batch_op:
        batch_op.add_column(sa.Column("page_text", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("page_date", sa.String(length=32), nullable=True))
    op.create_table(
        "web_sites",
        sa.Column("site", sa.String(length=255), nullable=False),
        sa.Column("pages", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("site", name=op.f("pk_web_sites")),
    )
    op.create_table(
        "web_blocks",
        sa.Column("site", sa.String(length=255), nullable=False),
        sa.Column("block_hash", sa.BigInteger(), nullable=False),
        sa.Column("pages", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("site", "block_hash", name=op.f("pk_web_blocks")),
    )


def downgrade() -> None:
    op.drop_table("web_blocks")
    op.drop_table("web_sites")
    with op.batch_alter_table("items") as batch_op:
        batch_op.drop_column("page_date")
        batch_op.drop_column("page_text")
