"""The two table operations cleanup makes: find the entitlement rows naming an Array account (GSI1), and
mark one Removed with a conditional update. botocore errors are converted here, once."""

from __future__ import annotations

__all__ = ["MarkResult", "RowRef", "find_rows_for_account", "mark_row_removed"]

from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from processors.cleanup._clients import DynamoDBClient
from processors.cleanup._errors import GuardUnavailableError
from schema.aws_errors import aws_error_code
from schema.table import GSI1_NAME, EntitlementStatus, gsi1_key


@dataclass(frozen=True, slots=True)
class RowRef:
    """An entitlement row naming the account, as GSI1 (or the base table) showed it."""

    pk: str
    sk: str
    status: str | None

    @property
    def is_active(self) -> bool:
        return self.status == EntitlementStatus.ACTIVE.value

    @property
    def is_removed(self) -> bool:
        return self.status == EntitlementStatus.REMOVED.value


@dataclass(frozen=True, slots=True)
class MarkResult:
    marked: bool
    code: str  # "marked", "already_removed", "ConditionalCheckFailedException", or another error code


def _string(item: dict[str, Any], name: str) -> str | None:
    value = item.get(name)
    if isinstance(value, dict) and isinstance(value.get("S"), str):
        return str(value["S"])
    return None


def find_rows_for_account(dynamodb: DynamoDBClient, table_name: str, array_account_id: str) -> list[RowRef]:
    """Every entitlement row naming the account. Raises `GuardUnavailableError` if GSI1 cannot be read
    (or a row it lists cannot be read back): the guard then fails closed."""
    key = gsi1_key(array_account_id)
    rows: list[RowRef] = []
    start: dict[str, Any] | None = None
    try:
        while True:
            request: dict[str, Any] = {
                "TableName": table_name,
                "IndexName": GSI1_NAME,
                "KeyConditionExpression": "#gpk = :gpk AND #gsk = :gsk",
                "ExpressionAttributeNames": {"#gpk": "gsi1pk", "#gsk": "gsi1sk"},
                "ExpressionAttributeValues": {":gpk": {"S": key["gsi1pk"]}, ":gsk": {"S": key["gsi1sk"]}},
            }
            if start is not None:
                request["ExclusiveStartKey"] = start
            page = dynamodb.query(**request)
            for item in page.get("Items", []):
                pk, sk = _string(item, "pk"), _string(item, "sk")
                if pk is None or sk is None:
                    continue
                account = _string(item, "arrayAccountId")
                status = _string(item, "status")
                if account is None or status is None:
                    # A GSI that does not project these: read the row itself.
                    full = dynamodb.get_item(
                        TableName=table_name,
                        Key={"pk": {"S": pk}, "sk": {"S": sk}},
                        ConsistentRead=True,
                    ).get("Item")
                    if not full:
                        continue
                    account, status = _string(full, "arrayAccountId"), _string(full, "status")
                if account != array_account_id:
                    continue
                rows.append(RowRef(pk=pk, sk=sk, status=status))
            start = page.get("LastEvaluatedKey")
            if not start:
                return rows
    except (ClientError, BotoCoreError) as failed:
        raise GuardUnavailableError(aws_error_code(failed)) from None


def mark_row_removed(
    dynamodb: DynamoDBClient,
    table_name: str,
    row: RowRef,
    array_account_id: str,
    updated_at: str,
    *,
    read_back: bool = False,
) -> MarkResult:
    """Set the row Removed if it still names the account and is not already Removed. Never creates it.

    With `read_back` (the cleanup's mark after its delete; repair), a refused condition is read back: a row
    already Removed that names the account is marked (an earlier request did it: botocore's retry of a
    request whose answer timed out, or another attempt of the same expiry)."""
    try:
        dynamodb.update_item(
            TableName=table_name,
            Key={"pk": {"S": row.pk}, "sk": {"S": row.sk}},
            UpdateExpression="SET #status = :removed, #updatedAt = :now",
            ConditionExpression="attribute_exists(#pk) AND #acct = :acct AND #status <> :removed",
            ExpressionAttributeNames={
                "#pk": "pk",
                "#status": "status",
                "#updatedAt": "updatedAt",
                "#acct": "arrayAccountId",
            },
            ExpressionAttributeValues={
                ":removed": {"S": EntitlementStatus.REMOVED.value},
                ":now": {"S": updated_at},
                ":acct": {"S": array_account_id},
            },
        )
    except (ClientError, BotoCoreError) as failed:
        code = aws_error_code(failed)
        refused = code == "ConditionalCheckFailedException"
        if refused and read_back and _removed(dynamodb, table_name, row, array_account_id):
            return MarkResult(marked=True, code="already_removed")
        return MarkResult(marked=False, code=code)
    return MarkResult(marked=True, code="marked")


def _removed(dynamodb: DynamoDBClient, table_name: str, row: RowRef, array_account_id: str) -> bool:
    try:
        item = dynamodb.get_item(
            TableName=table_name, Key={"pk": {"S": row.pk}, "sk": {"S": row.sk}}, ConsistentRead=True
        ).get("Item")
    except (ClientError, BotoCoreError):
        return False  # unknown: the refusal stands
    return bool(
        item
        and _string(item, "status") == EntitlementStatus.REMOVED.value
        and _string(item, "arrayAccountId") == array_account_id
    )
