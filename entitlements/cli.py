"""`entitlements`: the one console script. A thin shell: each command group lives in
`entitlements/commands/<group>.py`, parses arguments, builds the settings once and calls library code
or the composition root (`entitlements.compose`). A refused setting ends the command with its field and
rule on stderr (exit 2), never its value, and a missing queue with the setup command that makes it;
tracebacks never show local variables."""

from __future__ import annotations

__all__ = ["app", "main"]

import importlib

import typer

from config import SettingsError
from entitlements.compose import SetupMissingError

app = typer.Typer(
    no_args_is_help=True, add_completion=False, help=__doc__, pretty_exceptions_show_locals=False
)

# (module under entitlements.commands, group name or None to add its commands at the top level)
_COMMAND_MODULES: tuple[tuple[str, str | None], ...] = (
    ("table", "table"),
    ("local", "local"),
    ("simulate", None),
    ("consume", None),
    ("demo", None),
    ("lake", None),
    ("lake_tables", "lake"),
    ("mine", None),
    ("audit", None),
    ("cleanup", "cleanup"),
    ("erasure", "erasure"),
    ("quarantine", "quarantine"),
    ("dead_letter", "dead-letter"),
    ("serve", None),
    ("relinker", "relinker"),
)


def _register() -> None:
    for module_name, group in _COMMAND_MODULES:
        module = importlib.import_module(f"entitlements.commands.{module_name}")
        sub: typer.Typer = module.app
        if group is None:
            for command in sub.registered_commands:
                app.registered_commands.append(command)
        else:
            app.add_typer(sub, name=group)


_register()


def main() -> None:
    try:
        app()
    except (SettingsError, SetupMissingError) as refused:
        typer.echo(f"entitlements: {refused}", err=True)
        raise SystemExit(2) from None
