"""Bisects of confirmed slowdowns that span more than one commit (one per pair of commits).

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('bisects',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('repo', sa.String(length=200), nullable=False),
    sa.Column('before_sha', sa.String(length=64), nullable=False),
    sa.Column('after_sha', sa.String(length=64), nullable=False),
    sa.Column('change_points', sa.JSON(), nullable=False),
    sa.Column('workload', sa.String(length=300), nullable=False),
    sa.Column('batch_sizes', sa.JSON(), nullable=False),
    sa.Column('job_id', sa.Integer(), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('steps', sa.JSON(), nullable=False),
    sa.Column('result', sa.JSON(), nullable=True),
    sa.Column('first_bad_sha', sa.String(length=64), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('created_s', sa.Float(), nullable=False),
    sa.Column('finished_s', sa.Float(), nullable=True),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('repo', 'before_sha', 'after_sha', name='uq_bisects_pair')
    )
    with op.batch_alter_table('bisects', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_bisects_job_id'), ['job_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_bisects_repo'), ['repo'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('bisects', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_bisects_repo'))
        batch_op.drop_index(batch_op.f('ix_bisects_job_id'))

    op.drop_table('bisects')
