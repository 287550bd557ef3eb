"""analytics/audits/_render.py: the report as Markdown, JSON and HTML; the HTML opened in headless
Chromium (Debian's package; `make test` installs it with scripts/install_debian_tools.sh)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from matplotlib.image import imread

from analytics.audits import AuditReport, render_report, run_audits
from analytics.audits._render import audit_charts
from analytics.lake import open_lake
from schema.table import cancellation_key
from tests.analytics.audits.story import Story, clean_story

Audit = Callable[..., AuditReport]

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> AuditReport:
    """A duplicate (3 rows, one user) and a string ttl. Landed and audited once for the module: the report
    is frozen and every test here only reads it."""
    story = clean_story()
    story.signup("mallory", "acct-m1")
    story.signup("mallory", "acct-m2")
    story.signup("mallory", "acct-m3")
    story.cancel("frank", ttl="1893456000")
    lake = open_lake(str(tmp_path_factory.mktemp("planted") / "lake"))
    story.land(lake)
    return run_audits(lake)


def chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        pytest.fail("chromium is not installed: run `bash scripts/install_debian_tools.sh` (make test does)")
    return path


def run_chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / "chromium-profile"
    return subprocess.run(
        [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )


def test_markdown_lists_every_check_and_the_failing_rows(planted: AuditReport) -> None:
    text = render_report(planted, "markdown")
    assert text.startswith("# Entitlements audit: ERROR")
    assert all(f"| {r.name} |" in text for r in planted.results)
    assert "**1 duplicate group** (by user_id), **2 surplus rows**, **3 rows** involved." in text
    assert "| mallory | acct-m3 | Active |" in text


def test_json_starts_with_the_status_and_the_counts(planted: AuditReport) -> None:
    document = json.loads(render_report(planted, "json"))
    assert list(document)[:2] == ["status", "counts"]
    assert document["status"] == "error"
    errors = sum(1 for r in planted.results if r.status.value == "error")
    assert document["counts"] == {
        "checks": len(planted.results),
        "pass": len(planted.results) - errors,
        "warn": 0,
        "error": errors,
        "failing_rows": sum(r.rows_involved for r in planted.results if r.status.value != "pass"),
    }


def test_every_finding_says_what_to_do_and_which_pages_to_read(planted: AuditReport) -> None:
    markdown, html = render_report(planted, "markdown"), render_report(planted, "html")
    for result in planted.failing():
        assert f"**What to do.** {result.remediation}" in markdown
        assert f"`{result.docs[0]}`" in markdown and f"<code>{result.docs[0]}</code>" in html


def test_no_rendering_cites_a_seed_or_an_issue(planted: AuditReport) -> None:
    for fmt in ("markdown", "html", "json", "junit"):
        assert not re.search(r"\bseeds?\s+0*\d+|\bissues?\s+#?\d+", render_report(planted, fmt), re.I), fmt


def test_json_is_the_whole_report(planted: AuditReport) -> None:
    document = json.loads(render_report(planted, "json"))
    assert AuditReport.model_validate(document) == planted
    duplicate = next(r for r in document["results"] if r["name"] == "duplicate_active_rows")
    assert (duplicate["groups"], duplicate["surplus_rows"], duplicate["rows_involved"]) == (1, 2, 3)


def test_the_charts_are_png_images(planted: AuditReport) -> None:
    charts = audit_charts(planted)
    assert [c.title.split(":")[0].split(" (")[0] for c in charts] == [
        "Findings per check",
        "Findings by day, stream time",
    ]
    assert all(c.data_uri.startswith("data:image/png;base64,iVBORw0KGgo") for c in charts)


def test_the_findings_chart_bars_only_the_checks_that_found_something(planted: AuditReport) -> None:
    [per_check] = [c for c in audit_charts(planted) if c.title.startswith("Findings per check")]
    found = [r for r in planted.results if r.count]
    assert 0 < len(found) < len(planted.results)
    assert f"{len(found)} of {len(planted.results)} checks found something" in per_check.title
    assert per_check.alt == "; ".join(f"{r.name}: {r.count} ({r.status.value})" for r in found)


def test_an_audit_that_found_nothing_draws_no_findings_chart(planted: AuditReport) -> None:
    clean = planted.model_copy(
        update={"results": [r.model_copy(update={"count": 0, "timeline": {}}) for r in planted.results]}
    )
    assert audit_charts(clean) == []


def test_counts_read_as_english_one_row_and_many_rows(planted: AuditReport) -> None:
    html = render_report(planted, "html")
    assert not re.search(r"\b1</b>? rows\b|\b1 rows\b", html)
    assert "<b>3 rows</b> involved" in html  # the planted duplicate group (three rows)


def test_the_html_report_links_the_docs_and_sql_it_names(planted: AuditReport) -> None:
    html = render_report(planted, "html")
    assert re.search(r'<a href="file://[^"]+/docs/operations/audits\.md#[^"]+"><code>docs/', html)
    assert re.search(r'<a href="file://[^"]+\.sql"><code>[^<]+\.sql</code></a>', html)


@pytest.fixture
def both_clocks(story: Story, audit: Audit) -> AuditReport:
    """A duplicate (dated on stream time) and a cleanup whose mark failed after its delete (dated on
    the processor's clock)."""
    story.signup("mallory", "acct-m1")
    story.signup("mallory", "acct-m2")
    story.cancel("frank")
    story.expire(cancellation_key("frank"), mark=False)
    return audit(story)


def test_findings_by_day_are_one_chart_per_clock_named_in_its_title(both_clocks: AuditReport) -> None:
    by_day = {c.title: c.alt for c in audit_charts(both_clocks)[1:]}
    assert list(by_day) == [
        "Findings by day, stream time (ApproximateCreationDateTime)",
        "Findings by day, processor clock (outcomes' occurred_at)",
    ]
    stream, processor = by_day.values()
    assert "duplicate_active_rows: 2" in stream and "deleted_account" not in stream
    assert "deleted_account_row_not_removed: 1" in processor and "duplicate" not in processor


def test_html_escapes_what_the_rows_hold(story: Story, audit: Audit) -> None:
    story.set_status("frank", "acct-f1", "<script>alert(1)</script>")
    html = render_report(audit(story), "html")
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_the_html_report_renders_in_headless_chromium_with_its_findings(
    planted: AuditReport, tmp_path: Path
) -> None:
    page = tmp_path / "audit.html"
    page.write_text(render_report(planted, "html"), encoding="utf-8")
    dom = run_chromium(tmp_path, "--dump-dom", page.as_uri()).stdout
    assert '<span class="badge error" id="overall-status">ERROR</span>' in dom
    assert "<b>1 duplicate group</b> (by user_id), <b>2 surplus rows</b>, <b>3 rows</b> involved." in dom
    assert "<td>ENTITLEMENT#acct-m3</td>" in dom
    assert "cleanup_ttl_not_actionable" in dom and "<td>string</td>" in dom
    assert dom.count('<img class="chart"') == 2


def test_the_html_report_screenshot_is_not_blank(planted: AuditReport, tmp_path: Path) -> None:
    page = tmp_path / "audit.html"
    page.write_text(render_report(planted, "html"), encoding="utf-8")
    shot = tmp_path / "audit.png"
    run_chromium(tmp_path, f"--screenshot={shot}", "--window-size=1200,2000", page.as_uri())
    pixels = imread(shot)
    assert pixels.shape[:2] == (2000, 1200)
    colours = {tuple(p) for p in pixels[::8, ::8].reshape(-1, pixels.shape[2]).tolist()}
    assert len(colours) > 20  # text, badges and charts, not one flat colour


LONG_USER = "user-" + "x" * 70
SCROLL_WIDTH_PROBE = (
    "<script>window.addEventListener('load', () => document.body.setAttribute("
    "'data-scroll-width', String(document.documentElement.scrollWidth)));</script>"
)


@pytest.fixture
def wide(story: Story, audit: Audit) -> AuditReport:
    """Findings in the widest checks (15 and 10 columns) with long unbroken ids: a plain table of them
    is twice as wide as the page."""
    story.signup(LONG_USER, "acct-" + "y" * 60)
    story.signup(LONG_USER, "acct-" + "z" * 60)
    story.cancel("frank", ttl="1893456000")
    story.put(story.record(cancellation_key("carol"), "carol", "acct-a1", 1_999_999_999))
    return audit(story)


def test_the_html_report_fits_a_1280_px_window_in_headless_chromium(
    wide: AuditReport, tmp_path: Path
) -> None:
    page = tmp_path / "audit.html"
    page.write_text(render_report(wide, "html").replace("</body>", SCROLL_WIDTH_PROBE + "</body>"))
    shot = tmp_path / "audit.png"
    window = ("--window-size=1280,3000", "--virtual-time-budget=5000")
    run_chromium(tmp_path, *window, f"--screenshot={shot}", page.as_uri())
    dom = run_chromium(tmp_path, *window, "--dump-dom", page.as_uri()).stdout
    measured = re.search(r'data-scroll-width="(\d+)"', dom)
    assert imread(shot).shape[1] == 1280
    assert measured is not None and int(measured.group(1)) <= 1280
    assert LONG_USER in dom  # the long values are on the page, wrapped
