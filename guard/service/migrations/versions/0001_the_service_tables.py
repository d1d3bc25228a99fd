"""The service tables: deliveries, jobs, runs, samples, verdicts, main points, change points, posted comments.

Revision ID: 0001
Revises: (none)
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('change_points',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('repo', sa.String(length=200), nullable=False),
    sa.Column('workload', sa.String(length=300), nullable=False),
    sa.Column('batch_size', sa.Integer(), nullable=False),
    sa.Column('gpu_class', sa.String(length=300), nullable=False),
    sa.Column('before_sha', sa.String(length=64), nullable=False),
    sa.Column('after_sha', sa.String(length=64), nullable=False),
    sa.Column('before_order', sa.Integer(), nullable=False),
    sa.Column('after_order', sa.Integer(), nullable=False),
    sa.Column('before_ms', sa.Float(), nullable=False),
    sa.Column('after_ms', sa.Float(), nullable=False),
    sa.Column('change_pct', sa.Float(), nullable=False),
    sa.Column('direction', sa.String(length=8), nullable=False),
    sa.Column('p_value', sa.Float(), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('confirmation', sa.JSON(), nullable=True),
    sa.Column('created_s', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('change_points', schema=None) as batch_op:
        batch_op.create_index('ix_change_points_series', ['repo', 'workload', 'batch_size', 'gpu_class'], unique=False)

    op.create_table('deliveries',
    sa.Column('id', sa.String(length=64), nullable=False),
    sa.Column('event', sa.String(length=64), nullable=False),
    sa.Column('action', sa.String(length=64), nullable=True),
    sa.Column('repo', sa.String(length=200), nullable=True),
    sa.Column('received_s', sa.Float(), nullable=False),
    sa.Column('outcome', sa.String(length=16), nullable=False),
    sa.Column('reason', sa.String(length=300), nullable=True),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_table('jobs',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('delivery', sa.String(length=64), nullable=True),
    sa.Column('kind', sa.String(length=32), nullable=False),
    sa.Column('repo', sa.String(length=200), nullable=False),
    sa.Column('pr', sa.Integer(), nullable=True),
    sa.Column('base_sha', sa.String(length=64), nullable=True),
    sa.Column('head_sha', sa.String(length=64), nullable=True),
    sa.Column('clone_url', sa.Text(), nullable=True),
    sa.Column('sender', sa.String(length=100), nullable=True),
    sa.Column('installation_id', sa.BigInteger(), nullable=True),
    sa.Column('detail', sa.JSON(), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('lease_owner', sa.String(length=100), nullable=True),
    sa.Column('lease_expires_s', sa.Float(), nullable=True),
    sa.Column('created_s', sa.Float(), nullable=False),
    sa.Column('started_s', sa.Float(), nullable=True),
    sa.Column('finished_s', sa.Float(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('run_id', sa.Integer(), nullable=True),
    sa.ForeignKeyConstraint(['delivery'], ['deliveries.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('delivery')
    )
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_jobs_head_sha'), ['head_sha'], unique=False)
        batch_op.create_index(batch_op.f('ix_jobs_repo'), ['repo'], unique=False)
        batch_op.create_index(batch_op.f('ix_jobs_state'), ['state'], unique=False)

    op.create_table('posted_comments',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('job_id', sa.Integer(), nullable=False),
    sa.Column('repo', sa.String(length=200), nullable=False),
    sa.Column('pr', sa.Integer(), nullable=True),
    sa.Column('comment_id', sa.BigInteger(), nullable=True),
    sa.Column('url', sa.Text(), nullable=True),
    sa.Column('check_run_id', sa.BigInteger(), nullable=True),
    sa.Column('created_s', sa.Float(), nullable=False),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('job_id', name='uq_posted_comments_job')
    )
    op.create_table('runs',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('job_id', sa.Integer(), nullable=True),
    sa.Column('source', sa.String(length=16), nullable=False),
    sa.Column('repo', sa.String(length=200), nullable=False),
    sa.Column('pr', sa.Integer(), nullable=True),
    sa.Column('base_sha', sa.String(length=64), nullable=False),
    sa.Column('head_sha', sa.String(length=64), nullable=False),
    sa.Column('verdict', sa.String(length=16), nullable=False),
    sa.Column('workload', sa.String(length=300), nullable=False),
    sa.Column('gpu_class', sa.String(length=300), nullable=False),
    sa.Column('report_json', sa.Text(), nullable=False),
    sa.Column('out_dir', sa.Text(), nullable=True),
    sa.Column('created_s', sa.Float(), nullable=False),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_runs_head_sha'), ['head_sha'], unique=False)
        batch_op.create_index(batch_op.f('ix_runs_repo'), ['repo'], unique=False)

    op.create_table('main_points',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('repo', sa.String(length=200), nullable=False),
    sa.Column('workload', sa.String(length=300), nullable=False),
    sa.Column('batch_size', sa.Integer(), nullable=False),
    sa.Column('gpu_class', sa.String(length=300), nullable=False),
    sa.Column('sha', sa.String(length=64), nullable=False),
    sa.Column('commit_order', sa.Integer(), nullable=True),
    sa.Column('subject', sa.Text(), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('gpu_ms_per_step', sa.Float(), nullable=False),
    sa.Column('gpu_ms_values', sa.JSON(), nullable=False),
    sa.Column('tok_per_s', sa.Float(), nullable=True),
    sa.Column('gpu_timed', sa.Boolean(), nullable=False),
    sa.Column('created_s', sa.Float(), nullable=False),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('main_points', schema=None) as batch_op:
        batch_op.create_index('ix_main_points_series', ['repo', 'workload', 'batch_size', 'gpu_class'], unique=False)

    op.create_table('samples',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('arm', sa.String(length=100), nullable=False),
    sa.Column('batch_size', sa.Integer(), nullable=False),
    sa.Column('repeat', sa.Integer(), nullable=False),
    sa.Column('gpu_ms_per_step', sa.Float(), nullable=False),
    sa.Column('tok_per_s', sa.Float(), nullable=True),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('samples', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_samples_run_id'), ['run_id'], unique=False)

    op.create_table('verdicts',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('batch_size', sa.Integer(), nullable=False),
    sa.Column('verdict', sa.String(length=16), nullable=False),
    sa.Column('gpu_ms_change_pct', sa.Float(), nullable=True),
    sa.Column('tok_per_s_change_pct', sa.Float(), nullable=True),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('verdicts', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_verdicts_run_id'), ['run_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('verdicts', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_verdicts_run_id'))

    op.drop_table('verdicts')
    with op.batch_alter_table('samples', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_samples_run_id'))

    op.drop_table('samples')
    with op.batch_alter_table('main_points', schema=None) as batch_op:
        batch_op.drop_index('ix_main_points_series')

    op.drop_table('main_points')
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_runs_repo'))
        batch_op.drop_index(batch_op.f('ix_runs_head_sha'))

    op.drop_table('runs')
    op.drop_table('posted_comments')
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_jobs_state'))
        batch_op.drop_index(batch_op.f('ix_jobs_repo'))
        batch_op.drop_index(batch_op.f('ix_jobs_head_sha'))

    op.drop_table('jobs')
    op.drop_table('deliveries')
    with op.batch_alter_table('change_points', schema=None) as batch_op:
        batch_op.drop_index('ix_change_points_series')

    op.drop_table('change_points')
