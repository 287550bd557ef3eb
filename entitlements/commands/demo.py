"""`entitlements demo`: the main job on the embedded local stack, ending in a report (see _demo.py)."""

from __future__ import annotations

__all__ = ["app"]

from pathlib import Path
from typing import Annotated

import typer

from entitlements._demo import DemoOptions, run_demo
from entitlements._logging import configure_logging

app = typer.Typer()


@app.command()
def demo(
    *,
    state_dir: Annotated[Path, typer.Option(help="Where the run keeps its lake, logs and reports.")] = Path(
        "var/demo"
    ),
    users: Annotated[int, typer.Option(min=1)] = 200,
    operations: Annotated[int, typer.Option(min=1)] = 1500,
    rate: Annotated[float, typer.Option(min=1, help="Operations per second.")] = 300.0,
    faults: Annotated[bool, typer.Option(help="Plant the anomalies the audits must find.")] = True,
    seed: Annotated[int, typer.Option()] = 7,
    clients: Annotated[int, typer.Option(min=1, help="Concurrent HTTP clients of the service.")] = 8,
) -> None:
    """Local stack and fakes, the service driven by concurrent clients and forced races, the real KCL
    consumer with cleanup and the lake, then the audit report."""
    configure_logging("WARNING")
    options = DemoOptions(
        state_dir=state_dir,
        users=users,
        operations=operations,
        rate=rate,
        faults=faults,
        seed=seed,
        clients=clients,
    )
    result = run_demo(options, progress=lambda line: typer.echo(f"- {line}", err=True))
    stats = result.consumer_stats
    typer.echo("\n# Entitlements demo\n")
    typer.echo("## The workload through the service (HTTP requests by operation)\n")
    for operation, count in sorted(result.workload.operations.items()):
        answers = ", ".join(
            f"{status}: {n}" for status, n in sorted(result.workload.answers[operation].items())
        )
        typer.echo(f"- {operation}: {count} ({answers or 'none'})")
    typer.echo(f"- relinks refused (ErrEntitlementNotActive, 404): {result.workload.relinks_rejected}")
    races = result.races
    typer.echo("\n## Races forced through the fakes' hooks (link answers by status)\n")
    typer.echo(
        f"- relink held at Array while a second Array signup answered: {races.relink_vs_second_signup}"
    )
    typer.echo(f"- relink held at Array while a cancellation answered: {races.relink_vs_cancellation}")
    typer.echo(f"- second signup given the account already held: {races.same_account_again}")
    if races.unguarded_stale_put:
        typer.echo(
            f"- the same race with the unguarded link write (fault injection): {races.unguarded_stale_put}, "
            f"{races.overwritten_rows} row(s) overwritten"
        )
    planted: dict[str, int] = {}
    for fault in result.planted:
        planted[fault.kind.value] = planted.get(fault.kind.value, 0) + 1
    typer.echo(f"- planted by direct writes (the service cannot produce these): {planted or 'none'}")
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
