"""The formats the audit report renders as: a module of its own, so that `entitlements audit --help`
(whose --format option names them) loads neither the renderer nor the lake stack."""

from __future__ import annotations

__all__ = ["ReportFormat"]

from enum import StrEnum


class ReportFormat(StrEnum):
    MARKDOWN = "markdown"
    JSON = "json"
    HTML = "html"
    JUNIT = "junit"
