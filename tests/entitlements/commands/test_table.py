"""`entitlements table create`."""

from __future__ import annotations

from typer.testing import CliRunner

from entitlements.cli import app
from tests.support.dynamodb import REGION, client, unique_table_name

runner = CliRunner()


def local_env(endpoint: str, table_name: str) -> dict[str, str]:
    return {
        "ENTITLEMENTS_AWS__ENDPOINT_URL": endpoint,
        "ENTITLEMENTS_AWS__REGION": REGION,
        "ENTITLEMENTS_AWS__ACCESS_KEY_ID": "testing",
        "ENTITLEMENTS_AWS__SECRET_ACCESS_KEY": "testing",
        "ENTITLEMENTS_CONSUMER__TABLE_NAME": table_name,
    }


def test_table_create_makes_the_configured_table_on_the_configured_endpoint(moto_endpoint: str) -> None:
    name = unique_table_name("cli")
    result = runner.invoke(app, ["table", "create"], env=local_env(moto_endpoint, name))
    described = client(moto_endpoint, "dynamodb").describe_table(TableName=name)["Table"]
    assert (result.exit_code, described["StreamSpecification"]["StreamViewType"]) == (0, "NEW_AND_OLD_IMAGES")


def test_table_create_prints_the_stream_arn(moto_endpoint: str) -> None:
    name = unique_table_name("cli")
    result = runner.invoke(app, ["table", "create"], env=local_env(moto_endpoint, name))
    arn = client(moto_endpoint, "dynamodb").describe_table(TableName=name)["Table"]["LatestStreamArn"]
    assert f"stream arn: {arn}" in result.output


def test_table_create_twice_says_the_table_already_existed(moto_endpoint: str) -> None:
    name = unique_table_name("cli")
    runner.invoke(app, ["table", "create"], env=local_env(moto_endpoint, name))
    again = runner.invoke(app, ["table", "create"], env=local_env(moto_endpoint, name))
    assert (again.exit_code, f"table {name} already existed" in again.output) == (0, True)


def test_table_create_takes_a_table_name_option(moto_endpoint: str) -> None:
    name = unique_table_name("cli")
    runner.invoke(app, ["table", "create", "--table-name", name], env=local_env(moto_endpoint, "other"))
    assert client(moto_endpoint, "dynamodb").describe_table(TableName=name)["Table"]["TableName"] == name


def test_table_create_with_kinesis_refuses_an_unknown_precision_in_one_line_making_nothing(
    moto_endpoint: str,
) -> None:
    name = unique_table_name("cli")
    result = runner.invoke(
        app,
        ["table", "create", "--kinesis", "arn:aws:kinesis:eu-west-1:1:stream/s", "--precision", "SECOND"],
        env=local_env(moto_endpoint, name),
    )
    assert result.exit_code == 2
    assert (
        result.output.strip().splitlines()[-1].endswith("precision must be one of MICROSECOND, MILLISECOND")
    )
    assert name not in client(moto_endpoint, "dynamodb").list_tables()["TableNames"]
