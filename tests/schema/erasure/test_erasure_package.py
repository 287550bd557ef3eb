"""schema/erasure/__init__.py: the public API, and the package's place in the layering."""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys

import schema.erasure
from schema.errors import RetryableError

FORBIDDEN = ("config", "pipeline", "processors", "analytics", "entitlements", "devstack")


def test_every_module_declares_all() -> None:
    for info in pkgutil.iter_modules(schema.erasure.__path__):
        module = importlib.import_module(f"schema.erasure.{info.name}")
        assert isinstance(module.__all__, list), info.name
        for name in module.__all__:
            assert hasattr(module, name), (info.name, name)


def test_every_public_name_is_exported_and_helpers_stay_private() -> None:
    for name in schema.erasure.__all__:
        assert hasattr(schema.erasure, name), name
    assert all(info.name.startswith("_") for info in pkgutil.iter_modules(schema.erasure.__path__))


def test_importing_it_imports_no_package_above_schema() -> None:
    code = "import json, sys, schema.erasure; print(json.dumps(sorted(sys.modules)))"
    output = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    loaded = json.loads(output)
    assert not [name for name in loaded if name.split(".")[0] in FORBIDDEN]


# Each name the contract document (@linn-cloud/domain-erasure) gives, and its Python spelling here.
DOCUMENT_NAMES = {
    "EraseRequest": "EraseRequest",
    "RefileRequest": "RefileRequest",
    "ClassifyRequest": "ClassifyRequest",
    "CheckRequest": "CheckRequest",
    "AckResponse": "AckResponse",
    "RefileAckResponse": "RefileAckResponse",
    "HoldingsResponse": "HoldingsResponse",
    "parseErasureRequest": "parse_erasure_request",
    "ErasureContractError": "ErasureContractError",
    "ErasureResponseSendError": "ErasureResponseSendError",
    "ErasureResponseSender": "ErasureResponseSender",
    "ErasureHandlerEnvironment": "ErasureHandlerEnvironment",
    "addressKey": "address_key",
    "quarantineAddress": "quarantine_address",
    "isQuarantineAddress": "is_quarantine_address",
    "erasureCapabilityFixtures": "CAPABILITY_FIXTURES",
    "the channel constants": "CHANNEL_CONSTANTS",
    "restamp (expiresAt to now + R)": "restamp_expires_at",
}


def test_every_name_the_contract_document_gives_is_exported_from_the_package() -> None:
    missing = [
        name
        for name in DOCUMENT_NAMES.values()
        if name not in schema.erasure.__all__ or not hasattr(schema.erasure, name)
    ]
    assert missing == []


def test_the_documented_names_import_as_a_store_would_write_them() -> None:
    code = "from schema.erasure import " + ", ".join(sorted(set(DOCUMENT_NAMES.values())))
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_address_helpers_from_the_package_behave_as_the_document_says() -> None:
    assert schema.erasure.address_key("Kelvin\u212a@X") == "kelvin\u212a@x"
    assert schema.erasure.quarantine_address("h-1") == "quarantine+h-1@erasure.invalid"
    assert schema.erasure.is_quarantine_address("quarantine+h-1@erasure.invalid")


def test_the_documented_error_codes_and_variable_names_are_the_packages() -> None:
    assert {code.value for code in schema.erasure.ErasureContractErrorCode} == {
        "NOT_JSON",
        "INVALID_MESSAGE",
        "NOT_A_REQUEST",
    }
    environment = schema.erasure.ErasureHandlerEnvironment
    assert environment.PASS_TWO_DELAY_VARIABLE == "ERASURE_PASS_TWO_DELAY_SECONDS"
    assert environment.BATCH_TIMEOUT_VARIABLE == "ERASURE_BATCH_TIMEOUT_SECONDS"
    assert issubclass(schema.erasure.ErasureResponseSendError, RetryableError)
    assert schema.erasure.CAPABILITY_FIXTURES.pairs
