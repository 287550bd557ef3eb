"""`entitlements simulate`: the entitlement service's documented writes at a chosen rate and mix."""

from __future__ import annotations

__all__ = ["app"]

import json
import os
import random
from pathlib import Path
from typing import Annotated

import typer

from config import load_settings
from devstack.simulator import EntitlementTable, Mix, SimulationConfig, run_simulation
from entitlements._clients import aws_client
from entitlements._logging import configure_logging
from pipeline.clock import clock_from_settings
from schema.errors import EntitlementsError

app = typer.Typer()


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(text)


@app.command()
def simulate(
    *,
    users: Annotated[int, typer.Option(min=1, help="Size of the simulated user population.")] = 50,
    operations: Annotated[
        int, typer.Option(min=0, help="Operations to perform (planted faults come on top).")
    ] = 200,
    rate: Annotated[
        float, typer.Option(min=0.0, help="Operations per second; 0 is as fast as the table answers.")
    ] = 0.0,
    seed: Annotated[
        int | None, typer.Option(help="Seed for a deterministic run; default a random one (reported).")
    ] = None,
    faults: Annotated[
        bool, typer.Option("--faults/--no-faults", help="Plant the known faults, countably.")
    ] = False,
    fault_count: Annotated[int, typer.Option(min=0, help="How many of each fault kind --faults plants.")] = 1,
    signup_weight: Annotated[float, typer.Option(min=0.0, help="Mix weight of signups.")] = 3.0,
    cancel_weight: Annotated[float, typer.Option(min=0.0, help="Mix weight of cancellations.")] = 1.0,
    reactivate_weight: Annotated[float, typer.Option(min=0.0, help="Mix weight of reactivations.")] = 0.5,
    second_signup_weight: Annotated[
        float, typer.Option(min=0.0, help="Mix weight of second Array signups.")
    ] = 1.0,
    relink_weight: Annotated[
        float, typer.Option(min=0.0, help="Mix weight of relink writes (SaveIfActive).")
    ] = 4.0,
    max_relink_window: Annotated[
        int, typer.Option(min=0, help="Most operations between a relink's read and its write.")
    ] = 3,
    contention: Annotated[
        float,
        typer.Option(min=0.0, max=1.0, help="Share of cancels and second signups aimed at users mid-relink."),
    ] = 0.5,
    table_name: Annotated[
        str | None, typer.Option(help="Table; default the settings' consumer.table_name.")
    ] = None,
    summary_json: Annotated[
        Path | None,
        typer.Option(help="Write the full summary, planted faults' keys included, to this file (mode 0600)."),
    ] = None,
) -> None:
    """Write the service's workload to the table; print a summary (counts only) as JSON."""
    configure_logging()
    settings = load_settings()
    try:
        config = SimulationConfig(
            table_name=table_name or settings.consumer.table_name,
            cleanup_ttl_days=settings.policy.cleanup_ttl_days,
            stale_entitlement_ttl_days=settings.policy.stale_entitlement_ttl_days,
            users=users,
            operations=operations,
            rate=rate,
            mix=Mix(
                signup=signup_weight,
                cancel=cancel_weight,
                reactivate=reactivate_weight,
                second_signup=second_signup_weight,
                relink=relink_weight,
            ),
            seed=seed if seed is not None else random.SystemRandom().randrange(2**32),
            faults=faults,
            faults_per_kind=fault_count,
            max_relink_window=max_relink_window,
            contention=contention,
        )
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None
    table = EntitlementTable(aws_client(settings.aws, "dynamodb"), config.table_name)
    try:
        summary = run_simulation(config, table, clock_from_settings(settings.clock))
    except EntitlementsError as error:  # messages hold codes only, never keys or bodies
        typer.echo(f"simulate failed: {error}", err=True)
        raise typer.Exit(1) from None
    if summary_json is not None:
        _write_private(summary_json, json.dumps(summary.to_json(include_keys=True), indent=2) + "\n")
    typer.echo(json.dumps(summary.to_json(include_keys=False), indent=2))
