"""The Python twin and the JavaScript reference (conformance/node) give the same verdict on every body.

The reference is Node's JSON.parse, then schema/erasure-contract.schema.json under ajv 8's 2020-12 build
in strict mode with ajv-formats, then the request/answer split. It runs the whole corpus once; on every
text body its verdict, `parse_erasure_request`'s and the corpus's expected verdict must be one. Byte
bodies cannot reach a Node store (SQS refuses invalid UTF-8), so for them the runner's strict reading
is held to the corpus, as our own reading. Generated vectors (deep nesting at any depth up to the SQS
body limit, and mutations of valid messages) go through both twins too.

Node and the runner's packages are part of the set-up (`make setup` runs `npm ci` in conformance/node):
if either is missing, these tests fail and say so; they never skip.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.schema.erasure.erasure_test_support import (
    SCHEMA_DIR,
    corpus_body,
    corpus_entries,
    entry_names,
    parser_verdict,
)

RUNNER_DIR = SCHEMA_DIR.parent / "conformance" / "node"
RUNNER = RUNNER_DIR / "run-corpus.mjs"
ENTRIES = corpus_entries()
TEXT_ENTRIES = [entry for entry in ENTRIES if entry["bodyEncoding"] == "text"]
BYTE_ENTRIES = [entry for entry in ENTRIES if entry["bodyEncoding"] != "text"]
SQS_BODY_LIMIT = 262_144  # bytes
RUN_TIMEOUT_SECONDS = 120


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not on PATH: the erasure twins' JavaScript reference needs Node 20 (make setup)")
    if not (RUNNER_DIR / "node_modules" / "ajv" / "package.json").is_file():
        pytest.fail(f"{RUNNER_DIR}/node_modules is missing: run `make setup` (npm ci in conformance/node)")
    return node


def run_reference(corpus: Path | None = None) -> dict[str, Any]:
    """The runner's report on `corpus` (the repository's corpus by default)."""
    command = [_node(), str(RUNNER)] + ([str(corpus)] if corpus is not None else [])
    done = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT_SECONDS, check=False)
    if done.returncode != 0:
        pytest.fail(f"the Node reference failed (exit {done.returncode}): {done.stderr.strip()}")
    report: dict[str, Any] = json.loads(done.stdout)
    return report


@cache
def corpus_report() -> dict[str, dict[str, Any]]:
    return {verdict["name"]: verdict for verdict in run_reference()["verdicts"]}


def test_the_schema_compiles_under_strict_ajv_2020_with_ajv_formats() -> None:
    # run_reference fails with ajv's own reason when the runner cannot compile the schema.
    runner = run_reference()["runner"]
    assert runner["node"].startswith("v20.") or int(runner["node"].lstrip("v").split(".")[0]) >= 20
    assert runner["ajv"].startswith("8.")
    assert runner["options"]["strict"] is True


def test_the_reference_gives_a_verdict_for_every_corpus_entry() -> None:
    assert list(corpus_report()) == entry_names(ENTRIES)


@pytest.mark.parametrize("entry", TEXT_ENTRIES, ids=entry_names(TEXT_ENTRIES))
def test_both_twins_give_the_expected_verdict_on_a_text_body(entry: dict[str, Any]) -> None:
    node = corpus_report()[entry["name"]]
    verdicts = {"node": node["verdict"], "python": parser_verdict(corpus_body(entry))}
    assert verdicts == {"node": entry["expected"], "python": entry["expected"]}
    assert node.get("messageType") == entry.get("messageType")


@pytest.mark.parametrize("entry", BYTE_ENTRIES, ids=entry_names(BYTE_ENTRIES))
def test_the_references_strict_reading_of_bytes_gives_the_expected_verdict(entry: dict[str, Any]) -> None:
    node = corpus_report()[entry["name"]]
    assert node["bytesReading"] is True
    assert (node["verdict"], parser_verdict(corpus_body(entry))) == (entry["expected"], entry["expected"])


def _nested(depth: int, bottom: str = "", opener: str = "[", closer: str = "]") -> str:
    return opener * depth + bottom + closer * depth


def _deep_vectors() -> list[tuple[str, str, str]]:
    """(name, body, expected) at depths from 2 to the SQS body limit."""
    vectors: list[tuple[str, str, str]] = []
    limit = SQS_BODY_LIMIT // 2 - 1
    for depth in (2, 3, 63, 64, 65, 300, 990, 991, 992, 1_000, 1_001, 4_096, 50_000, limit):
        vectors.append((f"arrays-{depth}", _nested(depth), "INVALID_MESSAGE"))
        vectors.append((f"arrays-{depth}-bad-bottom", _nested(depth, "x"), "NOT_JSON"))
        vectors.append((f"arrays-{depth}-unclosed", "[" * depth, "NOT_JSON"))
    erase = (
        '{"type":"erasure/ERASE","requestId":"r","sendNo":1,"expiresAt":"2099-01-01T00:00:00Z",'
        '"keyKind":"ACCOUNT"'
    )
    for depth in (1, 2, 500, 991, 1_000, 20_000, (SQS_BODY_LIMIT - 200) // 6):
        objects = '{"a":' * depth + "1" + "}" * depth
        vectors.append((f"objects-{depth}-in-key", f'{erase},"key":{objects}}}', "INVALID_MESSAGE"))
        vectors.append((f"objects-{depth}-in-extra", f'{erase},"key":"k","x":{objects}}}', "INVALID_MESSAGE"))
        vectors.append((f"objects-{depth}-bad-bottom", f'{erase},"key":{objects[:-1]}}}', "NOT_JSON"))
    for name, body, _ in vectors:
        assert len(body.encode("utf-8")) <= SQS_BODY_LIMIT, name
    return vectors


_MUTATION_ALPHABET = ['"', "\\", "[", "]", "{", "}", ",", ":", "0", "1", "-", ".", "e", " ", "\\u", "Z", "A"]


def _mutations(count: int, seed: int) -> list[tuple[str, str]]:
    """Valid messages with a few characters deleted, replaced or inserted: mostly near-misses."""
    rng = random.Random(seed)
    bases = [
        entry["body"]
        for entry in TEXT_ENTRIES
        if entry["expected"] != "NOT_JSON" and len(entry["body"]) < 400
    ]
    vectors: list[tuple[str, str]] = []
    for number in range(count):
        body = list(rng.choice(bases))
        for _ in range(rng.randint(1, 3)):
            where = rng.randrange(len(body) + 1)
            edit = rng.random()
            if edit < 0.3 and body:
                del body[min(where, len(body) - 1)]
            elif edit < 0.6 and body:
                body[min(where, len(body) - 1)] = rng.choice(_MUTATION_ALPHABET)
            else:
                body.insert(where, rng.choice(_MUTATION_ALPHABET))
        vectors.append((f"mutation-{number}", "".join(body)))
    return vectors


def _run_vectors(tmp_path: Path, vectors: list[tuple[str, str]]) -> dict[str, str]:
    corpus = tmp_path / "vectors.json"
    entries = [{"name": name, "bodyEncoding": "text", "body": body} for name, body in vectors]
    corpus.write_text(json.dumps({"entries": entries}), encoding="utf-8")
    return {verdict["name"]: verdict["verdict"] for verdict in run_reference(corpus)["verdicts"]}


def test_deep_nesting_has_one_verdict_in_both_twins_at_any_depth_up_to_the_body_limit(tmp_path: Path) -> None:
    vectors = _deep_vectors()
    node = _run_vectors(tmp_path, [(name, body) for name, body, _ in vectors])
    differing = {
        name: (node[name], parser_verdict(body), expected)
        for name, body, expected in vectors
        if not node[name] == parser_verdict(body) == expected
    }
    assert differing == {}


def test_both_twins_agree_on_mutated_messages(tmp_path: Path) -> None:
    vectors = _mutations(600, seed=11)
    node = _run_vectors(tmp_path, vectors)
    differing = {
        name: (node[name], parser_verdict(body))
        for name, body in vectors
        if node[name] != parser_verdict(body)
    }
    assert differing == {}
