"""config/settings.py: a refused setting is named by its field and rule, never by its value."""

from __future__ import annotations

import traceback
from pathlib import Path

import pytest

import pipeline
from config import SettingsError, load_settings, settings_environment
from schema.errors import TerminalError

CANARY = "canary-7f3a-secret-value"


def _refused(monkeypatch: pytest.MonkeyPatch, **environ: str) -> SettingsError:
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as caught:
        load_settings()
    return caught.value


def _everything_it_shows(error: SettingsError) -> str:
    return "".join(traceback.format_exception(error)) + repr(error) + repr(error.args)


def test_a_refused_value_is_named_by_its_variable_and_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    error = _refused(monkeypatch, ENTITLEMENTS_POLICY__CLEANUP_TTL_DAYS="0")
    assert error.problems == (
        "ENTITLEMENTS_POLICY__CLEANUP_TTL_DAYS: greater_than_equal (ge=1): "
        "Input should be greater than or equal to 1",
    )


def test_a_mistyped_secret_is_never_in_what_the_error_shows(monkeypatch: pytest.MonkeyPatch) -> None:
    error = _refused(monkeypatch, ENTITLEMENTS_ARRAY__TIMEOUT_SECONDS=CANARY)
    assert "ENTITLEMENTS_ARRAY__TIMEOUT_SECONDS: float_parsing" in str(error)
    assert CANARY not in _everything_it_shows(error)


def test_the_pydantic_error_that_quotes_the_value_is_not_chained(monkeypatch: pytest.MonkeyPatch) -> None:
    error = _refused(monkeypatch, ENTITLEMENTS_ARRAY__TIMEOUT_SECONDS=CANARY)
    assert (error.__cause__, error.__context__) == (None, None)


def test_a_secret_given_to_an_unknown_field_is_not_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    error = _refused(monkeypatch, ENTITLEMENTS_ARRAY__APP_KEYY=CANARY)
    assert error.problems == (
        "ENTITLEMENTS_ARRAY__APP_KEYY: unknown setting, a likely typo "
        "(did you mean ENTITLEMENTS_ARRAY__APP_KEY?)",
    )
    assert CANARY not in _everything_it_shows(error)


def test_a_section_given_as_json_that_does_not_parse_names_the_section(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    error = _refused(monkeypatch, ENTITLEMENTS_ARRAY=f'{{"app_key": "{CANARY}"')
    assert 'field "array"' in str(error)
    assert CANARY not in _everything_it_shows(error)


def test_a_secret_in_a_json_section_with_a_bad_field_is_not_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    error = _refused(monkeypatch, ENTITLEMENTS_ARRAY=f'{{"app_key": "x", "concurrency": "{CANARY}"}}')
    assert error.problems[0].startswith("ENTITLEMENTS_ARRAY__CONCURRENCY: int_parsing")
    assert CANARY not in _everything_it_shows(error)


def test_every_refused_field_is_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    error = _refused(monkeypatch, ENTITLEMENTS_LAKE__FLUSH_ROWS="0", ENTITLEMENTS_ARRAY__CONCURRENCY="none")
    assert sorted(p.split(":", 1)[0] for p in error.problems) == [
        "ENTITLEMENTS_ARRAY__CONCURRENCY",
        "ENTITLEMENTS_LAKE__FLUSH_ROWS",
    ]


def test_an_explicit_override_is_refused_the_same_way() -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings(array={"retry_budget_seconds": CANARY})
    assert CANARY not in _everything_it_shows(caught.value)


def test_a_refused_setting_is_a_terminal_error_of_the_project() -> None:
    assert issubclass(SettingsError, TerminalError)


def test_valid_settings_load_with_overrides_winning() -> None:
    assert load_settings(lake={"flush_rows": 5}).lake.flush_rows == 5


def test_a_mistyped_variable_is_named_as_a_likely_typo_with_the_setting_it_resembles(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    error = _refused(monkeypatch, ENTITLEMENTS_LAKE_ROOT=CANARY)
    assert error.problems == (
        "ENTITLEMENTS_LAKE_ROOT: unknown setting, a likely typo (did you mean ENTITLEMENTS_LAKE__ROOT?)",
    )
    assert CANARY not in _everything_it_shows(error)


def test_an_unknown_variable_far_from_every_setting_is_named_without_a_guess(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    error = _refused(monkeypatch, ENTITLEMENTS_ZZZ="1")
    assert error.problems == ("ENTITLEMENTS_ZZZ: unknown setting, a likely typo",)


def test_every_setting_is_a_known_variable_so_a_child_environment_loads() -> None:
    environ = settings_environment(load_settings(environ={}))
    assert load_settings(environ=environ) is not None


def test_the_launcher_jar_defaults_to_the_installed_packages_whatever_the_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    jar = load_settings().consumer.launcher_jar
    assert jar == Path(pipeline.__file__).parent / "launcher" / "target" / "entitlements-kcl-launcher.jar"


def test_a_relative_launcher_jar_setting_is_taken_from_the_folder_the_command_runs_in(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ENTITLEMENTS_CONSUMER__LAUNCHER_JAR", "build/launcher.jar")
    assert load_settings().consumer.launcher_jar == tmp_path / "build" / "launcher.jar"


@pytest.mark.parametrize("url", ["not-a-url", f"ftp://{CANARY}", f"http://{CANARY}:99999", "http://:5000"])
def test_an_aws_endpoint_that_is_not_an_http_url_is_refused_by_rule_never_by_value(
    monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    error = _refused(monkeypatch, ENTITLEMENTS_AWS__ENDPOINT_URL=url)
    assert error.problems == (
        "ENTITLEMENTS_AWS__ENDPOINT_URL: http_url: must be an http:// or https:// URL with a host (and a "
        "port of 1 to 65535), e.g. http://127.0.0.1:5000",
    )
    assert CANARY not in _everything_it_shows(error)


def test_a_service_endpoint_is_held_to_the_same_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    error = _refused(monkeypatch, ENTITLEMENTS_AWS__S3_ENDPOINT="127.0.0.1:9000")
    assert error.problems[0].startswith("ENTITLEMENTS_AWS__S3_ENDPOINT: http_url: ")


def test_an_http_or_https_endpoint_is_taken_as_given() -> None:
    aws = load_settings(environ={}, aws={"endpoint_url": "https://127.0.0.1:4566/"}).aws
    assert aws.endpoint_url == "https://127.0.0.1:4566/"


def test_a_state_dir_naming_a_file_is_refused_as_a_file_not_a_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "a-file").write_text("kept")
    error = _refused(monkeypatch, ENTITLEMENTS_CONSUMER__STATE_DIR=str(tmp_path / "a-file"))
    assert error.problems == (
        "ENTITLEMENTS_CONSUMER__STATE_DIR: not_a_folder: names a file, not a folder: name a folder (it is "
        "made if missing)",
    )
    assert (tmp_path / "a-file").read_text() == "kept"


def test_a_state_dir_that_does_not_exist_yet_is_taken(tmp_path: Path) -> None:
    settings = load_settings(environ={}, consumer={"state_dir": tmp_path / "new"})
    assert settings.consumer.state_dir == tmp_path / "new" and not (tmp_path / "new").exists()
