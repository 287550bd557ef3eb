"""telemetry/_emf.py: the process's figures as CloudWatch EMF documents, to a file or a socket, never to
stdout."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

import telemetry
from config import MetricsSettings
from schema.errors import TerminalError
from telemetry import _emf
from tests.telemetry._emf_format import emf_problems


@pytest.fixture
def emf_file(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "metrics" / "emf.jsonl"
    publisher = telemetry.publish_emf(
        MetricsSettings(emf_file=path, emf_interval_seconds=3600), process="test"
    )
    assert publisher is not None
    yield path
    publisher.close()


def documents(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def publish_all() -> None:
    assert _emf._publisher is not None
    _emf._publisher.publish()


def test_every_document_declares_its_dimensions_and_metrics_as_members(emf_file: Path) -> None:
    telemetry.records_taken(3)
    telemetry.iterator_age(1.5)
    telemetry.parked("cleanup", 2)
    telemetry.flush_duration("lake", 0.25)
    telemetry.cleanup_outcome("cleanup.deleted")
    telemetry.erasure_answer("erasure/ACK", "DONE")
    publish_all()
    written = documents(emf_file)
    assert [emf_problems(document) for document in written] == [[]] * len(written)
    assert {name for document in written for name in document} >= {
        "Records", "IteratorAge", "ParkedRecords", "ParkedBatches", "FlushDuration", "CleanupOutcomes",
        "ErasureAnswers", "Process", "Handler", "Kind", "Answer",
    }  # fmt: skip


def test_a_labelled_figure_gets_a_document_per_label_with_its_dimension(emf_file: Path) -> None:
    telemetry.cleanup_outcome("cleanup.deleted")
    telemetry.cleanup_outcome("cleanup.deleted")
    telemetry.cleanup_outcome("cleanup.parked")
    publish_all()
    by_kind = {document["Kind"]: document["CleanupOutcomes"] for document in documents(emf_file)}
    assert by_kind == {"cleanup.deleted": [2.0], "cleanup.parked": [1.0]}


def test_a_counter_carries_what_happened_since_the_previous_document(emf_file: Path) -> None:
    telemetry.checkpointed()
    publish_all()
    publish_all()
    assert [document["Checkpoints"] for document in documents(emf_file)] == [[1.0], [0.0]]


def test_more_values_than_powertools_holds_are_split_over_documents_and_none_reach_stdout(
    emf_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for _ in range(150):
        telemetry.flush_duration("lake", 0.01)
    publish_all()
    written = [document for document in documents(emf_file) if "FlushDuration" in document]
    assert [len(document["FlushDuration"]) for document in written] == [99, 51]  # type: ignore[arg-type]
    assert capsys.readouterr().out == ""


def test_a_socket_sink_gets_one_document_per_datagram(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as agent:
        agent.bind(("127.0.0.1", 0))
        agent.settimeout(10)
        port = agent.getsockname()[1]
        settings = MetricsSettings(emf_socket=f"udp://127.0.0.1:{port}", emf_interval_seconds=3600)
        publisher = telemetry.publish_emf(settings, process="test")
        assert publisher is not None
        telemetry.quarantined()
        publisher.close()  # the last document is written at close
        document = json.loads(agent.recv(65_536))
    assert (emf_problems(document), document["Quarantined"]) == ([], [1.0])


def test_an_emf_file_that_cannot_be_opened_is_refused_naming_the_setting(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("a file where the folder should be")
    with pytest.raises(TerminalError, match="ENTITLEMENTS_METRICS__EMF_FILE"):
        telemetry.publish_emf(MetricsSettings(emf_file=tmp_path / "taken" / "emf.jsonl"), process="test")


def test_no_sink_publishes_nothing() -> None:
    assert telemetry.publish_emf(MetricsSettings(), process="test") is None


def test_a_tcp_socket_sink_gets_one_document_per_line() -> None:
    with socket.socket() as agent:
        agent.bind(("127.0.0.1", 0))
        agent.listen()
        agent.settimeout(10)
        port = agent.getsockname()[1]
        settings = MetricsSettings(emf_socket=f"tcp://127.0.0.1:{port}", emf_interval_seconds=3600)
        publisher = telemetry.publish_emf(settings, process="test")
        assert publisher is not None
        telemetry.checkpointed()
        publisher.close()
        connection, _address = agent.accept()
        with connection:
            received = connection.makefile("rb").read()
    [line] = received.splitlines()
    document = json.loads(line)
    assert (emf_problems(document), document["Checkpoints"]) == ([], [1.0])
