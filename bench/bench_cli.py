"""How long `entitlements --help` and each `entitlements COMMAND --help` take, each beside a baseline
measured in the same run.

Each is a fresh process (what a person typing the command waits for), best of a few runs taken in
turns with its baseline's:
- `entitlements --help` beside `python -c "import typer"`: the root group lists its commands without
  importing them (entitlements/cli.py), so its cost over typer's own import is the CLI shell's.
- every `entitlements COMMAND --help` beside the `--help` of a bare typer command with one option
  (`_BARE_COMMAND`): building a command's parameters loads typer's pydantic adapters, which any typer
  command pays; what a command's help costs over that is its own imports. The lake stack, boto3 and
  matplotlib must stay out of it (tests/entitlements/test_cli.py checks that; this measures it).
Also, for information: `entitlements --version`.

Targets: the root's help at most 1.5x its baseline; each command's help at most 2x its baseline (on
this machine, idle: about 0.15 s and 0.35 s for the baselines).
"""

from __future__ import annotations

__all__ = ["main"]

import os
import subprocess
import sys

from bench._report import Comparison, best_of, print_figures
from entitlements.cli import COMMANDS

REPEATS = 5
ROOT_TARGET_RATIO = 1.5
COMMAND_TARGET_RATIO = 2.0

_BARE_COMMAND = """
import typer
app = typer.Typer()
@app.command()
def run(name: str = typer.Option("x", help="A name.")) -> None:
    pass
app()
"""


def _run(*argv: str) -> None:
    environ = {**os.environ, "COLUMNS": "100"}
    subprocess.run([sys.executable, *argv], env=environ, capture_output=True, check=True, timeout=60)


def _cli(*args: str) -> None:
    # The console script's own entry point, run by this interpreter (what `entitlements` does).
    _run("-c", "from entitlements.cli import main; main()", *args)


def _figure(name: str, value: float, baseline_name: str, baseline: float, ratio: float) -> Comparison:
    return Comparison(
        name,
        value,
        "s",
        baseline_name,
        baseline,
        better="lower",
        target=f"ratio <= {ratio}",
        met=value <= ratio * baseline,
    )


def _paired(command: list[str], baseline: list[str]) -> tuple[float, float]:
    """The best of REPEATS runs of each, taken in turns: a load that changes during the run weighs on
    the figure and its baseline alike."""
    best_command = best_baseline = float("inf")
    for _ in range(REPEATS):
        best_baseline = min(best_baseline, best_of(1, lambda: _run(*baseline)))
        best_command = min(best_command, best_of(1, lambda: _cli(*command)))
    return best_command, best_baseline


def main() -> None:
    typer_name, bare_name = 'python -c "import typer"', "bare typer command --help"
    import_typer, bare_help = ["-c", "import typer"], ["-c", _BARE_COMMAND, "--help"]
    root, typer_import = _paired(["--help"], import_typer)
    figures = [_figure("entitlements --help", root, typer_name, typer_import, ROOT_TARGET_RATIO)]
    for name in COMMANDS:
        seconds, bare = _paired([name, "--help"], bare_help)
        figures.append(_figure(f"entitlements {name} --help", seconds, bare_name, bare, COMMAND_TARGET_RATIO))
    version, typer_import = _paired(["--version"], import_typer)
    figures.append(
        Comparison("entitlements --version", version, "s", typer_name, typer_import, better="lower")
    )
    print_figures(
        f"CLI start-up (fresh process each, best of {REPEATS}, in turns with its baseline)", figures
    )


if __name__ == "__main__":
    main()
