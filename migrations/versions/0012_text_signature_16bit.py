"""Text signatures keep 16 bits of each MinHash position, not 32 (extract/text_sketches.py,
`stored_values`): 520 bytes a text instead of 1,032, about a quarter of what a text item
costs the store beyond its text.

The 16-bit value is a function of the 32-bit one (the value modulo 0xFFFF, 0xFFFF for an
empty position), so every stored text signature is converted in place, exactly what
signing the text again would give, without reading or tokenising a text; the version of
those signatures, and of a refresh's signer being tidied, gains the "b16" that names the
new layout. The files of the text indexes are stamped with the old version and are
rebuilt from the store when next opened.

Downgrading leaves the converted signatures under their new version: the older code finds
no signature of its own version and signs every text again before its next ingest
(`TextSignal.catch_up`).

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import numpy as np
import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

KINDS = ("text", "text:next")  # the text signal's two signature slots (signals/text_refresh.py)
MARK = "|b16"  # the last part of a text signature's version from now on
OLD_BYTES = 8 + 4 * 128 * 2  # a SimHash and two MinHashes of 128 positions, 32 bits each
EMPTY = 0xFFFFFFFF
BATCH = 5_000


def narrow(value: bytes) -> bytes:
    """A 32-bit text signature as its 16-bit form (extract/text_sketches.py as written)."""
    sig = np.frombuffer(value, np.uint8)[8:].view(np.uint32)
    out = (sig % np.uint32(0xFFFF)).astype(np.uint16)
    out[sig == EMPTY] = 0xFFFF
    return bytes(value[:8]) + out.tobytes()


def upgrade() -> None:
    conn = op.get_bind()
    versions = sa.table("signature_versions", sa.column("id", sa.Integer), sa.column("kind", sa.String),
                        sa.column("version", sa.String))
    signatures = sa.table("signatures", sa.column("item_pk", sa.BigInteger), sa.column("kind", sa.String),
                          sa.column("version_id", sa.Integer), sa.column("value", sa.LargeBinary))
    models = sa.table("model_versions", sa.column("pk", sa.Integer), sa.column("kind", sa.String),
                      sa.column("params", sa.JSON))
    ids = [vid for vid, version in conn.execute(
        sa.select(versions.c.id, versions.c.version).where(versions.c.kind.in_(KINDS))) if not version.endswith(MARK)]
    for vid in ids:
        conn.execute(versions.update().where(versions.c.id == vid).values(version=versions.c.version + MARK))
    for kind in KINDS:
        last = -1
        while ids:
            # (in key order, the versions picked here: a version filter in SQL would read
            # every row of those versions through their index, and sort them, each batch)
            rows = conn.execute(sa.select(signatures.c.item_pk, signatures.c.version_id, signatures.c.value)
                                .where(signatures.c.kind == kind, signatures.c.item_pk > last)
                                .order_by(signatures.c.item_pk).limit(BATCH)).all()
            if not rows:
                break
            last = rows[-1][0]
            changed = [{"b_pk": pk, "b_value": narrow(value)} for pk, vid, value in rows
                       if vid in ids and len(value) == OLD_BYTES]
            if changed:
                conn.execute(signatures.update()
                             .where(signatures.c.item_pk == sa.bindparam("b_pk"), signatures.c.kind == kind)
                             .values(value=sa.bindparam("b_value")), changed)
    # A refresh being tidied names the signer of the signatures it moves into place.
    for pk, params in conn.execute(sa.select(models.c.pk, models.c.params).where(models.c.kind == "tfidf-pending")):
        signer = (params or {}).get("signer")
        if signer and not signer.endswith(MARK):
            conn.execute(models.update().where(models.c.pk == pk).values(params={**params, "signer": signer + MARK}))


def downgrade() -> None:
    pass  # (see the module docstring)
