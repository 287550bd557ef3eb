"""transactions-service's primary-account call (`schema.array`'s wire contract, served locally by
`devstack.fake_transactions`), on the HTTP edge's one caller, retry and httpx mapping.

Transient failures are retried, then `unavailable` (`transactions_unavailable`); 404 `not_found`
(`no_primary_account`); 401/403 `refused` (`transactions_credentials`), another refusal `refused`
(`transactions_refused`); an answer without an account or a token `refused` (`transactions_bad_answer`):
raised as the caller's `DownstreamErrors` say. The processor token is a `SecretStr` from the answer on:
no error, log line or repr holds it, nor a user id.
"""

from __future__ import annotations

__all__ = ["HttpTransactions", "PrimaryAccount", "Transactions"]

import logging
from dataclasses import dataclass
from typing import Protocol

import httpx
from pydantic import SecretStr

from adapters._caller import GaveUp, ServiceCalls, refusal_code, text_field
from adapters.errors import DownstreamErrors
from adapters.retry import RetryPolicy
from config import ServiceSettings
from schema import array as wire

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PrimaryAccount:
    """The user's primary account at transactions-service, with the processor token for it."""

    account_id: str
    processor_token: SecretStr  # its repr is '**********'


class Transactions(Protocol):
    def primary_account(self, user_id: str) -> PrimaryAccount: ...


class HttpTransactions(ServiceCalls):
    """`Transactions` over HTTP. Thread-safe. Failures are raised as `errors` say (class attribute, or
    the `errors` argument)."""

    def __init__(
        self,
        service: ServiceSettings,
        *,
        http: httpx.Client | None = None,
        retry: RetryPolicy | None = None,
        errors: DownstreamErrors | None = None,
    ) -> None:
        super().__init__(service.transactions_base_url, service, http=http, retry=retry, errors=errors)

    def primary_account(self, user_id: str) -> PrimaryAccount:
        try:
            answer = self._caller.call(
                wire.PRIMARY_ACCOUNT_METHOD, self._base + wire.primary_account_path(user_id)
            )
        except GaveUp as failed:
            logger.info("downstream gave up", extra={"service": "transactions", "code": failed.code})
            raise self.errors.unavailable(
                f"transactions unavailable ({failed.code})", "transactions_unavailable"
            ) from None
        response = answer.response
        if response.status_code == 404:
            raise self.errors.not_found("the user has no primary account", "no_primary_account")
        if not response.is_success:
            status = response.status_code
            raise self.errors.refused(
                f"transactions refused the call (HTTP {status})", refusal_code("transactions", status)
            )
        account_id = text_field(response, wire.ACCOUNT_ID_FIELD)
        token = text_field(response, wire.PROCESSOR_TOKEN_FIELD)
        if account_id is None or token is None:
            raise self.errors.refused(
                "transactions answered without an account or token", "transactions_bad_answer"
            )
        return PrimaryAccount(account_id=account_id, processor_token=SecretStr(token))
