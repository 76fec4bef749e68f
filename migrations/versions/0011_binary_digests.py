"""An item's three SHA-256 digests (text hash, content key, fingerprint) are stored as their
32 bytes, not as 64 hexadecimal characters: 96 bytes an item less, about a twentieth of
what a text item costs the store beyond its text. The code still holds them as hex strings
(schema.Digest converts). PostgreSQL declares them bytea; SQLite keeps their declaration
and holds BLOBs under it (schema.Digest says why).

A value that is not hexadecimal (none is written, but a store may have been edited by
hand) becomes the SHA-256 of its text, so the migration never stops half-way.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import hashlib

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

COLUMNS = ("text_hash", "content_key", "fingerprint")


def _unhex(value: str | bytes | None) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        if len(value) == 32:
            return value  # (a digest's bytes already)
        value = value.decode("utf-8", "replace")
    try:
        return bytes.fromhex(value)
    except ValueError:
        return hashlib.sha256(value.encode()).digest()


def upgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name == "postgresql":
        for name in COLUMNS:
            op.execute(f"ALTER TABLE items ALTER COLUMN {name} TYPE bytea USING CASE "
                       f"WHEN {name} ~ '^([0-9a-fA-F]{{2}})*$' THEN decode({name}, 'hex') "
                       f"ELSE sha256(convert_to({name}, 'UTF8')) END")
        return
    conn.connection.driver_connection.create_function("mmdedup_unhex", 1, _unhex, deterministic=True)
    # (SQLite: the declared type stays, see schema.Digest; the values become BLOBs)
    op.execute("UPDATE items SET " + ", ".join(f"{name} = mmdedup_unhex({name})" for name in COLUMNS))


def downgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name == "postgresql":
        for name in COLUMNS:
            op.execute(f"ALTER TABLE items ALTER COLUMN {name} TYPE varchar(64) USING encode({name}, 'hex')")
        return
    op.execute("UPDATE items SET " + ", ".join(  # (hex(NULL) is '')
        f"{name} = CASE WHEN {name} IS NULL THEN NULL ELSE lower(hex({name})) END" for name in COLUMNS))
