"""`entitlements table create`: make the entitlements table, its GSI1 index, stream and TTL (and with
`--kinesis ARN`, its Kinesis Data Streams destination)."""

from __future__ import annotations

__all__ = ["app"]

import typer

app = typer.Typer(no_args_is_help=True, help="The entitlements table.")


@app.command("create")
def create(
    table_name: str = typer.Option(None, help="Table name; default the settings' consumer.table_name."),
    kinesis: str = typer.Option(
        None,
        "--kinesis",
        help="Also stream the table's changes to this Kinesis data stream (its ARN): Kinesis Data "
        "Streams for DynamoDB.",
    ),
    precision: str = typer.Option(
        "MICROSECOND",
        help="With --kinesis: the unit of each record's ApproximateCreationDateTime, MICROSECOND or "
        "MILLISECOND.",
    ),
) -> None:
    """Make the table (or bring an existing one to the contract) on the configured endpoint."""
    # Imported here, not at the top: `--help` never pays for them.
    from config import load_settings  # noqa: PLC0415
    from entitlements._clients import aws_client, bounded_calls  # noqa: PLC0415
    from entitlements._logging import configure_logging  # noqa: PLC0415
    from pipeline import create_table, enable_kinesis_destination, kinesis_precision  # noqa: PLC0415

    configure_logging()
    settings = load_settings()
    name = table_name or settings.consumer.table_name
    if kinesis:
        kinesis_precision(precision)  # refused before anything is made
    with bounded_calls():  # a silent endpoint: one line within seconds, not minutes of retries
        client = aws_client(settings.aws, "dynamodb")
        table = create_table(client, name)
        destination = (
            enable_kinesis_destination(client, name, kinesis, precision=precision) if kinesis else None
        )
    state = "created" if table.created else "already existed"
    typer.echo(f"table {table.table_name} {state}")
    typer.echo(f"table arn:  {table.table_arn}")
    typer.echo(f"stream arn: {table.stream_arn}")
    if destination is not None:
        typer.echo(f"kinesis destination {destination}: {kinesis} ({precision})")
