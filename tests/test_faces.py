"""The packages' faces: what other packages import from `pipeline` is what its face exports."""

from __future__ import annotations

import ast
from pathlib import Path

import pipeline

REPO = Path(__file__).resolve().parents[1]

# Inner modules outside packages may still name, with the reason:
EXCEPTIONS = {
    # the one atomic private write, shared with the composition root and a bench (schema._files' twin)
    "pipeline._files": "private file helpers",
    # the bench builds stream images as the decoder reads them
    "pipeline._attribute_values": "a bench's encoder",
}


def _imported_from_pipeline_modules() -> dict[str, set[str]]:
    """name -> the files outside pipeline/ and tests/ that import it from an inner pipeline module."""
    found: dict[str, set[str]] = {}
    for path in REPO.rglob("*.py"):
        relative = path.relative_to(REPO)
        if (
            relative.parts[0] in {".venv", "pipeline", "tests", "node_modules"}
            or "node_modules" in relative.parts
        ):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module):
                continue
            module = node.module
            if (
                not module.startswith("pipeline.")
                or module in EXCEPTIONS
                or module.startswith("pipeline.launcher")
            ):
                continue
            for alias in node.names:
                found.setdefault(alias.name, set()).add(str(relative))
    return found


def test_every_name_other_packages_take_from_pipelines_modules_is_on_its_face() -> None:
    missing = {
        name: sorted(files)
        for name, files in _imported_from_pipeline_modules().items()
        if name not in pipeline.__all__
    }
    assert missing == {}


def test_every_name_on_pipelines_face_resolves() -> None:
    assert [name for name in pipeline.__all__ if getattr(pipeline, name, None) is None] == []
