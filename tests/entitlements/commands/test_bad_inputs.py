"""Every command, given a bad input or a misconfiguration: one line on stderr naming what is at fault, a
non-zero exit, no traceback (entitlements/cli.py's contract; each command's own checks).

For every command: a bad setting value, a mistyped variable and a section that is not JSON; then, where
the command has one, a missing path, a malformed file and an unreachable endpoint (a closed port on
127.0.0.1; for the servers, a port already in use). The cases the issue names are among them.
"""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from typer.testing import CliRunner, Result

from analytics.lake import open_lake
from entitlements.cli import app
from pipeline.tables import create_table
from tests.analytics.audits.story import clean_story
from tests.analytics.lake.delta_files import data_files
from tests.entitlements.commands._stored import StateDir, stream_record
from tests.pipeline._consumer_fakes import STREAM
from tests.support.dynamodb import client
from tests.support.outcomes import land_outcomes

if TYPE_CHECKING:
    from pipeline.parking import RawRecord

CANARY = "canary-5e1f-not-to-be-shown"

# Every command, with the arguments that make it run (not just print its help).
COMMANDS: dict[str, list[str]] = {
    "local up": ["local", "up", "--no-service"],
    "table create": ["table", "create"],
    "simulate": ["simulate", "--operations", "5"],
    "demo": ["demo", "--state-dir", "{tmp}/demo"],
    "serve": ["serve"],
    "consume": ["consume"],
    "replay-parked": ["replay-parked"],
    "consumer-status": ["consumer-status"],
    "quarantine list": ["quarantine", "list"],
    "quarantine export": ["quarantine", "export", "{tmp}/export.jsonl"],
    "quarantine redrive": ["quarantine", "redrive"],
    "dead-letter list": ["dead-letter", "list"],
    "dead-letter export": ["dead-letter", "export", "{tmp}/export.jsonl"],
    "dead-letter redrive": ["dead-letter", "redrive"],
    "cleanup setup": ["cleanup", "setup"],
    "cleanup retry-worker": ["cleanup", "retry-worker", "--drain", "--max-seconds", "5"],
    "cleanup repair": ["cleanup", "repair", "--dry-run"],
    "erasure setup": ["erasure", "setup"],
    "erasure worker": ["erasure", "worker", "--wait-seconds", "0"],
    "erasure try": ["erasure", "try", "CHECK", "--key-kind", "ACCOUNT", "--key", "acct-1", "--wait", "1"],
    "relinker setup": ["relinker", "setup"],
    "relinker enqueue": ["relinker", "enqueue", "--user", "u1"],
    "relinker run": ["relinker", "run", "--drain", "--max-seconds", "5"],
    "sql": ["sql", "SELECT count(*) FROM changes"],
    "snapshot": ["snapshot"],
    "compact": ["compact"],
    "lake files": ["lake", "files"],
    "lake migrate": ["lake", "migrate"],
    "mine": ["mine", "cleanup_latency"],
    "audit": ["audit"],
    "audit-failures": ["audit-failures"],
}
# `erasure validate` reads no settings (it checks messages against the contract alone): its cases are below.


@dataclass
class World:
    """One test's folder, environment and ports: AWS is the session's moto (nothing made there yet under
    this test's names) unless a case points it at the closed port."""

    tmp: Path
    moto: str
    closed: int
    busy: int
    env: dict[str, str] = field(default_factory=dict)

    def fill(self, text: str) -> str:
        for name, value in (("tmp", self.tmp), ("closed", self.closed), ("busy", self.busy)):
            text = text.replace("{" + name + "}", str(value))
        return text

    def run(self, argv: list[str], **env: str) -> Result:
        environ = {**self.env, **{name: self.fill(value) for name, value in env.items()}}
        return CliRunner().invoke(app, [self.fill(arg) for arg in argv], env=environ)

    @property
    def state(self) -> StateDir:
        return StateDir(self.tmp / "state")

    def dead_aws(self) -> dict[str, str]:
        return {"ENTITLEMENTS_AWS__ENDPOINT_URL": f"http://127.0.0.1:{self.closed}"}


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield int(holder.getsockname()[1])


@pytest.fixture
def world(
    tmp_path: Path, moto_endpoint: str, closed_port: int, busy_port: int, monkeypatch: pytest.MonkeyPatch
) -> World:
    monkeypatch.chdir(tmp_path)  # a default relative path (var/...) lands here, never in the repository
    name = f"bad-{uuid.uuid4().hex[:10]}"
    w = World(tmp_path, moto_endpoint, closed_port, busy_port)
    w.env = {
        "ENTITLEMENTS_AWS__ENDPOINT_URL": moto_endpoint,
        "ENTITLEMENTS_AWS__REGION": "eu-west-1",
        "ENTITLEMENTS_AWS__ACCESS_KEY_ID": "testing",
        "ENTITLEMENTS_AWS__SECRET_ACCESS_KEY": "testing",
        "ENTITLEMENTS_AWS__MAX_ATTEMPTS": "1",
        "ENTITLEMENTS_CONSUMER__TABLE_NAME": name,
        "ENTITLEMENTS_CONSUMER__STATE_DIR": str(tmp_path / "state"),
        "ENTITLEMENTS_LAKE__ROOT": str(tmp_path / "lake"),
        "ENTITLEMENTS_ARRAY__BASE_URL": f"http://127.0.0.1:{closed_port}",
        "ENTITLEMENTS_ARRAY__MAX_ATTEMPTS": "1",
        "ENTITLEMENTS_ERASURE__QUEUE_NAME": f"{name}-erasure",
        "ENTITLEMENTS_ERASURE__RESPONSES_QUEUE_NAME": f"{name}-responses",
        "ENTITLEMENTS_ERASURE__TOPIC_NAME": f"{name}-topic",
        "ENTITLEMENTS_SERVICE__RELINKER_QUEUE_NAME": f"{name}-relink",
        "ENTITLEMENTS_SERVICE__PORT": str(busy_port),
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    return w


def refused_on_one_line(result: Result) -> str:
    """The contract: a non-zero exit, exactly one line on stderr, no traceback anywhere."""
    assert result.exit_code != 0, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output + result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


# -- every command: settings --------------------------------------------------------------------------


@pytest.mark.parametrize("command", COMMANDS)
def test_a_bad_setting_value_is_named_by_its_variable_and_rule_never_the_value(
    world: World, command: str
) -> None:
    line = refused_on_one_line(world.run(COMMANDS[command], ENTITLEMENTS_LAKE__FLUSH_ROWS=CANARY))
    assert "ENTITLEMENTS_LAKE__FLUSH_ROWS: int_parsing" in line
    assert CANARY not in line


@pytest.mark.parametrize("command", COMMANDS)
def test_a_mistyped_variable_is_named_as_a_likely_typo(world: World, command: str) -> None:
    line = refused_on_one_line(world.run(COMMANDS[command], ENTITLEMENTS_LAKE_ROOT=str(world.tmp / "x")))
    assert (
        "ENTITLEMENTS_LAKE_ROOT: unknown setting, a likely typo (did you mean ENTITLEMENTS_LAKE__ROOT?)"
        in line
    )
    assert not (world.tmp / "var").exists() and not (world.tmp / "x").exists()


@pytest.mark.parametrize("command", COMMANDS)
def test_a_settings_section_that_is_not_json_names_the_section(world: World, command: str) -> None:
    line = refused_on_one_line(world.run(COMMANDS[command], ENTITLEMENTS_ARRAY=f'{{"app_key": "{CANARY}"'))
    assert "ENTITLEMENTS_ARRAY: not a JSON object" in line
    assert CANARY not in line


# The demo makes its own local stack and state folder: neither setting reaches it.
USES_THE_SETTINGS = [name for name in COMMANDS if name != "demo"]


@pytest.mark.parametrize("command", USES_THE_SETTINGS)
def test_an_aws_endpoint_that_is_not_a_url_is_named_by_its_variable_and_rule(
    world: World, command: str
) -> None:
    line = refused_on_one_line(world.run(COMMANDS[command], ENTITLEMENTS_AWS__ENDPOINT_URL=f"{CANARY}"))
    assert "ENTITLEMENTS_AWS__ENDPOINT_URL: http_url: must be an http:// or https:// URL" in line
    assert CANARY not in line and "unexpected" not in line


@pytest.mark.parametrize("command", USES_THE_SETTINGS)
def test_a_state_dir_naming_a_file_is_named_as_a_file_not_a_folder(world: World, command: str) -> None:
    state = _a_file(world)
    line = refused_on_one_line(world.run(COMMANDS[command], ENTITLEMENTS_CONSUMER__STATE_DIR=str(state)))
    assert "ENTITLEMENTS_CONSUMER__STATE_DIR: not_a_folder: names a file, not a folder" in line
    assert "File exists" not in line and state.read_text() == "not a folder"


# -- unreachable endpoints ---------------------------------------------------------------------------

DEAD_AWS = [
    "table create",
    "simulate",
    "consume",
    "cleanup setup",
    "cleanup retry-worker",
    "cleanup repair",
    "erasure setup",
    "erasure worker",
    "erasure try",
    "relinker setup",
    "relinker enqueue",
    "relinker run",
]


@pytest.mark.parametrize("command", DEAD_AWS)
def test_an_unreachable_aws_endpoint_is_named_with_the_fix(world: World, command: str) -> None:
    line = refused_on_one_line(world.run(COMMANDS[command], **world.dead_aws()))
    assert "cannot reach AWS" in line
    assert "entitlements local up" in line and "ENTITLEMENTS_AWS__ENDPOINT_URL" in line


def test_an_unreachable_aws_endpoint_is_named_by_its_address(world: World) -> None:
    line = refused_on_one_line(world.run(COMMANDS["table create"], **world.dead_aws()))
    assert line == (
        f"entitlements: DynamoDB CreateTable failed: EndpointConnectionError: cannot reach AWS at "
        f"http://127.0.0.1:{world.closed}: start it (`entitlements local up` for the local stack) or fix "
        "ENTITLEMENTS_AWS__ENDPOINT_URL"
    )


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback port that accepts connections (the kernel's backlog, at most 16) and never answers;
    closed with the test."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        yield int(silent.getsockname()[1])


def _worst_case_seconds(config: Any) -> float:
    """How long one call of a client so configured can take against an endpoint that accepts and never
    answers: each attempt's connect and read timeouts, and standard mode's backoff between attempts (at
    most 2 ** (n - 1) s before attempt n + 1, capped at 20 s)."""
    attempts = int(config.retries["total_max_attempts"])
    backoff = sum(min(20, 2**n) for n in range(attempts - 1))
    return float(attempts * (config.connect_timeout + config.read_timeout) + backoff)


# What makes "one line within 15 s" hold, asserted on what the command configured rather than timed.
SILENT_ENDPOINT_SECONDS = 15


# botocore's defaults (60 s reads, every attempt retried) would take over six minutes here: the timeout
# fails the test instead, with room for any load.
@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "command",
    [
        "table create",
        "erasure setup",
        "cleanup setup",
        "relinker setup",
        "relinker enqueue",
        "cleanup repair",
        "simulate",
    ],
)
def test_a_setup_command_against_an_endpoint_that_never_answers_is_one_line(
    world: World, silent_port: int, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[Any] = []
    build = boto3.client

    def recorded(*args: Any, **kwargs: Any) -> Any:
        built.append(client := build(*args, **kwargs))
        return client

    monkeypatch.setattr(boto3, "client", recorded)  # every client the command builds (entitlements._clients)
    silent = {"ENTITLEMENTS_AWS__ENDPOINT_URL": f"http://127.0.0.1:{silent_port}"}
    line = refused_on_one_line(world.run(COMMANDS[command], ENTITLEMENTS_AWS__MAX_ATTEMPTS="5", **silent))
    assert f"cannot reach AWS at http://127.0.0.1:{silent_port}" in line or "ReadTimeoutError" in line
    assert built, "no client was built: the bound below would be vacuous"
    slow = {
        f"{c.meta.service_model.service_name}: {_worst_case_seconds(c.meta.config):.0f} s"
        for c in built
        if _worst_case_seconds(c.meta.config) > SILENT_ENDPOINT_SECONDS
    }
    assert not slow, slow


@pytest.mark.parametrize("command", ["table create", "cleanup setup", "erasure setup", "relinker setup"])
def test_aws_credentials_in_the_sdks_own_variables_add_no_second_line(
    world: World, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fresh default session: one that found credentials before (another test) never looks, nor logs, again.
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    sdk_only: dict[str, str | None] = {
        "ENTITLEMENTS_AWS__ACCESS_KEY_ID": None,
        "ENTITLEMENTS_AWS__SECRET_ACCESS_KEY": None,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": None,
        "AWS_PROFILE": None,
    }
    env = {**world.env, **world.dead_aws(), **sdk_only}  # the closed port on 127.0.0.1; no metadata service
    line = refused_on_one_line(CliRunner().invoke(app, COMMANDS[command], env=env))
    assert "cannot reach AWS" in line and "testing" not in line


def _parked(world: World) -> None:
    world.state.parked.park(
        handler="cleanup", stream_arn=STREAM, shard_id="shardId-1",
        records=[_raw(stream_record("e-1"))], reason="OSError",
    )  # fmt: skip


def _raw(data: bytes) -> RawRecord:
    from pipeline.parking import RawRecord  # noqa: PLC0415

    return RawRecord(data, "100")


STORED: dict[str, Callable[[World], None]] = {
    "replay-parked": _parked,
    "quarantine redrive": lambda w: w.state.quarantined(stream_record("e-1")),
    "dead-letter redrive": lambda w: w.state.dead_lettered(stream_record("e-1")),
}


@pytest.mark.parametrize("command", STORED)
def test_replaying_stored_records_against_an_unreachable_endpoint_is_one_line(
    world: World, command: str
) -> None:
    STORED[command](world)
    line = refused_on_one_line(world.run(COMMANDS[command], **world.dead_aws()))
    assert "EndpointConnectionError" in line or "cannot reach AWS" in line


@pytest.mark.parametrize("command", ["sql", "snapshot", "compact", "lake files", "mine", "audit"])
def test_a_lake_on_an_unreachable_s3_endpoint_is_one_line(world: World, command: str) -> None:
    result = world.run(COMMANDS[command], ENTITLEMENTS_LAKE__ROOT="s3://lake/x", **world.dead_aws())
    refused_on_one_line(result)


@pytest.mark.parametrize(("command", "option"), [("local up", "--port"), ("serve", "--port")])
def test_a_server_port_already_in_use_is_refused_at_once(world: World, command: str, option: str) -> None:
    line = refused_on_one_line(world.run([*COMMANDS[command], option, "{busy}"]))
    assert f"port {world.busy}" in line and "in use" in line


def test_serve_on_the_settings_port_in_use_names_it(world: World) -> None:
    line = refused_on_one_line(world.run(COMMANDS["serve"]))
    assert f"port {world.busy}" in line and "ENTITLEMENTS_SERVICE__PORT" in line


def test_serve_on_a_port_past_65535_is_a_usage_line_not_an_overflow(world: World) -> None:
    line = refused_on_one_line(world.run([*COMMANDS["serve"], "--port", "70000"]))
    assert "Invalid value for '--port'" in line and "65535" in line and "Overflow" not in line


# A label over 63 characters is refused by the IDNA codec before any resolver is asked (no DNS query).
@pytest.mark.parametrize(
    ("option", "variable"),
    [(["--host", "h" * 64], None), ([], "ENTITLEMENTS_SERVICE__HOST")],
)
def test_serve_on_a_host_that_does_not_resolve_names_the_option_never_the_value(
    world: World, option: list[str], variable: str | None
) -> None:
    env = {variable: "h" * 64} if variable else {}
    line = refused_on_one_line(world.run([*COMMANDS["serve"], *option, "--port", "0"], **env))
    assert f"({variable or '--host'}) is neither an IP address nor a name that resolves" in line
    assert "h" * 64 not in line and "gaierror" not in line


def test_serve_on_an_address_no_interface_holds_says_so(world: World) -> None:
    # 192.0.2.1: TEST-NET-1, documentation only, on no interface of a test machine; never sent to.
    line = refused_on_one_line(world.run([*COMMANDS["serve"], "--host", "192.0.2.1", "--port", "0"]))
    assert "cannot listen on the address to serve on (--host): Cannot assign requested address" in line


def test_local_up_refuses_a_port_given_twice(world: World) -> None:
    line = refused_on_one_line(world.run([*COMMANDS["local up"], "--array-port", "{busy}"]))
    assert f"port {world.busy}" in line


# -- missing resources and paths ----------------------------------------------------------------------


def test_consume_with_a_missing_table_names_the_command_that_makes_it(world: World) -> None:
    line = refused_on_one_line(world.run(COMMANDS["consume"]))
    assert "does not exist: run `entitlements table create`" in line


def test_consume_with_a_missing_launcher_jar_names_the_variable(world: World) -> None:
    line = refused_on_one_line(
        world.run(COMMANDS["consume"], ENTITLEMENTS_CONSUMER__LAUNCHER_JAR="{tmp}/missing.jar")
    )
    assert f"launcher jar not found at {world.tmp / 'missing.jar'}" in line
    assert "ENTITLEMENTS_CONSUMER__LAUNCHER_JAR" in line


def test_simulate_with_a_missing_table_names_the_command_that_makes_it(world: World) -> None:
    line = refused_on_one_line(world.run(COMMANDS["simulate"]))
    assert "run `entitlements table create`" in line


def test_erasure_worker_before_erasure_setup_names_the_setup(world: World) -> None:
    line = refused_on_one_line(world.run(COMMANDS["erasure worker"]))
    assert "run `entitlements erasure setup` first" in line


def test_erasure_try_before_erasure_setup_names_the_setup_and_publishes_nothing(world: World) -> None:
    line = refused_on_one_line(world.run(COMMANDS["erasure try"]))
    assert "no erasure topic named" in line and "run entitlements erasure setup" in line


def test_erasure_try_with_a_key_the_contract_refuses_never_shows_the_key(world: World) -> None:
    # An address key holds no A to Z.
    argv = ["erasure", "try", "CHECK", "--key-kind", "ADDRESS", "--key", f"Upper-{CANARY}", "--wait", "1"]
    assert world.run(["erasure", "setup"]).exit_code == 0
    line = refused_on_one_line(world.run(argv))
    assert "the contract refuses this request" in line and CANARY not in line
    sqs = client(world.moto, "sqs")
    queue = sqs.get_queue_url(QueueName=world.env["ENTITLEMENTS_ERASURE__QUEUE_NAME"])["QueueUrl"]
    assert sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=1).get("Messages", []) == []


def test_erasure_try_with_a_send_no_on_check_is_refused(world: World) -> None:
    line = refused_on_one_line(world.run([*COMMANDS["erasure try"], "--send-no", "2"]))
    assert "CHECK has no sendNo (only ERASE does)" in line


def test_erasure_try_with_no_worker_running_says_no_answer_came(world: World) -> None:
    assert world.run(["erasure", "setup"]).exit_code == 0
    result = world.run(COMMANDS["erasure try"])
    lines = result.stderr.splitlines()
    assert result.exit_code == 1 and "Traceback" not in result.output + result.stderr
    assert lines[0].startswith("published erasure/CHECK on"), result.stderr
    assert "acct-1" not in result.stderr
    assert "no answer within 1 s" in lines[-1] and "erasure worker" in lines[-1]


def test_the_cleanup_retry_worker_before_cleanup_setup_names_the_setup(world: World) -> None:
    # A queue of this test's own: the default name may have been made on the session's moto by any
    # other test that ran `cleanup setup` in this process.
    queue = f"{world.env['ENTITLEMENTS_CONSUMER__TABLE_NAME']}-cleanup-retry"
    line = refused_on_one_line(world.run([*COMMANDS["cleanup retry-worker"], "--queue-name", queue]))
    assert "run `entitlements cleanup setup` first" in line


def test_the_relinker_before_its_setup_names_the_setup(world: World) -> None:
    line = refused_on_one_line(world.run(COMMANDS["relinker run"]))
    assert "run `entitlements relinker setup` first" in line


LAKE_READS = ["sql", "snapshot", "compact", "lake files", "mine", "audit", "audit-failures", "cleanup repair"]


@pytest.mark.parametrize("command", LAKE_READS)
def test_a_missing_lake_names_its_path_and_never_creates_it(world: World, command: str) -> None:
    create_table(client(world.moto, "dynamodb"), world.env["ENTITLEMENTS_CONSUMER__TABLE_NAME"])
    line = refused_on_one_line(world.run(COMMANDS[command], ENTITLEMENTS_LAKE__ROOT="{tmp}/nowhere"))
    assert str(world.tmp / "nowhere") in line
    assert not (world.tmp / "nowhere").exists()


@pytest.mark.parametrize("command", ["sql", "mine", "audit"])
def test_a_missing_lake_beside_the_demos_points_at_the_demos(world: World, command: str) -> None:
    clean_story().land(open_lake(str(world.tmp / "var" / "demo" / "lake")))  # `demo`'s default place
    line = refused_on_one_line(world.run(COMMANDS[command], ENTITLEMENTS_LAKE__ROOT="var/lake"))
    demo = world.tmp / "var" / "demo" / "lake"
    assert line.startswith("entitlements: lake not found at var/lake")
    assert line.endswith(f"(the demo's lake is {demo}: export ENTITLEMENTS_LAKE__ROOT={demo} to read it)")
    assert not (world.tmp / "var" / "lake").exists()


def test_erasure_validate_with_a_missing_file_names_it(world: World) -> None:
    line = refused_on_one_line(world.run(["erasure", "validate", "{tmp}/missing.jsonl"]))
    assert str(world.tmp / "missing.jsonl") in line and "No such file" in line


def _a_file(world: World) -> Path:
    path = world.tmp / "a-file"
    path.write_text("not a folder")
    return path


def test_local_up_with_an_env_file_under_a_file_names_the_path(world: World) -> None:
    _a_file(world)
    line = refused_on_one_line(world.run([*COMMANDS["local up"], "--env-file", "{tmp}/a-file/env"]))
    assert str(world.tmp / "a-file") in line


def test_simulate_with_a_summary_file_under_a_file_names_the_path_before_writing(world: World) -> None:
    _a_file(world)
    line = refused_on_one_line(world.run([*COMMANDS["simulate"], "--summary-json", "{tmp}/a-file/s.json"]))
    assert str(world.tmp / "a-file") in line


@pytest.mark.parametrize("command", ["quarantine export", "dead-letter export"])
def test_an_export_under_a_file_names_the_path(world: World, command: str) -> None:
    (world.tmp / "state").mkdir()
    _a_file(world)
    argv = [*COMMANDS[command][:-1], "{tmp}/a-file/export.jsonl"]
    line = refused_on_one_line(world.run(argv))
    assert str(world.tmp / "a-file") in line


def test_demo_refuses_a_state_folder_it_did_not_make(world: World) -> None:
    (world.tmp / "demo").mkdir()
    (world.tmp / "demo" / "mine.txt").write_text("kept")
    refused_on_one_line(world.run(COMMANDS["demo"]))
    assert (world.tmp / "demo" / "mine.txt").read_text() == "kept"


# -- malformed files ----------------------------------------------------------------------------------


def test_consumer_status_with_a_corrupt_stats_file_names_it_and_exits_1_without_a_traceback(
    world: World,
) -> None:
    stats = world.tmp / "state" / "stats"
    stats.mkdir(parents=True)
    (stats / "shardId-1.json").write_text('{"shard_id": "shardId-1", "records": ')
    result = world.run(COMMANDS["consumer-status"])
    assert "shardId-1.json: unreadable stats file" in result.output.splitlines()
    assert result.exit_code == 1
    assert "Traceback" not in result.output + result.stderr


def _damaged(world: World, store: str) -> Path:
    """A record stored the store's own way, then its file overwritten with garbage."""
    STORED[{"parked": "replay-parked", "quarantine": "quarantine redrive"}.get(store, "dead-letter redrive")](
        world
    )
    (stored,) = [path for path in (world.tmp / "state" / store).rglob("*") if path.is_file()]
    stored.write_bytes(b"\x00garbage")
    return stored


@pytest.mark.parametrize(
    ("command", "store"),
    [
        ("replay-parked", "parked"),
        ("quarantine list", "quarantine"),
        ("quarantine export", "quarantine"),
        ("dead-letter list", "dead-letter"),
        ("dead-letter export", "dead-letter"),
    ],
)
def test_a_damaged_store_file_is_named_on_one_line(world: World, command: str, store: str) -> None:
    damaged = _damaged(world, store)
    line = refused_on_one_line(world.run(COMMANDS[command]))
    assert "damaged file" in line and str(damaged) in line


@pytest.mark.parametrize("command", ["sql", "snapshot", "mine", "audit"])
def test_a_damaged_lake_file_is_one_line(world: World, command: str) -> None:
    lake = open_lake(str(world.tmp / "lake"))
    clean_story().land(lake)
    damaged = data_files(lake, "changes")[0]
    (world.tmp / "lake" / damaged).write_bytes(b"garbage")
    refused_on_one_line(world.run(COMMANDS[command]))


@pytest.mark.parametrize("command", ["sql", "mine", "audit"])
def test_a_truncated_lake_file_is_named_by_its_path_with_the_fix(world: World, command: str) -> None:
    lake = open_lake(str(world.tmp / "lake"))
    clean_story().land(lake)
    damaged = world.tmp / "lake" / data_files(lake, "changes")[0]
    damaged.write_bytes(damaged.read_bytes()[:100])
    line = refused_on_one_line(world.run(COMMANDS[command]))
    assert f"the lake file {damaged} cannot be read" in line and "entitlements lake files" in line
    assert "unexpected" not in line


def _newer_protocol(world: World) -> None:
    """A commit on `changes` that asks its readers for a table feature no deltalake release knows."""
    lake = open_lake(str(world.tmp / "lake"))
    clean_story().land(lake)
    log = world.tmp / "lake" / "changes" / "_delta_log"
    version = max(int(path.stem) for path in log.glob("*.json")) + 1
    protocol = {
        "minReaderVersion": 3, "minWriterVersion": 7,
        "readerFeatures": ["featureFromTheFuture"], "writerFeatures": ["featureFromTheFuture"],
    }  # fmt: skip
    commit = [{"protocol": protocol}, {"commitInfo": {"timestamp": 1764633600000, "operation": "WRITE"}}]
    (log / f"{version:020d}.json").write_text("".join(json.dumps(action) + "\n" for action in commit))


@pytest.mark.parametrize("command", ["sql", "snapshot", "mine", "audit"])
def test_a_lake_needing_a_newer_delta_reader_says_so_never_check_the_endpoint(
    world: World, command: str
) -> None:
    _newer_protocol(world)
    line = refused_on_one_line(world.run(COMMANDS[command]))
    assert "a Delta protocol or feature this reader does not support" in line
    assert "ENDPOINT" not in line and "credentials" not in line


@pytest.mark.parametrize("command", LAKE_READS)
def test_a_lake_root_of_an_unsupported_scheme_is_named_as_such_not_as_missing(
    world: World, command: str
) -> None:
    create_table(client(world.moto, "dynamodb"), world.env["ENTITLEMENTS_CONSUMER__TABLE_NAME"])
    line = refused_on_one_line(world.run(COMMANDS[command], ENTITLEMENTS_LAKE__ROOT="gs://bucket/lake"))
    assert "ENTITLEMENTS_LAKE__ROOT: a gs:// lake is not supported: give a folder or s3://" in line
    assert "not found" not in line


def test_audit_with_a_malformed_thresholds_file_names_it(world: World) -> None:
    clean_story().land(open_lake(str(world.tmp / "lake")))
    (world.tmp / "thresholds.toml").write_text("[checks\nnot toml")
    line = refused_on_one_line(world.run([*COMMANDS["audit"], "--thresholds", "{tmp}/thresholds.toml"]))
    assert "thresholds.toml" in line


def test_erasure_validate_of_a_malformed_file_gives_a_verdict_per_line_never_a_traceback(
    world: World,
) -> None:
    (world.tmp / "messages.jsonl").write_bytes(b"\x00\xff garbage\n{}\n")
    result = world.run(["erasure", "validate", "{tmp}/messages.jsonl"])
    assert result.exit_code == 1
    assert result.output.splitlines() == [
        "1: NOT_JSON",
        "2: INVALID_MESSAGE $.type: required",
        "2 messages, 0 accepted, 2 refused",
    ]


# -- what needs nothing -------------------------------------------------------------------------------


def test_replay_parked_with_nothing_parked_and_a_dead_endpoint_needs_no_aws(world: World) -> None:
    result = world.run(COMMANDS["replay-parked"], **world.dead_aws())
    assert (result.exit_code, result.output.splitlines()) == (0, ["nothing parked"])


def test_replay_parked_with_nothing_parked_and_no_aws_configured_needs_no_aws(world: World) -> None:
    no_aws = {name: None for name in world.env if name.startswith("ENTITLEMENTS_AWS__")}
    no_aws.update(AWS_ACCESS_KEY_ID=None, AWS_SECRET_ACCESS_KEY=None, AWS_DEFAULT_REGION=None)
    result = CliRunner().invoke(app, COMMANDS["replay-parked"], env={**world.env, **no_aws})
    assert (result.exit_code, result.output.splitlines()) == (0, ["nothing parked"])


def test_a_usage_error_is_one_line_naming_the_command_and_its_help(world: World) -> None:
    line = refused_on_one_line(world.run(["table", "create", "--no-such-option"]))
    assert line == (
        "entitlements: table create: No such option: --no-such-option "
        "(see `entitlements table create --help`)"
    )


def test_debug_shows_the_traceback(world: World) -> None:
    result = world.run(["--debug", *COMMANDS["table create"]], **world.dead_aws())
    assert "Traceback" in result.stderr and "AwsRetryableError" in result.stderr


def test_debug_adds_the_traceback_and_changes_neither_the_line_nor_the_exit_status(world: World) -> None:
    plain = world.run(COMMANDS["table create"], **world.dead_aws())
    debug = world.run(["--debug", *COMMANDS["table create"]], **world.dead_aws())
    assert (debug.exit_code, debug.stderr.splitlines()[-1]) == (plain.exit_code, refused_on_one_line(plain))


# -- silent successes: what would do nothing and exit 0 is one line and a non-zero exit ---------------


def test_dead_letter_redrive_of_a_handler_that_does_not_exist_is_refused_and_keeps_the_letters(
    world: World,
) -> None:
    world.state.dead_lettered(stream_record("e-1"))
    line = refused_on_one_line(world.run([*COMMANDS["dead-letter redrive"], "--handler", "nope"]))
    assert "--handler names no handler of the consumer" in line and "the dead letters are of: cleanup" in line
    assert world.state.dead_letters.count() == 1


def test_audit_failures_of_an_audit_id_never_stored_is_refused(world: World) -> None:
    clean_story().land(open_lake(str(world.tmp / "lake")))
    line = refused_on_one_line(world.run([*COMMANDS["audit-failures"], "--audit-id", "nope"]))
    assert "no failing rows are stored under that --audit-id" in line and "0 audit runs stored" in line


def test_audit_failures_of_a_check_that_does_not_exist_is_refused(world: World) -> None:
    clean_story().land(open_lake(str(world.tmp / "lake")))
    line = refused_on_one_line(world.run([*COMMANDS["audit-failures"], "--check", "nope"]))
    assert "unknown checks: nope" in line


def test_cleanup_repair_on_a_table_holding_none_of_the_lakes_rows_names_the_likely_wrong_table(
    world: World,
) -> None:
    create_table(client(world.moto, "dynamodb"), world.env["ENTITLEMENTS_CONSUMER__TABLE_NAME"])
    clean_story().land(open_lake(str(world.tmp / "lake")))
    line = refused_on_one_line(world.run(COMMANDS["cleanup repair"]))
    assert "holds none of the rows of the" in line and "likely the wrong table" in line
    assert "ENTITLEMENTS_CONSUMER__TABLE_NAME" in line


def test_simulate_against_a_service_that_never_answers_is_refused_not_a_summary_and_exit_0(
    world: World,
) -> None:
    create_table(client(world.moto, "dynamodb"), world.env["ENTITLEMENTS_CONSUMER__TABLE_NAME"])
    argv = [*COMMANDS["simulate"], "--clients", "2", "--service-url", "http://127.0.0.1:{closed}/x"]
    line = refused_on_one_line(world.run(argv))
    assert line == (
        f"entitlements: simulate: none of the 5 requests got an answer from http://127.0.0.1:{world.closed}: "
        "is the service running there? (--service-url names it; without it one starts in this process)"
    )


def test_simulate_whose_service_cannot_complete_an_operation_exits_1_and_writes_no_row(
    world: World,
) -> None:
    # The settings' Array is the closed port: the in-process service answers each signup unavailable.
    dynamodb = client(world.moto, "dynamodb")
    table = world.env["ENTITLEMENTS_CONSUMER__TABLE_NAME"]
    create_table(dynamodb, table)
    result = world.run([*COMMANDS["simulate"], "--signup-weight", "1", *_ONLY_SIGNUPS])
    line = refused_on_one_line(result)
    assert (
        result.exit_code == 1
        and "5 of 5 operations failed" in line
        and "ENTITLEMENTS_ARRAY__BASE_URL" in line
    )
    assert dynamodb.scan(TableName=table)["Count"] == 0


_ONLY_SIGNUPS = [
    "--cancel-weight", "0", "--reactivate-weight", "0", "--second-signup-weight", "0", "--relink-weight", "0"
]  # fmt: skip


def test_an_audit_over_no_change_rows_and_some_outcomes_never_passes(world: World) -> None:
    lake = open_lake(str(world.tmp / "lake"))
    land_outcomes(lake, *clean_story().outcomes)
    result = world.run(COMMANDS["audit"])
    line = refused_on_one_line(result)
    assert "no change rows" in line and result.exit_code == 2 and "PASS" not in result.output


@dataclass(frozen=True)
class Output:
    """A command that writes its result to --output: its arguments, a file it writes, how that file
    starts, and a --format with another format's suffix (None: the command has one format)."""

    argv: list[str]
    name: str
    starts: str | bytes
    mismatched: tuple[str, str, str] | None  # --format, a suffix not its own, what the refusal names


OUTPUTS = {
    "sql": Output(COMMANDS["sql"], "out.csv", "count_star()", ("csv", "x.json", "name a .csv file")),
    "snapshot --as-of": Output(["snapshot", "--as-of", "2100-01-01T00:00:00Z"], "out.parquet", b"PAR1", None),
    "mine": Output(COMMANDS["mine"], "out.md", "# ", ("markdown", "x.html", "name a .md or .markdown file")),
    "audit": Output(
        COMMANDS["audit"], "out.html", "<!DOCTYPE html>", ("html", "x.md", "name a .html or .htm file")
    ),
    # Nothing stored yet: the JSON lines of no row are an empty file.
    "audit-failures": Output(COMMANDS["audit-failures"], "out.jsonl", "", None),
}


def _starts(path: Path, start: str | bytes) -> bool:
    return (
        path.read_bytes().startswith(start)
        if isinstance(start, bytes)
        else path.read_text().startswith(start)
    )


@pytest.mark.parametrize("command", OUTPUTS)
def test_an_output_suffix_the_command_does_not_write_is_refused_and_nothing_is_written(
    world: World, command: str
) -> None:
    clean_story().land(open_lake(str(world.tmp / "lake")))
    line = refused_on_one_line(world.run([*OUTPUTS[command].argv, "--output", "{tmp}/x.xlsx"]))
    assert f"the suffix .xlsx is not what {command} writes" in line
    assert not (world.tmp / "x.xlsx").exists()


@pytest.mark.parametrize("command", [name for name, output in OUTPUTS.items() if output.mismatched])
def test_an_output_suffix_that_is_another_formats_is_refused(world: World, command: str) -> None:
    clean_story().land(open_lake(str(world.tmp / "lake")))
    fmt, name, wanted = OUTPUTS[command].mismatched or ("", "", "")
    argv = [*OUTPUTS[command].argv, "--format", fmt, "--output", f"{{tmp}}/{name}"]
    line = refused_on_one_line(world.run(argv))
    assert f"not what --format {fmt} writes: {wanted}" in line
    assert not (world.tmp / name).exists()


@pytest.mark.parametrize("command", OUTPUTS)
def test_an_existing_output_is_kept_without_force(world: World, command: str) -> None:
    clean_story().land(open_lake(str(world.tmp / "lake")))
    existing = world.tmp / OUTPUTS[command].name
    existing.write_text("kept")
    line = refused_on_one_line(world.run([*OUTPUTS[command].argv, "--output", str(existing)]))
    assert (
        line == f"entitlements: --output {existing} exists: name a new file, or add --force to overwrite it"
    )
    assert existing.read_text() == "kept"


@pytest.mark.parametrize("command", OUTPUTS)
def test_an_existing_output_is_overwritten_with_force(world: World, command: str) -> None:
    clean_story().land(open_lake(str(world.tmp / "lake")))
    existing = world.tmp / OUTPUTS[command].name
    existing.write_text("old")
    result = world.run([*OUTPUTS[command].argv, "--output", str(existing), "--force"])
    assert result.exit_code == 0, result.output
    assert existing.read_text(errors="replace") != "old" and _starts(existing, OUTPUTS[command].starts)


@pytest.mark.parametrize(
    ("command", "name", "starts"),
    [
        ("sql", "out.json", "[\n {"),
        ("mine", "out.md", "# "),
        ("mine", "out.html", "<!DOCTYPE html>"),
        ("audit", "out.md", "# Entitlements audit: PASS"),
        ("audit", "out.html", "<!DOCTYPE html>"),
        ("audit", "out.xml", '<?xml version="1.0"'),
    ],
)
def test_an_output_without_format_is_written_in_its_suffixs_format(
    world: World, command: str, name: str, starts: str
) -> None:
    clean_story().land(open_lake(str(world.tmp / "lake")))
    result = world.run([*OUTPUTS[command].argv, "--output", f"{{tmp}}/{name}"])
    assert result.exit_code == 0, result.output
    assert _starts(world.tmp / name, starts), (world.tmp / name).read_text()[:200]


def test_mine_keeps_an_existing_chart_beside_its_markdown_and_writes_neither(world: World) -> None:
    clean_story().land(open_lake(str(world.tmp / "lake")))
    chart = world.tmp / "latency.chart1.png"
    chart.write_bytes(b"kept")
    line = refused_on_one_line(world.run(["mine", "cleanup_latency", "--output", "{tmp}/latency.md"]))
    assert f"--output {chart} exists" in line
    assert chart.read_bytes() == b"kept" and not (world.tmp / "latency.md").exists()


def test_snapshot_output_without_as_of_is_refused_not_ignored(world: World) -> None:
    clean_story().land(open_lake(str(world.tmp / "lake")))
    line = refused_on_one_line(world.run([*COMMANDS["snapshot"], "--output", "{tmp}/state.parquet"]))
    assert "--output needs --as-of" in line
    assert not (world.tmp / "state.parquet").exists()


def test_sql_writes_a_text_table_to_a_txt_output_counting_its_row_in_the_singular(world: World) -> None:
    clean_story().land(open_lake(str(world.tmp / "lake")))
    result = world.run([*COMMANDS["sql"], "--output", "{tmp}/out.txt"])
    assert result.exit_code == 0, result.output
    assert (world.tmp / "out.txt").read_text().splitlines()[-1] == "1 row"
    assert result.stderr.splitlines() == [f"1 row written to {world.tmp / 'out.txt'}"]


@pytest.mark.parametrize(
    "query",
    [
        "FROM read_csv('{secret}')",
        "FROM '{secret}'",
        "SELECT * FROM read_parquet('{lake}/changes/*/*.parquet')",
        "ATTACH '{secret}.duckdb' AS other",
    ],
)
def test_sql_reading_past_the_lakes_views_is_one_line_showing_no_path(world: World, query: str) -> None:
    clean_story().land(open_lake(str(world.tmp / "lake")))
    secret = world.tmp / "secret.csv"
    secret.write_text(f"{CANARY}\n")
    line = refused_on_one_line(world.run(["sql", query.format(secret=secret, lake=world.tmp / "lake")]))
    assert "refused" in line and CANARY not in line and str(secret) not in line
