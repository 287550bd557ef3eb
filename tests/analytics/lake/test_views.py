"""analytics/lake/views.py and analytics/sql/*.sql: the views over the lake."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from datetime import date, timedelta
from functools import partial
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import ColumnProperties, WriterProperties, write_deltalake

from analytics.lake import CHANGES, Lake, LakeHandler, LakeMissing, default_allow_list, open_lake
from analytics.lake import _commits as commits_module
from analytics.lake._delta import open_table
from analytics.lake._duck import delta_extension_path, literal
from analytics.lake._files import AUDIT_FAILURES_TABLE, TABLES, ensure_layout
from analytics.lake._high_water import Plan as HighWaterPlan
from analytics.lake._mask import write_mask
from analytics.lake._schema import image_columns
from analytics.lake.snapshots import snapshot
from analytics.lake.views import (
    VIEW_NAMES,
    cli_script,
    connect,
    create_views,
    lock_down,
    set_mask,
    view_comments,
    views_read_by,
    write_database,
)
from schema.outcomes import FINAL_OUTCOME_PRECEDENCE, OutcomeEvent, OutcomeKind, outcome_id
from tests.analytics.lake.conftest import new_s3_lake
from tests.analytics.lake.delta_files import data_files
from tests.analytics.lakesim import REPLAYED_SOURCE, TableSim, final_outcome, land, replay, state_rows
from tests.support.lake_templates import LakeTemplates

REPO = Path(__file__).resolve().parents[2]


_land = partial(land, flush_rows=30)


@pytest.fixture
def landed(lake: Lake, history: TableSim, lake_templates: LakeTemplates) -> Lake:
    # `history` is the same every time (seed 7): landed once per run, copied into this test's lake. It is
    # the `lake` fixture's lake, so a test marked `usefixtures("landed")` finds `history` landed in `lake`
    # (flush_rows=30) as if it had landed it itself: fifteen Delta commits a test were most of this file's
    # CPU, and each test's lake is still its own copy, free to write to.
    lake_templates.copy("views-history", lambda fresh: _land(fresh, history), Path(lake.base))
    return lake


def test_views_on_a_lake_with_no_tables_raise_lake_missing_and_create_nothing(lake: Lake) -> None:
    with pytest.raises(LakeMissing, match=r"lake not found at .*lake: run `entitlements consume`"):
        connect(lake)
    assert not Path(lake.path(CHANGES)).exists()


def test_views_on_a_lake_whose_tables_hold_no_commit_raise_lake_missing(lake: Lake) -> None:
    ensure_layout(lake, default_allow_list())
    with pytest.raises(LakeMissing, match="empty"):
        connect(lake)


def test_a_read_of_a_missing_lake_folder_raises_before_creating_it(tmp_path: Path) -> None:
    with pytest.raises(LakeMissing, match="lake not found at"):
        open_lake(str(tmp_path / "nowhere"), create=False)
    assert not (tmp_path / "nowhere").exists()


def test_the_views_carry_every_allow_listed_image_column(landed: Lake) -> None:
    con = connect(landed)
    columns = {row[0] for row in con.execute("DESCRIBE item_versions").fetchall()}
    assert {f.name for f in image_columns(default_allow_list())} <= columns


def test_a_view_reads_into_a_pandas_dataframe_with_the_same_rows_as_arrow(landed: Lake) -> None:
    con = connect(landed)
    query = "SELECT pk, sk FROM entitlements ORDER BY pk, sk"
    frame = con.sql(query).df()
    assert list(frame.itertuples(index=False, name=None)) == con.sql(query).fetchall()
    assert len(frame) > 0


def duckdb_cli() -> str:
    """The DuckDB CLI the dev dependencies install beside this interpreter (PyPI duckdb-cli)."""
    beside = Path(sys.executable).parent / "duckdb"
    found = str(beside) if beside.exists() else shutil.which("duckdb")
    assert found, "the DuckDB CLI is missing: pip install -e '.[dev]' installs duckdb-cli"
    return found


def duckdb_cli_lines(*commands: str, cwd: Path, database: Path | None = None) -> list[str]:
    """The DuckDB CLI's CSV lines for `commands`, run in `cwd` (on `database` when given). The delta
    extension comes from its PyPI wheel, loaded by path first (a script's own `LOAD delta` is then a
    no-op); DuckDB's extension site is not reachable here."""
    arguments = [duckdb_cli(), *([str(database)] if database else []), "-csv", "-noheader"]
    for command in (f"LOAD {literal(delta_extension_path())}", *commands):
        arguments += ["-c", command]
    result = subprocess.run(arguments, cwd=cwd, capture_output=True, text=True, timeout=120, check=True)
    return result.stdout.strip().splitlines()


def _duckdb_cli(script: str, query: str, cwd: Path) -> list[str]:
    return duckdb_cli_lines(script, query, cwd=cwd)


_VIEW_COLUMNS = (
    "SELECT table_name, column_name, comment FROM duckdb_columns() "
    "WHERE table_name IN (SELECT view_name FROM duckdb_views() WHERE NOT internal)"
)


@pytest.mark.usefixtures("landed")
def test_the_duckdb_cli_reads_the_views_from_any_folder(
    lake: Lake, history: TableSim, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    counted = _duckdb_cli(cli_script(lake), "SELECT count(*) FROM changes", elsewhere)
    assert counted == [str(len(history.events))]


@pytest.mark.usefixtures("landed")
def test_a_printed_script_reads_commits_made_after_it(lake: Lake, history: TableSim, tmp_path: Path) -> None:
    script = cli_script(lake)
    later = TableSim(shards=("shardId-00000003-cccc",), seed=8)
    later.random_history(users=5, operations=40)
    _land(lake, later)
    query = "SELECT count(*) FROM changes"
    assert _duckdb_cli(script, query, tmp_path) == [str(len(history.events) + len(later.events))]


def test_a_printed_script_names_no_file_outside_the_lake(landed: Lake) -> None:
    quoted = re.findall(r"'((?:[^']|'')*)'", cli_script(landed))
    paths = {text for text in quoted if "/" in text and " " not in text}
    assert paths and all(path.startswith(landed.uri + "/") or path == landed.uri for path in paths)


def test_a_printed_script_hides_a_user_masked_after_it_was_printed(landed: Lake, tmp_path: Path) -> None:
    script = cli_script(landed)
    query = "SELECT count(*) FROM changes WHERE user_id = 'u001'"
    assert _duckdb_cli(script, query, tmp_path) != ["0"]
    write_mask(landed, ["u001"])
    # Both views in one CLI run of the same script (each query prints its one line).
    hidden = "SELECT count(*) FROM entitlements WHERE user_id = 'u001'"
    assert duckdb_cli_lines(script, query, hidden, cwd=tmp_path) == ["0", "0"]


def test_the_script_gives_the_same_rows_as_the_python_views(landed: Lake, tmp_path: Path) -> None:
    snapshot(landed)
    script = cli_script(landed)
    con = connect(landed)
    views = ("changes", "outcomes", "current_items", "users", "array_accounts", "snapshot_items")
    queries = [f"SELECT count(*), count(DISTINCT {view}) FROM {view}" for view in views]
    expected = [",".join(str(v) for v in con.execute(query).fetchone() or ()) for query in queries]
    # One CLI run for every view (each query prints its one line, in order): each run loads the
    # extension and creates every view again, six of them were most of this test's time.
    assert dict(zip(views, duckdb_cli_lines(script, *queries, cwd=tmp_path), strict=True)) == dict(
        zip(views, expected, strict=True)
    )


def test_the_duckdb_cli_and_the_python_package_are_one_version() -> None:
    result = subprocess.run(
        [duckdb_cli(), "--version"], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.split()[0] == f"v{duckdb.__version__}"


def test_the_duckdb_cli_reads_the_delta_tables_with_the_extension_wheel(
    landed: Lake, history: TableSim, tmp_path: Path
) -> None:
    script = f"LOAD {literal(delta_extension_path())};"
    query = f"SELECT count(DISTINCT event_id) FROM delta_scan({literal(landed.table_uri(CHANGES))})"
    assert _duckdb_cli(script, query, tmp_path) == [str(len(history.events))]


def test_the_duckdb_cli_sees_every_comment(landed: Lake, tmp_path: Path) -> None:
    query = f"SELECT count(*) FROM ({_VIEW_COLUMNS}) WHERE comment IS NULL"
    assert _duckdb_cli(cli_script(landed), query, tmp_path) == ["0"]


def test_the_duckdb_cli_hides_the_users_masked_in_the_lake(landed: Lake, tmp_path: Path) -> None:
    write_mask(landed, ["u001"])
    query = "SELECT count(*) FROM changes WHERE user_id = 'u001'"
    assert _duckdb_cli(cli_script(landed), query, tmp_path) == ["0"]


def test_every_view_and_every_column_carries_a_comment_from_the_lake_doc(landed: Lake) -> None:
    con = connect(landed)
    views = con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal AND comment IS NULL")
    columns = con.execute(f"SELECT table_name, column_name FROM ({_VIEW_COLUMNS}) WHERE comment IS NULL")
    assert views.fetchall() == [] and columns.fetchall() == []


def test_the_comments_are_the_lake_docs_words(landed: Lake) -> None:
    con = connect(landed, views=["array_accounts"])
    comment = con.execute(
        "SELECT comment FROM duckdb_columns() WHERE table_name = 'array_accounts' "
        "AND column_name = 'cleanup_cancelled_at'"
    ).fetchall()
    assert comment == [(view_comments()[1]["array_accounts.cleanup_cancelled_at"],)]


def test_the_lake_doc_explains_no_column_that_no_view_or_table_holds(landed: Lake) -> None:
    held = {(str(v), str(c)) for v, c, _ in connect(landed).execute(_VIEW_COLUMNS).fetchall()}
    allow = default_allow_list()
    for spec in (*TABLES.values(), AUDIT_FAILURES_TABLE):
        held |= {(spec.meaning.name, name) for name in spec.schema(allow).names}
    names = {column for _, column in held}
    stale = [
        key
        for key in view_comments()[1]
        if (tuple(key.split(".", 1)) not in held if "." in key else key not in names)
    ]
    assert stale == []


@pytest.mark.usefixtures("landed")
def test_changes_hold_each_event_once_even_when_files_repeat_it(lake: Lake, history: TableSim) -> None:
    _land(lake, history, flush_rows=41)
    con = connect(lake)
    assert con.execute("SELECT count(*) FROM changes").fetchall() == [(len(history.events),)]
    assert con.execute("SELECT count(*) FROM outcomes").fetchall() == [(len(history.outcomes),)]


@pytest.mark.usefixtures("landed")
def test_current_items_are_the_replayed_table(lake: Lake, history: TableSim) -> None:
    con = connect(lake)
    assert state_rows(con.sql("SELECT * FROM current_items").to_arrow_table()) == replay(history.events)
    expected = replay(history.events)
    entitlements = con.execute("SELECT count(*) FROM entitlements").fetchall()[0][0]
    cleanups = con.execute("SELECT count(*) FROM cleanup_records").fetchall()[0][0]
    assert entitlements == sum(1 for _, sk in expected if sk.startswith("ENTITLEMENT#"))
    assert cleanups == sum(1 for _, sk in expected if sk.startswith("CLEANUP#"))


def test_current_items_from_the_snapshot_equal_those_from_the_log(lake: Lake, history: TableSim) -> None:
    half = len(history.events) // 2
    first = TableSim(seed=0)
    first.events = history.events[:half]
    _land(lake, first)
    snapshot(lake)
    rest = TableSim(seed=0)
    rest.events = history.events[half:]
    _land(lake, rest)
    from_log = connect(lake).sql("SELECT * FROM current_items").to_arrow_table()
    from_snapshot = connect(lake, from_snapshot=True).sql("SELECT * FROM current_items").to_arrow_table()
    assert state_rows(from_snapshot) == state_rows(from_log) == replay(history.events)
    assert from_snapshot.column_names == from_log.column_names


@pytest.mark.usefixtures("landed")
def test_item_versions_chain_each_item_in_stream_time(lake: Lake, history: TableSim) -> None:
    con = connect(lake)
    broken = con.execute(
        "SELECT count(*) FROM (SELECT valid_to, lead(valid_from) OVER "
        "(PARTITION BY pk, sk ORDER BY sequence_key) AS next_from FROM item_versions) "
        "WHERE valid_to IS DISTINCT FROM next_from"
    ).fetchall()
    latest = con.execute("SELECT count(*) FROM item_versions WHERE is_latest").fetchall()[0][0]
    assert broken == [(0,)]
    assert latest == len({(str(e.keys["pk"]), str(e.keys["sk"])) for e in history.events})


@pytest.mark.usefixtures("landed")
def test_users_and_array_accounts_summarise_the_table(lake: Lake, history: TableSim) -> None:
    con = connect(lake)
    users = con.execute("SELECT count(*), sum(entitlement_rows) FROM users").fetchall()[0]
    assert users[0] == len({e.user_id for e in history.events})
    assert users[1] == con.execute("SELECT count(*) FROM entitlements").fetchall()[0][0]
    deleted = con.execute("SELECT count(*) FROM array_accounts WHERE array_account_deleted").fetchall()[0][0]
    assert deleted == len({o.array_account_id for o in history.outcomes})
    assert con.execute("SELECT max(user_count) FROM array_accounts").fetchall() == [(1,)]


@pytest.mark.usefixtures("landed")
def test_the_mask_hides_erased_users_from_every_view(lake: Lake, history: TableSim) -> None:
    snapshot(lake)
    erased = ["u001", "u002"]
    con = connect(lake, mask=erased)
    for view in VIEW_NAMES:
        columns = {row[0] for row in con.execute(f"DESCRIBE {view}").fetchall()}
        if "user_id" in columns:
            hits = con.execute(f"SELECT count(*) FROM {view} WHERE user_id IN ('u001', 'u002')").fetchall()
            assert hits == [(0,)], view
    set_mask(con, [])
    assert con.execute("SELECT count(*) FROM changes WHERE user_id = 'u001'").fetchall()[0][0] > 0


def _with_day(table: pa.Table, path: str) -> pa.Table:
    day = path.split("/")[1].split("=", 1)[1]
    return table.append_column(
        pa.field("event_date", pa.date32()), pa.array([date.fromisoformat(day)] * table.num_rows, pa.date32())
    )


@pytest.mark.usefixtures("landed")
def test_files_written_under_other_schemas_lose_no_column(lake: Lake, history: TableSim) -> None:
    path = data_files(lake, CHANGES)[0]
    newer = pq.read_table(lake.path(path))
    newer = newer.append_column("new_plan", pa.array(["gold"] * newer.num_rows))
    write_deltalake(open_table(lake, CHANGES), _with_day(newer, path), mode="append", schema_mode="merge")  # type: ignore[call-overload]
    con = connect(lake)
    columns = {row[0] for row in con.execute("DESCRIBE changes").fetchall()}
    assert {"new_plan", "new_item_updated_at", "old_item_updated_at"} <= columns
    assert con.execute("SELECT count(*) FROM raw_changes WHERE new_plan = 'gold'").fetchall() == [
        (newer.num_rows,)
    ]
    assert con.execute("SELECT count(*) FROM raw_changes WHERE new_plan IS NULL").fetchall() == [
        (len(history.events),)
    ]
    assert con.execute("SELECT count(*) FROM changes").fetchall() == [(len(history.events),)]


@pytest.mark.usefixtures("landed")
def test_create_views_works_on_an_existing_connection(lake: Lake, history: TableSim) -> None:
    con = duckdb.connect()
    create_views(con, lake)
    create_views(con, lake)  # idempotent
    assert con.execute("SELECT count(*) FROM changes").fetchall() == [(len(history.events),)]


@pytest.mark.usefixtures("landed")
def test_only_files_that_overlap_another_are_deduplicated(
    lake: Lake, history: TableSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    con = connect(lake)
    assert con.execute("SELECT count(*) FROM change_files_to_dedupe").fetchall() == [(0,)]
    replay_of = TableSim(seed=0)
    replay_of.events = history.events[40:90]
    # The replay lands without the high-water marks' plan (as a lake landed before them holds
    # replays), with other batch boundaries over the same events.
    monkeypatch.setattr(commits_module, "plan_changes", lambda _table, data, **_: HighWaterPlan(data))
    _land(lake, replay_of, flush_rows=7)
    con = connect(lake)
    overlapping = con.execute("SELECT count(*) FROM change_files_to_dedupe").fetchall()[0][0]
    total = con.execute("SELECT count(*) FROM change_files").fetchall()[0][0]
    assert 0 < overlapping < total
    assert con.execute("SELECT count(*) FROM changes").fetchall() == [(len(history.events),)]


@pytest.mark.usefixtures("landed")
def test_a_file_without_statistics_is_always_deduplicated(lake: Lake, history: TableSim) -> None:
    path = data_files(lake, CHANGES)[0]
    table = _with_day(pq.read_table(lake.path(path)), path)
    no_statistics = WriterProperties(default_column_properties=ColumnProperties(statistics_enabled="NONE"))
    write_deltalake(open_table(lake, CHANGES), table, mode="append", writer_properties=no_statistics)  # type: ignore[call-overload]
    con = connect(lake)
    every_file = con.execute("SELECT count(*) FROM change_files").fetchall()
    assert con.execute("SELECT count(*) FROM change_files_to_dedupe").fetchall() == every_file
    assert con.execute("SELECT count(*) FROM changes").fetchall() == [(len(history.events),)]


def _views_on(con: duckdb.DuckDBPyConnection) -> set[str]:
    rows = con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()
    return {name for (name,) in rows}


def test_a_stream_time_comes_to_python_as_an_aware_utc_instant(landed: Lake, history: TableSim) -> None:
    con = connect(landed, views=["changes"])
    ((latest,),) = con.execute("SELECT max(created_at) FROM changes").fetchall()
    assert latest == max(e.created_at for e in history.events) and latest.utcoffset() == timedelta(0)


def test_the_view_files_create_exactly_the_listed_views(landed: Lake) -> None:
    assert _views_on(connect(landed)) == set(VIEW_NAMES)


def test_asking_for_some_views_creates_them_and_what_they_read_from_the_log(landed: Lake) -> None:
    con = connect(landed, views=["entitlements"])

    assert _views_on(con) == {
        "entitlements",
        "current_items",
        "item_versions",
        "changes",
        "raw_changes",
        "change_files",
        "change_files_to_dedupe",
    }


@pytest.mark.usefixtures("landed")
def test_asking_for_some_views_reads_the_snapshot_alone_when_it_is_current(
    lake: Lake, history: TableSim
) -> None:
    snapshot(lake)

    con = connect(lake, views=["entitlements"], from_snapshot=True)

    assert _views_on(con) == {"entitlements", "current_items"}
    everything = connect(lake, from_snapshot=True)
    query = "SELECT * FROM entitlements ORDER BY pk, sk"
    assert con.sql(query).to_arrow_table() == everything.sql(query).to_arrow_table()


def test_asking_for_a_view_the_lake_does_not_define_is_refused(landed: Lake) -> None:
    with pytest.raises(ValueError, match="not views of the lake: entitlement"):
        connect(landed, views=["entitlement"])


def test_the_views_a_statement_reads_ignore_comments_and_strings() -> None:
    sql = "-- from changes\nSELECT 'users' AS label, u.* FROM users AS u JOIN raw_changes USING (user_id)"

    assert views_read_by(sql) == {"users", "raw_changes"}


# -- one final outcome per expiry ---------------------------------------------------------------------


def _land_in_turn(lake: Lake, *flushes: list[OutcomeEvent]) -> None:
    """Each list landed by its own process (a crash replay lands the expiry's outcomes again)."""
    for outcomes in flushes:
        handler = LakeHandler(lake)
        for outcome in outcomes:
            handler.add_outcome(outcome)
        handler.flush()


def _final_outcomes(lake: Lake) -> list[tuple[str, str]]:
    con = connect(lake, views=["outcomes"])
    try:
        rows = con.execute(
            "SELECT source_event_id, kind FROM outcomes WHERE kind IN (?, ?, ?, ?) ORDER BY kind",
            [kind.value for kind in FINAL_OUTCOME_PRECEDENCE],
        ).fetchall()
    finally:
        con.close()
    return [(str(source), str(kind)) for source, kind in rows]


def test_a_replayed_expiry_that_deleted_then_saw_already_deleted_reports_one_final_outcome_deleted(
    lake: Lake,
) -> None:
    deleted = final_outcome(OutcomeKind.CLEANUP_DELETED, minute=0)
    already = final_outcome(OutcomeKind.CLEANUP_ALREADY_DELETED, minute=5)
    _land_in_turn(lake, [deleted], [already])
    assert _final_outcomes(lake) == [(REPLAYED_SOURCE, "cleanup.deleted")]


def test_the_deleted_outcome_wins_whichever_landed_first(lake: Lake) -> None:
    deleted = final_outcome(OutcomeKind.CLEANUP_DELETED, minute=5)
    already = final_outcome(OutcomeKind.CLEANUP_ALREADY_DELETED, minute=0, attempt=1)
    _land_in_turn(lake, [already], [deleted])
    assert _final_outcomes(lake) == [(REPLAYED_SOURCE, "cleanup.deleted")]


def test_final_outcomes_written_under_the_old_per_kind_identity_still_report_one(lake: Lake) -> None:
    _land_in_turn(
        lake,
        [final_outcome(OutcomeKind.CLEANUP_REFUSED_BY_GUARD, minute=0, legacy_id=True)],
        [final_outcome(OutcomeKind.CLEANUP_ALREADY_DELETED, minute=5, attempt=1, legacy_id=True)],
        [final_outcome(OutcomeKind.CLEANUP_DELETED, minute=9, attempt=2, legacy_id=True)],
    )
    assert _final_outcomes(lake) == [(REPLAYED_SOURCE, "cleanup.deleted")]


def test_already_deleted_outranks_a_refusal_and_a_refusal_a_failure(lake: Lake) -> None:
    _land_in_turn(
        lake,
        [final_outcome(OutcomeKind.CLEANUP_FAILED, minute=0)],
        [final_outcome(OutcomeKind.CLEANUP_REFUSED_BY_GUARD, minute=1)],
        [final_outcome(OutcomeKind.CLEANUP_ALREADY_DELETED, minute=2)],
    )
    assert _final_outcomes(lake) == [(REPLAYED_SOURCE, "cleanup.already_deleted")]


def test_the_outcomes_views_precedence_is_the_one_schema_outcomes_states(landed: Lake) -> None:
    con = connect(landed, views=["outcomes"])
    try:
        ranks = [
            con.execute("SELECT final_outcome_rank(?)", [kind.value]).fetchone()
            for kind in (*FINAL_OUTCOME_PRECEDENCE, OutcomeKind.CLEANUP_ROW_MARKED)
        ]
    finally:
        con.close()
    assert ranks == [(1,), (2,), (3,), (4,), (None,)]


def test_steps_of_a_replayed_expiry_are_kept_beside_its_one_final_outcome(lake: Lake) -> None:
    marked = final_outcome(OutcomeKind.CLEANUP_DELETED, minute=0).model_copy(
        update={
            "kind": OutcomeKind.CLEANUP_ROW_MARKED,
            "outcome_id": outcome_id(REPLAYED_SOURCE, OutcomeKind.CLEANUP_ROW_MARKED),
        }
    )
    _land_in_turn(
        lake,
        [final_outcome(OutcomeKind.CLEANUP_DELETED, minute=0), marked],
        [final_outcome(OutcomeKind.CLEANUP_ALREADY_DELETED, minute=5), marked],
    )
    con = connect(lake, views=["outcomes"])
    try:
        kinds = con.execute("SELECT kind FROM outcomes ORDER BY kind").fetchall()
    finally:
        con.close()
    assert kinds == [("cleanup.deleted",), ("cleanup.row_marked",)]


@pytest.mark.usefixtures("landed")
def test_views_created_on_any_connection_hide_the_users_masked_in_the_lake(
    lake: Lake, history: TableSim
) -> None:
    write_mask(lake, ["u001"])
    con = duckdb.connect()
    create_views(con, lake)
    assert con.execute("SELECT count(*) FROM changes WHERE user_id = 'u001'").fetchall() == [(0,)]


@pytest.mark.usefixtures("landed")
def test_a_caller_mask_adds_to_the_lake_mask_and_never_replaces_it(lake: Lake, history: TableSim) -> None:
    write_mask(lake, ["u001"])
    con = connect(lake, mask=["u002"])
    hidden = con.execute("SELECT count(*) FROM changes WHERE user_id IN ('u001', 'u002')").fetchall()
    assert hidden == [(0,)]


def test_a_locked_down_connection_reads_the_views_and_no_other_file(
    landed: Lake, history: TableSim, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.csv"
    secret.write_text("a\n1\n")
    con = connect(landed)
    lock_down(con, landed)

    assert con.execute("SELECT count(*) FROM changes").fetchone() == (len(history.events),)
    with pytest.raises(duckdb.PermissionException):
        con.execute(f"FROM read_csv({literal(str(secret))})")
    with pytest.raises(duckdb.PermissionException):
        con.execute(f"ATTACH {literal(str(tmp_path / 'other.duckdb'))}")
    with pytest.raises(duckdb.InvalidInputException, match="locked"):
        con.execute("SET enable_external_access = true")


def test_a_locked_down_connection_reads_a_lake_on_s3(history: TableSim, moto_s3_endpoint: str) -> None:
    # The run's moto process (tests/analytics/lake/conftest.py), the lake in a bucket of its own. The
    # history lands in one flush (a file per table and day, still several files to read): what is
    # checked is that a locked-down connection may read the lake's S3 paths, which does not depend on how
    # many commits wrote them, and 22 commits through moto were this file's costliest minute.
    lake = new_s3_lake(moto_s3_endpoint)
    land(lake, history, flush_rows=len(history.events))
    con = connect(lake)
    lock_down(con, lake)
    assert con.execute("SELECT count(*) FROM changes").fetchone() == (len(history.events),)


def _files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


@pytest.mark.usefixtures("landed")
def test_a_database_of_views_reads_later_commits_from_another_folder_and_writes_nothing_else(
    lake: Lake, history: TableSim, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    watched = tmp_path / "tmp"
    watched.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(watched))  # where an anchor would have gone
    before = _files_under(tmp_path)
    target = tmp_path / "out" / "lake.duckdb"
    target.parent.mkdir()
    write_database(lake, target)
    lake_files = {p for p in _files_under(tmp_path) if str(p).startswith(lake.base)}
    assert _files_under(tmp_path) - before - lake_files == {target}
    later = TableSim(shards=("shardId-00000004-dddd",), seed=9)
    later.random_history(users=4, operations=30)
    _land(lake, later)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    counted = duckdb_cli_lines("SELECT count(*) FROM changes", cwd=elsewhere, database=target)
    assert counted == [str(len(history.events) + len(later.events))]
    con = duckdb.connect(str(target), read_only=True)
    comments = con.execute(f"SELECT count(*) FROM ({_VIEW_COLUMNS}) WHERE comment IS NULL").fetchall()
    assert comments == [(0,)]


def test_printing_the_script_writes_no_file(
    landed: Lake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    watched = tmp_path / "tmp"
    watched.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(watched))
    before = _files_under(tmp_path)
    cli_script(landed)
    assert _files_under(tmp_path) == before
