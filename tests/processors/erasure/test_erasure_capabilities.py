"""The capability test, built from the contract's capability fixtures: every (type, keyKind) pair is sent
to the worker and answered with the pair's response type and an outcome of the right set, implemented
pairs from `outcomesWhenImplemented`, the rest from `outcomesWhenNotImplemented`. The capability table
is the one place that says which is which."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from processors.erasure._capabilities import CAPABILITIES, Handling, handling_for
from schema.erasure import CAPABILITY_FIXTURES, restamp_expires_at
from schema.erasure._fixtures import CapabilityPair
from tests.processors.erasure.erasure_subscriber_helpers import Stack

PAIRS = CAPABILITY_FIXTURES.pairs


def test_the_capability_table_names_exactly_the_contracts_pairs() -> None:
    assert set(CAPABILITIES) == {(pair.type, pair.key_kind) for pair in PAIRS}


def test_this_store_implements_erase_check_and_classify_by_account_only() -> None:
    implemented = {pair for pair, handling in CAPABILITIES.items() if handling is not Handling.NOT_APPLICABLE}
    assert implemented == {
        ("erasure/ERASE", "ACCOUNT"),
        ("erasure/CHECK", "ACCOUNT"),
        ("erasure/CLASSIFY", "ACCOUNT"),
    }


@pytest.mark.parametrize("pair", PAIRS, ids=lambda pair: f"{pair.type}-{pair.key_kind}")
def test_every_pair_is_answered_with_its_response_type_and_a_right_outcome(
    pair: CapabilityPair, make_stack: Any
) -> None:
    stack: Stack = make_stack()
    request = restamp_expires_at(pair.request, datetime.now(UTC))
    request = request.model_copy(update={"request_id": f"{request.request_id}-{uuid.uuid4().hex[:6]}"})
    stack.publish(request)
    answer = stack.answer_to(request.request_id)
    assert answer.type == pair.response_type
    assert answer.subscriber == "entitlements"
    outcome = getattr(answer, pair.outcome_field)
    implemented = handling_for(pair.request) is not Handling.NOT_APPLICABLE
    expected = pair.outcomes_when_implemented if implemented else pair.outcomes_when_not_implemented
    assert outcome in expected
