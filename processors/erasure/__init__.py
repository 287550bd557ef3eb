"""The entitlements store's erasure subscriber (the erasure contract: docs/operations/erasure.md).

A worker on the store's SQS queue (fed by the erasure SNS topic with raw delivery) that validates,
checks expiry, dispatches through one capability table and answers through `ErasureResponseSender`:

- ERASE by ACCOUNT (the key is the table's user id): two passes over the Array accounts the user's rows
  name, the cleanup records, the entitlement rows, the lake (mask, then purge), and the consumer's
  quarantine and parked work, remembered in a ledger keyed by HMAC-SHA256 of the user id; then a
  verifier's receipt (every store scanned, kept in the ledger and the lake) and, when it is clean, ACK DONE.
- CHECK and CLASSIFY by ACCOUNT: HOLDS_DATA / HOLDS_NONE from the table, the lake and the consumer's
  copies; CANNOT_ANSWER when a part cannot be read.
- every ADDRESS pair and REFILE: NOT_APPLICABLE at once, counted in the ErasureNotApplicable metric (the
  table holds no addresses).

    worker = ErasureWorker(settings=settings.erasure, sqs=sqs, cloudwatch=cloudwatch,
                           queue_url=channel.queue_url, responses_queue_url=channel.responses_queue_url,
                           targets=ErasureTargets(...), clock=clock)
    worker.run(stop)

The lake's landing drops an erased account's data with `erased_filter(ledger)` (by the event's time: a
user who signs up again after the erasure completed is new data).
"""

from processors.erasure._config import checked_timings
from processors.erasure._consumer_stores import ConsumerStores
from processors.erasure._errors import ErasureConfigError
from processors.erasure._ledger import LEDGER_DIR_NAME, ErasureLedger, erased_filter
from processors.erasure._procedure import ErasureTargets
from processors.erasure._setup import ErasureChannel, ensure_erasure_channel
from processors.erasure._worker import ErasureWorker

__all__ = [
    "LEDGER_DIR_NAME",
    "ConsumerStores",
    "ErasureChannel",
    "ErasureConfigError",
    "ErasureLedger",
    "ErasureTargets",
    "ErasureWorker",
    "checked_timings",
    "ensure_erasure_channel",
    "erased_filter",
]
