"""Stream records in the shape the adapter hands them to the child (JSON, epoch milliseconds, lowercase
`userIdentity`), for tests that feed raw records to the consumer."""

from __future__ import annotations

__all__ = ["insert", "ttl_removal"]

import json
from typing import Any


def insert(
    new_image: dict[str, Any],
    *,
    event_id: str,
    sequence_number: str,
    created_at_ms: int,
    size_bytes: int = 100,
) -> bytes:
    """The write of the new item `new_image` (DynamoDB JSON; its keys are its `pk` and `sk`)."""
    return json.dumps(
        {
            "eventID": event_id,
            "eventName": "INSERT",
            "eventVersion": "1.1",
            "eventSource": "aws:dynamodb",
            "awsRegion": "eu-west-1",
            "dynamodb": {
                "ApproximateCreationDateTime": created_at_ms,
                "Keys": {"pk": new_image["pk"], "sk": new_image["sk"]},
                "NewImage": new_image,
                "SequenceNumber": sequence_number,
                "SizeBytes": size_bytes,
                "StreamViewType": "NEW_AND_OLD_IMAGES",
            },
        }
    ).encode()


def ttl_removal(
    old_image: dict[str, Any], *, event_id: str, sequence_number: str, created_at_ms: int, size_bytes: int
) -> bytes:
    """DynamoDB's TTL removing the item `old_image` (DynamoDB JSON; its keys are its `pk` and `sk`)."""
    return json.dumps(
        {
            "eventID": event_id,
            "eventName": "REMOVE",
            "eventVersion": "1.1",
            "eventSource": "aws:dynamodb",
            "awsRegion": "eu-west-1",
            "dynamodb": {
                "ApproximateCreationDateTime": created_at_ms,
                "Keys": {"pk": old_image["pk"], "sk": old_image["sk"]},
                "OldImage": old_image,
                "SequenceNumber": sequence_number,
                "SizeBytes": size_bytes,
                "StreamViewType": "NEW_AND_OLD_IMAGES",
            },
            "userIdentity": {"principalId": "dynamodb.amazonaws.com", "type": "Service"},
        }
    ).encode()
