"""Per-shard high-water marks carried in the Delta log, and the exactly-once plan of a commit.

Every commit that lands rows of a shard also sets that shard's high-water mark (HWM): the highest
sequence key of the shard committed to the table so far, as Delta `txn` actions (application
transactions) of that same commit. A `txn` version is an int64 and a sequence key 48 digits, so the
key is split over three application ids written together, each holding 16 digits:
`lake.hwm/<stream_arn>/<shard_id>#0` (the first 16 digits), `#1`, `#2`. They are part of the commit
(all of them or none), and the table's snapshot keeps each application id's latest version through
checkpoints, log clean-up (an erasure's expunge) and rewrites that carry no `txn` (compaction, purge):
unlike commitInfo, a `txn` is state, not history.

A commit of a table is planned against one version of it (`plan_changes`, `plan_outcomes`):
- rows of a shard above its HWM cannot be in the table (nothing of the shard above it was committed)
  and are kept as they are;
- rows at or below it (a replay after a restart or a lease move; or the first commit of a shard,
  which has no HWM yet) are looked up in the table's rows of that shard and key range, and those
  present are dropped. The rest are written: a window the consumer parked, a quarantined or
  dead-lettered record redriven, lie below the HWM without being in the table, so a bare "drop
  everything at or below the HWM" would lose them.

Two commits carrying one shard's application ids conflict in delta-rs's own conflict check (a
concurrent transaction on the same application id fails the later commit; pinned by
tests/analytics/lake/test_high_water.py); commits of other shards, compactions and purges do not,
and delta-rs retries those itself without rewriting the data files. So the plan made against a
version holds at the version the commit lands on, or the commit fails and the caller plans again on
the newest version (`analytics.lake._delta.append` with `prepare`).

Outcomes use the HWM of their source shard the same way, in the `outcomes` table (the source key of
every outcome committed for that shard); an outcome's identity is its outcome_id, or (source event,
final) for a final outcome, as the `outcomes` view has it; a final outcome the precedence prefers to
the one held is not a replay and lands (the view keeps the preferred one). Outcomes with no source
event (links, erasures) are looked up by outcome_id over the whole table, and such commits all carry one more
application id (`lake.unsourced`, a counter) so that two of them conflict.
"""

from __future__ import annotations

__all__ = [
    "HWM_PREFIX",
    "UNSOURCED",
    "MarkCache",
    "Plan",
    "app_ids",
    "high_water",
    "mark_transactions",
    "plan_changes",
    "plan_outcomes",
]

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from deltalake import DeltaTable, Transaction

from analytics.lake._delta import commits_since
from analytics.lake._filesystem import Lake
from analytics.lake._schema import PARTITION_COLUMN
from pipeline import SEQUENCE_WIDTH
from schema.outcomes import FINAL_CLEANUP_OUTCOMES, final_rank

HWM_PREFIX = "lake.hwm/"
UNSOURCED = "lake.unsourced"
_PARTS = 3
_DIGITS = SEQUENCE_WIDTH // _PARTS  # 16 digits: below 2**63
_FINAL_KINDS = frozenset(kind.value for kind in FINAL_CLEANUP_OUTCOMES)

Shard = tuple[str, str]  # (stream_arn, shard_id)
_FILTER_COLUMNS = (
    "stream_arn",
    "shard_id",
    "sequence_key",
    "source_stream_arn",
    "source_shard_id",
    "source_sequence_key",
    "outcome_id",
)


@dataclass
class Plan:
    """What one commit writes: the rows left after the lookups, the `txn` actions it carries, and how
    many rows were dropped as already in the table."""

    data: pa.Table
    transactions: list[Transaction] = field(default_factory=list)
    dropped: int = 0


def app_ids(stream_arn: str, shard_id: str) -> tuple[str, ...]:
    """The application ids holding a shard's HWM, most significant digits first."""
    return tuple(f"{HWM_PREFIX}{stream_arn}/{shard_id}#{part}" for part in range(_PARTS))


def high_water(table: DeltaTable, stream_arn: str, shard_id: str) -> str | None:
    """The shard's HWM (a 48-digit sequence key) at the table's loaded version; None when no commit of
    the shard carried one (a new shard, or rows landed before HWMs were kept)."""
    parts = [table.transaction_version(app_id) for app_id in app_ids(stream_arn, shard_id)]
    if any(part is None for part in parts):
        return None
    return "".join(str(part).rjust(_DIGITS, "0") for part in parts)


HighWater = Callable[[DeltaTable, str, str], "str | None"]


class MarkCache:
    """A writer's shards' HWMs in one table, kept between its commits, so a commit reads from the
    table only the marks of shards it has not seen.

    Reading a mark is three `transaction_version` calls, and each replays the log since the last
    checkpoint (on moto's S3 about 90 ms a call 20 versions past one), so a worker writer's commit of
    8 shards spent seconds reading marks. The cache holds marks as of one version. To use them at a
    newer version it reads the log entries between (one small object each: the other writers'
    commits and its own) and applies their `txn` actions, the Delta protocol's own record of the
    marks, so a mark another writer moved (a lease that moved) is the moved one. When an entry
    between is gone (an erasure cleaned the log, or a log retention passed) it forgets everything
    and reads marks afresh."""

    def __init__(self, lake: Lake, dataset: str) -> None:
        self._lake = lake
        self._dataset = dataset
        self._marks: dict[Shard, str | None] = {}
        self._as_of: int | None = None
        self.reads = 0  # marks read from the table's snapshot (three `txn` lookups each)

    def high_water(self, table: DeltaTable, stream_arn: str, shard_id: str) -> str | None:
        """The shard's HWM at the table's loaded version (as `high_water`)."""
        version = int(table.version())
        if self._as_of != version:
            self._advance(version)
        shard = (stream_arn, shard_id)
        if shard not in self._marks:
            self.reads += 1
            self._marks[shard] = high_water(table, stream_arn, shard_id)
        return self._marks[shard]

    def clear(self) -> None:
        self._marks.clear()
        self._as_of = None

    def _advance(self, version: int) -> None:
        entries = None
        if self._as_of is not None and version > self._as_of and self._marks:
            entries = commits_since(self._lake, self._dataset, self._as_of, version)
        self._as_of = version
        if entries is None:
            self._marks.clear()
            return
        parts = {
            app_id: (shard, part) for shard in self._marks for part, app_id in enumerate(app_ids(*shard))
        }
        for entry in entries:
            moved: dict[Shard, dict[int, int]] = {}
            for action in entry:
                txn = action.get("txn")
                if txn is not None and txn.get("appId") in parts:
                    shard, part = parts[txn["appId"]]
                    moved.setdefault(shard, {})[part] = int(txn["version"])
            for shard, values in moved.items():
                if len(values) == _PARTS:  # always so: a commit sets the three together
                    self._marks[shard] = "".join(str(values[p]).rjust(_DIGITS, "0") for p in range(_PARTS))
                else:
                    self._marks.pop(shard, None)


def mark_transactions(marks: Mapping[Shard, str]) -> list[Transaction]:
    """The `txn` actions setting each shard's HWM to its sequence key."""
    actions: list[Transaction] = []
    for (stream_arn, shard_id), key in sorted(marks.items()):
        if len(key) != SEQUENCE_WIDTH or not key.isdigit():
            raise ValueError(f"a sequence key is {SEQUENCE_WIDTH} decimal digits")
        for part, app_id in enumerate(app_ids(stream_arn, shard_id)):
            actions.append(Transaction(app_id, int(key[part * _DIGITS : (part + 1) * _DIGITS])))
    return actions


def _rows_of(data: pa.Table, stream_column: str, shard_column: str) -> dict[Shard, list[int]]:
    """`_shards` as Python lists, for the outcomes' planning (which walks its rows one by one)."""
    return {
        shard: list(range(data.num_rows)) if rows is None else rows.tolist()
        for shard, rows in _shards(data, stream_column, shard_column)
    }


def _present(
    table: DeltaTable,
    prune: list[tuple[str, str, object]],
    row_filter: ds.Expression,
    columns: list[str],
) -> pa.Table:
    """The `columns` of the table's rows matching `row_filter`, reading only the files whose
    partition values and statistics may match `prune`.

    The filter is applied after the read: a file delta-rs rewrote (a purge's delete) may hold
    string_view columns, which pyarrow's scan filter cannot compare with a string."""
    dataset = table.to_pyarrow_dataset(file_pruning_predicate=prune or None)
    read = sorted({*columns, *_FILTER_COLUMNS} & set(dataset.schema.names))
    return dataset.to_table(columns=read).filter(row_filter).select(columns)


def _shards(data: pa.Table, stream_column: str, shard_column: str) -> list[tuple[Shard, np.ndarray | None]]:
    """Each shard the rows name, with its rows' indices (None when every row is that shard's); a row
    naming no stream or no shard belongs to none. Found by Arrow, not by a Python loop over the rows."""
    if not data.num_rows:
        return []
    streams, shards = data[stream_column], data[shard_column]
    if not streams.null_count and not shards.null_count:
        stream_span, shard_span = pc.min_max(streams), pc.min_max(shards)
        if stream_span["min"] == stream_span["max"] and shard_span["min"] == shard_span["max"]:
            # The usual batch: one shard's rows (a handler's flush of one record processor).
            return [((stream_span["min"].as_py(), shard_span["min"].as_py()), None)]
    rows = pa.table({"stream": streams, "shard": shards, "row": np.arange(data.num_rows)})
    grouped = rows.group_by(["stream", "shard"], use_threads=False).aggregate([("row", "list")])
    found: list[tuple[Shard, np.ndarray | None]] = []
    for stream, shard, indices in zip(
        grouped["stream"].to_pylist(), grouped["shard"].to_pylist(), grouped["row_list"], strict=True
    ):
        if stream is not None and shard is not None:
            found.append(((stream, shard), indices.values.to_numpy()))
    return found


def plan_changes(table: DeltaTable, data: pa.Table, *, read_mark: HighWater = high_water) -> Plan:
    """The commit of change rows `data` (with their partition column) against the table's version;
    `read_mark` reads a shard's HWM there (a writer's `MarkCache.high_water`)."""
    keys = data["sequence_key"]
    days = data[PARTITION_COLUMN]
    drop: np.ndarray | None = None  # the rows found in the table, once there is one
    marks: dict[Shard, str] = {}
    dropped = 0
    for (stream, shard), rows in _shards(data, "stream_arn", "shard_id"):
        shard_keys = keys if rows is None else keys.take(rows)
        mark = read_mark(table, stream, shard)
        # Rows above the mark cannot be in the table; the others are candidates for the lookup.
        candidate = None if mark is None else pc.less_equal(shard_keys, mark)
        candidate_keys = shard_keys if candidate is None else shard_keys.filter(candidate)
        kept_keys = shard_keys
        if len(candidate_keys):
            span = pc.min_max(candidate_keys)
            low, high = span["min"].as_py(), span["max"].as_py()
            shard_days = days if rows is None else days.take(rows)
            candidate_days = shard_days if candidate is None else shard_days.filter(candidate)
            day_names = sorted(day.isoformat() for day in pc.unique(candidate_days).to_pylist())
            prune: list[tuple[str, str, object]] = [
                ("stream_arn", "=", stream),
                ("shard_id", "=", shard),
                ("sequence_key", ">=", low),
                ("sequence_key", "<=", high),
                (PARTITION_COLUMN, "in", day_names),
            ]
            row_filter = (
                (ds.field("stream_arn") == stream)
                & (ds.field("shard_id") == shard)
                & (ds.field("sequence_key") >= low)
                & (ds.field("sequence_key") <= high)
            )
            found = _present(table, prune, row_filter, ["sequence_key"])["sequence_key"]
            if len(found):
                # Only candidates can match: what was found lies in [low, high], at or below the mark.
                hit = pc.is_in(shard_keys, value_set=pc.cast(found, shard_keys.type).combine_chunks())
                hits = int(pc.sum(hit).as_py() or 0)
                if hits:
                    dropped += hits
                    kept_keys = shard_keys.filter(pc.invert(hit))
                    if drop is None:
                        drop = np.zeros(data.num_rows, dtype=bool)
                    drop[slice(None) if rows is None else rows] |= hit.to_numpy()
        if len(kept_keys):
            top = str(pc.max(kept_keys).as_py())
            marks[stream, shard] = top if mark is None else max(top, mark)
    kept = data if drop is None else data.filter(pa.array(~drop))
    return Plan(kept, mark_transactions(marks), dropped)


def _outcome_identity(outcome_id: str, kind: str | None, source_event_id: str | None) -> str:
    """As the `outcomes` view partitions: (source event, final) for a final outcome, else outcome_id."""
    if source_event_id is not None and kind in _FINAL_KINDS:
        return f"final|{source_event_id}"
    return str(outcome_id)


def _rank(kind: str | None) -> int | None:
    return final_rank(kind) if kind is not None else None


def _identities(rows: pa.Table) -> dict[str, int | None]:
    """Each identity the rows hold, with the best (lowest) final rank among its rows."""
    found: dict[str, int | None] = {}
    for o, k, s in zip(
        rows["outcome_id"].to_pylist(),
        rows["kind"].to_pylist(),
        rows["source_event_id"].to_pylist(),
        strict=True,
    ):
        _note(found, _outcome_identity(o, k, s), _rank(k))
    return found


def _note(found: dict[str, int | None], identity: str, rank: int | None) -> None:
    held = found.get(identity, rank)
    found[identity] = rank if held is None or (rank is not None and rank < held) else held


_OUTCOME_COLUMNS = ["outcome_id", "kind", "source_event_id"]


def plan_outcomes(table: DeltaTable, data: pa.Table, *, read_mark: HighWater = high_water) -> Plan:
    """The commit of outcome rows `data` against the table's version (see the module's docstring);
    `read_mark` as for `plan_changes`."""
    identity = [
        _outcome_identity(o, k, s)
        for o, k, s in zip(
            data["outcome_id"].to_pylist(),
            data["kind"].to_pylist(),
            data["source_event_id"].to_pylist(),
            strict=True,
        )
    ]
    ranks = [_rank(kind) for kind in data["kind"].to_pylist()]
    keys = data["source_sequence_key"].to_pylist()
    keep = [True] * data.num_rows
    marks: dict[Shard, str] = {}
    dropped = 0
    sourced = _rows_of(data, "source_stream_arn", "source_shard_id")
    placed = {i for rows in sourced.values() for i in rows}
    for (stream, shard), rows in sourced.items():
        mark = read_mark(table, stream, shard)
        candidates = [i for i in rows if keys[i] is None or mark is None or keys[i] <= mark]
        keyed = [keys[i] for i in candidates if keys[i] is not None]
        if candidates:
            condition = (ds.field("source_stream_arn") == stream) & (ds.field("source_shard_id") == shard)
            prune: list[tuple[str, str, object]] = [
                ("source_stream_arn", "=", stream),
                ("source_shard_id", "=", shard),
            ]
            if len(keyed) == len(candidates):  # every candidate has a key: read only their range
                low, high = min(keyed), max(keyed)
                condition = (
                    condition
                    & (ds.field("source_sequence_key") >= low)
                    & (ds.field("source_sequence_key") <= high)
                )
                prune += [("source_sequence_key", ">=", low), ("source_sequence_key", "<=", high)]
            dropped += _drop_present(
                table,
                prune=prune,
                condition=condition,
                candidates=candidates,
                identity=identity,
                ranks=ranks,
                keep=keep,
            )
        kept = [keys[i] for i in rows if keep[i] and keys[i] is not None]
        if kept:
            marks[stream, shard] = max([*kept, *([mark] if mark is not None else [])])
    transactions = mark_transactions(marks)
    unsourced = [i for i in range(data.num_rows) if i not in placed]
    if unsourced:
        ids = sorted({str(data["outcome_id"][i].as_py()) for i in unsourced})
        condition = ds.field("outcome_id").isin(ids)
        dropped += _drop_present(
            table,
            prune=[],
            condition=condition,
            candidates=unsourced,
            identity=identity,
            ranks=ranks,
            keep=keep,
        )
        if any(keep[i] for i in unsourced):
            # One counter shared by every commit of unsourced outcomes: two of them conflict.
            transactions.append(Transaction(UNSOURCED, (table.transaction_version(UNSOURCED) or 0) + 1))
    return Plan(data.filter(pa.array(keep, pa.bool_())), transactions, dropped)


def _drop_present(
    table: DeltaTable,
    *,
    prune: list[tuple[str, str, object]],
    condition: ds.Expression,
    candidates: Iterable[int],
    identity: list[str],
    ranks: list[int | None],
    keep: list[bool],
) -> int:
    """Mark the candidates whose identity the table (or an earlier row of this commit) holds; returns
    how many were marked."""
    found = _identities(_present(table, prune, condition, _OUTCOME_COLUMNS))
    dropped = 0
    for i in candidates:
        rank = ranks[i]
        if identity[i] in found:
            held = found[identity[i]]
            # A final outcome preferred to the one held (deleted after a stored failure: the retry
            # worker finished what the first attempt could not) is news, not a replay: it lands, and the
            # views keep the preferred one. Anything else already held is a replay.
            if rank is None or held is None or held <= rank:
                keep[i] = False
                dropped += 1
                continue
        _note(found, identity[i], rank)
    return dropped
