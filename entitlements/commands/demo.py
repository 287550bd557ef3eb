"""`entitlements demo`: the main job on the embedded local stack, ending in a report and its verdict (see
entitlements/_demo.py). Exit 0 when the audits found exactly what was planted, 1 when they did not."""

from __future__ import annotations

__all__ = ["app"]

import time
from pathlib import Path
from typing import Annotated

import typer

from devstack.planted_faults import FaultKind
from entitlements._demo import DemoOptions, run_demo
from entitlements._logging import configure_logging

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
    configure_logging("WARNING")
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
    stats = result.consumer_stats
    typer.echo("\n# Entitlements demo\n")
    typer.echo("## The workload through the service (HTTP requests by operation)\n")
    for operation, count in sorted(result.workload.operations.items()):
        answers = ", ".join(
            f"{status}: {n}" for status, n in sorted(result.workload.answers[operation].items())
        )
        typer.echo(f"- {operation}: {count} ({answers or 'none'})")
    typer.echo(f"- relinks refused (ErrEntitlementNotActive, 404): {result.workload.relinks_rejected}")
    bursts = result.workload.same_user
    if bursts is not None:
        typer.echo(
            f"- same-user bursts (two simultaneous requests for one user): {bursts.bursts}, answers "
            f"{bursts.answers}, 409 concurrent_request {bursts.concurrent_request}, undocumented "
            f"{bursts.undocumented}"
        )
    races_seen = result.races
    typer.echo("\n## Races forced through the fakes' hooks (link answers by status)\n")
    typer.echo(
        f"- relink held at Array while a second Array signup answered: {races_seen.relink_vs_second_signup}"
    )
    typer.echo(f"- relink held at Array while a cancellation answered: {races_seen.relink_vs_cancellation}")
    typer.echo(f"- second signup given the account already held: {races_seen.same_account_again}")
    if races_seen.unguarded_stale_put:
        typer.echo(
            f"- the same race with the unguarded link write (fault injection): "
            f"{races_seen.unguarded_stale_put}, {races_seen.overwritten_rows} row(s) overwritten"
        )
    planted: dict[str, int] = {}
    for fault in result.planted:
        planted[fault.kind.value] = planted.get(fault.kind.value, 0) + 1
    typer.echo(f"- planted (manifest: {state_dir / 'planted.json'}): {planted or 'none'}")
    typer.echo("\n## Events seen by the consumer, by kind (landed in the lake, deduplicated)\n")
    for kind, count in result.events_by_type.items():
        typer.echo(f"- {kind}: {count}")
    typer.echo(
        f"\nrecords delivered: {stats['records']} (replays included); quarantined: {stats['quarantined']}; "
        f"parked batches: {stats['parked_batches']}"
    )
    typer.echo("\n## Outcomes (cleanup, and the service's links)\n")
    for kind, count in result.outcomes_by_kind.items():
        typer.echo(f"- {kind}: {count}")
    typer.echo("\n## Audit\n")
    typer.echo(result.report_paths["markdown"].read_text())
    typer.echo(f"Reports: {', '.join(str(p) for p in result.report_paths.values())}")
    typer.echo("\n## Verdict (the audits' findings against the manifest of what was planted)\n")
    for line in result.verdict.lines():
        typer.echo(line)
    if not result.verdict.ok:
        raise typer.Exit(1)
