"""`entitlements erasure ...`: the erasure contract from the command line."""

from __future__ import annotations

__all__ = ["app"]

from typing import Annotated

import typer

from schema.erasure import REQUEST_TYPES, ErasureContractError, parse_erasure_message

app = typer.Typer(no_args_is_help=True, add_completion=False)


@app.callback()
def erasure() -> None:
    """The erasure contract between the account service and the stores."""


def _verdict(body: bytes) -> str:
    """`accepted <type>`, `NOT_A_REQUEST <type>`, `NOT_JSON` or `INVALID_MESSAGE`: never the body."""
    try:
        message = parse_erasure_message(body)
    except ErasureContractError as error:
        return error.code.value
    verdict = "accepted" if message.type in REQUEST_TYPES else "NOT_A_REQUEST"
    return f"{verdict} {message.type}"


@app.command()
def validate(
    file: Annotated[
        typer.FileBinaryRead, typer.Argument(metavar="FILE|-", help="One JSON message per line; - for stdin.")
    ],
) -> None:
    """Check messages (one JSON message per line) as a store's parser would, never printing them.

    Prints each line's number and verdict: accepted, NOT_JSON, INVALID_MESSAGE or NOT_A_REQUEST, with
    the type of a valid message. Empty lines are skipped. Exits 0 when every message is accepted, 1
    otherwise.
    """
    checked = accepted = 0
    for number, line in enumerate(file, start=1):
        body = line.rstrip(b"\r\n")
        if not body:
            continue
        verdict = _verdict(body)
        checked += 1
        accepted += verdict.startswith("accepted ")
        typer.echo(f"{number}: {verdict}")
    typer.echo(f"{checked} messages, {accepted} accepted, {checked - accepted} refused")
    if accepted != checked:
        raise typer.Exit(code=1)
