"""Helpers for the audit tests: land a story, audit it, and say which checks found something."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from analytics.audits import AuditReport, run_audits
from analytics.lake import Lake
from tests.analytics.audits.story import Story, clean_story
from tests.support.lake_templates import LakeTemplates


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


@cache
def _clean() -> Story:
    """The clean story as built here, to tell whether a test's story begins with it (never changed)."""
    return clean_story()


def land_story(story: Story, lake: Lake, templates: LakeTemplates) -> None:
    """Land `story` in `lake` (a fresh one). A story that begins with the clean story's events and
    outcomes (every story the `story` fixture hands out, with its plants after) starts from a copy of
    the clean story landed once per run, and only what was planted after it lands here, in the same
    7-row files (a second handler on the same lake, as a restarted consumer lands); any other story
    lands whole. The lake then holds the same rows either way: what the audits read."""
    clean = _clean()
    events, outcomes = len(clean.events), len(clean.outcomes)
    if story.events[:events] != clean.events or story.outcomes[:outcomes] != clean.outcomes:
        story.land(lake)
        return
    templates.copy("audits-clean-story", clean.land, Path(lake.base))
    Story(events=story.events[events:], outcomes=story.outcomes[outcomes:]).land(lake)


@pytest.fixture
def audit(lake: Lake, lake_templates: LakeTemplates) -> Callable[..., AuditReport]:
    def run(story: Story, **options: Any) -> AuditReport:
        land_story(story, lake, lake_templates)
        # One DuckDB thread unless a test asks for more: what a check finds does not depend on how many
        # threads run it, and on CI's two cores, shared by three test workers, a second thread per
        # audit only added its scheduling (about a sixth of each audit's CPU, measured alone).
        options.setdefault("threads", 1)
        return run_audits(lake, **options)

    return run
