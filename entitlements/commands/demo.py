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
) -> None:
    """Local stack, simulator, the real KCL consumer with cleanup and the lake, then the audit report."""
    configure_logging("WARNING")
    options = DemoOptions(
        state_dir=state_dir, users=users, operations=operations, rate=rate, faults=faults, seed=seed
    )
    result = run_demo(options, progress=lambda line: typer.echo(f"- {line}", err=True))
    stats = result.consumer_stats
    typer.echo("\n# Entitlements demo\n")
    typer.echo("## Simulated writes\n")
    for operation, count in sorted(result.simulation.operations.items()):
        typer.echo(f"- {operation}: {count}")
    typer.echo(f"- SaveIfActive refusals (ErrEntitlementNotActive): {result.simulation.guard_rejections}")
    planted = {kind: count for kind, count in result.simulation.faults.items() if count}
    typer.echo(f"- planted faults: {planted or 'none'}")
    typer.echo("\n## Events seen by the consumer, by kind (landed in the lake, deduplicated)\n")
    for kind, count in result.events_by_type.items():
        typer.echo(f"- {kind}: {count}")
    typer.echo(
        f"\nrecords delivered: {stats['records']} (replays included); quarantined: {stats['quarantined']}; "
        f"parked batches: {stats['parked_batches']}"
    )
    typer.echo("\n## Cleanup outcomes\n")
    for kind, count in result.outcomes_by_kind.items():
        typer.echo(f"- {kind}: {count}")
    typer.echo("\n## Audit\n")
    typer.echo(result.report_paths["markdown"].read_text())
    typer.echo(f"Reports: {', '.join(str(p) for p in result.report_paths.values())}")
