"""The erasure contract in Python: the twin of @linn-cloud/domain-erasure and its .NET package.

Message models, a parser and validator that agree with schema/erasure-contract.schema.json, the
channel's timing constants and the capability fixtures (read from the JSON files beside this package),
the address helpers every store compares addresses with, and a sender for a store's answers: every name
the contract document gives (docs/operations/erasure.md maps its JavaScript names to these).

    request = parse_erasure_request(record_body)  # raises ErasureContractError on a bad body
    if is_expired(request, now):
        return  # consumed with no answer
    sender.send(AckResponse(request_id=request.request_id, send_no=request.send_no,
                            subscriber=settings_subscriber, outcome="DONE"))
"""

from schema.erasure._address import address_key, is_quarantine_address, quarantine_address
from schema.erasure._constants import CHANNEL_CONSTANTS, ErasureChannelConstants
from schema.erasure._environment import ErasureHandlerEnvironment
from schema.erasure._errors import (
    ErasureContractError,
    ErasureContractErrorCode,
    ErasureEnvironmentError,
    ErasureResponseSendError,
    ErasureValueError,
)
from schema.erasure._fixtures import (
    CAPABILITY_FIXTURES,
    CapabilityPair,
    ErasureCapabilityFixtures,
    restamp_expires_at,
)
from schema.erasure._models import (
    CHECK,
    CLASSIFY,
    ERASE,
    REFILE,
    REQUEST_TYPES,
    AckResponse,
    CheckRequest,
    ClassifyRequest,
    EraseRequest,
    ErasureRequest,
    ErasureResponse,
    HoldingsAnswer,
    HoldingsResponse,
    RefileAckResponse,
    RefileRequest,
)
from schema.erasure._parse import (
    is_expired,
    parse_erasure_message,
    parse_erasure_request,
    serialize_erasure_message,
)
from schema.erasure._reasons import Refusal, refusal_reasons
from schema.erasure._schema import erasure_contract_schema
from schema.erasure._sender import ErasureResponseSender

__all__ = [
    "CAPABILITY_FIXTURES",
    "CHANNEL_CONSTANTS",
    "CHECK",
    "CLASSIFY",
    "ERASE",
    "REFILE",
    "REQUEST_TYPES",
    "AckResponse",
    "CapabilityPair",
    "CheckRequest",
    "ClassifyRequest",
    "EraseRequest",
    "ErasureCapabilityFixtures",
    "ErasureChannelConstants",
    "ErasureContractError",
    "ErasureContractErrorCode",
    "ErasureEnvironmentError",
    "ErasureHandlerEnvironment",
    "ErasureRequest",
    "ErasureResponse",
    "ErasureResponseSendError",
    "ErasureResponseSender",
    "ErasureValueError",
    "HoldingsAnswer",
    "HoldingsResponse",
    "RefileAckResponse",
    "RefileRequest",
    "Refusal",
    "address_key",
    "erasure_contract_schema",
    "is_expired",
    "is_quarantine_address",
    "parse_erasure_message",
    "parse_erasure_request",
    "quarantine_address",
    "refusal_reasons",
    "restamp_expires_at",
    "serialize_erasure_message",
]
