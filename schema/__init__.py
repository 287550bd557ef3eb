"""Contracts shared by every part of the project. Imports nothing else from the project."""

from schema._files import private_dir, write_private_file
from schema.errors import EntitlementsError, RecordContext, RetryableError, TerminalError
from schema.table import (
    CleanupKind,
    CleanupRecord,
    EntitlementRow,
    EntitlementStatus,
    Item,
    ItemKind,
    UnknownItem,
    parse_item,
)

__all__ = [
    "CleanupKind",
    "CleanupRecord",
    "EntitlementRow",
    "EntitlementStatus",
    "EntitlementsError",
    "Item",
    "ItemKind",
    "RecordContext",
    "RetryableError",
    "TerminalError",
    "UnknownItem",
    "parse_item",
    "private_dir",
    "write_private_file",
]
