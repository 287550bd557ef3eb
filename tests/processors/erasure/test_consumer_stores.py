"""The consumer's quarantine, dead letters and parked work lose an erased user's records on any content:
a record that does not decode is matched on its text, a store file that cannot be read is matched
whole, and a file that cannot be written fails the step retryably."""

from __future__ import annotations

import base64
import errno
import os
import time
from pathlib import Path

import pytest

from pipeline.dead_letter import DeadLetters
from pipeline.parking import ParkedWork, RawRecord
from pipeline.quarantine import Quarantine
from processors.erasure import ConsumerStores
from processors.erasure._consumer_stores import LEFTOVER_AGE_SECONDS
from processors.erasure._errors import ErasureStateError
from schema.errors import RetryableError
from tests.processors.erasure.test_record_match import ARN, GONE, KEPT, escaped, record, undecodable

SHARD = "shardId-00000001700000000000-stores"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def stores(root: Path) -> ConsumerStores:
    return ConsumerStores(root / "quarantine", root / "parked", root / "dead-letter")


def _quarantine(root: Path, raw: bytes, sequence_number: str) -> None:
    Quarantine(root / "quarantine").put(
        raw=raw, reason="r", stream_arn=ARN, shard_id=SHARD, sequence_number=sequence_number
    )


def _dead_letter(root: Path, raw: bytes, sequence_number: str) -> None:
    DeadLetters(root / "dead-letter").put(
        raw=raw,
        reason="r",
        handler="cleanup",
        stream_arn=ARN,
        shard_id=SHARD,
        sequence_number=sequence_number,
    )


def test_a_quarantined_record_whose_escaped_text_names_the_user_is_erased(
    root: Path, stores: ConsumerStores
) -> None:
    _quarantine(root, ('{"pk": {"S": "\\u0055SER#' + escaped(GONE) + '"}, "broken').encode(), "1")
    _quarantine(root, ('{"pk": {"S": "\\u0055SER#' + escaped(KEPT) + '"}, "broken').encode(), "2")
    assert stores.erase([GONE]).quarantined_removed == 1
    [left] = list(Quarantine(root / "quarantine"))
    assert left.sequence_number == "2"


def test_a_dead_lettered_record_of_the_user_is_erased_and_another_users_stays(
    root: Path, stores: ConsumerStores
) -> None:
    _dead_letter(root, record(GONE), "1")
    _dead_letter(root, record(KEPT), "2")
    assert stores.holds(GONE)
    assert stores.erase([GONE]).dead_letters_removed == 1
    assert not stores.holds(GONE) and stores.holds(KEPT)
    assert [letter.sequence_number for letter in DeadLetters(root / "dead-letter")] == ["2"]


def test_a_parked_record_that_does_not_decode_is_matched_on_its_text(
    root: Path, stores: ConsumerStores
) -> None:
    undecodable = ('{"Keys": {"pk": {"S": "USER#' + escaped(GONE) + '"}}}').encode()
    ParkedWork(root / "parked").park(
        handler="lake",
        stream_arn=ARN,
        shard_id=SHARD,
        records=[RawRecord(undecodable, "100"), RawRecord(record(KEPT), "200")],
        reason="r",
    )
    assert stores.erase([GONE]).parked_records_removed == 1
    [batch] = list(ParkedWork(root / "parked"))
    assert [raw.sequence_number for raw in batch.records] == ["200"]


def test_a_store_file_that_cannot_be_read_is_removed_when_it_names_the_user_and_kept_otherwise(
    root: Path, stores: ConsumerStores
) -> None:
    _quarantine(root, record(KEPT), "1")
    folder = root / "quarantine" / SHARD
    for name, user_id in (("damaged-gone.json", GONE), ("damaged-kept.json", KEPT)):
        truncated = base64.b64encode(record(user_id))[:400]  # cut short in the middle of the record
        (folder / name).write_bytes(b'{"raw_base64": "' + truncated)
    assert stores.erase([GONE]).unreadable_files_removed == 1
    assert not (folder / "damaged-gone.json").exists()
    assert (folder / "damaged-kept.json").exists() and Quarantine(root / "quarantine").count() == 2


def test_a_state_dir_that_cannot_be_written_fails_the_erasure_retryably(
    root: Path, stores: ConsumerStores, monkeypatch: pytest.MonkeyPatch
) -> None:
    _quarantine(root, record(GONE), "1")

    def read_only(self: Path, missing_ok: bool = False) -> None:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(Path, "unlink", read_only)
    with pytest.raises(ErasureStateError) as raised:
        stores.erase([GONE])
    assert isinstance(raised.value, RetryableError)
    assert (raised.value.step, raised.value.code) == ("consumer-stores", "EROFS")


def test_a_temporary_file_a_crash_left_mid_write_is_removed_when_it_names_the_user(
    root: Path, stores: ConsumerStores
) -> None:
    folder = root / "quarantine" / SHARD
    folder.mkdir(parents=True)
    long_ago = time.time() - 2 * LEFTOVER_AGE_SECONDS
    for name, user_id in ((".1.json.gone.tmp", GONE), (".2.json.kept.tmp", KEPT)):
        (folder / name).write_bytes(b'{"raw_base64": "' + base64.b64encode(record(user_id)))
        os.utime(folder / name, (long_ago, long_ago))
    assert stores.holds(GONE)
    assert stores.erase([GONE]).leftover_files_removed == 1
    assert sorted(path.name for path in folder.iterdir()) == [".2.json.kept.tmp"]


def test_a_temporary_file_of_a_write_in_progress_is_left_to_its_writer(
    root: Path, stores: ConsumerStores
) -> None:
    folder = root / "quarantine" / SHARD
    folder.mkdir(parents=True)
    (folder / ".1.json.now.tmp").write_bytes(b'{"raw_base64": "' + base64.b64encode(record(GONE)))
    assert stores.erase([GONE]).leftover_files_removed == 0
    assert (folder / ".1.json.now.tmp").exists()


def test_an_erasure_of_user_1_who_holds_nothing_removes_no_other_users_record(
    root: Path, stores: ConsumerStores
) -> None:
    others = ["11", "21", "user-1", "1a", "a1"]
    for number, other in enumerate(others, start=1):
        _quarantine(root, undecodable(other, sequence_number=str(number)), str(number))
        truncated = record(other, sequence_number=str(10 + number))[:-40]  # bytes that are not JSON
        _dead_letter(root, truncated, str(10 + number))
    assert not stores.holds("1")
    erased = stores.erase(["1"])
    assert (erased.quarantined_removed, erased.dead_letters_removed) == (0, 0)
    assert len(list(Quarantine(root / "quarantine"))) == len(others)
    assert len(list(DeadLetters(root / "dead-letter"))) == len(others)


def test_the_verifiers_scan_names_each_store_still_holding_a_record_of_the_user(
    root: Path, stores: ConsumerStores
) -> None:
    _dead_letter(root, record(GONE), "1")
    _quarantine(root, record(KEPT), "2")
    assert stores.scan(GONE) == {"quarantine": 0, "dead_letters": 1, "parked": 0, "leftover_files": 0}
    stores.erase([GONE])
    assert stores.scan(GONE) == {"quarantine": 0, "dead_letters": 0, "parked": 0, "leftover_files": 0}


def test_one_scan_of_a_batch_counts_each_users_records_apart(root: Path, stores: ConsumerStores) -> None:
    _dead_letter(root, record(GONE), "1")
    _quarantine(root, record(GONE), "2")
    _quarantine(root, record(KEPT), "3")
    _quarantine(root, record(KEPT), "4")
    assert stores.scan_for([GONE, KEPT, "nobody"]) == {
        GONE: {"quarantine": 1, "dead_letters": 1, "parked": 0, "leftover_files": 0},
        KEPT: {"quarantine": 2, "dead_letters": 0, "parked": 0, "leftover_files": 0},
        "nobody": {"quarantine": 0, "dead_letters": 0, "parked": 0, "leftover_files": 0},
    }


def test_an_erasure_of_a_batch_counts_what_it_removed_of_each_user(
    root: Path, stores: ConsumerStores
) -> None:
    _quarantine(root, record(GONE), "1")
    _quarantine(root, record(KEPT), "2")
    _quarantine(root, record(KEPT), "3")
    _dead_letter(root, undecodable(KEPT), "4")
    erased = stores.erase([GONE, KEPT])
    assert (erased.quarantined_removed, erased.dead_letters_removed) == (3, 1)
    mine, theirs = erased.by_user[GONE], erased.by_user[KEPT]
    assert (mine.quarantined_removed, mine.dead_letters_removed) == (1, 0)
    assert (theirs.quarantined_removed, theirs.dead_letters_removed) == (2, 1)
