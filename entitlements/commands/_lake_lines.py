"""The lake's own failures as one line, read past the line a part gave them (`entitlements.cli`'s
`describe_error` and the audit commands, which print their refusals themselves)."""

from __future__ import annotations

__all__ = ["lake_line"]

import re
from pathlib import Path


def _chain(error: BaseException) -> list[BaseException]:
    """`error` and what it was raised from or during (`raise ... from None` keeps the context)."""
    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


# A lake's data file that DuckDB could not read, as DuckDB names it: `... file '/lake/changes/x.parquet'`.
_DATA_FILE = re.compile(r"'([^'\n]+\.parquet)'")
_LAKE_SCHEMES = ("s3://",)
# Where `entitlements demo` keeps its lake by default (its --state-dir, var/demo, and the lake in it).
_DEMO_LAKE = Path("var/demo/lake")


def lake_line(error: BaseException) -> str | None:
    """The lake's own failures, read past the line a part gave them: a root of a kind the lake cannot
    be kept on; a table needing a newer Delta reader (never 'check the endpoint' for a folder); a data
    file DuckDB cannot read, named by its path (lake paths hold dates and file ids, no record data).
    The third-party text is matched, never shown."""
    chain = _chain(error)
    root = next((str(e.root) for e in chain if _is_lake_error(e) and hasattr(e, "root")), None)
    if root is not None and "://" in root and not root.startswith(_LAKE_SCHEMES):
        scheme = root.split("://", 1)[0]
        return (
            f"ENTITLEMENTS_LAKE__ROOT: a {scheme}:// lake is not supported: give a folder or "
            "s3://bucket/prefix"
        )
    missing = next((e for e in chain if type(e).__name__ == "LakeMissing"), None)
    if missing is not None and root is not None and _DEMO_LAKE.is_dir():
        demo = _DEMO_LAKE.resolve()
        if "://" not in root and Path(root).resolve() != demo:
            return f"{missing} (the demo's lake is {demo}: export ENTITLEMENTS_LAKE__ROOT={demo} to read it)"
    for cause in chain:
        kind = type(cause).__name__
        if kind == "DeltaError" and "Unsupported" in str(cause):
            where = f" at {root}" if root is not None else ""
            return (
                f"the lake{where} has a table written with a Delta protocol or feature this reader does "
                "not support (DeltaError: Unsupported): read it with the deltalake version that wrote "
                "it, or upgrade the pinned deltalake in pyproject.toml"
            )
        if type(cause).__module__.split(".")[0] in ("duckdb", "_duckdb"):
            damaged = _DATA_FILE.search(str(cause))
            if damaged is not None:
                return (
                    f"the lake file {damaged.group(1)} cannot be read ({kind}: damaged or truncated): "
                    "restore it from a copy (`entitlements lake files` lists each table's files)"
                )
    return None


def _is_lake_error(error: BaseException) -> bool:
    return type(error).__module__.startswith("analytics.")
