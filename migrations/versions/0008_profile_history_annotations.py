"""profile history and annotations: every change of an engine profile as a version (who,
when, the JSON before and after, the change in words), so a deleted profile can be restored;
and the notes people add to the time charts ("deployed vLLM 0.33")

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-09
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

TSZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "profile_versions",
        sa.Column("engine", sa.String, primary_key=True),
        # 1, 2, … per engine: the order of its changes (times from a test clock can tie). Two
        # writers of one engine collide on the engines row or on this key, never both win.
        sa.Column("seq", sa.Integer, primary_key=True),
        sa.Column("changed_at", TSZ, nullable=False),
        sa.Column("author", sa.String, nullable=False),
        sa.Column("action", sa.String, nullable=False),  # create | edit | delete | restore
        sa.Column("before_json", sa.String),  # the profile's JSON before; NULL for a create
        sa.Column("after_json", sa.String),  # and after; NULL for a delete
        sa.Column("summary", sa.String, nullable=False),
    )
    op.create_table(
        "annotations",
        sa.Column("id", sa.String, primary_key=True),
        sa.Column("happened_at", TSZ, nullable=False),
        sa.Column("text", sa.String, nullable=False),
        sa.Column("engine", sa.String),  # NULL: about the whole fleet
        sa.Column("author", sa.String, nullable=False),
        sa.Column("created_at", TSZ, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("annotations")
    op.drop_table("profile_versions")
