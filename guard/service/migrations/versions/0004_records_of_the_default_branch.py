"""Runs that hold the record of one default-branch commit (source `record`): no base and no
verdict, and one per upload key (its repository, commit and series).

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('upload_key', sa.String(length=64), nullable=True))
        batch_op.alter_column('base_sha', existing_type=sa.VARCHAR(length=64), nullable=True)
        batch_op.alter_column('verdict', existing_type=sa.VARCHAR(length=16), nullable=True)
        batch_op.create_unique_constraint('uq_runs_upload_key', ['upload_key'])


def downgrade() -> None:
    # the records' runs have no base and no verdict, which the older schema requires: they go, with their rows
    records = "SELECT id FROM runs WHERE source = 'record'"
    op.execute(f"DELETE FROM main_points WHERE run_id IN ({records})")
    op.execute(f"DELETE FROM samples WHERE run_id IN ({records})")
    op.execute(f"DELETE FROM verdicts WHERE run_id IN ({records})")
    op.execute("DELETE FROM runs WHERE source = 'record'")
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_constraint('uq_runs_upload_key', type_='unique')
        batch_op.alter_column('verdict', existing_type=sa.VARCHAR(length=16), nullable=False)
        batch_op.alter_column('base_sha', existing_type=sa.VARCHAR(length=64), nullable=False)
        batch_op.drop_column('upload_key')
