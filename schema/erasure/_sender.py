"""Sending a store's answers on the response queue.

Only answers (ACK, REFILE_ACK, HOLDINGS) are sent, each validated against the schema and the models
before anything leaves. On a send failure the log holds an error code and a count of failed sends,
nothing else (never the body, a key or a requestId, and no traceback: a client error's text can quote
the request), and `ErasureResponseSendError` is raised so that the handler fails and SQS retries.
"""

from __future__ import annotations

__all__ = ["ErasureResponseSender", "SqsSendClient"]

import logging
from collections.abc import Mapping
from typing import Any, Protocol

from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from schema.aws_errors import aws_error_code
from schema.erasure._errors import ErasureContractError, ErasureContractErrorCode, ErasureResponseSendError
from schema.erasure._models import (
    AckResponse,
    ErasureResponse,
    HoldingsResponse,
    RefileAckResponse,
    response_adapter,
)
from schema.erasure._parse import serialize_erasure_message
from schema.erasure._schema import RESPONSE_VALIDATOR

_log = logging.getLogger(__name__)

_RESPONSE_CLASSES = (AckResponse, RefileAckResponse, HoldingsResponse)


class SqsSendClient(Protocol):
    """The one call the sender makes (a boto3 SQS client has it)."""

    def send_message(self, *, QueueUrl: str, MessageBody: str) -> Any: ...


def _valid_response(response: object) -> ErasureResponse | None:
    if isinstance(response, _RESPONSE_CLASSES):
        try:  # a model built with model_construct may hold anything, and the error would quote it
            data: object = response.model_dump(mode="json", by_alias=True, warnings=False)
        except (PydanticSerializationError, ValueError, TypeError):
            return None
    elif isinstance(response, Mapping):
        data = dict(response)
    else:
        return None
    if not RESPONSE_VALIDATOR.is_valid(data):
        return None
    try:
        validated: ErasureResponse = response_adapter().validate_python(data, by_alias=True, by_name=False)
    except ValidationError:
        return None
    return validated


class ErasureResponseSender:
    """`send(answer)` puts one answer on the response queue, with no message attributes."""

    def __init__(
        self, sqs_client: SqsSendClient, queue_url: str, logger: logging.Logger | None = None
    ) -> None:
        self._client = sqs_client
        self._queue_url = queue_url
        self._log = logger if logger is not None else _log
        self._failed_sends = 0

    @property
    def failed_sends(self) -> int:
        return self._failed_sends

    def send(self, response: ErasureResponse | Mapping[str, Any]) -> None:
        """Validate and send. Raises ErasureContractError(INVALID_MESSAGE) before sending anything that
        is not a valid answer, and ErasureResponseSendError when the send itself fails."""
        valid = _valid_response(response)
        if valid is None:
            raise ErasureContractError(ErasureContractErrorCode.INVALID_MESSAGE) from None
        body = serialize_erasure_message(valid)
        failure: str | None = None
        try:
            self._client.send_message(QueueUrl=self._queue_url, MessageBody=body)
        except Exception as error:  # every failure is converted here, once, without its text
            failure = aws_error_code(error)
        if failure is None:
            return
        self._failed_sends += 1
        self._log.error("erasure response send failed: code=%s failed_sends=%d", failure, self._failed_sends)
        raise ErasureResponseSendError(failure, self._failed_sends) from None
