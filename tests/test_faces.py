"""The packages' faces: what other packages take from `pipeline` or `service`, from the face or from an
inner module, is what the face exports; and the callers moved to pipeline's face take nothing from its
inner modules."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest

import pipeline
import service

REPO = Path(__file__).resolve().parents[1]

# Folders whose files are not callers: tests may import any inner module (they test them).
_NOT_CALLERS = {".venv", "tests", "node_modules"}

# Inner modules outside packages may still name, with the reason:
EXCEPTIONS = {
    # the one atomic private write, shared with the composition root and a bench (schema._files' twin)
    "pipeline._files": "private file helpers",
    # the bench builds stream images as the decoder reads them
    "pipeline._attribute_values": "a bench's encoder",
}

# The callers moved to pipeline's face (issue 25): an inner pipeline module imported again in one of them
# fails here, even for a name the face has.
FACE_ONLY = (
    "processors/cleanup",
    "analytics/bootstrap",
    "devstack/stack.py",
    "entitlements/_demo.py",
    "entitlements/child.py",
)


def _is_module(dotted: str) -> bool:
    """Whether `dotted` names a module or package of this repository."""
    path = REPO.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


@cache
def _imports(root: Path) -> tuple[tuple[str, str, str], ...]:
    """(file relative to root, module, name) for every absolute `from <module> import <name>`, and
    (file, module, "") for every `import <module>`, in the files under root that are not tests."""
    found: list[tuple[str, str, str]] = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        if relative.parts[0] in _NOT_CALLERS or "node_modules" in relative.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for alias in node.names:
                    # `from service import dynamo` imports an inner module, not a name of the face.
                    if _is_module(f"{node.module}.{alias.name}"):
                        found.append((relative.as_posix(), f"{node.module}.{alias.name}", ""))
                    else:
                        found.append((relative.as_posix(), node.module, alias.name))
            elif isinstance(node, ast.Import):
                found.extend((relative.as_posix(), alias.name, "") for alias in node.names)
    return tuple(found)


def _taken_from(package: str, root: Path) -> dict[str, set[str]]:
    """name -> the files outside `package`/ that import it from the package's face or from one of its
    inner modules (but the EXCEPTIONS and pipeline's launcher)."""
    found: dict[str, set[str]] = {}
    for file, module, name in _imports(root):
        if not name or file.split("/")[0] == package or module in EXCEPTIONS:
            continue
        if module == package or (
            module.startswith(f"{package}.") and not module.startswith("pipeline.launcher")
        ):
            found.setdefault(name, set()).add(file)
    return found


def _missing_from(face: ModuleType, root: Path = REPO) -> dict[str, list[str]]:
    """name -> the files that take it from `face`'s package although the face does not export it."""
    return {
        name: sorted(files)
        for name, files in _taken_from(face.__name__, root).items()
        if name not in face.__all__
    }


@pytest.mark.parametrize("face", [pipeline, service], ids=lambda face: face.__name__)
def test_every_name_other_packages_take_from_a_package_is_on_its_face(face: ModuleType) -> None:
    assert _missing_from(face) == {}


@pytest.mark.parametrize("face", [pipeline, service], ids=lambda face: face.__name__)
def test_every_name_on_a_face_resolves(face: ModuleType) -> None:
    assert [name for name in face.__all__ if getattr(face, name, None) is None] == []


def test_the_callers_moved_to_pipelines_face_import_no_inner_pipeline_module() -> None:
    inner = sorted(
        {
            (file, module)
            for file, module, _ in _imports(REPO)
            if module.startswith("pipeline.")
            and any(file == caller or file.startswith(f"{caller}/") for caller in FACE_ONLY)
        }
    )
    assert inner == []


def test_the_callers_moved_to_pipelines_face_are_still_there() -> None:
    # A renamed caller would silently drop out of the check above.
    assert [caller for caller in FACE_ONLY if not (REPO / caller).exists()] == []


def test_a_caller_taking_a_name_the_face_lacks_is_found(tmp_path: Path) -> None:
    caller = tmp_path / "processors" / "caller.py"
    caller.parent.mkdir()
    caller.write_text(
        "from pipeline import StreamEvent, NotOnTheFace\n"
        "from pipeline.events import ChangeKind, NotOnTheFaceEither\n"
        "from pipeline._files import private_dir\n"
        "from pipeline import events\n",
        encoding="utf-8",
    )
    assert _missing_from(pipeline, tmp_path) == {
        "NotOnTheFace": ["processors/caller.py"],
        "NotOnTheFaceEither": ["processors/caller.py"],
    }
