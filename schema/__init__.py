"""Contracts shared by every part of the project. Imports nothing else from the project.

Each contract is a public module of its own (`schema.table`, `schema.table_writes`, `schema.outcomes`,
`schema.clock`, `schema.errors`, `schema.aws_errors`, `schema.array`, `schema.erasure`): import its names
from there. The face is what every layer takes from `schema` itself: the one owner-only, atomic file write
(`schema._files`), which sits here because `schema` imports none of the other packages.
"""

from schema._files import (
    PRIVATE_DIR_MODE,
    PRIVATE_FILE_MODE,
    append_private_file,
    private_dir,
    write_private_file,
)

__all__ = [
    "PRIVATE_DIR_MODE",
    "PRIVATE_FILE_MODE",
    "append_private_file",
    "private_dir",
    "write_private_file",
]
