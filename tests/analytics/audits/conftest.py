"""Helpers for the audit tests: land a story, audit it, and say which checks found something."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from analytics.audits import AuditReport, run_audits
from analytics.lake import Lake
from tests.analytics.audits.story import Story, clean_story


def found(report: AuditReport) -> dict[str, int]:
    """The checks that returned rows, with how many."""
    return {r.name: r.rows_involved for r in report.results if r.rows_involved}


def keys(report: AuditReport, check: str, *columns: str) -> set[tuple[Any, ...]]:
    """The offending rows of one check, as tuples of the columns named (default: pk, sk)."""
    names = columns or ("pk", "sk")
    return {tuple(row[c] for c in names) for row in report.result(check).rows}


@pytest.fixture
def story() -> Story:
    """A clean history: every later step plants on top of it."""
    return clean_story()


@pytest.fixture
def audit(lake: Lake) -> Callable[..., AuditReport]:
    def run(story: Story, **options: Any) -> AuditReport:
        story.land(lake)
        return run_audits(lake, **options)

    return run
