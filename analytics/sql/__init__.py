"""The DuckDB views over the lake, one statement per numbered file (`entitlements lake views` prints them
whole for the DuckDB CLI)."""

__all__: list[str] = []
