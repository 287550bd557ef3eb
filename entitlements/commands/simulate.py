"""`entitlements simulate`: the entitlement service's workload at a chosen rate and mix.

With `--clients N` the mix goes as HTTP requests from N concurrent clients to the service
(`devstack.service_workload`): a service started in this process on 127.0.0.1 with the settings' table,
Array and transactions-service (the local stack's fakes), or the one at `--service-url`.
`--concurrent-same-user RATE` adds, beside the clients, RATE bursts per second of two simultaneous
requests for one user, so races the service's guard decides arise by themselves (a loser's 409
`concurrent_request` is counted as the documented answer). `--unguarded-links` (in-process service
only; refused unless every endpoint is loopback) makes the link write an unconditional put
(`devstack.unguarded_links`), to show the harm the service design guards against (a link's stale put
writing a retired row back Active: docs/table.md). `--faults` plants the anomalies the service cannot
produce by direct table writes, labelled `planted_by_direct_write`.

With `--clients 0` (the default) the simulator's state machine (`devstack.simulator`) sends each
operation, one at a time, to the service's own code in this process (`entitlements._workload.
in_process_service`, no HTTP), against the settings' table and the local stack's fakes.
"""

from __future__ import annotations

__all__ = ["app"]

import json
import os
import random
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from config import Settings, load_settings
from entitlements._logging import configure_logging
from entitlements._progress import progress

if TYPE_CHECKING:  # the simulator and the service are imported when the command runs: --help stays fast
    from devstack.direct_writes import DirectWrites
    from devstack.service_workload import WorkloadSummary
    from devstack.simulator import SimulationConfig

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
    contention: Annotated[
        float,
        typer.Option(
            min=0.0,
            max=1.0,
            help="With --clients: share of cancels and second signups aimed at users mid-relink.",
        ),
    ] = 0.5,
    table_name: Annotated[
        str | None, typer.Option(help="Table; default the settings' consumer.table_name.")
    ] = None,
    clients: Annotated[
        int,
        typer.Option(
            min=0, help="Concurrent HTTP clients sending the mix to the service; 0 writes the table."
        ),
    ] = 0,
    service_url: Annotated[
        str | None,
        typer.Option(help="With --clients: the running service to drive; default one started in-process."),
    ] = None,
    concurrent_same_user: Annotated[
        float,
        typer.Option(
            min=0.0,
            help="With --clients: bursts per second of two simultaneous requests for one user (0: none); "
            "a losing request's 409 concurrent_request is a documented answer.",
        ),
    ] = 0.0,
    unguarded_links: Annotated[
        bool,
        typer.Option(
            "--unguarded-links/--guarded-links",
            help="In-process service only, local stack only: the link write is an unconditional put.",
        ),
    ] = False,
    summary_json: Annotated[
        Path | None,
        typer.Option(help="Write the full summary, planted faults' keys included, to this file (mode 0600)."),
    ] = None,
) -> None:
    """Send the service's workload (through the service with --clients, else to the table); print a
    summary (counts only) as JSON."""
    from devstack.direct_writes import DirectWrites  # noqa: PLC0415
    from devstack.simulator import Mix, SimulationConfig, run_simulation  # noqa: PLC0415
    from entitlements import compose  # noqa: PLC0415
    from entitlements._clients import aws_client  # noqa: PLC0415
    from pipeline.clock import clock_from_settings  # noqa: PLC0415

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
            contention=contention,
        )
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None
    if concurrent_same_user > 0 and clients == 0:
        raise typer.BadParameter("--concurrent-same-user needs --clients (requests through the service)")
    if unguarded_links and (clients == 0 or service_url is not None):
        raise typer.BadParameter("--unguarded-links needs --clients and the in-process service")
    if summary_json is not None:  # a folder that cannot hold it is refused before anything is written
        summary_json.parent.mkdir(parents=True, exist_ok=True)
    # The table, reached once first: missing or unreachable, one line naming the fix (the messages of
    # the errors below hold codes only, never keys or bodies).
    compose.table_stream_arn(settings, table_name=config.table_name)
    table = DirectWrites(aws_client(settings.aws, "dynamodb"), config.table_name)
    summary: Any
    if clients == 0:
        from entitlements._workload import in_process_service  # noqa: PLC0415 (the service, only here)

        with (
            in_process_service(settings) as service,
            progress("simulating: operations through the service", total=config.operations) as bar,
        ):
            summary = run_simulation(
                config, table, clock_from_settings(settings.clock), service=service, progress=bar.at
            )
    else:
        summary = _through_the_service(
            settings,
            config,
            table,
            clients=clients,
            service_url=service_url,
            unguarded=unguarded_links,
            concurrent_same_user=concurrent_same_user,
        )
    if summary_json is not None:
        _write_private(summary_json, json.dumps(summary.to_json(include_keys=True), indent=2) + "\n")
    typer.echo(json.dumps(summary.to_json(include_keys=False), indent=2))


def _through_the_service(
    settings: Settings,
    config: SimulationConfig,
    table: DirectWrites,
    *,
    clients: int,
    service_url: str | None,
    unguarded: bool,
    concurrent_same_user: float,
) -> WorkloadSummary:
    from devstack.planted_faults import FaultKind, plant_faults  # noqa: PLC0415
    from devstack.service_workload import WorkloadConfig, run_service_workload  # noqa: PLC0415
    from entitlements._workload import local_service  # noqa: PLC0415 (the service's stack, only here)
    from pipeline.clock import clock_from_settings  # noqa: PLC0415

    # The anomalies a workload through the service cannot produce: planted by direct writes.
    direct_write_faults = (
        FaultKind.STRING_TTL,
        FaultKind.MILLISECOND_TTL,
        FaultKind.FAILED_REACTIVATION_DELETE,
        FaultKind.TOKEN_CANARY,
    )

    workload = WorkloadConfig(
        users=config.users,
        operations=config.operations,
        clients=clients,
        mix=config.mix,
        seed=config.seed,
        contention=config.contention,
        rate=config.rate,
        concurrent_same_user=concurrent_same_user,
    )
    planted = (
        plant_faults(config, table, clock_from_settings(settings.clock), direct_write_faults)
        if config.faults
        else []
    )
    if service_url is not None:
        summary = run_service_workload(workload, service_url)
    else:
        with local_service(settings, unguarded_links=unguarded) as running:
            summary = run_service_workload(workload, running.url)
            if running.unguarded is not None:
                summary.unguarded_links = running.unguarded.snapshot()
    summary.planted_faults = planted
    return summary
