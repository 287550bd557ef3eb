"""entitlements/cli.py: the console script's shell around the commands."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
from importlib.metadata import version
from pathlib import Path

import pytest
import typer
import typer.main

from entitlements.cli import COMMANDS, _thread_failed, app, describe_error

CANARY = "canary-7f3a-secret-value"
REPO = Path(__file__).resolve().parents[2]


def test_a_refused_setting_ends_a_command_with_its_field_and_rule_never_the_value() -> None:
    environ = {**os.environ, "ENTITLEMENTS_CONSUMER__COMMIT_EVERY_RECORDS": CANARY}
    done = subprocess.run(
        [sys.executable, "-c", "from entitlements.cli import main; main()", "consumer-status"],
        cwd=REPO,
        env=environ,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert b"ENTITLEMENTS_CONSUMER__COMMIT_EVERY_RECORDS: int_parsing" in done.stderr
    assert CANARY.encode() not in done.stderr + done.stdout


def _entitlements(*args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    """The console script's entry point in a fresh process, from `cwd` (default: a folder outside the
    repository, as a user would run it)."""
    return subprocess.run(
        [sys.executable, "-c", "from entitlements.cli import main; main()", *args],
        cwd=cwd or Path(tempfile.gettempdir()),
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_version_prints_the_installed_distributions_version() -> None:
    done = _entitlements("--version")
    assert (done.returncode, done.stdout) == (0, f"entitlements {version('entitlements-streams')}\n")


def test_help_lists_every_command_without_importing_any_command_module() -> None:
    probe = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from entitlements.cli import COMMANDS, app\n"
        "result = CliRunner().invoke(app, ['--help'])\n"
        "assert result.exit_code == 0, result.output\n"
        "assert all(name in result.output for name in COMMANDS), result.output\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('entitlements.commands')\n"
        "                or m.split('.')[0] in ('boto3', 'pydantic_settings', 'analytics', 'rich'))\n"
        "print(loaded)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )
    assert (done.returncode, done.stdout) == (0, "[]\n"), done.stderr


# What a command's `--help` must not load: the lake stack, the AWS SDK and the charts cost seconds of
# start-up on a loaded machine, and help needs none of them (the command imports them when it runs).
_HEAVY = ("boto3", "deltalake", "duckdb", "matplotlib", "pandas", "polars", "pyarrow")

# In a fresh process: `entitlements NAME --help` and, for a group, `entitlements NAME SUB --help` of each
# of its commands, as the console script runs them; then the heavy packages that got loaded.
_HELP_PROBE = """
import sys
import typer.main
from entitlements.cli import main, app
name, heavy = sys.argv[1], sys.argv[2].split(",")
def ask(*args):
    sys.argv = ["entitlements", *args, "--help"]
    try:
        main()
    except SystemExit as done:
        assert done.code in (0, None), (args, done.code)
ask(name)
group = typer.main.get_command(app)
group.load(name)
for sub in sorted(getattr(group.commands[name], "commands", {})):
    ask(name, sub)
print(",".join(sorted(m for m in heavy if m in sys.modules)), file=sys.stderr)
"""


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_commands_help_loads_neither_the_lake_stack_nor_the_aws_sdk(name: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _HELP_PROBE, name, ",".join(_HEAVY)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[-1:] == [""], done.stderr


def test_the_command_table_names_exactly_the_commands_the_modules_define() -> None:
    group = typer.main.get_command(app)
    ctx = typer.Context(group)
    for name in COMMANDS:
        group.load(name)
    assert sorted(group.commands) == sorted(COMMANDS)
    for name, entry in COMMANDS.items():
        command = group.get_command(ctx, name)
        assert command is not None
        assert (
            command.callback is None or command.callback.__module__ == f"entitlements.commands.{entry.module}"
        )


def _complete(words: str) -> list[str]:
    """What bash completion offers for the last word (the installed console script, as a shell runs it)."""
    script = Path(sys.executable).parent / "entitlements"
    done = subprocess.run(
        [str(script)],
        env={
            **os.environ,
            "_ENTITLEMENTS_COMPLETE": "complete_bash",
            "COMP_WORDS": words,
            "COMP_CWORD": str(len(words.split()) - 1),
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout.split()


def test_shell_completion_completes_commands_and_subcommands() -> None:
    assert (_complete("entitlements era"), _complete("entitlements erasure va")) == (
        ["erasure"],
        ["validate"],
    )


def test_a_mistyped_command_gets_one_line_with_the_close_match() -> None:
    done = _entitlements("erasur")
    assert done.returncode == 2
    assert done.stderr == (
        "entitlements: No such command 'erasur'. Did you mean 'erasure'? (see `entitlements --help`)\n"
    )


def test_a_command_runs_from_any_folder_with_the_launcher_jar_from_the_installed_package(
    tmp_path: Path,
) -> None:
    done = _entitlements(
        "consume",
        cwd=tmp_path,
        ENTITLEMENTS_AWS__ENDPOINT_URL="http://127.0.0.1:9",
        ENTITLEMENTS_AWS__MAX_ATTEMPTS="1",
        ENTITLEMENTS_AWS__ACCESS_KEY_ID="testing",
        ENTITLEMENTS_AWS__SECRET_ACCESS_KEY="testing",
    )
    # Past the jar check (found from the package, not from this folder) to the table lookup.
    assert done.returncode == 2
    assert done.stderr.startswith("entitlements: DynamoDB DescribeTable failed: EndpointConnectionError")
    assert not (tmp_path / "var").exists()


def test_an_unexpected_error_is_named_by_its_class_only() -> None:
    assert describe_error(KeyError(CANARY)) == (
        "unexpected KeyError (run `entitlements --debug ...` for the traceback)"
    )


def test_an_os_error_names_its_path() -> None:
    error = FileNotFoundError(2, "No such file or directory", "/nowhere/x")
    assert describe_error(error) == "No such file or directory: /nowhere/x"


def test_an_os_error_raised_with_a_message_keeps_it() -> None:
    assert (
        describe_error(FileNotFoundError("launcher jar not built: /x.jar"))
        == "launcher jar not built: /x.jar"
    )


def test_entitlements_alone_prints_its_help() -> None:
    done = _entitlements()
    assert done.stderr.startswith("Usage: ") and "Stream consumer:" in done.stderr


def test_a_group_alone_prints_its_help() -> None:
    done = _entitlements("table")
    assert done.stderr.startswith("Usage: ") and "create" in done.stderr


def test_a_background_threads_failure_is_one_line_too(capsys: pytest.CaptureFixture[str]) -> None:
    error = KeyError(CANARY)
    thread = threading.Thread(name="fake-array")
    _thread_failed(threading.ExceptHookArgs([KeyError, error, None, thread]))
    assert capsys.readouterr().err == (
        "entitlements: fake-array failed: unexpected KeyError "
        "(run `entitlements --debug ...` for the traceback)\n"
    )


# A command whose worker thread fails once Ctrl-C has stopped the main thread (as the demo's HTTP
# clients do when their service is closed under them).
_INTERRUPTED_COMMAND = """
import signal, sys, threading, time
from entitlements.cli import app, main

signal.signal(signal.SIGINT, signal.default_int_handler)  # as from a terminal (a runner may ignore it)

@app.command("hang")
def hang() -> None:
    closed = threading.Event()

    def client() -> None:
        closed.wait()
        raise RuntimeError("the service this client used was closed")

    threading.Thread(target=client, name="workload-client-1").start()
    try:
        print("ready", file=sys.stderr, flush=True)
        time.sleep(60)
    finally:
        closed.set()
        time.sleep(0.5)  # the thread fails while the command unwinds

sys.argv = ["entitlements", "hang"]
main()
"""


def test_ctrl_c_is_one_line_and_exit_130_without_the_failures_of_the_threads_it_stopped() -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", _INTERRUPTED_COMMAND], stderr=subprocess.PIPE, text=True
    )
    assert process.stderr is not None
    assert process.stderr.readline() == "ready\n"
    process.send_signal(signal.SIGINT)
    rest = process.stderr.read()
    assert (process.wait(timeout=30), rest.splitlines()) == (
        130,
        ["entitlements: interrupted: stopped what it had started"],
    )
