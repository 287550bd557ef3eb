"""The packages' faces: what other packages take from `pipeline` or `service`, from the face or from an
inner module, is what the face exports; the faces of the lake, `pipeline`, `service`, `telemetry`, the
cleanup, the erasure and `schema` are each exactly what other packages take from them (a name read as
`package.name` after `import package` is taken too); the lake's public modules export what they are
taken for, and its private modules stay inside it; the callers moved to pipeline's face take nothing
from its inner modules; the composition root and the benches import no inner module of another package
(but the few a bench pokes at, named with the reason); and every name a face exports resolves."""

from __future__ import annotations

import ast
import importlib
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
    # the bench builds stream images as the decoder reads them
    "pipeline._attribute_values": "a bench's encoder",
}

# The callers moved to pipeline's face (issue 25): an inner pipeline module imported again in one of them
# fails here, even for a name the face has.
FACE_ONLY = (
    "processors/cleanup",
    "processors/erasure",
    "analytics/bootstrap",
    "analytics/lake",
    "devstack/stack.py",
    "entitlements/_demo.py",
    "entitlements/child.py",
)

# The composition root and the benches take every name of another package from its face (issue 25).
ROOT_AND_BENCHES = ("entitlements/compose.py", "bench")

# Packages whose public modules are each a face of their own, only their `_private` modules inner:
# `schema` is the kernel, one contract a module (table, table_writes, outcomes, clock, errors, aws_errors,
# array: the README's layout names them so), and its `__init__` the few names every part takes; the lake
# likewise, one job a public module (snapshots, compaction, purge, history_start, views, eraser, ...)
# beside the dozen names of its `__init__` (issue 25).
MODULE_FACES = frozenset({"analytics.lake", "schema"})

# Private lake modules a caller outside analytics/lake/ still imports (but the BENCH_POKES), with the
# reason; tests/ may import any (the lake's tests specify them). None since the audit-failures table moved
# into the lake (analytics.lake.audit_failures, issue 25): the audits take it from that public module.
LAKE_PRIVATE_CALLERS: dict[str, str] = {}

# What a bench may still take from an inner module, or a public module's name that module does not export:
# module -> (names, "" for the module itself; why).
# Each is an implementation detail a bench measures underneath the face, not a name for other callers.
BENCH_POKES: dict[str, tuple[frozenset[str], str]] = {
    "analytics.lake._delta": (
        frozenset({"active_files", "append", "commits_since", "open_table"}),
        "the Delta layer the lake hides: synthetic lakes appended straight to it, its files counted",
    ),
    "analytics.lake._files": (
        frozenset({"TABLES", "ensure_layout"}),
        "the tables' layout: an empty lake made to append synthetic rows to",
    ),
    "analytics.lake._duck": (
        frozenset({"literal", "load_delta_extension"}),
        "the delta extension's delta_scan, a baseline beside the views",
    ),
    "analytics.lake._fold": (frozenset({"read_table"}), "data files copied to plain Parquet, a baseline"),
    "analytics.lake._rows": (
        frozenset({"PendingFile"}),
        "a flush's parts built by hand, sent to worker writers as a child's landing sends them",
    ),
    "analytics.lake.views": (frozenset({"SQL_DIR"}), "an audit's SQL read from its file"),
    "pipeline._attribute_values": (
        frozenset({"encode_image"}),
        "stream images built as the decoder reads them",
    ),
    "pipeline.decode": (frozenset({""}), "the decoder's typed branch swapped out to measure it"),
    "schema.erasure._models": (
        frozenset({"message_adapter"}),
        "the bare pydantic validation under parse, a baseline (schema.erasure's face is its contract's)",
    ),
}


def _is_module(dotted: str) -> bool:
    """Whether `dotted` names a module or package of this repository."""
    path = REPO.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


@cache
def _imports(root: Path) -> tuple[tuple[str, str, str], ...]:
    """(file relative to root, module, name) for every absolute `from <module> import <name>`, and
    (file, module, "") for every `import <module>`, in the files under root that are not tests; after
    `import <package>` (undotted), each `<package>.<name>` read is (file, package, name) too."""
    found: list[tuple[str, str, str]] = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        if relative.parts[0] in _NOT_CALLERS or "node_modules" in relative.parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        # `import telemetry` then `telemetry.records_taken(...)` takes records_taken from the face as
        # surely as `from telemetry import records_taken` does.
        bound: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for alias in node.names:
                    # `from service import dynamo` imports an inner module, not a name of the face; but a
                    # name the face exports is the face's, even where a submodule is spelled the same.
                    if _is_module(f"{node.module}.{alias.name}") and alias.name not in _exported(node.module):
                        found.append((relative.as_posix(), f"{node.module}.{alias.name}", ""))
                    else:
                        found.append((relative.as_posix(), node.module, alias.name))
            elif isinstance(node, ast.Import):
                found.extend((relative.as_posix(), alias.name, "") for alias in node.names)
                bound.update(
                    (alias.asname or alias.name, alias.name)
                    for alias in node.names
                    if "." not in alias.name and _is_module(alias.name)
                )
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in bound
            ):
                module = bound[node.value.id]
                if _is_module(f"{module}.{node.attr}") and node.attr not in _exported(module):
                    found.append((relative.as_posix(), f"{module}.{node.attr}", ""))
                else:
                    found.append((relative.as_posix(), module, node.attr))
    return tuple(found)


def _taken_from(package: str, root: Path) -> dict[str, set[str]]:
    """name -> the files outside `package`'s folder that import it from the package's face or from one
    of its inner modules (but the EXCEPTIONS and pipeline's launcher); for a MODULE_FACES package, whose
    public modules are faces of their own, from the face only."""
    found: dict[str, set[str]] = {}
    folder = f"{package.replace('.', '/')}/"
    for file, module, name in _imports(root):
        if not name or file.startswith(folder) or module in EXCEPTIONS:
            continue
        inner = (
            package not in MODULE_FACES
            and module.startswith(f"{package}.")
            and not module.startswith("pipeline.launcher")
        )
        if module == package or inner:
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


# Faces held to exactly what other packages take from them (issue 25 item 5): a name nobody outside takes
# leaves the face for its home, and the tests import it there.
EXACT_FACES = (
    "analytics.lake",
    "pipeline",
    "processors.cleanup",
    "processors.erasure",
    "schema",
    "service",
    "telemetry",
)


@pytest.mark.parametrize("face", EXACT_FACES)
def test_a_face_is_exactly_what_other_packages_take_from_it(face: str) -> None:
    assert sorted(_taken_from(face, REPO)) == sorted(_exported(face))


@cache
def _exported(package: str) -> tuple[str, ...]:
    """`package`'s `__all__`, read from its `__init__.py` without importing it; () without one."""
    init = REPO.joinpath(*package.split("."), "__init__.py")
    if not init.is_file():
        return ()
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
        ):
            return tuple(ast.literal_eval(node.value))
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id == "__all__"
        ):
            return tuple(ast.literal_eval(node.value)) if node.value is not None else ()
    return ()


def _faces() -> list[str]:
    """Every package of the repository whose `__init__` exports names, but tests and the benches."""
    return sorted(
        ".".join(init.parent.relative_to(REPO).parts)
        for init in REPO.rglob("__init__.py")
        if init.parent != REPO
        and init.relative_to(REPO).parts[0] not in (*_NOT_CALLERS, "bench")
        and "node_modules" not in init.parts
        and _exported(".".join(init.parent.relative_to(REPO).parts))
    )


def _face_of(module: str) -> str | None:
    """The package whose `__init__` is `module`'s face: the innermost package holding it (or being it)
    that exports names, short of a MODULE_FACES package; None when there is none."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        package = ".".join(parts[:end])
        if package in MODULE_FACES:
            return None
        if _exported(package):
            return package
    return None


def _is_inner(module: str) -> bool:
    """Whether a caller outside `module`'s package reaches past a face to import it: a module under a
    face (and not the face itself), or a `_private` module where there is no face."""
    face = _face_of(module)
    if face is not None:
        return module != face
    return any(part.startswith("_") for part in module.split("."))


def _inner_imports(root: Path = REPO) -> list[tuple[str, str, str]]:
    """(file, module, name) for each import, in the composition root and the benches under root, of a
    module inner to another package of this repository, but the BENCH_POKES of a bench."""
    found: set[tuple[str, str, str]] = set()
    for file, module, name in _imports(root):
        if not any(file == caller or file.startswith(f"{caller}/") for caller in ROOT_AND_BENCHES):
            continue
        top = module.split(".")[0]
        if top == file.split("/")[0] or not _is_module(top) or not _is_inner(module):
            continue
        poked, _ = BENCH_POKES.get(module, (frozenset(), ""))
        if not (file.startswith("bench/") and name in poked):
            found.add((file, module, name))
    return sorted(found)


@pytest.mark.parametrize("face", _faces())
def test_every_name_on_a_face_resolves(face: str) -> None:
    module = importlib.import_module(face)
    assert [name for name in module.__all__ if getattr(module, name, None) is None] == []


def test_the_faces_found_include_the_lazy_and_the_eager_ones() -> None:
    # A walk that found no face would check nothing above.
    assert {"analytics", "analytics.lake", "pipeline", "processors.cleanup", "schema", "service"} <= set(
        _faces()
    )


def test_the_composition_root_and_the_benches_import_no_inner_module_of_another_package() -> None:
    assert _inner_imports() == []


def test_every_inner_name_a_bench_may_poke_at_is_still_poked_at() -> None:
    # An allowance nobody uses any more would let the next bench poke there unseen.
    taken = {(module, name) for file, module, name in _imports(REPO) if file.startswith("bench/")}
    unused = sorted(
        (module, name)
        for module, (names, _) in BENCH_POKES.items()
        for name in names
        if (module, name) not in taken
    )
    assert unused == []


def test_an_inner_import_in_the_composition_root_or_a_bench_is_found(tmp_path: Path) -> None:
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "bench_caller.py").write_text(
        "from pipeline import ShardConsumer\n"
        "from schema.table import ItemKind\n"
        "from devstack.moto_server import MotoServer\n"
        "from bench._report import Comparison\n"
        "from analytics.lake._delta import append, table_schema_names\n"
        "from processors.cleanup.retry_worker import RetryWorker\n"
        "from devstack import _writes\n"
        "import pipeline.events\n"
        "from schema._files import private_dir\n",
        encoding="utf-8",
    )
    (tmp_path / "entitlements").mkdir()
    (tmp_path / "entitlements" / "compose.py").write_text(
        "from entitlements._clients import aws_client\n"
        "from analytics.lake._delta import append\n"
        "from service.dynamo import EntitlementTable\n",
        encoding="utf-8",
    )
    (tmp_path / "processors").mkdir()
    (tmp_path / "processors" / "not_checked_here.py").write_text(
        "from service.dynamo import EntitlementTable\n", encoding="utf-8"
    )
    assert _inner_imports(tmp_path) == [
        ("bench/bench_caller.py", "analytics.lake._delta", "table_schema_names"),
        ("bench/bench_caller.py", "devstack._writes", ""),
        ("bench/bench_caller.py", "pipeline.events", ""),
        ("bench/bench_caller.py", "processors.cleanup.retry_worker", "RetryWorker"),
        ("bench/bench_caller.py", "schema._files", "private_dir"),
        ("entitlements/compose.py", "analytics.lake._delta", "append"),
        ("entitlements/compose.py", "service.dynamo", "EntitlementTable"),
    ]


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
        "from pipeline._attribute_values import encode_image\n"
        "from pipeline import events\n"
        "import pipeline\n"
        "pipeline.create_table, pipeline.ReadFromTheFace, pipeline.events\n",
        encoding="utf-8",
    )
    assert _missing_from(pipeline, tmp_path) == {
        "NotOnTheFace": ["processors/caller.py"],
        "NotOnTheFaceEither": ["processors/caller.py"],
        "ReadFromTheFace": ["processors/caller.py"],
    }


_LAKE = "analytics.lake"


@cache
def _module_exports(module: str) -> tuple[str, ...]:
    """The `__all__` of this repository's module (or package) `module`, read without importing it."""
    path = REPO.joinpath(*module.split("."))
    source = path.with_suffix(".py") if path.with_suffix(".py").is_file() else path / "__init__.py"
    for node in ast.parse(source.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
        ):
            return tuple(ast.literal_eval(node.value))
    return ()


def _lake_callers(root: Path) -> list[tuple[str, str, str]]:
    """(file, module, name) for each import of the lake or one of its modules by a file under root
    outside analytics/lake/ (tests are not callers)."""
    return [
        (file, module, name)
        for file, module, name in _imports(root)
        if (module == _LAKE or module.startswith(f"{_LAKE}.")) and not file.startswith("analytics/lake/")
    ]


def _lake_strays(root: Path = REPO) -> list[tuple[str, str, str]]:
    """(file, module, name) for each import, outside analytics/lake/, of a private lake module or of a
    name a public lake module does not export; but a bench's BENCH_POKES and the LAKE_PRIVATE_CALLERS."""
    found: set[tuple[str, str, str]] = set()
    for file, module, name in _lake_callers(root):
        if module == _LAKE or file in LAKE_PRIVATE_CALLERS:
            continue
        poked, _ = BENCH_POKES.get(module, (frozenset(), ""))
        if file.startswith("bench/") and name in poked:
            continue
        if any(part.startswith("_") for part in module.split(".")) or (
            name and name not in _module_exports(module)
        ):
            found.add((file, module, name))
    return sorted(found)


def test_callers_outside_the_lake_take_only_what_its_public_modules_export() -> None:
    assert _lake_strays() == []


def test_every_caller_allowed_a_private_lake_module_still_imports_one() -> None:
    # An allowance nobody needs any more would let the next caller reach in unseen.
    reaching = {
        file
        for file, module, _ in _lake_callers(REPO)
        if any(part.startswith("_") for part in module.split("."))
    }
    assert sorted(set(LAKE_PRIVATE_CALLERS) - reaching) == []


def test_a_stray_lake_import_is_found_and_the_face_names_taken_are_counted(tmp_path: Path) -> None:
    (tmp_path / "analytics" / "lake").mkdir(parents=True)
    (tmp_path / "analytics" / "caller.py").write_text(
        "from analytics.lake import Lake, _commits\n"
        "from analytics.lake._delta import append\n"
        "from analytics.lake.snapshots import snapshot, not_exported\n"
        "import analytics.lake.views\n",
        encoding="utf-8",
    )
    (tmp_path / "analytics" / "lake" / "inside.py").write_text(
        "from analytics.lake._delta import delete_rows\nfrom analytics.lake import open_lake\n",
        encoding="utf-8",
    )
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "bench_caller.py").write_text(
        "from analytics.lake import changes_schema\n"
        "from analytics.lake._delta import append, delete_rows\n"
        "from analytics.lake.views import SQL_DIR, create_views\n",
        encoding="utf-8",
    )
    assert _lake_strays(tmp_path) == [
        ("analytics/caller.py", "analytics.lake._commits", ""),
        ("analytics/caller.py", "analytics.lake._delta", "append"),
        ("analytics/caller.py", "analytics.lake.snapshots", "not_exported"),
        ("bench/bench_caller.py", "analytics.lake._delta", "delete_rows"),
    ]
    assert set(_taken_from(_LAKE, tmp_path)) == {"Lake", "changes_schema"}
