"""schema/erasure/__init__.py: the public API, and the package's place in the layering."""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys

import schema.erasure

FORBIDDEN = ("config", "pipeline", "processors", "analytics", "entitlements", "devstack")


def test_every_module_declares_all() -> None:
    for info in pkgutil.iter_modules(schema.erasure.__path__):
        module = importlib.import_module(f"schema.erasure.{info.name}")
        assert isinstance(module.__all__, list), info.name
        for name in module.__all__:
            assert hasattr(module, name), (info.name, name)


def test_every_public_name_is_exported_and_helpers_stay_private() -> None:
    for name in schema.erasure.__all__:
        assert hasattr(schema.erasure, name), name
    assert all(info.name.startswith("_") for info in pkgutil.iter_modules(schema.erasure.__path__))


def test_importing_it_imports_no_package_above_schema() -> None:
    code = "import json, sys, schema.erasure; print(json.dumps(sorted(sys.modules)))"
    output = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    loaded = json.loads(output)
    assert not [name for name in loaded if name.split(".")[0] in FORBIDDEN]
