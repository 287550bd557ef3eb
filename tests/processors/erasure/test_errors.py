"""processors/erasure/_errors.py: failures converted once into retryable step errors, codes only."""

from __future__ import annotations

import errno

import pytest
from botocore.exceptions import ClientError

from processors.erasure._errors import (
    ErasureStateError,
    ErasureStepError,
    converted,
    state_files,
)
from schema.errors import RetryableError


def test_a_botocore_error_becomes_a_step_error_naming_the_step_and_code_only() -> None:
    throttled = ClientError({"Error": {"Code": "ThrottlingException", "Message": "user-42"}}, "DeleteItem")
    with pytest.raises(ErasureStepError) as raised, converted("table"):
        raise throttled
    assert (raised.value.step, raised.value.code, raised.value.__cause__) == (
        "table",
        "ThrottlingException",
        None,
    )
    assert "user-42" not in str(raised.value)


def test_a_full_disk_becomes_a_retryable_state_error_named_by_errno_never_the_path() -> None:
    with pytest.raises(ErasureStateError) as raised, state_files("ledger"):
        raise OSError(errno.ENOSPC, "No space left", "/state/user-42")
    assert (isinstance(raised.value, RetryableError), raised.value.code) == (True, "ENOSPC")
    assert "user-42" not in str(raised.value)
