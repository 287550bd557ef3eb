"""One module per command group; each exposes a `typer.Typer` named `app`."""

__all__: list[str] = []
