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

from entitlements._logging import configure_logging
from entitlements._progress import LINE_SECONDS, progress

if TYPE_CHECKING:  # the simulator and the service are imported when the command runs: --help stays fast
    from config import Settings
    from devstack.direct_writes import DirectWrites
    from devstack.service_workload import WorkloadSummary
    from devstack.workload import Answered, EntitlementOperations, SimulationConfig

app = typer.Typer()

_DOWNSTREAMS = (
    "Array (ENTITLEMENTS_ARRAY__BASE_URL) and transactions-service "
    "(ENTITLEMENTS_SERVICE__TRANSACTIONS_BASE_URL)"
)


class _CountedOperations:
    """The in-process service, counting the operations it could not complete (a downstream kept
    failing: `OperationAnswer.UNAVAILABLE`, the 503 of the HTTP API), which the simulator's summary folds into
    its refusals."""

    def __init__(self, service: EntitlementOperations) -> None:
        self._service = service
        self.unavailable = 0

    def _counted(self, answered: Answered) -> Answered:
        from devstack.workload import OperationAnswer  # noqa: PLC0415

        self.unavailable += answered.answer is OperationAnswer.UNAVAILABLE
        return answered

    def signup(self, user_id: str) -> Answered:
        return self._counted(self._service.signup(user_id))

    def cancel(self, user_id: str) -> Answered:
        return self._counted(self._service.cancel(user_id))

    def reactivate(self, user_id: str) -> Answered:
        return self._counted(self._service.reactivate(user_id))

    def second_signup(self, user_id: str) -> Answered:
        return self._counted(self._service.second_signup(user_id))

    def relink(self, user_id: str) -> Answered:
        return self._counted(self._service.relink(user_id))


def _origin(url: str) -> str:
    from urllib.parse import urlsplit  # noqa: PLC0415

    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"


def _refuse_a_failed_run(*, sent: int, no_answer: int, server_errors: int, service_url: str | None) -> None:
    """A workload the service did not take is not a success: one line on stderr (after the summary on
    stdout, which counts what happened) and a non-zero exit. 2 when no request got any answer (the
    service is not there), 1 when some operations failed on the service's side (5xx: a downstream of
    the service kept failing), as a verdict."""
    if sent and no_answer == sent:
        where = _origin(service_url) if service_url else "the in-process service"
        typer.echo(
            f"entitlements: simulate: none of the {sent} requests got an answer from {where}: is the "
            "service running there? (--service-url names it; without it one starts in this process)",
            err=True,
        )
        raise typer.Exit(2)
    failed = no_answer + server_errors
    if failed:
        typer.echo(
            f"entitlements: simulate: {failed} of {sent} operations failed ({no_answer} with no answer, "
            f"{server_errors} the service could not complete, its 503: a downstream kept failing): check "
            f"{_DOWNSTREAMS} "
            "and the service's log; the summary counts them",
            err=True,
        )
        raise typer.Exit(1)


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
    summary (counts only) as JSON. Exits 1 when operations failed on the service's side (answered 5xx,
    or no answer), 2 when the service never answered at all."""
    from config import load_settings  # noqa: PLC0415 (kept off --help)
    from devstack.direct_writes import DirectWrites  # noqa: PLC0415
    from devstack.simulator import run_simulation  # noqa: PLC0415
    from devstack.workload import Mix, SimulationConfig  # noqa: PLC0415
    from entitlements import compose  # noqa: PLC0415
    from entitlements._clients import aws_client, bounded_calls  # noqa: PLC0415
    from schema.clock import clock_from_settings  # noqa: PLC0415

    configure_logging("WARNING")  # the summary and a failed run's line say what the run did
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
    with bounded_calls():  # and a silent endpoint one line within seconds, not minutes of retries
        compose.table_stream_arn(settings, table_name=config.table_name)
    table = DirectWrites(aws_client(settings.aws, "dynamodb"), config.table_name)
    summary: Any
    if clients == 0:
        from entitlements._workload import in_process_service  # noqa: PLC0415 (the service, only here)

        with (
            in_process_service(settings) as service,
            progress(
                "simulating: operations through the service", total=config.operations, every=LINE_SECONDS
            ) as bar,
        ):
            counted = _CountedOperations(service)
            summary = run_simulation(
                config, table, clock_from_settings(settings.clock), service=counted, progress=bar.at
            )
        no_answer, server_errors, sent = 0, counted.unavailable, sum(summary.operations.values())
    else:
        # The workload reports no counts while it runs: a spinner on a terminal, else a line every
        # few seconds, so that a long run is never minutes of silence.
        with progress(f"simulating: requests from {clients} clients", every=LINE_SECONDS):
            summary = _through_the_service(
                settings,
                config,
                table,
                clients=clients,
                service_url=service_url,
                unguarded=unguarded_links,
                concurrent_same_user=concurrent_same_user,
            )
        no_answer = summary.transport_errors
        server_errors = sum(
            count for by in summary.answers.values() for status, count in by.items() if status[0] == "5"
        )
        sent = no_answer + sum(sum(by.values()) for by in summary.answers.values())
    if summary_json is not None:
        _write_private(summary_json, json.dumps(summary.to_json(include_keys=True), indent=2) + "\n")
    typer.echo(json.dumps(summary.to_json(include_keys=False), indent=2))
    _refuse_a_failed_run(sent=sent, no_answer=no_answer, server_errors=server_errors, service_url=service_url)


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
    from schema.clock import clock_from_settings  # noqa: PLC0415

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
