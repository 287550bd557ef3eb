"""What the consumer-store commands share: the stores and the recovery built from the settings, the
summary lines they print, one line (and exit 1) while a store holds damaged files the command skipped,
and the one implementation of `quarantine` and `dead-letter` (`store_commands`: list, export, redrive).

Their errors are `StoreCommandError`s naming the path at fault and what fixes it; the CLI prints them
as one line (exit 2). A store's files are never quoted: a path names a shard and a sequence number only."""

from __future__ import annotations

__all__ = [
    "DEAD_LETTERS",
    "QUARANTINE",
    "StoreCommandError",
    "StoreKind",
    "Stores",
    "build_recovery",
    "exit_if_damaged",
    "one_line_errors",
    "print_counts",
    "print_report",
    "read_store",
    "redrive_store",
    "state_stores",
    "store_commands",
]

from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Protocol, TypeVar

import typer

from schema.errors import EntitlementsError, TerminalError

# The settings, the stores and the recovery are imported where they are used: `quarantine --help` and
# `dead-letter --help` build these groups and must not load the consumer (entitlements.compose loads
# every part, the lake stack included).
if TYPE_CHECKING:
    from config import Settings
    from pipeline import DeadLetters, ParkedWork, Quarantine, Recovery, RecoveryReport

_T = TypeVar("_T")

# The damaged files a line names before it says how many more there are.
_NAMED_DAMAGED = 5


class _Store(Protocol):
    def damaged(self) -> list[Path]: ...


@dataclass(frozen=True)
class Stores:
    quarantine: Quarantine
    parked: ParkedWork
    dead_letters: DeadLetters

    @classmethod
    def from_settings(cls, settings: Settings) -> Stores:
        from pipeline import DeadLetters, ParkedWork, Quarantine  # noqa: PLC0415 (kept off --help)

        consumer = settings.consumer
        return cls(
            Quarantine(consumer.quarantine_dir),
            ParkedWork(consumer.parked_dir),
            DeadLetters(consumer.dead_letter_dir),
        )


def build_recovery(settings: Settings) -> Recovery:
    """The consumer's handlers (the same composition as the KCL child) over the consumer's stores."""
    from entitlements import compose  # noqa: PLC0415 (kept off --help)
    from pipeline import HandlerRetryPolicy, Recovery  # noqa: PLC0415

    stores = Stores.from_settings(settings)
    consumer = settings.consumer
    return Recovery(
        handlers=compose.handler_registry(settings),
        decode=compose.record_decoder(settings),  # the child's decoder, Kinesis records included
        quarantine=stores.quarantine,
        parked=stores.parked,
        dead_letters=stores.dead_letters,
        retry=HandlerRetryPolicy(consumer.handler_retry_attempts, consumer.handler_retry_max_seconds),
    )


@contextmanager
def one_line_errors(command: str) -> Iterator[None]:
    """An error the operator can act on is one line on stderr and exit code 1. Our errors' messages
    and OSError's (a path) hold no record content; anything else is named by its class only."""
    try:
        yield
    except (EntitlementsError, OSError, ValueError) as error:
        typer.echo(f"{command}: {type(error).__name__}: {error}", err=True)
        raise typer.Exit(1) from None


def print_counts(label: str, counts: Counter[tuple[str, str]]) -> None:
    total = sum(counts.values())
    typer.echo(f"{label}: {total} record{'' if total == 1 else 's'}")
    for (handler, reason), count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        typer.echo(f"  {count:>6}  {handler + '  ' if handler else ''}{reason}")


def print_report(done: str, report: RecoveryReport, remaining: str) -> None:
    typer.echo(f"{done} {report.finished}; {report.remaining} {remaining}")
    for (store, code), records in sorted(report.failures.items()):
        typer.echo(f"  {records:>6}  {store}  {code}")


def exit_if_damaged(command: str, store: _Store) -> None:
    """While the store holds files it cannot read (it skipped them): one line on stderr naming them by
    path (shard and sequence only, never content), and exit code 1. They stay in place for inspection."""
    damaged = store.damaged()
    if not damaged:
        return
    named = ", ".join(str(path) for path in damaged[:_NAMED_DAMAGED])
    more = len(damaged) - _NAMED_DAMAGED
    typer.echo(
        f"{command}: {len(damaged)} damaged file{'' if len(damaged) == 1 else 's'} skipped, left in "
        f"place: {named}{f' and {more} more' if more > 0 else ''}",
        err=True,
    )
    raise typer.Exit(1)


class StoreCommandError(TerminalError):
    """A store command cannot read its store or write its export: names the path and the fix."""


@dataclass(frozen=True)
class StoreKind:
    """One consumer store as its command group shows it."""

    command: str  # the group's name: `entitlements <command> list|export|redrive`
    label: str  # the count line's label
    noun: str  # what one of its records is called, plural
    remaining: str  # the redrive line's word for a record still stored
    store: Callable[[Stores], Quarantine | DeadLetters]


QUARANTINE = StoreKind(
    "quarantine", "quarantine", "quarantined records", "still quarantined", lambda stores: stores.quarantine
)
DEAD_LETTERS = StoreKind(
    "dead-letter", "dead letters", "dead letters", "still dead-lettered", lambda stores: stores.dead_letters
)

_NEW_FILE = "A new file (never overwritten), created readable by you only (0600)."


def _unreadable(kind: StoreKind, store: Quarantine | DeadLetters, error: OSError) -> StoreCommandError:
    """A store the command cannot read (permissions, a file where a folder must be): its path and fix."""
    return StoreCommandError(
        f"cannot read the {kind.label} at {error.filename or store.root} "
        f"({error.strerror or type(error).__name__}): run `entitlements {kind.command}` as the user that "
        "owns ENTITLEMENTS_CONSUMER__STATE_DIR (the stores are owner-only), or point that variable at the "
        "consumer's state folder"
    )


def read_store(kind: StoreKind, store: Quarantine | DeadLetters, read: Callable[[], _T]) -> _T:
    try:
        return read()
    except OSError as error:
        raise _unreadable(kind, store, error) from None


def _export(kind: StoreKind, store: Quarantine | DeadLetters, destination: Path) -> int:
    from pipeline import export_stored  # noqa: PLC0415 (kept off --help)

    try:
        return export_stored(store, destination)
    except FileExistsError:
        raise StoreCommandError(
            f"{destination} exists: an export never overwrites a file; name a new one"
        ) from None
    except OSError as error:
        if error.filename is not None and Path(error.filename) != destination:
            raise _unreadable(kind, store, error) from None
        raise StoreCommandError(
            f"cannot write the export {destination} ({error.strerror or type(error).__name__}): name a new "
            "file in a folder you can write to"
        ) from None


def state_stores(settings: Settings) -> Stores:
    """The consumer's stores; a state folder that is not there is a misconfiguration, never 0 records
    (a consumer that ran has one, whether or not it ever stored a record)."""
    state = settings.consumer.state_dir
    if not state.is_dir():
        what = "is not a folder" if state.exists() else "does not exist"
        raise StoreCommandError(
            f"the consumer's state folder {state} {what}: set ENTITLEMENTS_CONSUMER__STATE_DIR to the "
            "folder `entitlements consume` keeps its state in"
        )
    return Stores.from_settings(settings)


def store_commands(kind: StoreKind, *, help_text: str) -> typer.Typer:
    """`entitlements <kind.command> list|export`; each command module adds its own `redrive`."""
    app = typer.Typer(no_args_is_help=True, help=help_text)

    @app.command("list", help=f"How many {kind.noun} there are, by reason (no content).")
    def list_records() -> None:
        from config import load_settings  # noqa: PLC0415 (kept off --help)
        from pipeline import reason_counts  # noqa: PLC0415

        store = kind.store(state_stores(load_settings()))
        print_counts(kind.label, read_store(kind, store, lambda: reason_counts(store)))
        exit_if_damaged(f"{kind.command} list", store)

    @app.command(help=f"Write all {kind.noun} (raw bytes as base64, reason, position) to a new 0600 file.")
    def export(destination: Annotated[Path, typer.Argument(help=_NEW_FILE)]) -> None:
        from config import load_settings  # noqa: PLC0415 (kept off --help)

        store = kind.store(state_stores(load_settings()))
        written = _export(kind, store, destination)
        typer.echo(f"exported {written} {kind.noun} to {destination}")
        exit_if_damaged(f"{kind.command} export", store)

    return app


def redrive_store(kind: StoreKind, run: Callable[[Recovery], RecoveryReport]) -> None:
    """Run the store's records through the consumer's path (`run`), print the report; exit 1 while
    any record stays stored or a damaged file was skipped."""
    from config import load_settings  # noqa: PLC0415 (kept off --help)
    from entitlements._logging import configure_logging  # noqa: PLC0415
    from pipeline import RecoveryReport  # noqa: PLC0415

    configure_logging()
    settings = load_settings()
    store = kind.store(state_stores(settings))
    if not read_store(kind, store, store.count):  # nothing to re-drive: no handler, no AWS needed
        print_report("re-driven", RecoveryReport(), kind.remaining)
        return
    report = read_store(kind, store, lambda: run(build_recovery(settings)))
    print_report("re-driven", report, kind.remaining)
    exit_if_damaged(f"{kind.command} redrive", store)
    if report.remaining:
        raise typer.Exit(1)
