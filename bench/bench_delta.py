"""`make bench` / `python -m bench delta`: the lake's Delta tables, each figure beside a baseline
measured in the same run.

- Landing commit cost: rows appended as Delta commits (the landing's `append`, the table object kept
  open) beside a bare `pq.write_table` of the same rows, chunk by chunk.
- Reader: the duplicate-Active check through the views (DuckDB reading the files the Delta log names)
  beside the same views over a plain copy of the same Parquet files; and the exactly-once `changes`
  count through the file list beside the same through the delta extension's `delta_scan` and through a
  pyarrow dataset of the table (the Arrow route), both of which must dedupe every row.
- Compaction over a simulated hour of landing (a flush every 10 s per shard, tiered compaction every 5 min):
  bytes rewritten per byte landed (target <= 4), files per partition-day and shard after it (target
  <= 100), and compaction throughput beside landing throughput.
- Erasure of one user on a 1 M-row table (DELETE, vacuum, checkpoint, log clean-up) beside a rewrite of
  every data file of the table.
"""

from __future__ import annotations

import os
import tempfile
import time
from datetime import UTC, datetime

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from analytics import connect
from analytics.lake import Lake, default_allow_list, open_lake
from analytics.lake._delta import active_files, append, commits_since, open_table
from analytics.lake._duck import literal, load_delta_extension
from analytics.lake._files import TABLES, ensure_layout
from analytics.lake._fold import read_table
from analytics.lake.compaction import compact, tier_target
from analytics.lake.purge import purge_users
from analytics.lake.views import SQL_DIR, create_views
from bench._report import Comparison, best_of, print_figures
from bench._synthetic_lake import generate_lake

ROWS = int(os.environ.get("BENCH_DELTA_ROWS", "1000000"))
CHUNK = 5_000
HOUR_FLUSHES = 360  # per shard: one every 10 s
HOUR_COMPACT_EVERY = 30  # flushes: every 5 minutes (compact_continuously's tiers)
FANOUT = 4
TIERS = 3


def _table_rows(lake: Lake) -> pa.Table:
    table = open_table(lake, "changes")
    assert table is not None
    return pa.concat_tables(
        [read_table(lake, f"changes/{p}") for p, _ in active_files(table)],
        promote_options="permissive",
    )


def _landing(root: str, rows: pa.Table) -> list[Comparison]:
    chunks = [rows.slice(i, CHUNK) for i in range(0, min(rows.num_rows, 200 * CHUNK), CHUNK)]
    day = datetime(2026, 1, 1, tzinfo=UTC).date()
    dated = [
        c.append_column(pa.field("event_date", pa.date32()), pa.array([day] * c.num_rows, pa.date32()))
        for c in chunks
    ]
    counter = [0]

    def commits() -> None:
        counter[0] += 1
        lake = open_lake(os.path.join(root, f"landing-{counter[0]}"))
        table = ensure_layout(lake, default_allow_list())["changes"]
        for chunk in dated:
            append(lake, table, "changes", chunk, partition_by=TABLES["changes"].partition_by)

    def bare() -> None:
        folder = os.path.join(root, f"bare-{counter[0]}")
        os.makedirs(folder, exist_ok=True)
        for index, chunk in enumerate(chunks):
            pq.write_table(chunk, os.path.join(folder, f"{index}.parquet"), compression="zstd")

    delta_seconds = best_of(2, commits)
    bare_seconds = best_of(2, bare)
    print(f"  landing: {len(chunks)} commits of {CHUNK:,} rows")
    return [
        Comparison(
            name=f"landing: one Delta commit per flush of {CHUNK:,} rows",
            value=delta_seconds / len(chunks) * 1000,
            unit="ms/flush",
            baseline_name="bare pq.write_table of the same rows",
            baseline_value=bare_seconds / len(chunks) * 1000,
            better="lower",
        )
    ]


_CHECK = (SQL_DIR / "audits" / "duplicate_active_rows.sql").read_text()


def _readers(root: str, lake: Lake) -> list[Comparison]:
    """The duplicate-Active check (the `entitlements` view over the whole log: a fold of every change)
    on the Delta table, beside the same views over a plain copy of the same Parquet files; and the
    exactly-once `changes` through the file list beside the Arrow-dataset route."""
    table = open_table(lake, "changes")
    assert table is not None
    plain = os.path.join(root, "plain")
    copies = []
    for index, (path, _) in enumerate(active_files(table)):
        day = path.split("/", 1)[0]
        target = os.path.join(plain, day, f"{index}.parquet")
        os.makedirs(os.path.dirname(target), exist_ok=True)
        pq.write_table(read_table(lake, f"changes/{path}"), target, compression="zstd")
        copies.append(target)

    def check_on_delta() -> None:
        con = connect(lake, views=["entitlements"])
        con.execute(f"SELECT count(*) FROM ({_CHECK})").fetchall()

    def check_on_plain_parquet() -> None:
        con = duckdb.connect()
        create_views(con, lake, views=["entitlements"])  # the same views, then pointed at the copies
        anchor = con.execute("SELECT getvariable('changes_files')[1]").fetchall()[0][0]
        con.execute("SET VARIABLE changes_files = ?", [[anchor, *copies]])
        con.execute(f"SELECT count(*) FROM ({_CHECK})").fetchall()

    def through_files() -> None:
        connect(lake, views=["changes"]).execute("SELECT count(*) FROM changes").fetchall()

    def through_extension() -> None:
        con = duckdb.connect()
        load_delta_extension(con)
        con.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM delta_scan({literal(lake.table_uri('changes'))}) QUALIFY "
            "row_number() OVER (PARTITION BY stream_arn, shard_id, sequence_number) = 1)"
        ).fetchall()

    def through_arrow() -> None:
        delta = open_table(lake, "changes")
        assert delta is not None
        con = duckdb.connect()
        con.register("changes_dataset", delta.to_pyarrow_dataset())
        con.execute(
            "SELECT count(*) FROM (SELECT 1 FROM changes_dataset QUALIFY row_number() OVER "
            "(PARTITION BY stream_arn, shard_id, sequence_number) = 1)"
        ).fetchall()

    delta_seconds = best_of(2, check_on_delta)
    plain_seconds = best_of(2, check_on_plain_parquet)
    files_seconds = best_of(2, through_files)
    extension_seconds = best_of(2, through_extension)
    arrow_seconds = best_of(2, through_arrow)
    return [
        Comparison(
            name=f"duplicate-Active check, whole log (DuckDB {duckdb.__version__}, the Delta log's files)",
            value=delta_seconds,
            unit="s",
            baseline_name="the same views over a plain copy of the same Parquet files",
            baseline_value=plain_seconds,
            better="lower",
        ),
        Comparison(
            name=f"changes, exactly once: DuckDB {duckdb.__version__} over the log's file list",
            value=files_seconds,
            unit="s",
            baseline_name="the delta extension's delta_scan of the table, dedupe of every row",
            baseline_value=extension_seconds,
            better="lower",
        ),
        Comparison(
            name=f"changes, exactly once: DuckDB {duckdb.__version__} over the log's file list",
            value=files_seconds,
            unit="s",
            baseline_name="the table's pyarrow dataset (the Arrow route), dedupe of every row",
            baseline_value=arrow_seconds,
            better="lower",
        ),
    ]


def _hour(root: str, rows: pa.Table) -> list[Comparison]:
    lake = open_lake(os.path.join(root, "hour"))
    table = ensure_layout(lake, default_allow_list())["changes"]
    shards = sorted(set(rows["shard_id"].to_pylist()))
    per_flush = max(1, min(rows.num_rows // (HOUR_FLUSHES * len(shards)), 200))
    rewritten = landed = rounds = first_tier = 0
    landing_seconds = compaction_seconds = 0.0
    day = datetime(2026, 1, 1, tzinfo=UTC).date()
    offset = 0
    by_shard = [rows.filter(pc.equal(rows["shard_id"], shard)) for shard in shards]
    for flush in range(1, HOUR_FLUSHES + 1):
        for shard_rows in by_shard:  # each shard's worker lands its own rows, in sequence order
            chunk = shard_rows.slice(offset, per_flush)
            chunk = chunk.append_column(
                pa.field("event_date", pa.date32()), pa.array([day] * chunk.num_rows, pa.date32())
            )
            started = time.perf_counter()
            version = append(lake, table, "changes", chunk, partition_by=TABLES["changes"].partition_by)
            landing_seconds += time.perf_counter() - started
            commit = commits_since(lake, "changes", version - 1, version) or [[]]
            landed += sum(int(a["add"]["size"]) for a in commit[0] if "add" in a)
        offset += per_flush
        if flush % HOUR_COMPACT_EVERY == 0:
            rounds += 1
            # About what one interval's landing weighs once merged (merged files compress better than
            # the small ones they replace): the first tier's output is then not merged again at once.
            first_tier = first_tier or landed // 2
            started = time.perf_counter()
            target = tier_target(rounds, first_tier, FANOUT, TIERS)
            result = compact(lake, datasets=("changes",), small_file_bytes=target)
            compaction_seconds += time.perf_counter() - started
            rewritten += result.bytes_rewritten.get("changes", 0)
    files = len(active_files(open_table(lake, "changes")))
    per_shard = files / len(shards)
    return [
        Comparison(
            name="compaction: bytes rewritten per byte landed over a simulated hour",
            value=rewritten / max(landed, 1),
            unit="x",
            baseline_name="the target",
            baseline_value=4.0,
            better="lower",
            target="<= 4",
            met=rewritten / max(landed, 1) <= 4,
        ),
        Comparison(
            name="files per partition-day and shard after the hour",
            value=per_shard,
            unit="files",
            baseline_name="the target",
            baseline_value=100,
            better="lower",
            target="<= 100",
            met=per_shard <= 100,
        ),
        Comparison(
            name="compaction throughput (bytes rewritten per second)",
            value=rewritten / max(compaction_seconds, 1e-9) / 1e6,
            unit="MB/s",
            baseline_name="landing throughput (bytes landed per second of commits)",
            baseline_value=landed / max(landing_seconds, 1e-9) / 1e6,
        ),
    ]


def _erasure(root: str, rows: pa.Table, user: str) -> list[Comparison]:
    lake = open_lake(os.path.join(root, "erasure"))
    table = ensure_layout(lake, default_allow_list())["changes"]
    day = datetime(2026, 1, 1, tzinfo=UTC).date()
    for index in range(0, rows.num_rows, 250_000):
        chunk = rows.slice(index, 250_000)
        chunk = chunk.append_column(
            pa.field("event_date", pa.date32()), pa.array([day] * chunk.num_rows, pa.date32())
        )
        append(lake, table, "changes", chunk, partition_by=TABLES["changes"].partition_by)
    started = time.perf_counter()
    purge_users(lake, [user])
    erase_seconds = time.perf_counter() - started

    def rewrite_all() -> None:
        for index, part in enumerate(_table_rows(lake).to_batches(max_chunksize=250_000)):
            pq.write_table(pa.Table.from_batches([part]), os.path.join(root, f"rewrite-{index}.parquet"))

    rewrite_seconds = best_of(1, rewrite_all)
    return [
        Comparison(
            name=f"erasure of one user on a {rows.num_rows:,}-row table (delete, vacuum, log clean-up)",
            value=erase_seconds,
            unit="s",
            baseline_name="rewriting every data file of the table",
            baseline_value=rewrite_seconds,
            better="lower",
        )
    ]


def main() -> None:
    with tempfile.TemporaryDirectory() as root:
        source = open_lake(os.path.join(root, "source"))
        synthetic = generate_lake(source, ROWS, duplicate_active_users=20, rows_per_file=250_000)
        rows = _table_rows(source)
        title = f"lake on Delta (deltalake 1.6.6), {ROWS:,} rows"
        print_figures(f"{title}: landing", _landing(root, rows))
        print_figures(f"{title}: readers", _readers(root, source))
        print_figures(f"{title}: a simulated hour of landing and compaction", _hour(root, rows))
        print_figures(f"{title}: erasure", _erasure(root, rows, synthetic.duplicate_active_users[0]))


if __name__ == "__main__":
    main()
