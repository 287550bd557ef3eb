"""The DuckDB views over the lake, one statement per numbered file (see all.sql for the CLI)."""

__all__: list[str] = []
