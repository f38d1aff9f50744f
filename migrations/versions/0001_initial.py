"""initial tables: requests, rejects, tokens, engines, report_runs

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TSZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "requests",
        sa.Column("gateway", sa.String, nullable=False),
        sa.Column("request_id", sa.String, nullable=False),
        sa.Column("started_at", TSZ, nullable=False),
        sa.Column("received_at", TSZ, nullable=False),
        sa.Column("model", sa.String, nullable=False),
        sa.Column("engine", sa.String),
        sa.Column("tenant", sa.String),
        sa.Column("isl", sa.Integer, nullable=False),
        sa.Column("osl", sa.Integer, nullable=False),
        sa.Column("tokens_estimated", sa.Boolean, nullable=False),
        sa.Column("ttft_ms", sa.Double),
        sa.Column("e2e_ms", sa.Double),
        sa.Column("itl_ms", sa.Double),
        sa.Column("queue_ms", sa.Double),
        sa.Column("token_gaps_ms", sa.ARRAY(sa.Double)),
        sa.Column("status", sa.String, nullable=False),
        sa.Column("error_type", sa.String),
        sa.Column("stream", sa.Boolean),
        sa.Column("cached_tokens", sa.Integer),
    )
    op.create_table(
        "rejects",
        sa.Column("received_at", TSZ, nullable=False),
        sa.Column("gateway", sa.String),
        sa.Column("format", sa.String, nullable=False),
        sa.Column("item_index", sa.Integer),
        sa.Column("field", sa.String),
        sa.Column("reason", sa.String, nullable=False),
        sa.Column("raw", sa.String),
    )
    op.create_table(
        "tokens",
        sa.Column("id", sa.String, primary_key=True),
        sa.Column("token_hash", sa.String, nullable=False, unique=True),
        sa.Column("display", sa.String, nullable=False),
        sa.Column("gateway", sa.String, nullable=False),
        sa.Column("scope", sa.String, nullable=False),
        sa.Column("created_at", TSZ, nullable=False),
        sa.Column("last_used_at", TSZ),
        sa.Column("revoked_at", TSZ),
    )
    op.create_table(
        "engines",
        sa.Column("name", sa.String, primary_key=True),
        sa.Column("model", sa.String),
        sa.Column("framework", sa.String),
        sa.Column("profile", sa.String, nullable=False),
        sa.Column("created_at", TSZ, nullable=False),
        sa.Column("updated_at", TSZ, nullable=False),
    )
    op.create_table(
        "report_runs",
        sa.Column("id", sa.String, primary_key=True),
        sa.Column("week", sa.String, nullable=False),
        sa.Column("engine", sa.String),
        sa.Column("recipients", sa.String, nullable=False),
        sa.Column("status", sa.String, nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("message_id", sa.String),
        sa.Column("error", sa.String),
        sa.Column("started_at", TSZ, nullable=False),
        sa.Column("finished_at", TSZ),
    )


def downgrade() -> None:
    for table in ("report_runs", "engines", "tokens", "rejects", "requests"):
        op.drop_table(table)
