"""Initial schema: items, assets, signatures, pairs, labels, runs, failures, models, locks.

Revision ID: 0001
Revises: 
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('ingest_runs',
    sa.Column('pk', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('source', sa.Text(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('counts', sa.JSON(), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('pk', name=op.f('pk_ingest_runs'))
    )
    op.create_table('items',
    sa.Column('pk', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('id', sa.String(length=512), nullable=False),
    sa.Column('title', sa.Text(), nullable=True),
    sa.Column('text', sa.Text(), nullable=True),
    sa.Column('meta', sa.JSON(), nullable=False),
    sa.Column('text_hash', sa.String(length=64), nullable=True),
    sa.Column('content_key', sa.String(length=64), nullable=False),
    sa.Column('fingerprint', sa.String(length=64), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('source', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('pk', name=op.f('pk_items')),
    sa.UniqueConstraint('id', name=op.f('uq_items_id'))
    )
    with op.batch_alter_table('items', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_items_content_key'), ['content_key'], unique=False)
        batch_op.create_index(batch_op.f('ix_items_text_hash'), ['text_hash'], unique=False)

    op.create_table('job_locks',
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('holder', sa.String(length=255), nullable=False),
    sa.Column('acquired_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('name', name=op.f('pk_job_locks'))
    )
    op.create_table('model_versions',
    sa.Column('pk', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('kind', sa.String(length=32), nullable=False),
    sa.Column('version', sa.String(length=64), nullable=False),
    sa.Column('params', sa.JSON(), nullable=False),
    sa.Column('active', sa.Boolean(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('pk', name=op.f('pk_model_versions')),
    sa.UniqueConstraint('kind', 'version', name=op.f('uq_model_versions_kind'))
    )
    op.create_table('assets',
    sa.Column('pk', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('item_pk', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('role', sa.String(length=16), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('path', sa.Text(), nullable=False),
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.Column('size', sa.BigInteger(), nullable=False),
    sa.Column('media_type', sa.String(length=64), nullable=False),
    sa.ForeignKeyConstraint(['item_pk'], ['items.pk'], name=op.f('fk_assets_item_pk_items'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('pk', name=op.f('pk_assets')),
    sa.UniqueConstraint('item_pk', 'role', 'position', name=op.f('uq_assets_item_pk'))
    )
    with op.batch_alter_table('assets', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_assets_item_pk'), ['item_pk'], unique=False)
        batch_op.create_index(batch_op.f('ix_assets_sha256'), ['sha256'], unique=False)

    op.create_table('doc_freqs',
    sa.Column('model_pk', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('term_hash', sa.BigInteger(), nullable=False),
    sa.Column('df', sa.BigInteger(), nullable=False),
    sa.ForeignKeyConstraint(['model_pk'], ['model_versions.pk'], name=op.f('fk_doc_freqs_model_pk_model_versions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('model_pk', 'term_hash', name=op.f('pk_doc_freqs'))
    )
    op.create_table('failures',
    sa.Column('pk', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('run_pk', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('source', sa.Text(), nullable=False),
    sa.Column('key', sa.String(length=512), nullable=False),
    sa.Column('item_id', sa.String(length=512), nullable=True),
    sa.Column('reason', sa.String(length=32), nullable=False),
    sa.Column('detail', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('resolved_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['run_pk'], ['ingest_runs.pk'], name=op.f('fk_failures_run_pk_ingest_runs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('pk', name=op.f('pk_failures'))
    )
    with op.batch_alter_table('failures', schema=None) as batch_op:
        batch_op.create_index('ix_failures_open', ['source', 'key', 'resolved_at'], unique=False)

    op.create_table('labels',
    sa.Column('pk', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('a_pk', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('b_pk', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('decision', sa.String(length=16), nullable=False),
    sa.Column('reviewer', sa.String(length=128), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['a_pk'], ['items.pk'], name=op.f('fk_labels_a_pk_items'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['b_pk'], ['items.pk'], name=op.f('fk_labels_b_pk_items'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('pk', name=op.f('pk_labels'))
    )
    with op.batch_alter_table('labels', schema=None) as batch_op:
        batch_op.create_index('ix_labels_pair', ['a_pk', 'b_pk'], unique=False)

    op.create_table('pairs',
    sa.Column('a_pk', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('b_pk', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('score', sa.Float(), nullable=False),
    sa.Column('tier', sa.String(length=8), nullable=True),
    sa.Column('kind', sa.String(length=32), nullable=False),
    sa.Column('signals', sa.JSON(), nullable=False),
    sa.Column('model_version', sa.String(length=64), nullable=True),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['a_pk'], ['items.pk'], name=op.f('fk_pairs_a_pk_items'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['b_pk'], ['items.pk'], name=op.f('fk_pairs_b_pk_items'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('a_pk', 'b_pk', name=op.f('pk_pairs'))
    )
    with op.batch_alter_table('pairs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_pairs_b_pk'), ['b_pk'], unique=False)
        batch_op.create_index('ix_pairs_tier_score', ['tier', 'score'], unique=False)

    op.create_table('signatures',
    sa.Column('item_pk', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('kind', sa.String(length=64), nullable=False),
    sa.Column('version', sa.String(length=255), nullable=False),
    sa.Column('value', sa.LargeBinary(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['item_pk'], ['items.pk'], name=op.f('fk_signatures_item_pk_items'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('item_pk', 'kind', name=op.f('pk_signatures'))
    )
    op.create_table('word_weights',
    sa.Column('model_pk', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('word', sa.String(length=255), nullable=False),
    sa.Column('weight', sa.Float(), nullable=False),
    sa.ForeignKeyConstraint(['model_pk'], ['model_versions.pk'], name=op.f('fk_word_weights_model_pk_model_versions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('model_pk', 'word', name=op.f('pk_word_weights'))
    )


def downgrade() -> None:
    op.drop_table('word_weights')
    op.drop_table('signatures')
    with op.batch_alter_table('pairs', schema=None) as batch_op:
        batch_op.drop_index('ix_pairs_tier_score')
        batch_op.drop_index(batch_op.f('ix_pairs_b_pk'))

    op.drop_table('pairs')
    with op.batch_alter_table('labels', schema=None) as batch_op:
        batch_op.drop_index('ix_labels_pair')

    op.drop_table('labels')
    with op.batch_alter_table('failures', schema=None) as batch_op:
        batch_op.drop_index('ix_failures_open')

    op.drop_table('failures')
    op.drop_table('doc_freqs')
    with op.batch_alter_table('assets', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_assets_sha256'))
        batch_op.drop_index(batch_op.f('ix_assets_item_pk'))

    op.drop_table('assets')
    op.drop_table('model_versions')
    op.drop_table('job_locks')
    with op.batch_alter_table('items', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_items_text_hash'))
        batch_op.drop_index(batch_op.f('ix_items_content_key'))

    op.drop_table('items')
    op.drop_table('ingest_runs')
