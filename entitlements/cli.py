"""Entitlements stream processing: the local stack, the stream consumer, its cleanup, erasure and relink
workers, and the lake's analysis and audits.

Every command reads its settings from ENTITLEMENTS_* variables (`__` between nested names, e.g.
ENTITLEMENTS_AWS__ENDPOINT_URL). A failure is one line on stderr naming what is at fault and a non-zero
exit; `entitlements --debug COMMAND` shows the traceback.
"""

from __future__ import annotations

__all__ = ["COMMANDS", "CommandEntry", "app", "describe_error", "main"]

import importlib
import signal
import sys
import threading
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import typer
import typer.main
from typer.core import TyperCommand, TyperGroup

from entitlements._progress import set_quiet

# The exit code of a command that could not run (a bad input, a misconfiguration, an unreachable
# endpoint). Commands with a verdict (audit, validate, drain) exit 1 for a failed one themselves.
EXIT_REFUSED = 2
_EXIT_INTERRUPTED = 130  # 128 + SIGINT, as typer exits on KeyboardInterrupt


@dataclass(frozen=True, slots=True)
class CommandEntry:
    """A top-level command, known without importing it: `--help` and completion list these, and a
    command's module is imported only when the command runs (or its own `--help` is asked for)."""

    module: str  # under entitlements.commands
    group: bool  # the module's app is a group under this name (else: one of the module's commands)
    summary: str
    panel: str


_LOCAL = "Local stack and workload"
_CONSUMER = "Stream consumer"
_WORKERS = "Cleanup, erasure and relinking"
_LAKE = "Lake and analysis"

COMMANDS: dict[str, CommandEntry] = {
    "local": CommandEntry(
        "local", True, "The local stack: moto, the fakes and the service on 127.0.0.1.", _LOCAL
    ),
    "table": CommandEntry(
        "table", True, "The entitlements table: create it on the configured endpoint.", _LOCAL
    ),
    "simulate": CommandEntry(
        "simulate", False, "Send the service's workload at a chosen rate and mix.", _LOCAL
    ),
    "demo": CommandEntry(
        "demo", False, "Everything end to end on the local stack, then the verdict.", _LOCAL
    ),
    "serve": CommandEntry("serve", False, "Serve the entitlements service's HTTP API.", _LOCAL),
    "consume": CommandEntry("consume", False, "Run the KCL consumer of the table's stream.", _CONSUMER),
    "replay-parked": CommandEntry(
        "consume", False, "Run parked batches again through the consumer's path.", _CONSUMER
    ),
    "consumer-status": CommandEntry(
        "consume", False, "Per shard: records, lag, quarantined, parked, retry queue.", _CONSUMER
    ),
    "quarantine": CommandEntry("quarantine", True, "Records the consumer could not decode.", _CONSUMER),
    "dead-letter": CommandEntry(
        "dead_letter", True, "Records a handler refused for their own content.", _CONSUMER
    ),
    "cleanup": CommandEntry(
        "cleanup", True, "Array account cleanup: retry queue, its worker, repair.", _WORKERS
    ),
    "erasure": CommandEntry(
        "erasure", True, "The erasure contract: validate messages, set up and run the worker.", _WORKERS
    ),
    "relinker": CommandEntry("relinker", True, "The relinker worker: its queues, jobs and run.", _WORKERS),
    "sql": CommandEntry("lake", False, "Run a read-only query over the lake's views.", _LAKE),
    "snapshot": CommandEntry("lake", False, "Fold the change log into the table's current state.", _LAKE),
    "compact": CommandEntry("lake", False, "Merge each partition's small files.", _LAKE),
    "lake": CommandEntry("lake_tables", True, "The lake's Delta tables.", _LAKE),
    "mine": CommandEntry("mine", False, "Run a mining report over the lake.", _LAKE),
    "audit": CommandEntry("audit", False, "Check the table's invariants over the lake.", _LAKE),
    "audit-failures": CommandEntry(
        "audit", False, "Print the rows an audit stored for its failing checks.", _LAKE
    ),
}


@dataclass
class _Run:
    """This invocation's global options (reset by each `main`)."""

    debug: bool = False
    interrupted: bool = False  # Ctrl-C came: the threads it stops fail as it unwinds, silently


_RUN = _Run()


def _interrupt(signum: int, frame: Any) -> None:
    """SIGINT as Python's own handler (KeyboardInterrupt in the main thread), remembered first: the
    command's threads then fail under it (closed clients, a stopped server) and say nothing."""
    _RUN.interrupted = True
    signal.default_int_handler(signum, frame)


def _loaded(module_name: str) -> dict[str, Any]:
    """The click commands a command module defines, by name (a group module: one, under its name)."""
    module = importlib.import_module(f"entitlements.commands.{module_name}")
    sub: typer.Typer = module.app
    holder = typer.Typer(rich_markup_mode=None)
    groups = [name for name, entry in COMMANDS.items() if entry.module == module_name and entry.group]
    if groups:
        holder.add_typer(sub, name=groups[0])
    else:
        holder.registered_commands.extend(sub.registered_commands)
    return dict(typer.main.get_group(holder).commands)


class _LazyGroup(TyperGroup):
    """The root group: lists `COMMANDS` without importing them and imports a command's module only to
    run it; turns every failure into one line on stderr (`describe_error`) unless `--debug`."""

    def list_commands(self, ctx: Any) -> list[str]:
        return [*COMMANDS, *(name for name in self.commands if name not in COMMANDS)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = self.commands.get(cmd_name)
        if command is not None or cmd_name not in COMMANDS:
            return command
        entry = COMMANDS[cmd_name]
        # A stand-in for listings (help, completion): the real command is loaded by `resolve_command`.
        return TyperCommand(
            name=cmd_name, help=entry.summary, short_help=entry.summary, rich_help_panel=entry.panel
        )

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The commands in sections (local stack, consumer, workers, lake), from `COMMANDS` alone."""
        panels: dict[str, list[tuple[str, str]]] = {}
        for name, entry in COMMANDS.items():
            panels.setdefault(entry.panel, []).append((name, entry.summary))
        for name in self.commands:
            if name not in COMMANDS:
                panels.setdefault("Other commands", []).append(
                    (name, self.commands[name].get_short_help_str())
                )
        for panel, rows in panels.items():
            with formatter.section(panel):
                formatter.write_dl(rows)

    def load(self, cmd_name: str) -> None:
        """Import the module of `cmd_name` (every module when the name is not listed: a command added
        to a module but not yet to `COMMANDS` still runs, and a typo gets close matches)."""
        if cmd_name in self.commands:
            return
        entry = COMMANDS.get(cmd_name)
        modules = [entry.module] if entry else sorted({e.module for e in COMMANDS.values()})
        for module_name in modules:
            for name, command in _loaded(module_name).items():
                self.commands.setdefault(name, command)

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any, list[str]]:
        if args:
            self.load(args[0])
        return super().resolve_command(ctx, args)

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        run = {"windows_expand_args": windows_expand_args, **extra}
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **run)
        _RUN.debug = _RUN.interrupted = False
        set_quiet(False)
        previous_hook, threading.excepthook = threading.excepthook, _thread_failed
        in_main = threading.current_thread() is threading.main_thread()  # where handlers can be set
        if in_main and signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not ignored
            signal.signal(signal.SIGINT, _interrupt)
        try:
            outcome = super().main(args, prog_name, complete_var, standalone_mode=False, **run)
            if _RUN.interrupted and outcome == _EXIT_INTERRUPTED:  # typer's silent exit for Ctrl-C
                typer.echo("entitlements: interrupted: stopped what it had started", err=True)
        except typer.TyperException as refused:  # click's usage errors: one line, not a panel
            if type(refused).__name__ == "NoArgsIsHelpError":  # `entitlements` or a group alone: its help
                typer.echo(refused.format_message(), err=True)
            else:
                typer.echo(f"entitlements: {_usage_line(refused)}", err=True)
            sys.exit(refused.exit_code)
        except typer.Abort:
            typer.echo("entitlements: aborted", err=True)
            sys.exit(1)
        except Exception as error:
            if _RUN.debug:  # the traceback added, the line and the exit status as without --debug
                traceback.print_exc(file=sys.stderr)
            typer.echo(f"entitlements: {describe_error(error)}", err=True)
            sys.exit(EXIT_REFUSED)
        finally:
            threading.excepthook = previous_hook
            if in_main and signal.getsignal(signal.SIGINT) is _interrupt:
                signal.signal(signal.SIGINT, signal.default_int_handler)
            _RUN.debug = False
        sys.exit(outcome if isinstance(outcome, int) else 0)


def _thread_failed(failed: threading.ExceptHookArgs) -> None:
    """A background thread's failure (a server's, a worker's): one line too, unless `--debug`."""
    if _RUN.debug or failed.exc_value is None:
        threading.__excepthook__(failed)
        return
    if _RUN.interrupted:  # stopped by Ctrl-C as the command unwinds: not a failure of its own
        return
    name = failed.thread.name if failed.thread is not None else "a thread"
    typer.echo(f"entitlements: {name} failed: {describe_error(failed.exc_value)}", err=True)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _usage_line(refused: typer.TyperException) -> str:
    ctx = getattr(refused, "ctx", None)
    names: list[str] = []
    while ctx is not None and ctx.parent is not None:  # the root's own name is always `entitlements`
        names.insert(0, ctx.info_name or "")
        ctx = ctx.parent
    where = " ".join(names)
    message = _one_line(refused.format_message())
    hint = f" (see `{' '.join(['entitlements', *names])} --help`)" if getattr(refused, "ctx", None) else ""
    return f"{where + ': ' if where else ''}{message}{hint}"


def _origin(url: object) -> str:
    """scheme://host:port of a URL: never its path or query (they can hold ids)."""
    from urllib.parse import urlsplit  # noqa: PLC0415 (kept off --help)

    parts = urlsplit(str(url))
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}" if parts.netloc else "the endpoint"


_UNREACHABLE_HINT = (
    "start it (`entitlements local up` for the local stack) or fix ENTITLEMENTS_AWS__ENDPOINT_URL"
)


def _botocore_line(error: Exception) -> str | None:
    from botocore import exceptions as boto  # noqa: PLC0415 (only when botocore raised)

    kwargs: dict[str, Any] = getattr(error, "kwargs", {}) or {}
    endpoint = kwargs.get("endpoint_url")
    if isinstance(error, boto.NoCredentialsError | boto.PartialCredentialsError):
        return (
            "no AWS credentials: set ENTITLEMENTS_AWS__ACCESS_KEY_ID and ENTITLEMENTS_AWS__SECRET_ACCESS_KEY "
            "(or the AWS_* variables)"
        )
    if isinstance(error, boto.NoRegionError):
        return "no AWS region: set ENTITLEMENTS_AWS__REGION"
    if isinstance(error, boto.EndpointConnectionError | boto.ConnectTimeoutError | boto.ReadTimeoutError):
        return f"cannot reach AWS at {_origin(endpoint)}: {_UNREACHABLE_HINT}"
    if isinstance(error, boto.ClientError):
        from schema.aws_errors import aws_error_code  # noqa: PLC0415

        return f"AWS {error.operation_name} failed: {aws_error_code(error)}"
    if isinstance(error, boto.BotoCoreError):
        return f"AWS call failed: {type(error).__name__}"
    return None


def _httpx_line(error: Exception) -> str | None:
    import httpx  # noqa: PLC0415 (only when httpx raised)

    if isinstance(error, httpx.TransportError):
        try:
            where = _origin(error.request.url)
        except RuntimeError:  # raised outside a request
            where = "an HTTP endpoint"
        return (
            f"cannot reach {where} ({type(error).__name__}): is it running? (Array: "
            "ENTITLEMENTS_ARRAY__BASE_URL; transactions-service: ENTITLEMENTS_SERVICE__TRANSACTIONS_BASE_URL)"
        )
    if isinstance(error, httpx.HTTPStatusError):
        return f"{_origin(error.request.url)} answered {error.response.status_code}"
    return None


def _os_line(error: OSError) -> str:
    """The OS's reason and the path (`No such file or directory: var/x`); an OSError raised with a message
    of ours (`launcher jar not built: ...`) keeps it."""
    if error.strerror is None:
        return str(error) or type(error).__name__
    if error.filename is not None:
        return f"{error.strerror}: {error.filename}"
    return error.strerror


def describe_error(error: BaseException) -> str:
    """One line for a failure that reached the command line: the project's errors say what is at fault
    (their messages hold no record content); a third-party error is named by what it concerns (an
    endpoint's address, a file's path) and its class, never by its text, which can quote data."""
    from entitlements.commands._lake_lines import lake_line  # noqa: PLC0415 (kept off --help)
    from schema.errors import EntitlementsError  # noqa: PLC0415

    refined = lake_line(error)
    if refined is not None:
        return _one_line(refined)
    if isinstance(error, EntitlementsError):
        text = str(error)
        if getattr(error, "code", None) in _CONNECTION_CODES:
            endpoint = getattr(error, "endpoint", None)
            text += f": cannot reach AWS{f' at {_origin(endpoint)}' if endpoint else ''}: {_UNREACHABLE_HINT}"
        return _one_line(text)
    module = type(error).__module__.split(".")[0]
    line: str | None = None
    if isinstance(error, Exception) and module == "botocore":
        line = _botocore_line(error)
    elif isinstance(error, Exception) and module in ("httpx", "httpcore"):
        line = _httpx_line(error)
    elif isinstance(error, OSError):
        line = _os_line(error)
    if line is None:
        line = f"unexpected {type(error).__name__} (run `entitlements --debug ...` for the traceback)"
    return _one_line(line)


_CONNECTION_CODES = frozenset(
    {"EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError", "ConnectionClosedError"}
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version  # noqa: PLC0415

        typer.echo(f"entitlements {version('entitlements-streams')}")
        raise typer.Exit


_HELP = (
    "Entitlements stream processing: the local stack, the stream consumer, its cleanup, erasure and "
    "relink workers, and the lake's analysis and audits.\n\n"
    "Settings come from ENTITLEMENTS_* variables, `__` between nested names "
    "(ENTITLEMENTS_AWS__ENDPOINT_URL). A failure is one line on stderr naming what is at fault, with a "
    "non-zero exit; `entitlements --debug COMMAND ...` shows its traceback."
)

app = typer.Typer(
    cls=_LazyGroup,
    no_args_is_help=True,
    help=_HELP,
    # Plain help (click's formatter): rich's help renderer costs more start-up than the rest of --help.
    rich_markup_mode=None,
    pretty_exceptions_show_locals=False,
    pretty_exceptions_short=True,
)


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show the traceback of a failure."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    _RUN.debug = debug
    set_quiet(quiet)


def main() -> None:
    app()
