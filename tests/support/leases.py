"""Reading the KCL lease table: where the daemon has checkpointed each shard (read from DynamoDB itself,
not from what the child says it did)."""

from __future__ import annotations

from typing import Any

from tests.support.kcl import aws_client, dynamodb


def checkpoints(endpoint: str, application_name: str) -> dict[str, str]:
    """Lease key -> checkpoint, for every lease of the application (its lease table has its name).
    A shard not yet checkpointed shows KCL's sentinel (TRIM_HORIZON, LATEST); no table yet: {}."""
    client = dynamodb(endpoint)
    try:
        items: list[dict[str, Any]] = client.scan(TableName=application_name, ConsistentRead=True)["Items"]
    except client.exceptions.ResourceNotFoundException:
        return {}
    return {
        str(item["leaseKey"]["S"]): str(item["checkpoint"]["S"])
        for item in items
        if "leaseKey" in item and "checkpoint" in item
    }


def checkpointed_past(endpoint: str, application_name: str, shard_id: str, sequence_number: str) -> bool:
    """Whether the lease of `shard_id` holds a checkpoint at or after `sequence_number` (or SHARD_END)."""
    for key, checkpoint in checkpoints(endpoint, application_name).items():
        if not key.endswith(shard_id):
            continue
        if checkpoint == "SHARD_END":
            return True
        if checkpoint.isdigit() and int(checkpoint) >= int(sequence_number):
            return True
    return False


def only_shard(endpoint: str, stream_arn: str) -> str:
    """The id of the stream's one shard (a new moto stream has one)."""
    streams = aws_client(endpoint, "dynamodbstreams")
    shards = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]
    assert len(shards) == 1
    return str(shards[0]["ShardId"])
