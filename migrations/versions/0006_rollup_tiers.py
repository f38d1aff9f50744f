"""rollup tiers: hourly without tenant and daily, beside the hourly rollups at full grain, and
the hours the rollups hold (their source and which tiers still hold them)

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

TSZ = sa.DateTime(timezone=True)
KINDS = ("shapes", "values", "gaps", "ttft")


def _dims() -> list[sa.Column]:
    return [
        sa.Column("hour", TSZ, nullable=False),
        sa.Column("model", sa.String, nullable=False),
        sa.Column("engine", sa.String),
        sa.Column("gateway", sa.String, nullable=False),
        sa.Column("status", sa.String, nullable=False),
    ]


def _columns(kind: str) -> list[sa.Column]:
    def small(name: str) -> sa.Column:
        return sa.Column(name, sa.SmallInteger, nullable=False)

    def double(name: str) -> sa.Column:
        return sa.Column(name, sa.Double, nullable=False)

    n = sa.Column("n", sa.BigInteger, nullable=False)
    if kind == "shapes":
        return [small("ib"), small("ob"), n, double("w")]
    if kind == "values":
        return [small("measure"), small("b"), n, double("vmax"), double("vsum"), double("w")]
    if kind == "gaps":
        return [small("pb"), small("b"), n, double("vmax"), double("w")]
    return [
        small("ib"),
        small("b"),
        n,
        *(double(c) for c in ("vmax", "sx", "sy", "sxy", "sxx", "w")),
    ]


def upgrade() -> None:
    for prefix in ("rollup_nt_", "rollup_day_"):
        for kind in KINDS:
            op.create_table(f"{prefix}{kind}", *_dims(), *_columns(kind))
    op.create_table(
        "rollup_hours",
        sa.Column("hour", TSZ, primary_key=True),
        sa.Column("day", TSZ, nullable=False),
        sa.Column("source", sa.String, nullable=False),
        sa.Column("origin", sa.String),
        sa.Column("in_full", sa.Boolean, nullable=False),
        sa.Column("in_nt", sa.Boolean, nullable=False),
        sa.Column("in_day", sa.Boolean, nullable=False),
        sa.Column("built_at", TSZ, nullable=False),
    )
    # The new tiers are built from the hourly rollups already there, so nothing needs a
    # rebuild; hours stored before this revision get UTC days (later ones: TOKENSHAPE_TZ's).
    op.execute(
        "INSERT INTO rollup_hours SELECT DISTINCT hour, date_trunc('day', hour AT TIME ZONE 'UTC') "
        "AT TIME ZONE 'UTC', 'raw', NULL, true, true, true, get_current_timestamp() "
        "FROM rollup_shapes"
    )
    for kind in KINDS:
        cols = [c.name for c in _columns(kind)]
        keys = [c for c in cols if c in ("ib", "ob", "measure", "pb", "b")]
        aggs = ", ".join(
            c if c in keys else f"max({c})" if c == "vmax" else f"sum({c})" for c in cols
        )
        for prefix, time in (
            ("rollup_nt_", "hour"),
            ("rollup_day_", "date_trunc('day', hour AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'"),
        ):
            op.execute(
                f"INSERT INTO {prefix}{kind} SELECT {time} AS hour, model, engine, gateway, "
                f"status, {aggs} FROM rollup_{kind} GROUP BY ALL"
            )


def downgrade() -> None:
    op.drop_table("rollup_hours")
    for prefix in ("rollup_nt_", "rollup_day_"):
        for kind in KINDS:
            op.drop_table(f"{prefix}{kind}")
