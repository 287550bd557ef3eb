"""The formats a mining report renders as: a module of its own, so that `entitlements mine --help`
(whose --format option names them) loads neither the renderer nor the lake stack."""

from __future__ import annotations

__all__ = ["MiningFormat"]

from enum import StrEnum


class MiningFormat(StrEnum):
    TABLE = "table"
    MARKDOWN = "markdown"
    JSON = "json"
    CSV = "csv"
    HTML = "html"
