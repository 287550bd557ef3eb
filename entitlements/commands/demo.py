"""`entitlements demo`: the main job on the embedded local stack, ending in a report and its verdict (see
entitlements/_demo.py). Exit 0 when the audits found exactly what was planted, 1 when they did not."""

from __future__ import annotations

__all__ = ["app", "report_lines"]

import shlex
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from devstack.planted_faults import FaultKind
from entitlements._logging import configure_logging

if TYPE_CHECKING:  # the run (the stack, the service, the consumer, the lake) is imported when it runs
    from entitlements._demo import DemoResult

app = typer.Typer()

_DAY = 86_400.0


@app.command()
def demo(
    *,
    state_dir: Annotated[
        Path,
        typer.Option(
            help="Where the run keeps its lake, logs and reports: a new or empty folder, or one an earlier "
            "demo made (only what it made there is replaced; anything else is refused, never deleted)."
        ),
    ] = Path("var/demo"),
    users: Annotated[int, typer.Option(min=1)] = 200,
    operations: Annotated[int, typer.Option(min=1)] = 1500,
    rate: Annotated[float, typer.Option(min=1, help="Operations per second.")] = 300.0,
    faults: Annotated[bool, typer.Option(help="Plant the anomalies the audits must find.")] = True,
    seed: Annotated[int, typer.Option()] = 7,
    clients: Annotated[int, typer.Option(min=1, help="Concurrent HTTP clients of the service.")] = 8,
    races: Annotated[int, typer.Option(min=0, help="Forced races of each kind.")] = 3,
    concurrent_same_user: Annotated[
        float,
        typer.Option(
            min=0.0,
            help="Bursts per second of two simultaneous requests for one user beside the mix (0: none); "
            "a losing request's 409 concurrent_request is a documented answer.",
        ),
    ] = 5.0,
    days_per_second: Annotated[
        float, typer.Option(min=0.1, max=20.0, help="Simulated days per real second (63 days = the policy).")
    ] = 4.2,
    timeout: Annotated[
        float, typer.Option(min=10, help="Seconds each wait may take before the run fails.")
    ] = 600.0,
    refuse_deletes: Annotated[
        int,
        typer.Option(
            min=0,
            help="After the workload, Array refuses the next N account deletes (expired credentials): the "
            "consumer parks those cleanups and the retry worker finishes them before the report.",
        ),
    ] = 0,
    suppress_fault: Annotated[
        list[FaultKind] | None,
        typer.Option(
            help="Record this fault in the manifest as planted but never write it: the verdict must then "
            "fail and name it (a check of the verdict itself). Repeatable."
        ),
    ] = None,
) -> None:
    """Local stack and fakes, the service driven by concurrent clients and forced races, the real KCL
    consumer with cleanup and the lake, then the audit report and the verdict: the audits' findings
    against what the manifest says was planted."""
    from entitlements._demo import DemoOptions, run_demo  # noqa: PLC0415 (--help stays fast)

    configure_logging("WARNING")
    # SIGTERM unwinds as Ctrl-C does (the consumer, its JVM and the stack stopped before the exit),
    # instead of ending this process at once and leaving the JVM running on its own.
    signal.signal(signal.SIGTERM, lambda signum, frame: signal.raise_signal(signal.SIGINT))
    options = DemoOptions(
        state_dir=state_dir,
        users=users,
        operations=operations,
        rate=rate,
        faults=faults,
        seed=seed,
        clients=clients,
        races=races,
        concurrent_same_user=concurrent_same_user,
        speed=days_per_second * _DAY,
        timeout_seconds=timeout,
        suppressed=frozenset(suppress_fault or ()),
        refused_deletes=refuse_deletes,
    )
    started = time.monotonic()
    result = run_demo(
        options, progress=lambda line: typer.echo(f"- [{time.monotonic() - started:5.1f} s] {line}", err=True)
    )
    for line in report_lines(result, state_dir):
        typer.echo(line)
    if not result.verdict.ok:
        raise typer.Exit(1)


def report_lines(result: DemoResult, state_dir: Path) -> Iterator[str]:
    """What the demo prints on stdout: counts by kind, the audit's summary (the full report with its
    rows is in the files it names), where the lake is and the one export line that points `entitlements
    sql` at it, and the verdict last."""
    from analytics.reports import counted  # noqa: PLC0415 (--help stays fast)
    from entitlements._demo import counts_text  # noqa: PLC0415

    stats = result.consumer_stats
    yield "\n# Entitlements demo\n"
    yield "## The workload through the service (HTTP requests by operation)\n"
    for operation, count in sorted(result.workload.operations.items()):
        yield f"- {operation}: {count} ({counts_text(result.workload.answers[operation])})"
    yield f"- relinks refused (ErrEntitlementNotActive, 404): {result.workload.relinks_rejected}"
    bursts = result.workload.same_user
    if bursts is not None:
        answers = "; ".join(f"{op} {counts_text(by)}" for op, by in sorted(bursts.answers.items())) or "none"
        yield (
            f"- same-user bursts (two simultaneous requests for one user): {bursts.bursts}, answers "
            f"{answers}; 409 concurrent_request {bursts.concurrent_request}, "
            f"undocumented {bursts.undocumented}"
        )
    races = result.races
    yield "\n## Races forced through the fakes' hooks (link answers by status)\n"
    second_signup = counts_text(races.relink_vs_second_signup)
    yield f"- relink held at Array while a second Array signup answered: {second_signup}"
    yield f"- relink held at Array while a cancellation answered: {counts_text(races.relink_vs_cancellation)}"
    yield f"- second signup given the account already held: {counts_text(races.same_account_again)}"
    if races.unguarded_stale_put:
        yield (
            f"- the same race with the unguarded link write (fault injection): "
            f"{counts_text(races.unguarded_stale_put)}; {races.overwritten_rows} row(s) overwritten"
        )
    planted: dict[str, int] = {}
    for fault in result.planted:
        planted[fault.kind.value] = planted.get(fault.kind.value, 0) + 1
    yield f"- planted (manifest: {state_dir / 'planted.json'}): {counts_text(planted)}"
    yield "\n## Events seen by the consumer, by kind (landed in the lake, deduplicated)\n"
    for kind, count in result.events_by_type.items():
        yield f"- {kind}: {count}"
    yield (
        f"\nrecords delivered: {stats['records']} (replays included); quarantined: {stats['quarantined']}; "
        f"parked batches: {stats['parked_batches']}"
    )
    yield "\n## Outcomes (cleanup, and the service's links)\n"
    for kind, count in result.outcomes_by_kind.items():
        yield f"- {kind}: {count}"
    audit = result.audit
    counts = audit.counts
    yield "\n## Audit\n"
    yield (
        f"status {audit.status.value}: {counts['checks']} checks, {counts['pass']} pass, "
        f"{counts['warn']} warn, {counts['error']} error; {counted(counts['failing_rows'], 'row')} found "
        "by the checks that did not pass"
    )
    for check in audit.results:
        if check.status.value != "pass":
            yield f"- {check.name}: {check.status.value}, {counted(check.rows_involved, 'row')}"
    yield f"\nThe full report, each check's rows and what to do: {result.report_paths['markdown']}"
    yield f"Reports: {', '.join(str(p) for p in result.report_paths.values())}"
    lake = (state_dir / "lake").resolve()
    yield "\n## The demo's lake\n"
    yield f"{lake} (not the default var/lake): for entitlements sql, mine and audit over it,"
    yield f"export ENTITLEMENTS_LAKE__ROOT={shlex.quote(str(lake))}"
    yield "\n## Verdict (the audits' findings against the manifest of what was planted)\n"
    yield from result.verdict.lines()
