"""DuckDB connections that never reach the network on their own."""

from __future__ import annotations

import duckdb

# Nothing at run time reaches the network unless configured: DuckDB would otherwise download
# and load extensions by itself (a SQLite or Parquet header makes it fetch a scanner). The
# lake's httpfs is loaded explicitly, and only when installed (app/storage/lake.use_remote).
OFFLINE = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}


def connect(path: str = ":memory:", *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection that never installs or auto-loads an extension."""
    return duckdb.connect(path, read_only=read_only, config=dict(OFFLINE))
