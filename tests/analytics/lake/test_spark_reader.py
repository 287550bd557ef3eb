"""Spark (pyspark 3.5.9 with delta-spark 3.3.3) reads the lake's Delta tables as they rest, with its own
Delta reader (`spark.read.format("delta").load(uri)`), and gets what deltalake's reader and our audit get.

The lake is demo-shaped: the clean story (every path the service takes) with two users left with several
Active rows, landed twice with other batch boundaries (a replay), then snapshotted, as the demo does before
its audit: `changes`, `outcomes` and `snapshots/state`. The Delta jars are local files that `make setup`
copied from Maven (scripts/spark/pom.xml into `<venv>/spark-jars`): Spark resolves nothing at run time and
runs offline. Spark binds to 127.0.0.1 only, with no UI, on local[1] (one task thread, one shuffle
partition: the rows are few), its JVM on the C1 compiler and the serial collector. Java 17 needs no
`--add-opens` of ours: pyspark starts the JVM through spark-submit, whose launcher adds Spark's own module
options.

Cost, measured on 2026-12-02 on the shared 2-core machine at load 10 to 25 (so read it as a ceiling): the
install adds 345 MB (pyspark 3.5.9, its wheel built from a 318 MB sdist, then cached by pip), 1.1 MB (py4j)
and 7.2 MB of jars (delta-spark_2.12 and delta-storage 3.3.3); `make setup` went from nothing to do to done
in 110 s (the project reinstalled with pyspark), the jar copy alone 8 to 25 s, and a second `make setup`
skips both. This module alone (`pytest -p no:xdist`, load 13 to 16): 6 passed in 210 s (234 s wall with
the interpreter's start), of which the lake 1 s, the JVM and session 35 s, the first Delta read 103 s (the
log replay's first queries compile), the Spark SQL audit over `changes` 30 s, the other reads 8 to 12 s
each. Far from "well under a minute" on a loaded machine: most of it is the JVM compiling, not the rows.
With local[1], C1 only and the serial collector (2026-12-02, load 20 to 26): 6 passed in 125 s, the
session 18 s, the first Delta read 52 s; the same reads in a script took 22 s of JVM CPU against 49 s
before (170 s wall to 42 s, load 17 to 26).
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession

from analytics.audits import run_audits
from analytics.lake import CHANGES, Lake, open_lake
from analytics.lake._mask import read_mask
from analytics.lake._schema import CHANGE_IDENTITY, OUTCOME_IDENTITY, OUTCOMES
from analytics.lake.snapshots import snapshot
from tests.analytics.audits.story import Story, clean_story

STATE = "snapshots/state"
STATE_IDENTITY = ("pk", "sk")
# Where `make setup` copies the Delta jars: inside the virtual environment that runs the tests.
SPARK_JARS = Path(sys.prefix) / "spark-jars"
DUPLICATED = {"mallory", "trudy"}


def _story() -> Story:
    story = clean_story()
    for user, accounts in (("mallory", ("acct-m1", "acct-m2")), ("trudy", ("acct-t1", "acct-t2", "acct-t3"))):
        for account in accounts:
            story.signup(user, account)
            story.tick(minutes=5)
    return story


@pytest.fixture(scope="module")
def demo_lake(tmp_path_factory: pytest.TempPathFactory) -> Lake:
    lake = open_lake(str(tmp_path_factory.mktemp("spark") / "lake"))
    story = _story()
    story.land(lake, flush_rows=7)
    story.land(lake, flush_rows=11)  # a replay with other batch boundaries
    snapshot(lake)
    return lake


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    jars = sorted(SPARK_JARS.glob("*.jar"))
    if not jars:
        pytest.fail(f"no Delta jars in {SPARK_JARS}: run `make setup`")
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"  # read by the JVM spark-submit starts now
    session = (
        SparkSession.builder.master("local[1]")
        .appName("lake-reader-test")
        .config("spark.jars", ",".join(str(jar) for jar in jars))
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "1")
        # A JVM that lives for a minute spends most of its CPU compiling: the C1 compiler alone (no C2)
        # and the serial collector halved the module's JVM CPU (49 s to 22 s at load 17 to 26) and cut
        # its wall time fourfold; the rows read and the SQL run are the same.
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        # Delta replays a table's log over 50 partitions by default: for a small log that is 50 tasks of
        # nothing. Whole-stage code generation and adaptive planning cost more than they save on rows
        # this few (the first read took about half the time without them).
        .config("spark.databricks.delta.snapshotPartitions", "1")
        .config("spark.sql.codegen.wholeStage", "false")
        .config("spark.sql.adaptive.enabled", "false")
        .getOrCreate()
    )
    try:
        yield session
    finally:
        session.stop()


def _read(spark: SparkSession, lake: Lake, table: str) -> DataFrame:
    return spark.read.format("delta").load(lake.table_uri(table))


def _spark_duplicate_active_from_changes(spark: SparkSession, lake: Lake) -> set[tuple[str, str]]:
    """schema/lake.md's definition in Spark SQL: each event once (its identity), the latest change of each
    item (highest sequence key), live entitlement rows whose status is Active, users with more than one."""
    _read(spark, lake, CHANGES).createOrReplaceTempView("lake_changes")
    masked = sorted(read_mask(lake)) or [""]
    spark.createDataFrame([(user,) for user in masked], "user_id string").createOrReplaceTempView("masked")
    rows = spark.sql(
        """
        WITH once AS (
            SELECT * FROM (
                SELECT *, row_number() OVER (
                    PARTITION BY stream_arn, shard_id, sequence_number ORDER BY sequence_key) AS copy
                FROM lake_changes
                WHERE user_id NOT IN (SELECT user_id FROM masked)
            ) WHERE copy = 1
        ),
        latest AS (
            SELECT * FROM (
                SELECT *, row_number() OVER (
                    PARTITION BY pk, sk ORDER BY sequence_key DESC, stream_arn DESC, shard_id DESC) AS rank
                FROM once
            ) WHERE rank = 1
        ),
        active AS (
            SELECT user_id, sk FROM latest
            WHERE change_kind <> 'REMOVE' AND item_kind = 'entitlement'
              AND (CASE WHEN has_new_image THEN new_status ELSE old_status END) = 'Active'
        )
        SELECT user_id, sk FROM active
        WHERE user_id IN (SELECT user_id FROM active GROUP BY user_id HAVING count(*) > 1)
        """
    ).collect()
    return {(row["user_id"], row["sk"]) for row in rows}


def _spark_duplicate_active_from_state(spark: SparkSession, lake: Lake) -> set[tuple[str, str]]:
    """The same over `snapshots/state`: the latest row of each item across its base and delta folds,
    tombstones dropped."""
    _read(spark, lake, STATE).createOrReplaceTempView("lake_state")
    rows = spark.sql(
        """
        WITH latest AS (
            SELECT * FROM (
                SELECT *, row_number() OVER (PARTITION BY pk, sk ORDER BY sequence_key DESC) AS rank
                FROM lake_state
            ) WHERE rank = 1
        ),
        active AS (
            SELECT user_id, sk FROM latest
            WHERE NOT deleted AND item_kind = 'entitlement' AND status = 'Active'
        )
        SELECT user_id, sk FROM active
        WHERE user_id IN (SELECT user_id FROM active GROUP BY user_id HAVING count(*) > 1)
        """
    ).collect()
    return {(row["user_id"], row["sk"]) for row in rows}


def _audit_duplicate_active(lake: Lake) -> set[tuple[str, str]]:
    rows = run_audits(lake).result("duplicate_active_rows").rows
    return {(str(row["user_id"]), str(row["sk"])) for row in rows}


@pytest.mark.parametrize(
    ("table", "identity"), [(CHANGES, CHANGE_IDENTITY), (OUTCOMES, OUTCOME_IDENTITY), (STATE, STATE_IDENTITY)]
)
def test_spark_reads_the_rows_and_distinct_identities_deltalake_reads(
    spark: SparkSession, demo_lake: Lake, table: str, identity: tuple[str, ...]
) -> None:
    arrow = DeltaTable(demo_lake.table_uri(table)).to_pyarrow_table(columns=list(identity))
    expected_identities = len(set(zip(*(arrow.column(c).to_pylist() for c in identity), strict=True)))
    frame = _read(spark, demo_lake, table)
    assert arrow.num_rows > 0
    assert (frame.count(), frame.select(*identity).distinct().count()) == (
        arrow.num_rows,
        expected_identities,
    )


def test_spark_sql_over_changes_finds_the_duplicate_active_rows_our_audit_finds(
    spark: SparkSession, demo_lake: Lake
) -> None:
    found = _spark_duplicate_active_from_changes(spark, demo_lake)
    assert found == _audit_duplicate_active(demo_lake)
    assert {user for user, _ in found} == DUPLICATED
    assert len(found) == 5


def test_spark_sql_over_the_snapshot_state_finds_the_same_duplicate_active_rows(
    spark: SparkSession, demo_lake: Lake
) -> None:
    assert _spark_duplicate_active_from_state(spark, demo_lake) == _audit_duplicate_active(demo_lake)


def test_the_staged_delta_jars_are_the_delta_spark_version_installed() -> None:
    version = importlib.metadata.version("delta-spark")
    names = {jar.name for jar in SPARK_JARS.glob("*.jar")}
    assert names == {f"delta-spark_2.12-{version}.jar", f"delta-storage-{version}.jar"}
