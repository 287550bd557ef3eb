"""pipeline/_instances.py: model instances given their state directly, in both builds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from pipeline._instances import COMPILED, new_instance, new_instance_in_python
from pipeline.events import StreamPosition
from schema.table import EntitlementRow, ItemKind

BUILDS: dict[str, Callable[..., Any]] = {"compiled": new_instance, "python": new_instance_in_python}
ROW = {
    "kind": ItemKind.ENTITLEMENT,
    "pk": "USER#u-1",
    "sk": "ENTITLEMENT#acc-1",
    "userId": "u-1",
    "arrayAccountId": "acc-1",
    "status": "Active",
    "createdAt": None,
    "updatedAt": None,
    "processorToken": None,
    "gsi1pk": None,
    "gsi1sk": None,
}


def _state(model: BaseModel) -> tuple[Any, ...]:
    return (
        type(model),
        list(model.__dict__.items()),
        model.__pydantic_fields_set__,
        type(model.__pydantic_fields_set__),
        model.__pydantic_extra__,
        model.__pydantic_private__,
    )


def test_the_setup_builds_the_compiled_builder() -> None:
    assert COMPILED
    assert new_instance is not new_instance_in_python


@pytest.mark.parametrize("build", BUILDS)
def test_an_instance_holds_the_state_model_construct_gives(build: str) -> None:
    fields_set = frozenset(["kind", "pk", "sk", "userId", "arrayAccountId", "status", "note"])

    built = BUILDS[build](EntitlementRow, dict(ROW), fields_set, {"note": "kept"})

    expected = EntitlementRow.model_construct(set(fields_set), **{**ROW, "note": "kept"})
    assert _state(built) == _state(expected)
    assert built == expected
    assert built.model_dump() == expected.model_dump()


@pytest.mark.parametrize("build", BUILDS)
def test_an_instance_owns_its_fields_set_and_holds_the_values_given(build: str) -> None:
    fields_set = {"stream_arn", "shard_id", "sequence_number"}
    values = {"stream_arn": "arn:s", "shard_id": "shard-1", "sequence_number": "42"}

    built = BUILDS[build](StreamPosition, values, fields_set, None)
    fields_set.add("other")

    assert built.__pydantic_fields_set__ == {"stream_arn", "shard_id", "sequence_number"}
    assert built.__dict__ is values
    assert built.sequence_key == StreamPosition(**values).sequence_key


@pytest.mark.parametrize("build", BUILDS)
def test_an_instance_is_frozen_as_its_model_says(build: str) -> None:
    built = BUILDS[build](EntitlementRow, dict(ROW), frozenset(ROW), {})

    with pytest.raises(ValueError, match="frozen"):
        built.status = "Cancelled"


def test_the_compiled_builder_builds_pydantic_models_only() -> None:
    with pytest.raises(TypeError, match="pydantic models"):
        new_instance(dict, {}, set(), None)  # type: ignore[type-var]
    with pytest.raises(TypeError, match="extra"):
        new_instance(EntitlementRow, dict(ROW), set(), [])  # type: ignore[arg-type]
