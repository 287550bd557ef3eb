"""The bootstrap without an export: a parallel Scan with segments (no point-in-time recovery, or no
permission to export).

A scan is not a snapshot: each page is read at its own moment, so an item changed while the scan runs may
be seen before or after its change. Its time T is the moment the scan starts, and its items are ordered
among the stream's changes exactly as an export's are (`analytics.bootstrap._boundary`): every change at
or after T wins over the scanned item, so an item the scan saw mid-change is settled by the stream
(which the consumer reads from before T). The consistency caveat is said on a progress line.

Its items are landed as an export's, with `stream_arn` `<table arn>/scan/<scan id>` and one "shard" per
segment (`segment-<i>-of-<n>`), each in one commit. A rerun resumes the scan the lake holds unfinished
(the same id, T and segments: only the missing segments are scanned) and lands nothing for a finished
one, so each scanned item is landed once. A scan reads the whole table: one read capacity unit per 4 KB
read with ConsistentRead (half without), per segment in parallel.
"""

from __future__ import annotations

__all__ = ["CAVEAT", "ScanReader", "bootstrap_scan", "scans_in_lake"]

import base64
import re
import secrets
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import orjson
import pyarrow.compute as pc
import pyarrow.dataset as ds
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError

from analytics.bootstrap._boundary import StreamReader
from analytics.bootstrap._errors import BootstrapRefused
from analytics.bootstrap._land import land_items, one_commit_per_file
from analytics.bootstrap._run import BootstrapReport, begin_report
from analytics.lake import CHANGES, AllowList, Lake, LakeHandler, default_allow_list
from analytics.lake.history_start import record_history_start
from config import BootstrapSettings, LakeSettings
from schema.aws_errors import converted

_SEGMENT = re.compile(r"\Asegment-(\d{5})-of-(\d{5})\Z")
CAVEAT = (
    "a scan is not a snapshot: items changed while it runs are settled by the stream's changes from "
    "its start on (run the consumer from the stream's trim horizon)"
)


class ScanReader(Protocol):
    def scan(self, **kwargs: Any) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class _Scan:
    source_arn: str
    started_at: datetime
    segments: int
    landed: frozenset[int]


def _shard(segment: int, segments: int) -> str:
    return f"segment-{segment:05d}-of-{segments:05d}"


def scans_in_lake(lake: Lake, table_arn: str) -> list[_Scan]:
    """The scans of `table_arn` the changes table holds rows of, with the segments landed."""
    try:
        table = DeltaTable(lake.table_uri(CHANGES), storage_options=dict(lake.storage_options) or None)
    except TableNotFoundError:
        return []
    except (DeltaError, OSError) as error:
        raise BootstrapRefused(f"the lake's changes table cannot be read ({type(error).__name__})") from None
    prefix = f"{table_arn}/scan/"
    rows = table.to_pyarrow_dataset().to_table(
        columns=["stream_arn", "shard_id", "created_at"],
        filter=pc.starts_with(ds.field("stream_arn"), pattern=prefix),
    )
    found: dict[str, tuple[datetime, int, set[int]]] = {}
    for arn, shard, created in zip(
        rows["stream_arn"].to_pylist(),
        rows["shard_id"].to_pylist(),
        rows["created_at"].to_pylist(),
        strict=True,
    ):
        match = _SEGMENT.match(shard or "")
        if match is None:
            continue
        earliest, segments, landed = found.setdefault(arn, (created, int(match.group(2)), set()))
        landed.add(int(match.group(1)))
        found[arn] = (min(earliest, created), segments, landed)
    return [
        _Scan(arn, started.astimezone(UTC), segments, frozenset(landed))
        for arn, (started, segments, landed) in sorted(found.items())
    ]


def _wire(value: Any) -> Any:
    """A boto3 attribute value as DynamoDB's JSON writes it (binary as base64 text)."""
    if isinstance(value, dict):
        return {name: _wire(member) for name, member in value.items()}
    if isinstance(value, list):
        return [_wire(member) for member in value]
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode()
    return value


def _scan_segment(
    dynamodb: ScanReader, table_name: str, segment: int, segments: int, page: int
) -> list[bytes]:
    lines: list[bytes] = []
    arguments: dict[str, Any] = {
        "TableName": table_name,
        "Segment": segment,
        "TotalSegments": segments,
        "ConsistentRead": True,
        "Limit": page,
    }
    while True:
        with converted("DynamoDB Scan"):
            answer = dynamodb.scan(**arguments)
        lines.extend(orjson.dumps({"Item": _wire(item)}) for item in answer.get("Items", []))
        if "LastEvaluatedKey" not in answer:
            return lines
        arguments["ExclusiveStartKey"] = answer["LastEvaluatedKey"]


def bootstrap_scan(
    dynamodb: ScanReader,
    *,
    table_name: str,
    table_arn: str,
    streams: StreamReader,
    stream_arn: str,
    lake: Lake,
    lake_settings: LakeSettings,
    allow_list: AllowList | None,
    settings: BootstrapSettings,
    now: datetime,
    accept_gap: bool,
    progress: Callable[[str], None],
) -> BootstrapReport:
    """Land the table's items by a parallel scan, resuming an unfinished one (see the module)."""
    unfinished = [s for s in scans_in_lake(lake, table_arn) if len(s.landed) < s.segments]
    finished = [s for s in scans_in_lake(lake, table_arn) if len(s.landed) >= s.segments]
    if unfinished:
        scan = unfinished[-1]
        progress(
            f"resuming the scan begun at {scan.started_at.isoformat()}: {len(scan.landed)} segments landed"
        )
    elif finished:
        scan = finished[-1]
        progress(f"a scan begun at {scan.started_at.isoformat()} is landed whole: nothing to do")
    else:
        started = now.replace(microsecond=now.microsecond // 1000 * 1000)
        scan_id = f"{int(started.timestamp() * 1000):014d}-{secrets.token_hex(4)}"
        scan = _Scan(f"{table_arn}/scan/{scan_id}", started, settings.scan_segments, frozenset())
    order, report = begin_report(
        streams,
        stream_arn,
        source_arn=scan.source_arn,
        as_of=scan.started_at,
        files=scan.segments,
        settings=settings,
        now=now,
        accept_gap=accept_gap,
        progress=progress,
    )
    report.files_skipped = len(scan.landed)
    report.history_starts_at = record_history_start(lake, allow_list or default_allow_list(), scan.started_at)
    missing = [segment for segment in range(scan.segments) if segment not in scan.landed]
    if not missing:
        return report
    progress(CAVEAT)
    handler = LakeHandler(lake, one_commit_per_file(lake_settings), allow_list=allow_list, name="bootstrap")
    with ThreadPoolExecutor(max_workers=min(len(missing), 8), thread_name_prefix="scan") as pool:
        futures = {
            pool.submit(_scan_segment, dynamodb, table_name, s, scan.segments, settings.scan_page_items): s
            for s in missing
        }
        failure: BaseException | None = None
        for future in as_completed(futures):
            segment = futures[future]
            error = future.exception()
            if error is not None:
                # The other segments are still landed: a rerun resumes with this one alone.
                failure = failure or error
                continue
            lines = future.result()
            report.items_landed += land_items(
                handler,
                source_arn=scan.source_arn,
                shard_id=_shard(segment, scan.segments),
                file_index=segment,
                lines=lines,
                exported_at=scan.started_at,
                order=order,
            )
            report.files_landed += 1
            done = len(scan.landed) + report.files_landed
            progress(
                f"segment {segment + 1}/{scan.segments}: {len(lines)} items landed ({done} segments done)"
            )
    if failure is not None:
        raise failure
    return report
