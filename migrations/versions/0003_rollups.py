"""hourly rollups of requests (heat map bins, value buckets) and the hours they miss

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

TSZ = sa.DateTime(timezone=True)


def _dims() -> list[sa.Column]:
    return [
        sa.Column("hour", TSZ, nullable=False),
        sa.Column("model", sa.String, nullable=False),
        sa.Column("engine", sa.String),
        sa.Column("gateway", sa.String, nullable=False),
        sa.Column("tenant", sa.String),
        sa.Column("status", sa.String, nullable=False),
    ]


def upgrade() -> None:
    op.create_table(
        "rollup_shapes",
        *_dims(),
        sa.Column("ib", sa.SmallInteger, nullable=False),
        sa.Column("ob", sa.SmallInteger, nullable=False),
        sa.Column("n", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "rollup_values",
        *_dims(),
        sa.Column("measure", sa.SmallInteger, nullable=False),
        sa.Column("b", sa.SmallInteger, nullable=False),
        sa.Column("n", sa.BigInteger, nullable=False),
        sa.Column("vmax", sa.Double, nullable=False),
        sa.Column("vsum", sa.Double, nullable=False),
    )
    op.create_table(
        "rollup_dirty",
        sa.Column("hour", TSZ, nullable=False),
        sa.Column("marked_at", TSZ, nullable=False),
    )
    # Every hour already stored is dirty: the server rebuilds them in the background (the
    # mover's thread, 24 hours per step), and until then those hours are read raw.
    op.execute(
        "INSERT INTO rollup_dirty SELECT DISTINCT "
        "date_trunc('hour', started_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', "
        "TIMESTAMPTZ '2000-01-01 00:00:00+00' FROM requests"
    )


def downgrade() -> None:
    for table in ("rollup_dirty", "rollup_values", "rollup_shapes"):
        op.drop_table(table)
