"""users, sessions and server keys: dashboard logins with roles

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

TSZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("name", sa.String, primary_key=True),
        sa.Column("password_hash", sa.String, nullable=False),
        sa.Column("role", sa.String, nullable=False),
        sa.Column("created_at", TSZ, nullable=False),
        sa.Column("last_login_at", TSZ),
    )
    op.create_table(
        "sessions",
        sa.Column("id_hash", sa.String, primary_key=True),
        sa.Column("user_name", sa.String, nullable=False),
        sa.Column("created_at", TSZ, nullable=False),
        sa.Column("expires_at", TSZ, nullable=False),
    )
    op.create_table(
        "server_keys",
        sa.Column("name", sa.String, primary_key=True),
        sa.Column("value", sa.String, nullable=False),
        sa.Column("created_at", TSZ, nullable=False),
    )


def downgrade() -> None:
    for table in ("server_keys", "sessions", "users"):
        op.drop_table(table)
