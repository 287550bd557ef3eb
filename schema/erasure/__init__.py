"""The erasure contract in Python: the twin of @linn-cloud/domain-erasure and its .NET package.

Message models, a parser and validator that agree with schema/erasure-contract.schema.json, the
channel's timing constants and the capability fixtures (read from the JSON files beside this package),
and a sender for a store's answers. The address helpers (`schema.erasure._address`) and the finer error
types (`schema.erasure._errors`) stay in their modules until a store needs them.

    request = parse_erasure_request(record_body)  # raises ErasureContractError on a bad body
    if is_expired(request, now):
        return  # consumed with no answer
    sender.send(AckResponse(request_id=request.request_id, send_no=request.send_no,
                            subscriber=settings_subscriber, outcome="DONE"))
"""

from schema.erasure._constants import CHANNEL_CONSTANTS, ErasureChannelConstants
from schema.erasure._environment import ErasureHandlerEnvironment
from schema.erasure._errors import (
    ErasureContractError,
    ErasureEnvironmentError,
)
from schema.erasure._fixtures import (
    CAPABILITY_FIXTURES,
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
    "CheckRequest",
    "ClassifyRequest",
    "EraseRequest",
    "ErasureChannelConstants",
    "ErasureContractError",
    "ErasureEnvironmentError",
    "ErasureHandlerEnvironment",
    "ErasureRequest",
    "ErasureResponse",
    "ErasureResponseSender",
    "HoldingsAnswer",
    "HoldingsResponse",
    "RefileAckResponse",
    "RefileRequest",
    "Refusal",
    "erasure_contract_schema",
    "is_expired",
    "parse_erasure_message",
    "parse_erasure_request",
    "refusal_reasons",
    "restamp_expires_at",
    "serialize_erasure_message",
]
