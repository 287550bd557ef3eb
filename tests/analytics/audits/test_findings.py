"""analytics/sql/audits/*.sql through run_audits: nothing in a clean history, and for each check a planted
anomaly found exactly (its rows, and no other check unless the seed says the anomaly implies it)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pydantic import SecretStr

from analytics.audits import AuditReport, load_checks
from processors.erasure import ErasureLedger
from schema.outcomes import OutcomeKind
from schema.table import cancellation_key, entitlement_key, stale_key
from tests.analytics.audits.conftest import found, keys
from tests.analytics.audits.story import DAY, Story, epoch

Audit = Callable[..., AuditReport]


def row_key(user: str, account: str) -> tuple[str, str]:
    key = entitlement_key(user, account)
    return key["pk"], key["sk"]


def test_a_clean_history_has_no_findings_at_all(story: Story, audit: Audit) -> None:
    report = audit(story)
    assert [r.name for r in report.results] == [c.name for c in load_checks()]
    assert found(report) == {}


# -- users with more than one Active row ------------------------------------------------------------


def test_a_second_row_made_active_without_retiring_the_first_is_a_duplicate_now_and_ever(
    story: Story, audit: Audit
) -> None:
    story.signup("mallory", "acct-m1")
    story.tick(hours=1)
    story.signup("mallory", "acct-m2")  # the old row never Superseded
    report = audit(story)
    assert found(report) == {"duplicate_active_rows": 2, "duplicate_active_rows_ever": 2}
    assert keys(report, "duplicate_active_rows") == {
        row_key("mallory", "acct-m1"),
        row_key("mallory", "acct-m2"),
    }
    assert keys(report, "duplicate_active_rows_ever") == keys(report, "duplicate_active_rows")


def test_duplicates_are_counted_as_groups_surplus_rows_and_rows_involved(story: Story, audit: Audit) -> None:
    story.signup("mallory", "acct-m1")
    story.signup("mallory", "acct-m2")
    story.signup("oscar", "acct-o1")
    story.signup("oscar", "acct-o2")
    story.signup("oscar", "acct-o3")
    result = audit(story).result("duplicate_active_rows")
    assert (result.groups, result.surplus_rows, result.rows_involved) == (2, 3, 5)
    assert result.count == 2


def test_two_active_rows_fixed_later_are_found_ever_but_not_now(story: Story, audit: Audit) -> None:
    story.signup("mallory", "acct-m1")
    story.tick(hours=1)
    story.signup("mallory", "acct-m2")
    story.tick(minutes=10)
    story.set_status("mallory", "acct-m1", "Superseded")
    story.put(story.record(stale_key("mallory", "acct-m1"), "mallory", "acct-m1", epoch(story.now) + DAY))
    report = audit(story)
    assert found(report) == {"duplicate_active_rows_ever": 2}
    (first, _second) = report.result("duplicate_active_rows_ever").rows
    assert first["last_overlap_to"] is not None and first["first_overlap_from"] is not None


def test_the_rows_of_one_transaction_are_not_an_overlap(story: Story, audit: Audit) -> None:
    story.signup("mallory", "acct-m1")
    story.tick(hours=1)
    story.put(story.new_row("mallory", "acct-m2"))
    story.tick(seconds=0.5)  # the same transaction's records, half a second apart in stream time
    story.set_status("mallory", "acct-m1", "Superseded")
    story.put(story.record(stale_key("mallory", "acct-m1"), "mallory", "acct-m1", epoch(story.now) + DAY))
    assert found(audit(story)) == {}


# -- ttl on an entitlement row ----------------------------------------------------------------------


def test_an_entitlement_row_carrying_a_ttl_is_found_now_and_ever(story: Story, audit: Audit) -> None:
    story.put({**story.row("alice", "acct-a1"), "ttl": epoch(story.now) + DAY})
    report = audit(story)
    assert found(report) == {"entitlement_row_with_ttl": 1, "entitlement_row_with_ttl_ever": 1}
    assert keys(report, "entitlement_row_with_ttl", "pk", "sk", "ttl_type") == {
        (*row_key("alice", "acct-a1"), "N")
    }


def test_a_ttl_once_carried_by_an_entitlement_row_is_found_ever(story: Story, audit: Audit) -> None:
    row = story.row("alice", "acct-a1")
    story.put({**row, "ttl": str(epoch(story.now) + DAY)})
    story.tick(hours=1)
    story.put(row)
    report = audit(story)
    assert found(report) == {"entitlement_row_with_ttl_ever": 1}
    assert keys(report, "entitlement_row_with_ttl_ever", "pk", "first_ttl_type") == {("USER#alice", "S")}


# -- deletes ----------------------------------------------------------------------------------------


def test_a_ttl_removal_of_an_entitlement_row_is_found(story: Story, audit: Audit) -> None:
    story.delete(entitlement_key("frank", "acct-f1"), ttl=True)
    report = audit(story)
    assert found(report) == {"ttl_removal_of_non_cleanup": 1}
    assert keys(report, "ttl_removal_of_non_cleanup") == {row_key("frank", "acct-f1")}


def test_a_delete_of_an_entitlement_row_is_found(story: Story, audit: Audit) -> None:
    story.delete(entitlement_key("frank", "acct-f1"))
    report = audit(story)
    assert found(report) == {"unexpected_delete": 1}
    assert keys(report, "unexpected_delete", "pk", "sk", "status") == {
        (*row_key("frank", "acct-f1"), "Active")
    }


def test_the_deletes_of_erased_users_are_excepted(story: Story, audit: Audit) -> None:
    story.delete(entitlement_key("frank", "acct-f1"))
    report = audit(story, erased_user_ids=["frank"])
    assert found(report) == {}
    assert report.erasure_exceptions == 1


def test_an_erasure_ledger_excepts_the_users_it_says_were_erased(story: Story, audit: Audit) -> None:
    class Ledger:
        def is_erased(self, user_id: str, at: object = None) -> bool:
            return user_id == "frank"

    story.delete(entitlement_key("frank", "acct-f1"))
    story.delete(entitlement_key("alice", "acct-a1"))
    report = audit(story, ledger=Ledger())
    assert keys(report, "unexpected_delete") == {row_key("alice", "acct-a1")}


def test_a_delete_inside_an_erasures_window_is_excepted_by_the_ledger(
    story: Story, audit: Audit, tmp_path: Path
) -> None:
    ledger = ErasureLedger(tmp_path / "erasure-ledger", SecretStr("audit-test-key"))
    story.signup("frank", "acct-f1")
    story.tick(minutes=1)
    ledger.record_started("frank", story.now)
    story.delete(entitlement_key("frank", "acct-f1"))
    ledger.record_pass("frank", 2, story.tick(minutes=1))
    report = audit(story, ledger=ledger)
    assert keys(report, "unexpected_delete") == set()
    assert report.erasure_exceptions == 1


def test_a_delete_after_the_erasure_completed_is_the_new_datas_and_reported(
    story: Story, audit: Audit, tmp_path: Path
) -> None:
    # frank was erased (the lake holds nothing of before), signed up again, and lost the new row.
    ledger = ErasureLedger(tmp_path / "erasure-ledger", SecretStr("audit-test-key"))
    ledger.record_started("frank", story.now)
    ledger.record_pass("frank", 2, story.now)
    story.tick(hours=1)
    story.signup("frank", "acct-f2")
    story.tick(minutes=1)
    story.delete(entitlement_key("frank", "acct-f2"))
    report = audit(story, ledger=ledger)
    assert keys(report, "unexpected_delete") == {row_key("frank", "acct-f2")}
    assert report.erasure_exceptions == 0


def test_a_stale_record_removed_by_the_service_is_found(story: Story, audit: Audit) -> None:
    story.signup("mallory", "acct-m1")
    story.tick(hours=1)
    story.second_signup("mallory", "acct-m2")
    story.tick(hours=1)
    story.delete(stale_key("mallory", "acct-m1"))
    report = audit(story)
    assert found(report) == {"stale_record_removed_not_by_ttl": 1}
    assert keys(report, "stale_record_removed_not_by_ttl") == {("USER#mallory", "CLEANUP#STALE#acct-m1")}


# -- stale writes -----------------------------------------------------------------------------------


def test_the_stale_put_race_is_found_as_the_seed_describes_it(story: Story, audit: Audit) -> None:
    """A relink reads the Active row, a second signup retires it, the relink puts the image back: the row
    is Active again (a stale write), the user has two Active rows, and the stale record names an account
    in use."""
    story.signup("mallory", "acct-m1")
    story.tick(hours=1)
    image = story.row("mallory", "acct-m1")
    story.second_signup("mallory", "acct-m2")
    story.tick(seconds=3)
    story.put(image)
    report = audit(story)
    assert found(report) == {
        "stale_write": 1,
        "duplicate_active_rows": 2,
        "duplicate_active_rows_ever": 2,
        "cleanup_names_active_account": 1,
        "cleanup_names_active_account_ever": 1,
    }
    assert keys(report, "stale_write", "pk", "sk", "previous_status") == {
        (*row_key("mallory", "acct-m1"), "Superseded")
    }


def test_a_removed_row_made_active_again_is_found(story: Story, audit: Audit) -> None:
    image = story.row("frank", "acct-f1")
    record = story.cancel("frank")
    story.expire(dict(record.keys))
    story.tick(hours=2)
    story.put(image)  # the stale image of a row cleanup has Removed
    report = audit(story)
    assert found(report) == {"stale_write": 1, "deleted_account_row_not_removed": 1}
    assert keys(report, "stale_write", "pk", "previous_status") == {("USER#frank", "Removed")}


# -- cleanup records naming an account in use -------------------------------------------------------


def test_a_cancellation_record_left_behind_by_a_reactivation_is_found_now_and_ever(
    story: Story, audit: Audit
) -> None:
    story.cancel("frank")
    story.tick(hours=5)
    story.set_status("frank", "acct-f1", "Active")  # the delete of the record failed
    report = audit(story)
    assert found(report) == {"cleanup_names_active_account": 1, "cleanup_names_active_account_ever": 1}
    assert keys(report, "cleanup_names_active_account", "sk", "row_sk", "array_account_id") == {
        ("CLEANUP#CANCELLATION", "ENTITLEMENT#acct-f1", "acct-f1")
    }


def test_a_cleanup_record_that_named_an_account_in_use_for_a_while_is_found_ever(
    story: Story, audit: Audit
) -> None:
    story.cancel("frank")
    story.tick(hours=5)
    story.set_status("frank", "acct-f1", "Active")
    story.tick(hours=5)
    story.delete(cancellation_key("frank"))  # a later retry of the delete
    report = audit(story)
    assert found(report) == {"cleanup_names_active_account_ever": 1}


# -- ttl DynamoDB would never act on ----------------------------------------------------------------


def test_a_string_ttl_is_found_now_and_ever(story: Story, audit: Audit) -> None:
    story.cancel("frank", ttl=str(epoch(story.now) + 63 * DAY))
    report = audit(story)
    assert found(report) == {"cleanup_ttl_not_actionable": 1, "cleanup_ttl_not_actionable_ever": 1}
    assert keys(report, "cleanup_ttl_not_actionable", "sk", "reason") == {("CLEANUP#CANCELLATION", "string")}


def test_a_millisecond_ttl_is_found(story: Story, audit: Audit) -> None:
    story.signup("mallory", "acct-m1")
    story.second_signup("mallory", "acct-m2", stale_ttl=(epoch(story.now) + DAY) * 1000)
    report = audit(story)
    assert found(report) == {"cleanup_ttl_not_actionable": 1, "cleanup_ttl_not_actionable_ever": 1}
    assert keys(report, "cleanup_ttl_not_actionable", "sk", "reason") == {
        ("CLEANUP#STALE#acct-m1", "milliseconds")
    }


def test_a_ttl_far_from_the_policy_is_found(story: Story, audit: Audit) -> None:
    story.cancel("frank", ttl=epoch(story.now) + DAY)  # 1 day, where a cancellation gets 63
    report = audit(story)
    assert found(report) == {"cleanup_ttl_not_actionable": 1, "cleanup_ttl_not_actionable_ever": 1}
    row = report.result("cleanup_ttl_not_actionable").rows[0]
    assert (row["reason"], row["policy_days"]) == ("off policy", 63)


def test_a_cleanup_record_without_a_ttl_is_found(story: Story, audit: Audit) -> None:
    story.put({**cancellation_key("frank"), "userId": "frank", "arrayAccountId": "acct-f1"})
    report = audit(story)
    assert keys(report, "cleanup_ttl_not_actionable", "sk", "reason") == {("CLEANUP#CANCELLATION", "missing")}


def test_a_ttl_fixed_later_is_found_ever_but_not_now(story: Story, audit: Audit) -> None:
    good = epoch(story.now) + 63 * DAY
    story.cancel("frank", ttl=str(good))
    story.tick(minutes=30)
    story.put({**story.items[("USER#frank", "CLEANUP#CANCELLATION")], "ttl": good})
    report = audit(story)
    assert found(report) == {"cleanup_ttl_not_actionable_ever": 1}


def test_a_ttl_rewritten_wrong_again_is_its_last_value_now_and_each_value_ever(
    story: Story, audit: Audit
) -> None:
    good = epoch(story.now) + 63 * DAY
    first = story.now
    story.cancel("frank", ttl=str(good))
    story.tick(minutes=10)
    story.put(story.items[("USER#frank", "CLEANUP#CANCELLATION")])  # the same string written again
    second = story.tick(minutes=20)
    story.put({**story.items[("USER#frank", "CLEANUP#CANCELLATION")], "ttl": good * 1000})
    report = audit(story)
    # Now dates the record's state by its latest change; ever dates each ttl by when it was first written.
    assert keys(report, "cleanup_ttl_not_actionable", "reason", "changed_at") == {
        ("milliseconds", second.isoformat())
    }
    assert keys(report, "cleanup_ttl_not_actionable_ever", "reason", "first_written_at") == {
        ("string", first.isoformat()),
        ("milliseconds", second.isoformat()),
    }


# -- expired cleanups, their outcomes and their rows ------------------------------------------------


def test_an_expiry_with_no_outcome_is_found(story: Story, audit: Audit) -> None:
    record = story.cancel("frank")
    story.expire(dict(record.keys), final=None)
    story.tick(hours=2)
    story.signup("zoe", "acct-z1")  # the log goes on past the grace period
    report = audit(story)
    assert found(report) == {"expired_cleanup_without_final_outcome": 1}
    assert keys(report, "expired_cleanup_without_final_outcome", "sk", "outcomes_seen") == {
        ("CLEANUP#CANCELLATION", None)
    }


def test_an_expiry_parked_and_never_finished_is_found_with_what_was_recorded(
    story: Story, audit: Audit
) -> None:
    record = story.cancel("frank")
    source = story.expire(dict(record.keys), final=None)
    story.outcome(OutcomeKind.CLEANUP_PARKED, source, user="frank", account="acct-f1", detail="503")
    story.tick(hours=2)
    story.signup("zoe", "acct-z1")
    report = audit(story)
    assert keys(report, "expired_cleanup_without_final_outcome", "outcomes_seen") == {("cleanup.parked",)}


def test_an_expiry_within_the_grace_period_is_not_reported_yet(story: Story, audit: Audit) -> None:
    record = story.cancel("frank")
    story.expire(dict(record.keys), final=None)
    story.tick(minutes=20)
    story.signup("zoe", "acct-z1")
    assert found(audit(story)) == {}


def test_an_account_deleted_whose_row_was_not_marked_is_found_now_and_ever(
    story: Story, audit: Audit
) -> None:
    record = story.cancel("frank")
    story.expire(dict(record.keys), mark=False)
    report = audit(story)
    assert found(report) == {"deleted_account_row_not_removed": 1, "deleted_account_row_not_removed_ever": 1}
    assert keys(report, "deleted_account_row_not_removed", "sk", "status", "deleted_by") == {
        ("ENTITLEMENT#acct-f1", "Cancelled", "cleanup.deleted")
    }


def test_a_row_repaired_after_its_mark_failed_is_found_ever(story: Story, audit: Audit) -> None:
    record = story.cancel("frank")
    story.expire(dict(record.keys), mark=False)
    story.tick(days=1)
    story.set_status("frank", "acct-f1", "Removed")  # `entitlements cleanup repair`
    report = audit(story)
    assert found(report) == {"deleted_account_row_not_removed_ever": 1}


def test_a_row_removed_with_no_cleanup_behind_it_is_found_now_and_ever(story: Story, audit: Audit) -> None:
    story.set_status("frank", "acct-f1", "Removed")
    report = audit(story)
    assert found(report) == {"removed_without_cleanup": 1, "removed_without_cleanup_ever": 1}
    assert keys(report, "removed_without_cleanup") == {row_key("frank", "acct-f1")}


def test_a_row_once_removed_with_no_cleanup_is_found_ever(story: Story, audit: Audit) -> None:
    story.set_status("frank", "acct-f1", "Removed")
    story.tick(days=1)
    story.delete(entitlement_key("frank", "acct-f1"))  # an erasure, excepted
    report = audit(story, erased_user_ids=["frank"])
    assert found(report) == {"removed_without_cleanup_ever": 1}


def test_a_guard_refusal_is_found(story: Story, audit: Audit) -> None:
    record = story.cancel("frank")
    story.tick(hours=5)
    story.set_status("frank", "acct-f1", "Active")  # the reactivation's delete failed
    story.expire(dict(record.keys), final=OutcomeKind.CLEANUP_REFUSED_BY_GUARD)
    report = audit(story)
    assert found(report) == {"guard_refusals": 1, "cleanup_names_active_account_ever": 1}
    assert keys(report, "guard_refusals", "user_id", "array_account_id") == {("frank", "acct-f1")}


# -- Array accounts with no row ---------------------------------------------------------------------


def test_an_account_created_at_array_whose_row_never_landed_is_found(story: Story, audit: Audit) -> None:
    story.account_created("zoe", "acct-z1")  # the signup's put failed: no row names the account
    story.tick(hours=2)
    story.signup("yann", "acct-y1")  # the log goes on past the grace period
    report = audit(story)
    assert found(report) == {"array_account_without_row": 1}
    assert keys(report, "array_account_without_row", "user_id", "array_account_id", "created_by") == {
        ("zoe", "acct-z1", "signup")
    }


def test_an_account_a_lost_race_scheduled_on_its_stale_key_is_not_an_account_without_row(
    story: Story, audit: Audit
) -> None:
    story.account_created("zoe", "acct-z2")  # the signup lost the guard: no row, a stale record instead
    story.put(story.record(stale_key("zoe", "acct-z2"), "zoe", "acct-z2", epoch(story.now) + DAY))
    story.tick(hours=2)
    story.signup("yann", "acct-y1")
    assert "array_account_without_row" not in found(audit(story))


def test_a_ttl_removal_of_an_idempotency_record_is_not_a_finding(story: Story, audit: Audit) -> None:
    story.signup("zoe", "acct-z1")
    keys_ = {"pk": "USER#zoe", "sk": "IDEMPOTENCY#d1"}
    story.put({**keys_, "userId": "zoe", "requestDigest": "r", "responseStatus": 201, "responseBody": "{}"})
    story.tick(hours=25)
    story.delete(keys_, ttl=True)
    assert found(audit(story)) == {}


def test_a_signup_whose_row_landed_is_not_an_account_without_row(story: Story, audit: Audit) -> None:
    story.signup("zoe", "acct-z1")  # records the account created, then writes its row
    story.tick(hours=2)
    story.signup("yann", "acct-y1")
    assert found(audit(story)) == {}


def test_an_account_created_within_the_grace_period_is_not_reported_yet(story: Story, audit: Audit) -> None:
    story.account_created("zoe", "acct-z1")
    story.tick(minutes=20)
    story.signup("yann", "acct-y1")
    assert found(audit(story)) == {}


# -- unknown statuses and item kinds ----------------------------------------------------------------


def test_an_unknown_status_is_found_now_and_ever(story: Story, audit: Audit) -> None:
    story.set_status("frank", "acct-f1", "Frozen")
    report = audit(story)
    assert found(report) == {"unknown_status": 1, "unknown_status_ever": 1}
    assert keys(report, "unknown_status", "sk", "status") == {("ENTITLEMENT#acct-f1", "Frozen")}


def test_an_unknown_status_held_for_a_while_is_found_ever(story: Story, audit: Audit) -> None:
    story.set_status("frank", "acct-f1", "Frozen")
    story.tick(hours=1)
    story.set_status("frank", "acct-f1", "Active")
    report = audit(story)
    assert found(report) == {"unknown_status_ever": 1}


def test_an_item_of_an_unknown_kind_is_found_now_and_ever(story: Story, audit: Audit) -> None:
    story.put({"pk": "USER#frank", "sk": "ODDITY#1", "note": "x"})
    report = audit(story)
    assert found(report) == {"unknown_item_kind": 1, "unknown_item_kind_ever": 1}
    assert keys(report, "unknown_item_kind") == {("USER#frank", "ODDITY#1")}


def test_an_item_of_an_unknown_kind_written_and_deleted_is_found_ever_and_as_a_delete(
    story: Story, audit: Audit
) -> None:
    story.put({"pk": "USER#frank", "sk": "ODDITY#1", "note": "x"})
    story.tick(hours=1)
    story.delete({"pk": "USER#frank", "sk": "ODDITY#1"})
    report = audit(story)
    assert found(report) == {"unknown_item_kind_ever": 1, "unexpected_delete": 1}
