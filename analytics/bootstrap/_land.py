"""Landing exported items through the lake's own handler, one Delta commit per data file, each file once.

A data file is one "shard" of the export: its rows carry the export's ARN as `stream_arn` and the
file's name as `shard_id`. The file's rows are committed together (the handler's flush, its size
bounds lifted), so a file is in the `changes` table whole or not at all, and a rerun after a kill at any
point skips the files whose rows are there (read through the table: `landed_files`). The landing's
per-shard high-water mark (issue 21) keeps the same identities once as well.
"""

from __future__ import annotations

__all__ = ["LandResult", "land_items", "landed_files", "one_commit_per_file"]

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

import msgspec
import pyarrow.dataset as ds
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError

from analytics.bootstrap._boundary import ExportOrder
from analytics.bootstrap._errors import BootstrapRefused
from analytics.lake import CHANGES, Lake, LakeHandler
from config import LakeSettings
from pipeline import DecodeError, StreamPosition, decode_export_item

# A sequence number every line can be decoded with before its own is known (it depends on its key).
_PLACEHOLDER = "1"


@dataclass
class LandResult:
    files_landed: int = 0
    files_skipped: int = 0
    items_landed: int = 0


def landed_files(lake: Lake, source_arn: str) -> set[str]:
    """The data files (shard ids) of `source_arn` whose rows the `changes` table holds."""
    options = dict(lake.storage_options) or None
    try:
        table = DeltaTable(lake.table_uri(CHANGES), storage_options=options)
    except TableNotFoundError:
        return set()
    except (DeltaError, OSError) as error:
        raise BootstrapRefused(f"the lake's changes table cannot be read ({type(error).__name__})") from None
    found = table.to_pyarrow_dataset().to_table(
        columns=["shard_id"], filter=ds.field("stream_arn") == source_arn
    )
    return {value for value in found["shard_id"].to_pylist() if isinstance(value, str)}


def land_items(
    handler: LakeHandler,
    *,
    source_arn: str,
    shard_id: str,
    file_index: int,
    lines: Iterable[bytes],
    exported_at: datetime,
    order: ExportOrder,
) -> int:
    """Decode every line of one file and land them in one commit; returns the number of items."""
    count = 0
    try:
        for line_number, line in enumerate(lines):
            event_id = f"{source_arn.rsplit('/', 1)[-1]}/{shard_id}/{line_number}"
            event = decode_export_item(
                line,
                export_arn=source_arn,
                data_file=shard_id,
                sequence_number=_PLACEHOLDER,
                exported_at=exported_at,
                event_id=event_id,
            )
            key = (event.keys["pk"], event.keys["sk"])
            position = StreamPosition(
                stream_arn=source_arn,
                shard_id=shard_id,
                sequence_number=order.sequence_for(key, file_index, line_number),
            )
            handler.add(msgspec.structs.replace(event, position=position))
            count += 1
    except DecodeError as error:
        handler.discard_pending()
        raise BootstrapRefused(
            f"data file {file_index + 1}, line {line_number + 1}: {error.reason}; this file was not landed"
        ) from None
    handler.flush()
    return count


def one_commit_per_file(settings: LakeSettings) -> LakeSettings:
    """The lake settings with the handler's own flush bounds lifted: the bootstrap flushes per file."""
    return settings.model_copy(update={"flush_rows": 2**62, "flush_seconds": 1e12})
