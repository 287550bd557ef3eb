"""`entitlements audit`: check the table's invariants (docs/table.md) over the settings' lake, now and ever.

    entitlements audit [--format markdown|json|html|junit] [--output PATH [--force]] [--as-of TIME]
                       [--thresholds PATH] [--erased-users PATH] [--erasure-ledger]
                       [--check NAME ...] [--from-log] [--store-failures]
    entitlements audit-failures [--audit-id ID] [--check NAME ...] [--output PATH [--force]]

Exit status, so that a schedule can gate on it: 0 when no check reached its error threshold, 1 when one
did, 2 when the audit could not run (no lake or one with no data, an --as-of before the lake's first
change, an unreadable lake or thresholds file, a bad argument), with one line on stderr naming the path
at fault and the command that fixes it.

`--output PATH` writes a new file (an existing one only with `--force`) whose suffix says the format
unless `--format` does: `.md`, `.json`, `.html`, `.xml` (JUnit); `audit-failures` writes `.jsonl`. A
suffix that is not the format's is refused before the lake is read (entitlements/commands/_output.py).
`--format json` starts with the run's `status` and `counts`; `--format junit` is JUnit XML for CI systems
(one test case per check: names and counts, never a row's value). `--store-failures` keeps every row of
each check that did not pass in the lake's `audits/failures` table (one commit per run; the erasure
purges it like every other table); `entitlements audit-failures` prints them back as JSON lines (one
stored row each, of one run or all, users being erased left out). Each check's remediation is in the
report and in docs/operations/audits.md.

`now` checks read the table's state: the latest snapshot plus the changes it has not folded (or the whole
log with --from-log); with --as-of, the state at that instant of stream time (ApproximateCreationDateTime)
and the history up to then. The checks are analytics/sql/audits/*.sql; thresholds default to
analytics/audits/defaults.toml. The erasure exception (deletes an erasure made are not reported) is empty
unless given: --erased-users names users (one id per line), --erasure-ledger asks the erasure ledger
(`<consumer.state_dir>/erasure-ledger`, keyed by `erasure.ledger_key`: docs/operations/erasure.md) about
every user with a delete that would otherwise be reported.
"""

from __future__ import annotations

__all__ = ["app", "run_audit"]

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

# Only the report formats and the checks' definitions at import: `audit --help` loads neither the lake
# stack nor matplotlib (a run imports them).
from analytics.audits import ReportFormat, load_checks
from entitlements._logging import configure_logging
from entitlements._progress import LINE_SECONDS, progress
from entitlements.commands._lake_lines import lake_line
from entitlements.commands._output import AUDIT, AUDIT_FAILURES, open_output
from schema.errors import EntitlementsError

if TYPE_CHECKING:
    import pyarrow as pa

    from config import Settings

app = typer.Typer(add_completion=False)

EXIT_ERROR = 2


class AuditInputError(EntitlementsError):
    """A file the audit command was given cannot be read."""


def _refused(message: str) -> int:
    """The one line a user sees when the audit could not run; the exit status for it."""
    typer.echo(f"entitlements: {message}", err=True)
    return EXIT_ERROR


def _instant(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise typer.BadParameter("expected an ISO 8601 instant, e.g. 2026-01-31T12:00:00Z") from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _erased(path: Path | None) -> list[str]:
    if path is None:
        return []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise AuditInputError(
            f"cannot read the erased-users file {path} ({type(error).__name__}): give a UTF-8 file of "
            "user ids, one a line"
        ) from None
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def _summary(status: str, counts: dict[str, int], output: Path | None, stored: str) -> str:
    parts = ", ".join(f"{counts[s]} {s}" for s in ("error", "warn", "pass"))
    where = f"; report written to {output}" if output else ""
    return f"audit: {status.upper()} ({parts}){where}{stored}"


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
    store_failures: bool = False,
    force: bool = False,
) -> int:
    """Audit the settings' lake, print or write the report (to a new `output` unless `force`), and
    return the exit status (0, 1 or 2). Never raises: a failure is one line on stderr (its message, or
    its class name for an unexpected one) and returns 2. Nothing is created where the lake should be."""
    from analytics.audits import load_config, render_report, run_audits  # noqa: PLC0415 (--help stays fast)
    from analytics.lake import lake_from_settings, require_reachable  # noqa: PLC0415
    from processors.erasure import LEDGER_DIR_NAME, ErasureLedger  # noqa: PLC0415

    try:
        lake = lake_from_settings(settings, create=False)
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
        require_reachable(lake)  # refused on one line before the step that would print progress lines
        # A bar on a terminal, a line every few seconds elsewhere: an audit takes 20-60 s on a large lake.
        with progress("auditing the lake", every=LINE_SECONDS):
            report = run_audits(
                lake,
                config,
                as_of=as_of,
                checks=checks or None,
                erased_user_ids=erased_user_ids or [],
                ledger=ledger,
                from_snapshot=not from_log,
                store_failures_in_lake=store_failures,
            )
        text = render_report(report, fmt)
        if output is not None:
            _write(output, text, force=force)
        else:
            sys.stdout.write(text)
    except EntitlementsError as error:  # a schedule must tell "could not run" (2) from "found" (1)
        return _refused(lake_line(error) or str(error))
    except Exception as error:
        return _refused(lake_line(error) or f"audit could not run ({type(error).__name__})")
    stored = report.stored_failures
    where = (
        f"; {stored.rows} failing rows stored in {stored.dataset}, audit_id {stored.audit_id}"
        if stored
        else ""
    )
    typer.echo(_summary(report.status.value, report.counts, output, where), err=output is None)
    return report.exit_code


def _write(output: Path, text: str, *, force: bool) -> None:
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        with open_output(output, force=force) as file:
            file.write(text)
    except OSError as error:
        raise AuditInputError(
            f"cannot write the report to {output} ({type(error).__name__}): give a writable --output"
        ) from None


@app.command("audit")
def audit_command(
    *,
    fmt: Annotated[
        ReportFormat | None,
        typer.Option(
            "--format",
            help="markdown, json, html or junit (JUnit XML for CI); default: from --output's suffix, "
            "else markdown.",
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", help="Write the report to this new file (.md, .json, .html or .xml), not stdout."
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing --output file.")] = False,
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
    store_failures: Annotated[
        bool,
        typer.Option(
            "--store-failures",
            help="Keep every row of each check that did not pass in the lake (table audits/failures).",
        ),
    ] = False,
) -> None:
    """Check the table's invariants over the lake; exit 0 (clean), 1 (an error threshold reached) or
    2 (the audit could not run)."""
    from config import SettingsError, load_settings  # noqa: PLC0415 (kept off --help)

    configure_logging("WARNING")
    moment = _instant(as_of) if as_of is not None else None
    try:
        erased = _erased(erased_users)
        settings = load_settings()
        chosen = AUDIT.format_for(output, fmt, ReportFormat.MARKDOWN, force=force)
    except (EntitlementsError, SettingsError) as error:  # settings errors: field and rule, never the value
        raise typer.Exit(_refused(str(error))) from None
    code = run_audit(
        settings,
        fmt=chosen,
        output=output,
        force=force,
        as_of=moment,
        thresholds=thresholds,
        erased_user_ids=erased,
        checks=check,
        from_log=from_log,
        use_erasure_ledger=erasure_ledger,
        store_failures=store_failures,
    )
    raise typer.Exit(code)


def _stored_lines(rows: list[dict[str, object]]) -> str:
    lines = []
    for row in rows:
        document = {
            key: value.isoformat() if hasattr(value, "isoformat") else value for key, value in row.items()
        }
        document["row"] = json.loads(str(row["row"]))
        lines.append(json.dumps(document, ensure_ascii=False) + "\n")
    return "".join(lines)


def _known_checks(checks: list[str] | None) -> None:
    """A --check that names no check would print nothing and exit 0, read as "no failures"."""
    known = {c.name for c in load_checks()}
    unknown = sorted({name for name in checks or [] if name not in known})
    if unknown:
        raise AuditInputError(
            f"audit-failures: unknown checks: {', '.join(unknown)} (the checks are analytics/sql/audits/"
            "*.sql; see docs/operations/audits.md)"
        )


def _no_such_run(stored: pa.Table, lake: str) -> str:
    """--audit-id naming no stored run would print nothing and exit 0, read as "no failures"; the line
    says how many runs are stored (the ids are printed by `audit --store-failures`, never here)."""
    runs = len(set(stored["audit_id"].to_pylist())) if stored.num_rows else 0
    return (
        f"audit-failures: no failing rows are stored under that --audit-id in {lake} ({runs} audit "
        f"run{'' if runs == 1 else 's'} stored): give the audit_id `entitlements audit --store-failures` "
        "printed, or leave --audit-id out for every run"
    )


@app.command("audit-failures")
def audit_failures_command(
    *,
    audit_id: Annotated[
        str | None, typer.Option("--audit-id", help="Only this run's rows (the id the audit printed).")
    ] = None,
    check: Annotated[
        list[str] | None, typer.Option("--check", help="Only this check's rows (repeatable).")
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", help="Write the JSON lines to this new file (.jsonl), not stdout."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing --output file.")] = False,
) -> None:
    """Print the failing rows `audit --store-failures` kept in the lake, one JSON object a line; exit 2
    when the lake cannot be read."""
    from analytics.audits import read_failures  # noqa: PLC0415 (kept off --help)
    from analytics.lake import lake_from_settings  # noqa: PLC0415
    from config import SettingsError, load_settings  # noqa: PLC0415

    configure_logging("WARNING")
    try:
        settings = load_settings()
        _known_checks(check)
        if output is not None:
            AUDIT_FAILURES.checked(output, force=force)
        lake = lake_from_settings(settings, create=False)
        table = read_failures(lake, audit_id=audit_id)
        if audit_id is not None and not table.num_rows:
            raise AuditInputError(_no_such_run(read_failures(lake), lake.uri))
        rows = [r for r in table.to_pylist() if not check or r["check_name"] in check]
        text = _stored_lines(rows)
        if output is not None:
            _write(output, text, force=force)
        else:
            sys.stdout.write(text)
    except (EntitlementsError, SettingsError) as error:
        raise typer.Exit(_refused(lake_line(error) or str(error))) from None
    except Exception as error:
        raise typer.Exit(
            _refused(lake_line(error) or f"audit-failures could not read the lake ({type(error).__name__})")
        ) from None
    typer.echo(f"audit-failures: {len(rows)} stored rows", err=True)
