"""The floor where storage, analytics and sizing meet: API, pages, CLI and email use it for
profiles, rightsizing, credentials, backups and counts (lint-imports keeps them off storage)."""
