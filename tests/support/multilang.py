"""What the MultiLangDaemon writes to a KCL child, for driving the child in-process without the daemon."""

from __future__ import annotations

__all__ = ["daemon_lines"]

import base64
import json


def daemon_lines(records: list[bytes]) -> str:
    """What the MultiLangDaemon writes to the child: initialize, one batch, the answer to the child's
    checkpoint, then shutdown (nothing is pending then, so no second checkpoint)."""
    batch = [
        {
            "action": "record",
            "data": base64.b64encode(data).decode(),
            "partitionKey": str(100 + i),
            "sequenceNumber": str(100 + i),
            "subSequenceNumber": 0,
            "approximateArrivalTimestamp": 1796033513579,
        }
        for i, data in enumerate(records)
    ]
    messages = [
        {"action": "initialize", "shardId": "shardId-1", "sequenceNumber": "0", "subSequenceNumber": 0},
        {"action": "processRecords", "records": batch, "millisBehindLatest": 0},
        {
            "action": "checkpoint",
            "sequenceNumber": str(99 + len(records)),
            "subSequenceNumber": 0,
            "error": None,
        },
        {"action": "shutdownRequested"},
    ]
    return "".join(json.dumps(message) + "\n" for message in messages)
