"""Fixtures shared by every test folder."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import settings

from devstack.moto_server import MotoServer
from entitlements._logging import _JsonFormatter
from tests.support.cpu_report import CpuReport
from tests.support.dynamodb import client
from tests.support.lake_templates import LakeTemplates

# Nothing in the tests may reach a real AWS account or the metadata service.
os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "eu-west-1")
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"

# Speed lives in bench/, never in tests: hypothesis' per-example deadline is a timing assertion that a
# loaded CI machine trips at random, so it is off for every property test.
settings.register_profile("project", deadline=None)
settings.load_profile("project")


def pytest_configure(config: pytest.Config) -> None:
    """The run's costliest test files by CPU end its report (tests.support.cpu_report)."""
    config.pluginmanager.register(CpuReport(config), "cpu-report")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On a pytest-xdist worker (`make test`: `--dist loadfile --no-loadscope-reorder`, so files are handed
    out in this order), the files whose tests start the Java daemon come first: they are the longest files
    and mostly wait, so they start while the short files fill the other workers, instead of one of them
    running alone at the end. Without xdist the order stays as collected."""
    if not hasattr(config, "workerinput"):
        return
    items.sort(key=lambda item: item.get_closest_marker("kcl") is None)  # stable: file order kept


@pytest.fixture(scope="session")
def lake_templates(tmp_path_factory: pytest.TempPathFactory) -> LakeTemplates:
    """Lakes built once per run (per xdist worker), copied into each test (tests.support.lake_templates)."""
    return LakeTemplates(tmp_path_factory.mktemp("lake-templates"))


@pytest.fixture(autouse=True)
def _entry_point_logging_undone() -> Iterator[None]:
    """An entry point's `configure_logging` replaces the root logger's handlers with one bound to the
    stderr of that moment (a CliRunner's, closed when its test ends). Undone after each test, so a later
    test's captured stderr never carries that stale handler's 'Logging error' reports."""
    root = logging.getLogger()
    level = root.level
    yield
    for handler in list(root.handlers):
        if isinstance(handler.formatter, _JsonFormatter):
            root.removeHandler(handler)
    root.setLevel(level)


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    """The project's moto server on loopback for the whole session (DynamoDB, Streams, SQS, SNS, S3,
    CloudWatch), with the transaction fix and the lock the TTL emulator shares (devstack.moto_server)."""
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise
    with MotoServer() as server:
        yield server


@pytest.fixture(scope="session")
def moto_endpoint(moto_server: MotoServer) -> str:
    return moto_server.endpoint


@pytest.fixture(scope="session")
def dynamodb(moto_endpoint: str) -> Any:
    """A DynamoDB client on the session moto server (tests.support.dynamodb.client)."""
    return client(moto_endpoint, "dynamodb")


@pytest.fixture(scope="session")
def streams(moto_endpoint: str) -> Any:
    """A DynamoDB Streams client on the session moto server."""
    return client(moto_endpoint, "dynamodbstreams")
