"""Fixtures shared by every test folder."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

import pytest
from moto.server import ThreadedMotoServer

# Nothing in the tests may reach a real AWS account or the metadata service.
os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "eu-west-1")
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """A moto server on loopback for the whole session (DynamoDB, Streams, SQS, SNS, S3, CloudWatch)."""
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()
