"""pipeline/__init__.py: the package's small face, loaded on first use."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import pipeline
from pipeline.handlers import HandlerRegistry

REPO = Path(__file__).resolve().parents[2]


def test_a_face_name_is_the_object_of_its_module() -> None:
    assert pipeline.HandlerRegistry is HandlerRegistry


def test_every_listed_name_resolves() -> None:
    assert all(getattr(pipeline, name) is not None for name in pipeline.__all__)


def test_a_name_outside_the_face_is_refused() -> None:
    # The shard consumer's per-shard figures stay inside the package: no caller outside it takes them.
    with pytest.raises(AttributeError):
        _ = pipeline.ShardStats


def test_importing_a_light_module_does_not_load_the_consumer() -> None:
    probe = "import sys, pipeline.errors; print('pipeline.shard_consumer' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, timeout=120, check=True
    )
    assert done.stdout.strip() == b"False"
