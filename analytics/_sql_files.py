"""The SQL files that define the audits' checks and the mining reports: one SELECT each, its metadata
in the leading `--` comment lines (`-- key: value` for the keys a caller's pattern knows, any other
comment line is the description), loaded from a directory in a fixed listing order.

Files whose names start with `_` are not definitions (shared views, parameters for the DuckDB CLI).
"""

from __future__ import annotations

__all__ = ["SqlHeader", "definition_files", "in_listing_order", "read_header"]

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar


class _Named(Protocol):
    @property
    def name(self) -> str: ...


_N = TypeVar("_N", bound=_Named)


@dataclass(frozen=True, slots=True)
class SqlHeader:
    text: str  # the whole file, header included
    fields: dict[str, str]  # key -> value, for the header lines `pattern` matches
    description: str  # the other header comment lines, joined by spaces
    # Every header line in order: (key, value) for those `pattern` matches, (None, text) for the others.
    # For a file whose keys repeat or whose description has parts (an audit file of both scopes).
    lines: tuple[tuple[str | None, str], ...]


def read_header(path: Path, pattern: re.Pattern[str]) -> SqlHeader:
    """Read `path` and split its leading comment lines: those `pattern` matches (group 1 the key, group 2
    the value) are fields, the others the description. The header ends at the first non-comment line."""
    text = path.read_text(encoding="utf-8")
    fields: dict[str, str] = {}
    description: list[str] = []
    lines: list[tuple[str | None, str]] = []
    for line in text.splitlines():
        if not line.startswith("--"):
            break
        match = pattern.match(line)
        if match:
            fields[match.group(1)] = match.group(2)
            lines.append((match.group(1), match.group(2)))
        else:
            description.append(line[2:].strip())
            lines.append((None, line[2:].strip()))
    return SqlHeader(
        text=text,
        fields=fields,
        description=" ".join(part for part in description if part),
        lines=tuple(lines),
    )


def definition_files(directory: Path) -> list[Path]:
    """The directory's *.sql files that define something (not `_`-prefixed), sorted by name."""
    return [p for p in sorted(directory.glob("*.sql")) if not p.name.startswith("_")]


def in_listing_order(items: Iterable[_N], order: tuple[str, ...]) -> tuple[_N, ...]:
    """`items` in the order their names take in `order`; names not in it after those, by name."""
    rank = {name: index for index, name in enumerate(order)}
    return tuple(sorted(items, key=lambda item: (rank.get(item.name, len(rank)), item.name)))
