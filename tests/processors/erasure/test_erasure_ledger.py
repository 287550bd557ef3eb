"""The erasure ledger: keyed by HMAC-SHA256 of the user id under the ledger key, holding no personal data,
durable in files another process sees at once; `erased_filter` is the lake landing's drop test."""

from __future__ import annotations

import errno
import hashlib
import hmac
import os
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import SecretStr

from config import load_settings
from processors.erasure import ErasureLedger, erased_filter
from processors.erasure._errors import ErasureStateError
from processors.erasure._ledger import CLOCK_SKEW
from schema.errors import RetryableError
from tests.processors.erasure.conftest import LEDGER_KEY

AT = datetime(2026, 5, 1, 12, tzinfo=UTC)
USER = "user-ledger-0001"


@pytest.fixture
def ledger(tmp_path: Path) -> ErasureLedger:
    return ErasureLedger(tmp_path / "erasure-ledger", LEDGER_KEY)


def test_an_entry_is_keyed_by_the_hmac_sha256_of_the_user_id(ledger: ErasureLedger) -> None:
    expected = hmac.new(LEDGER_KEY.get_secret_value().encode(), USER.encode(), hashlib.sha256).hexdigest()
    assert ledger.ledger_id(USER) == expected
    assert ledger.record_started(USER, AT) == expected
    assert list(ledger.ids()) == [expected]


def test_another_key_gives_another_entry_key(tmp_path: Path, ledger: ErasureLedger) -> None:
    other = ErasureLedger(tmp_path / "other", SecretStr("another-key"))
    assert other.ledger_id(USER) != ledger.ledger_id(USER)


def test_the_ledger_holds_no_personal_data(ledger: ErasureLedger) -> None:
    ledger.record_started(USER, AT)
    ledger.record_pass(USER, 2, AT)
    for path in ledger.root.iterdir():
        assert USER not in path.name
        assert USER.encode() not in path.read_bytes()


def test_entries_are_readable_by_their_owner_only(ledger: ErasureLedger) -> None:
    ledger.record_started(USER, AT)
    assert stat.S_IMODE(ledger.root.stat().st_mode) == 0o700
    for path in ledger.root.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_an_account_is_erased_from_the_moment_its_erasure_starts(ledger: ErasureLedger) -> None:
    assert not ledger.is_erased(USER)
    ledger.record_started(USER, AT)
    assert ledger.is_erased(USER)
    entry = ledger.entry(USER)
    assert entry is not None and entry.passes == 0 and not entry.completed


def test_another_process_sees_an_erasure_at_once(tmp_path: Path, ledger: ErasureLedger) -> None:
    reader = ErasureLedger(ledger.root, LEDGER_KEY)
    assert not reader.is_erased(USER)
    ledger.record_started(USER, AT)
    assert reader.is_erased(USER)


def test_the_second_pass_completes_the_entry_and_repeats_change_nothing(ledger: ErasureLedger) -> None:
    ledger.record_started(USER, AT)
    assert ledger.record_pass(USER, 1, AT).passes == 1
    done = ledger.record_pass(USER, 2, AT)
    assert done.completed and done.completed_at == AT
    later = datetime(2026, 6, 1, tzinfo=UTC)
    assert ledger.record_pass(USER, 2, later) == done
    assert ledger.record_pass(USER, 1, later) == done
    assert ledger.record_started(USER, later) == ledger.ledger_id(USER)
    assert ledger.entry(USER) == done


def test_the_landing_filter_drops_erased_accounts_only(ledger: ErasureLedger) -> None:
    drop = erased_filter(ledger)
    ledger.record_started(USER, AT)
    assert drop(USER, AT) is True
    assert drop("someone-else", AT) is False
    assert drop(None, AT) is False
    assert drop("", AT) is False


def test_after_completion_the_filter_drops_the_erased_data_and_lets_later_events_land(
    ledger: ErasureLedger,
) -> None:
    drop = erased_filter(ledger)
    ledger.record_started(USER, AT)
    later = AT + timedelta(days=3)
    assert drop(USER, later) is True  # in progress: every event of the account, whatever its time
    ledger.record_pass(USER, 1, AT)
    ledger.record_pass(USER, 2, AT)
    assert drop(USER, AT - timedelta(days=30)) is True
    assert drop(USER, AT + CLOCK_SKEW) is True  # a REMOVE the erasure caused, on a clock ahead of ours
    assert drop(USER, AT + CLOCK_SKEW + timedelta(seconds=1)) is False
    assert drop(USER, None) is True


def test_another_process_sees_the_completion_and_a_new_cycle_at_once(ledger: ErasureLedger) -> None:
    reader = ErasureLedger(ledger.root, LEDGER_KEY)
    after = AT + timedelta(hours=1)
    ledger.record_started(USER, AT)
    assert reader.is_erased(USER, after)
    ledger.record_pass(USER, 2, AT)
    assert not reader.is_erased(USER, after)
    ledger.record_started(USER, after + timedelta(hours=1), new_cycle=True)
    assert reader.is_erased(USER, after)


def test_a_new_cycle_opens_only_on_a_completed_entry(ledger: ErasureLedger) -> None:
    ledger.record_started(USER, AT)
    ledger.record_pass(USER, 1, AT)
    ledger.record_started(USER, AT + timedelta(minutes=5), new_cycle=True)
    entry = ledger.entry(USER)
    assert entry is not None and (entry.started_at, entry.passes) == (AT, 1)  # in progress: kept
    ledger.record_pass(USER, 2, AT)
    again = AT + timedelta(days=1)
    ledger.record_started(USER, again)
    assert ledger.entry(USER).completed  # type: ignore[union-attr]  # no new cycle unless asked
    ledger.record_started(USER, again, new_cycle=True)
    entry = ledger.entry(USER)
    assert entry is not None and (entry.started_at, entry.passes, entry.completed_at) == (again, 0, None)


def test_a_second_pass_is_the_stores_token_for_that_body_after_pass_one(ledger: ErasureLedger) -> None:
    body = '{"type":"erasure/ERASE"}'
    token = ledger.pass_two_token(body)
    ledger.record_started(USER, AT)
    assert not ledger.is_pass_two(USER, body, token)  # pass one not finished
    ledger.record_pass(USER, 1, AT)
    assert ledger.is_pass_two(USER, body, token)
    assert not ledger.is_pass_two(USER, body + " ", token)
    assert not ledger.is_pass_two(USER, body, "2")
    assert not ledger.is_pass_two(USER, body, None)
    other = ErasureLedger(ledger.root, SecretStr("another-key"))
    assert other.pass_two_token(body) != token


def test_an_empty_ledger_key_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="key"):
        ErasureLedger(tmp_path, SecretStr(""))


def test_the_ledgers_repr_shows_no_key(ledger: ErasureLedger) -> None:
    assert LEDGER_KEY.get_secret_value() not in repr(ledger)


def test_the_deployed_ledger_lives_under_the_consumers_state_dir(tmp_path: Path) -> None:
    settings = load_settings(consumer={"state_dir": tmp_path}, erasure={"ledger_key": LEDGER_KEY})
    deployed = ErasureLedger.from_settings(settings)
    assert deployed.root == tmp_path / "erasure-ledger"
    assert deployed.ledger_id(USER) == ErasureLedger(tmp_path / "x", LEDGER_KEY).ledger_id(USER)


def test_a_full_disk_fails_the_write_retryably_naming_no_path(
    ledger: ErasureLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full_disk(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(ledger.root))

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(ErasureStateError) as raised:
        ledger.record_started(USER, AT)
    assert isinstance(raised.value, RetryableError) and raised.value.code == "ENOSPC"
    assert str(ledger.root) not in str(raised.value) and raised.value.__cause__ is None
