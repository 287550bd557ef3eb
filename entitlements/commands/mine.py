"""`entitlements mine REPORT`: the reports an analyst of the entitlements service asks for.

    entitlements mine --list
    entitlements mine REPORT [--format table|markdown|json|csv|html] [--output PATH [--force]]
                             [--from-snapshot] [--as-of TIME]

Reports are analytics/sql/mining/*.sql over the settings' lake. Days are business time (the items'
updatedAt/createdAt as the service wrote them; the simulator's clock in demos), except where a report
says otherwise. `--output PATH` writes a new file whose suffix says the format unless `--format` does
(.txt, .md, .json, .csv, .html; an existing file only with `--force`: entitlements/commands/_output.py).
HTML embeds the report's chart; Markdown written with --output gets it as a PNG beside the file (kept,
like the file, unless `--force`). `--as-of TIME` runs the report over the lake as it stood at TIME
(stream creation time; nothing is written to the lake). Exit 0, or 2 when the report could not run
(one line on stderr: a missing or empty lake names its path and the command that fills it; an --output
refused).
"""

from __future__ import annotations

__all__ = ["app"]

import base64
import sys
from pathlib import Path
from typing import Annotated

import typer

# Only the formats and the report definitions at import: `mine --help` and `mine --list` load neither
# the lake stack nor matplotlib (the run imports them).
from analytics.mining import MiningFormat, load_reports
from entitlements._logging import configure_logging
from entitlements._progress import LINE_SECONDS, progress
from entitlements.commands._output import MINE, open_output, refuse_existing
from entitlements.commands.lake import _instant

app = typer.Typer(add_completion=False)

EXIT_ERROR = 2


def _list() -> str:
    width = max(len(r.name) for r in load_reports())
    return "".join(f"{r.name.ljust(width)}  {r.title}\n" for r in load_reports())


@app.command("mine")
def mine_command(
    *,
    report: Annotated[str | None, typer.Argument(help="The report to run (see --list).")] = None,
    list_reports: Annotated[bool, typer.Option("--list", help="List the reports and exit.")] = False,
    fmt: Annotated[
        MiningFormat | None,
        typer.Option(
            "--format",
            help="table, markdown, json, csv or html (default: from --output's suffix, else table).",
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            help="Write the report to this new file (.txt, .md, .json, .csv or .html), not stdout.",
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing --output file.")] = False,
    from_snapshot: Annotated[
        bool, typer.Option("--from-snapshot", help="Read the current state from the latest snapshot.")
    ] = False,
    as_of: Annotated[
        str | None,
        typer.Option(
            "--as-of",
            help="Run over the lake as it stood at this instant (ISO 8601; naive means UTC), by stream time.",
        ),
    ] = None,
) -> None:
    """Run a mining report over the lake (`--list` names them)."""
    from analytics.lake import lake_from_settings, require_reachable  # noqa: PLC0415 (kept off --help)
    from analytics.mining import render_mining, report_charts, run_report  # noqa: PLC0415
    from analytics.reports import counted  # noqa: PLC0415
    from config import load_settings  # noqa: PLC0415

    configure_logging("WARNING")
    if list_reports:
        sys.stdout.write(_list())
        return
    if report is None:
        typer.echo("name a report, or --list to see them", err=True)
        raise typer.Exit(EXIT_ERROR)
    instant = _instant(as_of) if as_of is not None else None
    settings = load_settings()
    chosen = MINE.format_for(output, fmt, MiningFormat.TABLE, force=force)
    lake = lake_from_settings(settings, create=False)
    require_reachable(lake)  # refused on one line before the step that would print progress lines
    # A bar on a terminal, a line every few seconds elsewhere: a report takes 20-60 s on a large lake.
    with progress(f"mining {report}", every=LINE_SECONDS):
        result = run_report(lake, report, policy=settings.policy, from_snapshot=from_snapshot, as_of=instant)
    charts: dict[Path, str] = {}
    if output is not None and chosen is MiningFormat.MARKDOWN:
        charts = {
            output.with_name(f"{output.stem}.chart{index}.png"): chart.png
            for index, chart in enumerate(report_charts(result), start=1)
        }
    for png in charts:  # every file refused before any is written: a refusal leaves nothing behind
        refuse_existing(png, force=force)
    with progress(f"rendering {report}", every=LINE_SECONDS):
        text = render_mining(result, chosen, chart_files=[png.name for png in charts])
    if output is None:
        sys.stdout.write(text)
        return
    output.parent.mkdir(parents=True, exist_ok=True)
    for png, encoded in charts.items():
        with open_output(png, force=force, binary=True) as file:
            file.write(base64.b64decode(encoded))
    with open_output(output, force=force) as file:
        file.write(text)
    typer.echo(f"{report}: {counted(result.table.num_rows, 'row')} written to {output}")
