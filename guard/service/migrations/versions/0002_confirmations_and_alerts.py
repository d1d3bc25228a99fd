"""Confirmations of change points (one paired run per candidate and round) and alerts (one per culprit).

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('alerts',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('dedupe_key', sa.String(length=300), nullable=False),
    sa.Column('repo', sa.String(length=200), nullable=False),
    sa.Column('culprit_sha', sa.String(length=64), nullable=False),
    sa.Column('pr_checked', sa.Boolean(), nullable=False),
    sa.Column('pr', sa.Integer(), nullable=True),
    sa.Column('listed', sa.JSON(), nullable=False),
    sa.Column('comment_id', sa.BigInteger(), nullable=True),
    sa.Column('comment_url', sa.Text(), nullable=True),
    sa.Column('issue_number', sa.Integer(), nullable=True),
    sa.Column('issue_url', sa.Text(), nullable=True),
    sa.Column('owner', sa.String(length=100), nullable=True),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('created_s', sa.Float(), nullable=False),
    sa.Column('posted_s', sa.Float(), nullable=True),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('dedupe_key')
    )
    with op.batch_alter_table('alerts', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_alerts_repo'), ['repo'], unique=False)

    op.create_table('confirmations',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('change_point', sa.String(length=16), nullable=False),
    sa.Column('repo', sa.String(length=200), nullable=False),
    sa.Column('workload', sa.String(length=300), nullable=False),
    sa.Column('batch_size', sa.Integer(), nullable=False),
    sa.Column('gpu_class', sa.String(length=300), nullable=False),
    sa.Column('before_sha', sa.String(length=64), nullable=False),
    sa.Column('after_sha', sa.String(length=64), nullable=False),
    sa.Column('round', sa.Integer(), nullable=False),
    sa.Column('job_id', sa.Integer(), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('confirmation', sa.JSON(), nullable=True),
    sa.Column('created_s', sa.Float(), nullable=False),
    sa.Column('decided_s', sa.Float(), nullable=True),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('change_point', 'before_sha', 'after_sha', 'round', name='uq_confirmations_round')
    )
    with op.batch_alter_table('confirmations', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_confirmations_job_id'), ['job_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_confirmations_repo'), ['repo'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('confirmations', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_confirmations_repo'))
        batch_op.drop_index(batch_op.f('ix_confirmations_job_id'))

    op.drop_table('confirmations')
    with op.batch_alter_table('alerts', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_alerts_repo'))

    op.drop_table('alerts')
