"""What the real child stored is erased too: records the KCL child quarantined (received over the
multilang protocol, through the consumer the composition root builds) are erased by the worker the
composition root builds, on any content."""

from __future__ import annotations

import io
import uuid
from pathlib import Path
from typing import Any

from amazon_kclpy import kcl

from config import Settings, load_settings
from devstack.fake_array import FakeArrayServer
from entitlements import compose
from pipeline.quarantine import Quarantine
from pipeline.record_processor import KclRecordProcessor
from processors.erasure import ensure_erasure_channel
from schema.erasure import AckResponse
from tests.processors.erasure.conftest import LEDGER_KEY
from tests.processors.erasure.erasure_subscriber_helpers import Responses, Stack, erase
from tests.processors.erasure.test_worker import nested_record
from tests.support.multilang import daemon_lines

STREAM = "arn:aws:dynamodb:eu-west-1:000000000000:table/t/stream/2026-01-01T00:00:00.000"


def _settings(moto_endpoint: str, tmp_path: Path, table_name: str, array_url: str) -> Settings:
    suffix = uuid.uuid4().hex[:10]
    return load_settings(
        aws={
            "endpoint_url": moto_endpoint,
            "region": "eu-west-1",
            "access_key_id": "testing",
            "secret_access_key": "testing",
        },
        consumer={
            "table_name": table_name,
            "stream_arn": STREAM,
            "state_dir": tmp_path / "state",
            "commit_every_records": 2,
            "commit_interval_seconds": 0.5,
        },
        lake={"root": str(tmp_path / "lake")},
        array={"base_url": array_url},
        erasure={
            "topic_name": f"erasure-requests-{suffix}",
            "queue_name": f"entitlements-erasure-{suffix}",
            "responses_queue_name": f"erasure-responses-{suffix}",
            "handler_timeout_seconds": 2.0,
            "batch_timeout_seconds": 2.0,
            "pass_two_delay_seconds": 1,
            "ledger_key": LEDGER_KEY,
        },
    )


def _run_child(settings: Settings, records: list[bytes]) -> None:
    compose.setup_retry_queues(settings)
    process = kcl.KCLProcess(
        KclRecordProcessor(compose.shard_consumer(settings)),
        input_file=io.StringIO(daemon_lines(records)),
        output_file=io.StringIO(),
        error_file=io.StringIO(),
    )
    process.run()


def test_a_record_of_the_user_nested_1000_deep_that_the_child_quarantined_is_erased_and_answered_done(
    moto_endpoint: str, sqs: Any, sns: Any, table: Any, tmp_path: Path
) -> None:
    user, other = (f"{name}-{uuid.uuid4().hex[:8]}" for name in ("user", "other"))
    with FakeArrayServer(host="127.0.0.1", port=0) as array:
        settings = _settings(moto_endpoint, tmp_path, table.table_name, array.url)
        _run_child(settings, [nested_record(user), nested_record(other)])
        quarantine = Quarantine(settings.consumer.quarantine_dir)
        assert quarantine.count() == 2  # neither record decoded
        channel = ensure_erasure_channel(sqs, sns, settings.erasure)
        with compose.erasure_worker(settings, settings.erasure, wait_seconds=1) as worker:
            stack = Stack(
                settings.erasure, sqs, sns, channel, worker, Responses(sqs, channel.responses_queue_url)
            )
            request = erase(user)
            stack.publish(request)
            answer = stack.answer_to(request.request_id)
    assert isinstance(answer, AckResponse) and answer.outcome == "DONE"
    assert [kept.raw for kept in quarantine] == [nested_record(other)]
