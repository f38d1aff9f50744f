"""hourly rollups for the latency views: inter-token gaps by output-token position, TTFT by
input length

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
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
        "rollup_gaps",
        *_dims(),
        sa.Column("pb", sa.SmallInteger, nullable=False),
        sa.Column("b", sa.SmallInteger, nullable=False),
        sa.Column("n", sa.BigInteger, nullable=False),
        sa.Column("vmax", sa.Double, nullable=False),
    )
    op.create_table(
        "rollup_ttft",
        *_dims(),
        sa.Column("ib", sa.SmallInteger, nullable=False),
        sa.Column("b", sa.SmallInteger, nullable=False),
        sa.Column("n", sa.BigInteger, nullable=False),
        sa.Column("vmax", sa.Double, nullable=False),
        sa.Column("sx", sa.Double, nullable=False),
        sa.Column("sy", sa.Double, nullable=False),
        sa.Column("sxy", sa.Double, nullable=False),
        sa.Column("sxx", sa.Double, nullable=False),
    )
    # Every stored hour is rebuilt in the background (all four rollups of each, 24 hours per
    # step); until then those hours are read raw.
    op.execute(
        "INSERT INTO rollup_dirty SELECT DISTINCT "
        "date_trunc('hour', started_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', "
        "TIMESTAMPTZ '2000-01-01 00:00:00+00' FROM requests"
    )


def downgrade() -> None:
    op.drop_table("rollup_ttft")
    op.drop_table("rollup_gaps")
