"""pipeline/launcher's poll pacing: CatchUpSleepTimeController (the wait KCL sleeps before each GetRecords
call of a shard) and CallSpacing (the wait kept at the call itself). 4 calls a second from start to
start (DynamoDB Streams allows 5: a quarter's margin for the jitter of the calls' arrival), under traffic
and while catching up, whatever the idle setting; back to back while a call
takes longer than the cap's interval; the adapter's own wait after an empty batch.

Each test runs a small Java program (single-file source mode) on the launcher's class path that plays a
shard's poll loop on a simulated clock, as KCL's PrefetchRecordsPublisher and the launcher's fetcher do:
ask the controller for the wait and sleep it, then the spacing's wait and sleep it, call (taking a given
time), and hand the controller the call's end and record count; it prints each call's start (ms)."""

from __future__ import annotations

import itertools
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
TARGET = REPO / "pipeline" / "launcher" / "target"
JAR = TARGET / "entitlements-kcl-launcher.jar"

pytestmark = pytest.mark.skipif(not JAR.exists(), reason="the launcher is not built (make setup)")

PROBE = """
import com.amazonaws.services.dynamodbv2.streamsadapter.DynamoDBStreamsSleepTimeController;
import entitlements.launcher.CallSpacing;
import entitlements.launcher.CatchUpSleepTimeController;
import java.time.Instant;
import software.amazon.kinesis.retrieval.polling.SleepTimeControllerConfig;

public class Probe {
    public static void main(String[] args) {
        long idle = Long.parseLong(args[0]);
        long call = Long.parseLong(args[1]);
        int records = Integer.parseInt(args[2]);
        int cycles = Integer.parseInt(args[3]);
        long[] clock = {0L};
        CatchUpSleepTimeController controller =
                new CatchUpSleepTimeController(new DynamoDBStreamsSleepTimeController());
        CallSpacing spacing = new CallSpacing(5, idle);
        Long lastEnd = null;
        Integer lastCount = null;
        for (int i = 0; i < cycles; i++) {
            // The adapter's controller measures the time since the last call's end on the real clock.
            Instant end = lastEnd == null ? null : Instant.now().minusMillis(clock[0] - lastEnd);
            long sleep = controller.getSleepTimeMillis(SleepTimeControllerConfig.builder()
                    .lastSuccessfulCall(end).idleMillisBetweenCalls(idle).lastRecordsCount(lastCount).build());
            clock[0] += sleep;
            clock[0] += spacing.waitBeforeCall(clock[0]);
            System.out.println(clock[0]);
            clock[0] += call;
            lastEnd = clock[0];
            lastCount = records;
        }
    }
}
"""


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("probe") / "Probe.java"
    source.write_text(PROBE)
    return source


def _starts(probe: Path, *, idle: int, call: int, records: int, cycles: int = 40) -> list[int]:
    done = subprocess.run(
        [
            "java",
            "-cp",
            f"{JAR}:{TARGET / 'lib'}/*",
            str(probe),
            str(idle),
            str(call),
            str(records),
            str(cycles),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return [int(line) for line in done.stdout.split()]


def _most_calls_in_a_second(starts: list[int]) -> int:
    return max(sum(1 for other in starts if start <= other < start + 1000) for start in starts)


def test_a_shard_catching_up_on_aws_like_calls_makes_4_calls_a_second(probe: Path) -> None:
    starts = _starts(probe, idle=200, call=50, records=1000)
    assert _most_calls_in_a_second(starts) == 4


def test_at_the_settings_floor_of_100_ms_idle_traffic_still_gets_4_calls_a_second(
    probe: Path,
) -> None:
    starts = _starts(probe, idle=100, call=10, records=1)
    assert _most_calls_in_a_second(starts) == 4


def test_calls_slower_than_the_cap_run_back_to_back_while_records_keep_coming(probe: Path) -> None:
    starts = _starts(probe, idle=200, call=1000, records=1000, cycles=6)
    assert [later - earlier for earlier, later in itertools.pairwise(starts)] == [1000] * 5


def test_a_longer_idle_setting_spaces_the_calls_further(probe: Path) -> None:
    starts = _starts(probe, idle=1000, call=50, records=1000)
    assert _most_calls_in_a_second(starts) == 1


def test_after_an_empty_batch_the_adapters_wait_of_twice_the_idle_from_the_calls_end_holds(
    probe: Path,
) -> None:
    starts = _starts(probe, idle=200, call=50, records=0, cycles=6)
    gaps = [later - earlier for earlier, later in itertools.pairwise(starts)]
    assert all(450 - 5 <= gap <= 450 + 5 for gap in gaps), gaps  # call 50 ms + 2 x idle 200 ms
