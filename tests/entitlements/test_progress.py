"""entitlements/_progress.py: a bar on stderr only for a person at a terminal, never otherwise."""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator

import pytest

from entitlements import _progress
from entitlements._progress import is_quiet, progress, set_quiet, track


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _not_quiet() -> Iterator[None]:
    set_quiet(False)
    yield
    set_quiet(False)


def test_no_bar_is_drawn_when_stderr_is_not_a_terminal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(_progress.sys, "stderr", io.StringIO())
    with progress("replaying parked batches", total=3) as bar:
        bar.advance(3)
    assert (_progress.sys.stderr.getvalue(), capsys.readouterr().out) == ("", "")


def test_a_bar_is_drawn_on_a_terminal_and_never_on_stdout(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    terminal = _Terminal()
    monkeypatch.setattr(_progress.sys, "stderr", terminal)
    with progress("replaying parked batches", total=3) as bar:
        bar.advance(3)
    assert "replaying parked batches" in terminal.getvalue()
    assert capsys.readouterr().out == ""


def test_quiet_turns_bars_off_even_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = _Terminal()
    monkeypatch.setattr(_progress.sys, "stderr", terminal)
    set_quiet(True)
    with progress("repairing rows", total=2) as bar:
        bar.advance()
    assert (is_quiet(), terminal.getvalue()) == (True, "")


def test_track_yields_every_item_and_counts_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_progress.sys, "stderr", io.StringIO())
    assert list(track(iter(range(4)), "items", total=4)) == [0, 1, 2, 3]


def test_a_steps_count_is_kept_when_no_bar_is_drawn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_progress.sys, "stderr", io.StringIO())
    with progress("snapshot") as bar:
        bar.set_total(5)
        bar.describe("snapshot: folding")
        bar.advance(2)
        bar.advance()
    assert bar.done == 3


def _first_line(stream: io.StringIO) -> str:
    """Wait (bounded) until the step's teller has written a line."""
    for _ in range(2000):
        if "\n" in stream.getvalue():
            return stream.getvalue().splitlines()[0]
        threading.Event().wait(0.005)
    raise AssertionError("no progress line")


def test_a_step_given_every_writes_lines_with_its_counts_away_from_a_terminal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stderr = io.StringIO()
    monkeypatch.setattr(_progress.sys, "stderr", stderr)
    with progress("writing 3 rows", total=3, every=0.01) as step:
        step.advance(2)
        line = _first_line(stderr)
    assert line.startswith("writing 3 rows: 2/3 ") and line.endswith(" s")
    assert capsys.readouterr().out == ""


def test_quiet_turns_the_lines_off_too(monkeypatch: pytest.MonkeyPatch) -> None:
    stderr = io.StringIO()
    monkeypatch.setattr(_progress.sys, "stderr", stderr)
    set_quiet(True)
    with progress("mining", every=0.001):
        threading.Event().wait(0.05)
    assert stderr.getvalue() == ""
