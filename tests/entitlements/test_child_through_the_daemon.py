"""entitlements/child.py started by the real daemon: a refused setting stops the child with the field
and the rule on its stderr (one JSON line, in the children's log), and a secret typed into the wrong place
(a canary) appears in neither."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from pipeline.daemon import DaemonSpec, KclDaemon
from tests.support.daemon_log import child_entries
from tests.support.kcl import running_consumer

pytestmark = pytest.mark.kcl

CANARY = "canary-0b5e-mistyped-secret"

# (the variable, its mistyped value holding the secret, what the child's refusal says instead)
MISTYPED = {
    "a secret in a number field": (
        "ENTITLEMENTS_ARRAY__TIMEOUT_SECONDS",
        CANARY,
        "ENTITLEMENTS_ARRAY__TIMEOUT_SECONDS: float_parsing",
    ),
    "a secret under a misspelt key": (
        "ENTITLEMENTS_ARRAY",
        f'{{"server_tokn": "{CANARY}"}}',
        "ENTITLEMENTS_ARRAY__SERVER_TOKN: extra_forbidden",
    ),
    "a secret in JSON that does not parse": (
        "ENTITLEMENTS_ARRAY",
        f'{{"server_token": "{CANARY}"',
        'ENTITLEMENTS_ARRAY: not a JSON object (error parsing value for field "array")',
    ),
}


@pytest.mark.parametrize("case", MISTYPED)
def test_a_mistyped_secret_is_refused_by_field_and_rule_and_never_reaches_the_daemon_log(
    case: str, moto_endpoint: str, tmp_path: Path
) -> None:
    variable, value, refusal = MISTYPED[case]
    with running_consumer(moto_endpoint, tmp_path / "state", worker_id="") as consumer:
        spec = DaemonSpec.from_settings(
            consumer.settings,
            stream_arn=consumer.stream_arn,
            worker_id="worker-1",
            work_dir=consumer.settings.consumer.state_dir / "daemon",
        )
        daemon = KclDaemon(dataclasses.replace(spec, environment={**spec.environment, variable: value}))
        daemon.start()
        consumer.daemons["worker-1"] = daemon
        assert spec.log_path is not None and spec.children_log_path is not None
        deadline = time.monotonic() + 240
        while not refused(spec.children_log_path, refusal) and time.monotonic() < deadline:
            time.sleep(0.5)
    logs = spec.children_log_path.read_bytes() + spec.log_path.read_bytes()
    assert refused(spec.children_log_path, refusal)  # the child started, refused, and said so on stderr
    assert CANARY.encode() not in logs


def refused(children_log: Path, refusal: str) -> bool:
    return any(refusal in str(entry.get("reason")) for entry in child_entries(children_log))
