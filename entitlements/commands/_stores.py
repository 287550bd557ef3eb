"""What the consumer-store commands share: the stores and the recovery built from the settings, the
summary lines they print, one clear line (and exit 1) for an error instead of a traceback, and one line
(and exit 1) while a store holds damaged files the command skipped."""

from __future__ import annotations

__all__ = [
    "Stores",
    "build_recovery",
    "exit_if_damaged",
    "one_line_errors",
    "print_counts",
    "print_report",
]

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import typer

from config import Settings
from entitlements import compose
from pipeline.dead_letter import DeadLetters
from pipeline.decode import decode_record
from pipeline.parking import ParkedWork
from pipeline.quarantine import Quarantine
from pipeline.recovery import Recovery, RecoveryReport
from pipeline.shard_consumer import RetryPolicy
from schema.errors import EntitlementsError

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
        consumer = settings.consumer
        return cls(
            Quarantine(consumer.quarantine_dir),
            ParkedWork(consumer.parked_dir),
            DeadLetters(consumer.dead_letter_dir),
        )


def build_recovery(settings: Settings) -> Recovery:
    """The consumer's handlers (the same composition as the KCL child) over the consumer's stores."""
    stores = Stores.from_settings(settings)
    consumer = settings.consumer
    return Recovery(
        handlers=compose.handler_registry(settings),
        decode=decode_record,
        quarantine=stores.quarantine,
        parked=stores.parked,
        dead_letters=stores.dead_letters,
        retry=RetryPolicy(consumer.handler_retry_attempts, consumer.handler_retry_max_seconds),
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
