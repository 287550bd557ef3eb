"""`entitlements audit`: check every invariant seed 000 states over the settings' lake, now and ever.

    entitlements audit [--format markdown|json|html] [--output PATH] [--as-of TIME]
                       [--thresholds PATH] [--erased-users PATH] [--erasure-ledger]
                       [--check NAME ...] [--from-log]

Exit status, so that a schedule can gate on it: 0 when no check reached its error threshold, 1 when one
did, 2 when the audit could not run (no lake, an unreadable lake or thresholds file, a bad argument).

`now` checks read the table's state: the latest snapshot plus the changes it has not folded (or the whole
log with --from-log); with --as-of, the state at that instant of stream time (ApproximateCreationDateTime)
and the history up to then. The checks are analytics/sql/audits/*.sql; thresholds default to
analytics/audits/defaults.toml. The erasure exception (deletes an erasure made are not reported) is empty
unless given: --erased-users names users (one id per line), --erasure-ledger asks the erasure ledger
(`<consumer.state_dir>/erasure-ledger`, keyed by `erasure.ledger_key`: processors/erasure) about every user
with a delete that would otherwise be reported. The demo (`entitlements demo`) ends with `run_audit`.
"""

from __future__ import annotations

__all__ = ["app", "run_audit"]

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from analytics.audits import ReportFormat, Status, load_checks, load_config, render_report, run_audits
from analytics.lake import lake_from_settings
from config import Settings, load_settings
from entitlements._logging import configure_logging
from processors.erasure import LEDGER_DIR_NAME, ErasureLedger

app = typer.Typer(add_completion=False)

EXIT_ERROR = 2


def _instant(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise typer.BadParameter("expected an ISO 8601 instant, e.g. 2026-01-31T12:00:00Z") from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _erased(path: Path | None) -> list[str]:
    if path is None:
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def _summary(status: str, counts: dict[str, int], output: Path | None) -> str:
    parts = ", ".join(f"{counts[s]} {s}" for s in ("error", "warn", "pass"))
    where = f"; report written to {output}" if output else ""
    return f"audit: {status.upper()} ({parts}){where}"


def run_audit(
    settings: Settings,
    *,
    fmt: ReportFormat = ReportFormat.MARKDOWN,
    output: Path | None = None,
    as_of: datetime | None = None,
    thresholds: Path | None = None,
    erased_user_ids: list[str] | None = None,
    checks: list[str] | None = None,
    from_log: bool = False,
    use_erasure_ledger: bool = False,
) -> int:
    """Audit the settings' lake, print or write the report, and return the exit status (0, 1 or 2).
    Never raises: any failure is reported on stderr as its class name and returns 2."""
    try:
        root = settings.lake.root
        if "://" not in root and not Path(root).is_dir():
            typer.echo(f"audit failed: no lake at {root}", err=True)
            return EXIT_ERROR
        lake = lake_from_settings(settings)
        config = load_config(
            thresholds,
            policy=settings.policy,
            known_checks=frozenset(c.name for c in load_checks()),
        )
        ledger = (
            ErasureLedger(settings.consumer.state_dir / LEDGER_DIR_NAME, settings.erasure.ledger_key)
            if use_erasure_ledger
            else None
        )
        report = run_audits(
            lake,
            config,
            as_of=as_of,
            checks=checks or None,
            erased_user_ids=erased_user_ids or [],
            ledger=ledger,
            from_snapshot=not from_log,
        )
        text = render_report(report, fmt)
        if output is not None:
            output.parent.mkdir(parents=True, exist_ok=True)
            output.write_text(text, encoding="utf-8")
        else:
            sys.stdout.write(text)
    except Exception as error:  # a schedule must tell "could not run" (2) from "found something" (1)
        typer.echo(f"audit failed: {type(error).__name__}: {error}", err=True)
        return EXIT_ERROR
    counts = {status.value: len(report.with_status(status)) for status in Status}
    typer.echo(_summary(report.status.value, counts, output), err=output is None)
    return report.exit_code


@app.command("audit")
def audit_command(
    *,
    fmt: Annotated[
        ReportFormat, typer.Option("--format", help="markdown, json or html.")
    ] = ReportFormat.MARKDOWN,
    output: Annotated[
        Path | None, typer.Option("--output", help="Write the report here, not stdout.")
    ] = None,
    as_of: Annotated[
        str | None,
        typer.Option("--as-of", help="Audit the state and history at this instant (ISO 8601, stream time)."),
    ] = None,
    thresholds: Annotated[
        Path | None,
        typer.Option("--thresholds", help="A TOML file overriding analytics/audits/defaults.toml."),
    ] = None,
    erased_users: Annotated[
        Path | None,
        typer.Option("--erased-users", help="A file of user ids (one a line) whose deletes were erasures."),
    ] = None,
    erasure_ledger: Annotated[
        bool,
        typer.Option(
            "--erasure-ledger", help="Except the deletes of users the erasure ledger says were erased."
        ),
    ] = False,
    check: Annotated[
        list[str] | None, typer.Option("--check", help="Run only this check (repeatable).")
    ] = None,
    from_log: Annotated[
        bool, typer.Option("--from-log", help="Read the state from the whole log, not the snapshot.")
    ] = False,
) -> None:
    """Check the table's invariants over the lake; exit 0 (clean), 1 (an error threshold reached) or
    2 (the audit could not run)."""
    configure_logging("WARNING")
    try:
        moment = _instant(as_of) if as_of is not None else None
        erased = _erased(erased_users)
        settings = load_settings()
    except typer.BadParameter:
        raise
    except Exception as error:
        typer.echo(f"audit failed: {type(error).__name__}: {error}", err=True)
        raise typer.Exit(EXIT_ERROR) from None
    code = run_audit(
        settings,
        fmt=fmt,
        output=output,
        as_of=moment,
        thresholds=thresholds,
        erased_user_ids=erased,
        checks=check,
        from_log=from_log,
        use_erasure_ledger=erasure_ledger,
    )
    raise typer.Exit(code)
