"""Everything that touches the DuckDB file: schema, migrations, connections, the writer, tokens."""
