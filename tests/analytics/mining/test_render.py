"""analytics/mining/_render.py: a report as a table, Markdown, JSON, CSV and HTML with its chart."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from pathlib import Path

import pytest

from analytics.lake import Lake
from analytics.mining import MiningResult, render_mining, report_charts, run_report
from tests.analytics.audits.story import clean_story
from tests.support.lake_templates import LakeTemplates


@pytest.fixture
def daily(lake: Lake, lake_templates: LakeTemplates) -> MiningResult:
    # The clean story is the same every time: landed once per run, copied into this test's lake.
    lake_templates.copy("clean-story", lambda fresh: clean_story().land(fresh), Path(lake.base))
    return run_report(lake, "daily_activity")


def test_the_terminal_table_has_the_title_and_every_row(daily: MiningResult) -> None:
    text = render_mining(daily, "table")
    assert "Signups, cancellations, reactivations and second signups per day" in text
    assert "2030-06-05" in text and "7 rows." in text


def test_json_carries_the_columns_and_rows(daily: MiningResult) -> None:
    document = json.loads(render_mining(daily, "json"))
    assert document["report"] == "daily_activity" and len(document["rows"]) == 7
    assert document["rows"][0] == {
        "day": "2030-06-01",
        "signups": 2,
        "second_signups": 0,
        "cancellations": 1,
        "reactivations": 0,
        "rows_removed": 0,
    }


def test_csv_has_a_header_and_a_line_per_row(daily: MiningResult) -> None:
    lines = list(csv.reader(io.StringIO(render_mining(daily, "csv"))))
    assert lines[0] == daily.columns and len(lines) == 8


def test_markdown_links_the_chart_files_it_is_given(daily: MiningResult) -> None:
    text = render_mining(daily, "markdown", chart_files=["daily.chart1.png"])
    assert "![Signups, cancellations, reactivations and second signups per day](daily.chart1.png)" in text
    assert "| 2030-06-05 | 1 | 1 | 1 | 0 | 0 |" in text


def test_html_embeds_the_chart_as_a_png(daily: MiningResult) -> None:
    html = render_mining(daily, "html")
    (chart,) = report_charts(daily)
    assert f'src="{chart.data_uri}"' in html and chart.png.startswith("iVBORw0KGgo")


def test_a_report_without_rows_has_no_chart(daily: MiningResult) -> None:
    assert report_charts(dataclasses.replace(daily, table=daily.table.slice(0, 0))) == []
