"""schema/erasure/_environment.py: the handler's two settings, each within its cap."""

from __future__ import annotations

import pytest

from schema.erasure import CHANNEL_CONSTANTS, ErasureEnvironmentError, ErasureHandlerEnvironment
from schema.errors import TerminalError

DELAY = "ERASURE_PASS_TWO_DELAY_SECONDS"
TIMEOUT = "ERASURE_BATCH_TIMEOUT_SECONDS"
X = CHANNEL_CONSTANTS.pass_two_delay_cap_seconds
B = CHANNEL_CONSTANTS.batch_timeout_cap_seconds


def _env(delay: str | None = "120", timeout: str | None = "30") -> dict[str, str]:
    values = {DELAY: delay, TIMEOUT: timeout}
    return {name: value for name, value in values.items() if value is not None}


def test_the_variable_names_are_the_contracts() -> None:
    assert ErasureHandlerEnvironment.PASS_TWO_DELAY_VARIABLE == DELAY
    assert ErasureHandlerEnvironment.BATCH_TIMEOUT_VARIABLE == TIMEOUT


def test_both_values_are_read_from_the_mapping_given() -> None:
    environment = ErasureHandlerEnvironment.from_environment(_env())
    assert (environment.pass_two_delay_seconds, environment.batch_timeout_seconds) == (120, 30)


def test_values_at_their_caps_and_at_zero_are_accepted() -> None:
    assert ErasureHandlerEnvironment.from_environment(_env(str(X), str(B))).pass_two_delay_seconds == X
    assert ErasureHandlerEnvironment.from_environment(_env("0", "0")).batch_timeout_seconds == 0


def test_the_process_environment_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DELAY, "7")
    monkeypatch.setenv(TIMEOUT, "8")
    environment = ErasureHandlerEnvironment.from_environment()
    assert (environment.pass_two_delay_seconds, environment.batch_timeout_seconds) == (7, 8)


@pytest.mark.parametrize(
    ("variable", "env"), [(DELAY, _env(delay=str(X + 1))), (TIMEOUT, _env(timeout=str(B + 1)))]
)
def test_a_value_above_its_cap_is_refused_clearly(variable: str, env: dict[str, str]) -> None:
    with pytest.raises(ErasureEnvironmentError, match=rf"{variable}=\d+ is above its cap of \d+ seconds"):
        ErasureHandlerEnvironment.from_environment(env)


@pytest.mark.parametrize(("variable", "env"), [(DELAY, _env(delay="-1")), (TIMEOUT, _env(timeout="-30"))])
def test_a_value_below_zero_is_refused_clearly(variable: str, env: dict[str, str]) -> None:
    with pytest.raises(ErasureEnvironmentError, match=rf"{variable}=-\d+ is below zero"):
        ErasureHandlerEnvironment.from_environment(env)


@pytest.mark.parametrize("env", [_env(delay=None), _env(timeout=None), _env(delay="")])
def test_a_missing_value_is_refused(env: dict[str, str]) -> None:
    with pytest.raises(ErasureEnvironmentError, match="is not set"):
        ErasureHandlerEnvironment.from_environment(env)


@pytest.mark.parametrize("raw", ["1.5", "ten", " 5", "5 ", "+5", "1_0", "\u0665", "5\n", "0x10"])
def test_a_value_that_is_not_a_whole_number_is_refused(raw: str) -> None:
    with pytest.raises(ErasureEnvironmentError, match="not a whole number") as caught:
        ErasureHandlerEnvironment.from_environment(_env(delay=raw))
    assert raw.strip() not in str(caught.value)


def test_the_error_is_a_terminal_value_error() -> None:
    with pytest.raises(ErasureEnvironmentError) as caught:
        ErasureHandlerEnvironment.from_environment(_env(delay="-1"))
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, TerminalError)


def test_building_it_directly_checks_the_caps_too() -> None:
    with pytest.raises(ErasureEnvironmentError):
        ErasureHandlerEnvironment(pass_two_delay_seconds=X + 1, batch_timeout_seconds=0)
    with pytest.raises(ErasureEnvironmentError):
        ErasureHandlerEnvironment(pass_two_delay_seconds=0, batch_timeout_seconds=True)
