"""entitlements/commands/serve.py: `entitlements serve` binds loopback unless told otherwise, with the
access log off (request paths hold user ids)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from typer.testing import CliRunner

from entitlements.cli import app as cli


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, Any]:
    monkeypatch.setenv("ENTITLEMENTS_CONSUMER__STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("ENTITLEMENTS_LAKE__ROOT", str(tmp_path / "lake"))
    seen: dict[str, Any] = {}
    monkeypatch.setattr("uvicorn.run", lambda app, **options: seen.update(app=app, **options))
    return seen


def test_serve_binds_127_0_0_1_by_default_with_no_access_log(served: dict[str, Any]) -> None:
    result = CliRunner().invoke(cli, ["serve"], env={"ENTITLEMENTS_SERVICE__PORT": "8799"})
    assert result.exit_code == 0, result.output
    assert (served["host"], served["port"], served["access_log"]) == ("127.0.0.1", 8799, False)
    assert isinstance(served["app"], FastAPI)


def test_serve_takes_the_bind_address_from_the_settings(served: dict[str, Any]) -> None:
    result = CliRunner().invoke(cli, ["serve"], env={"ENTITLEMENTS_SERVICE__HOST": "127.0.0.2"})
    assert result.exit_code == 0, result.output
    assert served["host"] == "127.0.0.2"
