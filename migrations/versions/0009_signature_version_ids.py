"""Signatures name their version by a small number (`signature_versions`), and lose
`created_at`.

A version string (tokenizer, sketch parameters, TF-IDF model...) runs to a few hundred
characters; stored in every signature row and in both indexes over (kind, version) it was
about a tenth of a store's bytes, and the indexes' pages were mostly copies of it. No
reader used `created_at`: the write number (`seq`) orders what was written. The two
indexes become one over (version_id, seq): every read names one version, and reads of
some items' signatures go by the primary key.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "signature_versions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("version", sa.String(length=255), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_signature_versions")),
        sa.UniqueConstraint("kind", "version", name=op.f("uq_signature_versions_kind")),
    )
    op.execute("INSERT INTO signature_versions (kind, version) "
               "SELECT DISTINCT kind, version FROM signatures ORDER BY kind, version")
    op.drop_index("ix_signatures_kind_version", table_name="signatures")
    op.drop_index("ix_signatures_kind_version_seq", table_name="signatures")
    op.add_column("signatures", sa.Column("version_id", sa.Integer(), nullable=True))
    op.execute("UPDATE signatures SET version_id = (SELECT v.id FROM signature_versions v "
               "WHERE v.kind = signatures.kind AND v.version = signatures.version)")
    with op.batch_alter_table("signatures") as batch:
        batch.drop_column("version")
        batch.drop_column("created_at")
        batch.alter_column("version_id", existing_type=sa.Integer(), nullable=False)
        batch.create_foreign_key(op.f("fk_signatures_version_id_signature_versions"),
                                 "signature_versions", ["version_id"], ["id"])
    op.create_index("ix_signatures_version_seq", "signatures", ["version_id", "seq"])


def downgrade() -> None:
    op.drop_index("ix_signatures_version_seq", table_name="signatures")
    op.add_column("signatures", sa.Column("version", sa.String(length=255), nullable=True))
    op.add_column("signatures", sa.Column("created_at", sa.DateTime(timezone=True), nullable=True))
    op.execute("UPDATE signatures SET version = (SELECT v.version FROM signature_versions v "
               "WHERE v.id = signatures.version_id), created_at = CURRENT_TIMESTAMP")
    with op.batch_alter_table("signatures") as batch:
        batch.drop_constraint(op.f("fk_signatures_version_id_signature_versions"), type_="foreignkey")
        batch.drop_column("version_id")
        batch.alter_column("version", existing_type=sa.String(length=255), nullable=False)
        batch.alter_column("created_at", existing_type=sa.DateTime(timezone=True), nullable=False)
    op.create_index("ix_signatures_kind_version", "signatures", ["kind", "version", "item_pk"])
    op.create_index("ix_signatures_kind_version_seq", "signatures", ["kind", "version", "seq"])
    op.drop_table("signature_versions")
