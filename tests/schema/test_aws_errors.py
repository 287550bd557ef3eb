"""schema/aws_errors.py: the one reading of a botocore error."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ParamValidationError

from schema.aws_errors import (
    RETRYABLE_AWS_CODES,
    RETRYABLE_CANCELLATION_CODES,
    AwsRetryableError,
    AwsTerminalError,
    aws_error_code,
    cancellation_codes,
    converted,
    is_retryable_aws_error,
)
from schema.errors import RetryableError, TerminalError


def _client_error(code: str, status: int = 400, message: str = "") -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}},
        "PutItem",
    )


def test_the_code_of_a_client_error_is_its_aws_error_code() -> None:
    assert (
        aws_error_code(_client_error("ConditionalCheckFailedException")) == "ConditionalCheckFailedException"
    )


def test_a_code_that_is_not_an_identifier_is_replaced_by_the_class_name() -> None:
    assert aws_error_code(_client_error("user u-123 at a@b.example")) == "ClientError"


def test_an_error_without_a_response_is_named_by_its_class() -> None:
    assert aws_error_code(EndpointConnectionError(endpoint_url="http://127.0.0.1:1")) == (
        "EndpointConnectionError"
    )


def test_throttling_is_retryable() -> None:
    assert is_retryable_aws_error(_client_error("ThrottlingException"))


def test_a_server_error_status_is_retryable_whatever_its_code() -> None:
    assert is_retryable_aws_error(_client_error("SomethingNew", status=503))


def test_a_connection_fault_is_retryable() -> None:
    assert is_retryable_aws_error(EndpointConnectionError(endpoint_url="http://127.0.0.1:1"))


def test_a_missing_resource_is_not_retryable() -> None:
    assert not is_retryable_aws_error(_client_error("ResourceNotFoundException"))


def test_parameter_validation_is_not_retryable() -> None:
    assert not is_retryable_aws_error(ParamValidationError(report="bad"))


def test_the_retryable_set_holds_both_lists_it_replaced() -> None:
    # The table admin's list and the devstack's list differed by TransactionInProgressException.
    assert {"ThrottlingException", "ProvisionedThroughputExceededException", "InternalServerError"} | {
        "TransactionInProgressException"
    } <= RETRYABLE_AWS_CODES


def test_converted_raises_a_retryable_error_naming_the_operation_and_code_only() -> None:
    with pytest.raises(RetryableError) as caught, converted("DynamoDB PutItem"):
        raise _client_error("ThrottlingException", message="key pk=USER#u-secret")
    assert isinstance(caught.value, AwsRetryableError)
    assert (str(caught.value), caught.value.code) == (
        "DynamoDB PutItem failed: ThrottlingException",
        "ThrottlingException",
    )


def test_converted_raises_a_terminal_error_for_a_refusal() -> None:
    with pytest.raises(TerminalError) as caught, converted("SQS GetQueueUrl"):
        raise _client_error("AWS.SimpleQueueService.NonExistentQueue")
    assert isinstance(caught.value, AwsTerminalError)


def test_converted_drops_the_botocore_error_from_the_chain() -> None:
    with pytest.raises(AwsTerminalError) as caught, converted("DynamoDB PutItem"):
        raise _client_error("ValidationException", message="item u-secret")
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_a_tolerated_code_is_reported_instead_of_raised() -> None:
    with converted("DynamoDB CreateTable", tolerate=frozenset({"ResourceInUseException"})) as tolerated:
        raise _client_error("ResourceInUseException")
    assert tolerated == ["ResourceInUseException"]


def test_errors_that_are_not_botocore_pass_through_unchanged() -> None:
    with pytest.raises(KeyError), converted("DynamoDB PutItem"):
        raise KeyError("x")


def _cancelled(reasons: object) -> ClientError:
    return ClientError(
        {"Error": {"Code": "TransactionCanceledException"}, "CancellationReasons": reasons},
        "TransactWriteItems",
    )


def test_the_cancellation_reasons_are_read_in_the_transactions_order() -> None:
    error = _cancelled([{"Code": "None"}, {"Code": "ConditionalCheckFailed", "Message": "x"}, {}])
    assert cancellation_codes(error) == ["None", "ConditionalCheckFailed", "None"]


def test_an_error_without_cancellation_reasons_has_none() -> None:
    assert cancellation_codes(_client_error("ValidationException")) == []


def test_a_conflict_or_throttled_cancellation_is_retryable_and_a_failed_condition_is_not() -> None:
    assert {"TransactionConflict", "ThrottlingError"} <= RETRYABLE_CANCELLATION_CODES
    assert "ConditionalCheckFailed" not in RETRYABLE_CANCELLATION_CODES
