"""sampled telemetry: each request's sample rate, and weighted counts in the hourly rollups

A request kept with probability p stands for 1/p requests. `requests.sample_rate` holds p
(NULL means 1: every row stored before this revision, and every record sent without one).
Each rollup gains `w`, the sum of 1/p over its rows beside the row count `n`; the rollups'
sums (vsum, sx, sy, sxy, sxx) become weighted sums, which rows of weight 1 leave unchanged.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

ROLLUPS = ("rollup_shapes", "rollup_values", "rollup_gaps", "rollup_ttft")


def upgrade() -> None:
    # ADD COLUMN appends: sample_rate is the last column of `requests`, as the writer's Arrow
    # tables have it.
    op.execute("ALTER TABLE requests ADD COLUMN sample_rate DOUBLE")
    for table in ROLLUPS:
        # Every row rolled up so far weighs 1, so its weighted count is its count; the rollups
        # stay exact and need no rebuild.
        op.execute(f"ALTER TABLE {table} ADD COLUMN w DOUBLE NOT NULL DEFAULT 0")
        op.execute(f"UPDATE {table} SET w = n")


def downgrade() -> None:
    for table in ROLLUPS:
        op.execute(f"ALTER TABLE {table} DROP COLUMN w")
    op.execute("ALTER TABLE requests DROP COLUMN sample_rate")
