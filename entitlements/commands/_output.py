"""`--output PATH` of the commands that write a result or a report to a file (`sql`, `snapshot --as-of`,
`mine`, `audit`, `audit-failures`): one check, made before the lake is read.

A file's suffix says its format when `--format` is not given; a suffix no format of the command writes
(`y.xlsx` would get a text table) or one that is another format's (`--format csv --output x.json`) is
refused, and so is an existing file unless `--force`: one line, exit 2, nothing written. The file is then
opened for exclusive creation, so that a file made meanwhile is still never overwritten without `--force`.
"""

from __future__ import annotations

__all__ = [
    "AUDIT",
    "AUDIT_FAILURES",
    "MINE",
    "SNAPSHOT",
    "SQL",
    "OutputRefused",
    "Outputs",
    "open_output",
    "refuse_existing",
]

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import IO, Any, Literal, TypeVar, overload

from schema.errors import TerminalError

_F = TypeVar("_F", bound=StrEnum)


class OutputRefused(TerminalError):
    """An --output the command will not write: a suffix that is not the format's, or an existing file."""


def refuse_existing(output: Path, *, force: bool) -> None:
    """An existing file (or a dangling link, which a write would follow) is kept unless --force."""
    if (output.exists() or output.is_symlink()) and not force:
        raise OutputRefused(f"--output {output} exists: name a new file, or add --force to overwrite it")


@dataclass(frozen=True)
class Outputs:
    """What one command writes to a file: each of its formats (by value) and the suffixes a file of that
    format may have, in the order a refusal names them."""

    command: str
    suffixes: Mapping[str, tuple[str, ...]]

    def _listed(self, fmt: str | None) -> str:
        names = list(self.suffixes[fmt]) if fmt else [s for of in self.suffixes.values() for s in of]
        return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"

    def checked(self, output: Path, fmt: str | None = None, *, force: bool) -> str:
        """The format `output` is written in (`fmt`, else its suffix's), or OutputRefused."""
        suffix = output.suffix.lower()
        by_suffix = {s: of for of, names in self.suffixes.items() for s in names}
        chosen = fmt or by_suffix.get(suffix)
        if chosen is None or suffix not in self.suffixes[chosen]:
            writer = f"--format {fmt}" if fmt else self.command
            raise OutputRefused(
                f"--output {output}: the suffix {suffix or '(none)'} is not what {writer} writes: "
                f"name a {self._listed(chosen)} file"
            )
        refuse_existing(output, force=force)
        return chosen

    def format_for(self, output: Path | None, fmt: _F | None, default: _F, *, force: bool) -> _F:
        """The format to write: `fmt` when given, else `output`'s suffix's, else (stdout) `default`."""
        if output is None:
            return fmt or default
        return type(default)(self.checked(output, fmt.value if fmt else None, force=force))


SQL = Outputs(
    "sql", {"csv": (".csv",), "json": (".json",), "parquet": (".parquet", ".pq"), "table": (".txt",)}
)
SNAPSHOT = Outputs("snapshot --as-of", {"parquet": (".parquet", ".pq")})
MINE = Outputs(
    "mine",
    {
        "table": (".txt",),
        "markdown": (".md", ".markdown"),
        "json": (".json",),
        "csv": (".csv",),
        "html": (".html", ".htm"),
    },
)
AUDIT = Outputs(
    "audit",
    {"markdown": (".md", ".markdown"), "json": (".json",), "html": (".html", ".htm"), "junit": (".xml",)},
)
# JSON lines: one stored row an object, not one JSON document (a .json file would not parse as one).
AUDIT_FAILURES = Outputs("audit-failures", {"jsonl": (".jsonl", ".ndjson")})


@overload
def open_output(output: Path, *, force: bool, binary: Literal[False] = ...) -> IO[str]: ...
@overload
def open_output(output: Path, *, force: bool, binary: Literal[True]) -> IO[bytes]: ...
def open_output(output: Path, *, force: bool, binary: bool = False) -> IO[Any]:
    """The output file, created (never replaced without --force, even if made after the check)."""
    mode = ("w" if force else "x") + ("b" if binary else "")
    try:
        if binary:
            return open(output, mode)
        return open(output, mode, encoding="utf-8", newline="")
    except FileExistsError:
        raise OutputRefused(
            f"--output {output} exists: name a new file, or add --force to overwrite it"
        ) from None
