"""schema/erasure/_address.py: address keys and quarantine addresses."""

from __future__ import annotations

import string

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from schema.erasure._address import address_key, is_quarantine_address, quarantine_address
from schema.errors import EntitlementsError


def test_address_key_lowercases_a_to_z() -> None:
    assert address_key("Someone@Example.COM") == "someone@example.com"


def test_address_key_leaves_a_kelvin_sign_as_typed() -> None:
    assert address_key("\u212aelvin@x") == "\u212aelvin@x"
    assert address_key("\u212aelvin@x") != address_key("Kelvin@x")


def test_address_key_leaves_other_upper_case_letters_as_typed() -> None:
    assert address_key("\u00c9MILE@x") == "\u00c9mile@x"


@given(st.text())
def test_address_key_changes_a_to_z_only(raw: str) -> None:
    keyed = address_key(raw)
    assert len(keyed) == len(raw)
    for before, after in zip(raw, keyed, strict=True):
        expected = before.lower() if before in string.ascii_uppercase else before
        assert after == expected


@given(st.text())
def test_address_key_is_idempotent(raw: str) -> None:
    assert address_key(address_key(raw)) == address_key(raw)


def test_quarantine_address_has_the_contracts_form() -> None:
    assert quarantine_address("hold-0001") == "quarantine+hold-0001@erasure.invalid"


@pytest.mark.parametrize("hold_id", ["a", "0", "-", "a" * 64, "0123-abcd-z"])
def test_quarantine_address_accepts_1_to_64_of_lower_case_digits_and_hyphen(hold_id: str) -> None:
    assert quarantine_address(hold_id) == f"quarantine+{hold_id}@erasure.invalid"


@pytest.mark.parametrize(
    "hold_id",
    ["", "a" * 65, "Hold", "hold_1", "hold 1", "hold\n", "\nhold", "hold.1", "h\u00f6ld", "\u212a", "hold@x"],
)
def test_quarantine_address_refuses_any_other_hold_id_with_a_value_error(hold_id: str) -> None:
    with pytest.raises(ValueError, match="hold id") as caught:
        quarantine_address(hold_id)
    assert isinstance(caught.value, EntitlementsError)
    assert hold_id not in str(caught.value) or hold_id == ""


def test_quarantine_address_refuses_a_hold_id_that_is_not_a_string() -> None:
    with pytest.raises(ValueError):
        quarantine_address(7)  # type: ignore[arg-type]


@given(st.from_regex(r"\A[a-z0-9-]{1,64}\Z"))
def test_every_quarantine_address_is_recognised(hold_id: str) -> None:
    assert is_quarantine_address(quarantine_address(hold_id))


@pytest.mark.parametrize(
    "address",
    [
        "someone@example.com",
        "quarantine+@erasure.invalid",
        "quarantine+hold@erasure.invalid\n",
        "quarantine+hold@erasure.invalid.com",
        "xquarantine+hold@erasure.invalid",
        "quarantine+ho_ld@erasure.invalid",
        "quarantine+" + "a" * 65 + "@erasure.invalid",
        "quarantine+hold@other.invalid",
        "quarantine+hold@erasure.\u0131nvalid",
    ],
)
def test_other_addresses_are_not_quarantine_addresses(address: str) -> None:
    assert not is_quarantine_address(address)


@pytest.mark.parametrize(
    "address",
    [
        "QUARANTINE+ABC@ERASURE.INVALID",
        "Quarantine+hold-1@erasure.invalid",
        "quarantine+Hold-1@erasure.invalid",
        "quarantine+hold-1@Erasure.Invalid",
        "quarantine+hold-1@erasure.INVALID",
    ],
)
def test_an_address_with_a_to_z_in_it_is_not_a_quarantine_address(address: str) -> None:
    assert not is_quarantine_address(address)


@given(st.text(max_size=80) | st.from_regex(r"\Aquarantine\+[a-zA-Z0-9_-]{0,66}@erasure\.invalid\n?\Z"))
@example("quarantine+abc@erasure.invalid")
@example("QUARANTINE+ABC@ERASURE.INVALID")
@example("quarantine+abc@erasure.invalid\n")
def test_an_address_is_a_quarantine_address_exactly_when_quarantine_address_returns_it(
    address: str,
) -> None:
    hold_id = address.removeprefix("quarantine+").removesuffix("@erasure.invalid")
    try:
        returned = quarantine_address(hold_id)
    except ValueError:
        returned = None
    assert is_quarantine_address(address) == (returned == address)


def test_a_value_that_is_not_a_string_is_not_a_quarantine_address() -> None:
    assert not is_quarantine_address(None)  # type: ignore[arg-type]
