"""analytics/lake/_schema.py and schema/lake_allow_list.json: explicit schemas from the allow-list."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from analytics.lake import changes_schema, default_allow_list
from analytics.lake._schema import OUTCOMES_SCHEMA, AllowListError, load_allow_list, state_schema


def test_the_shipped_allow_list_never_names_the_processor_token() -> None:
    allow = default_allow_list()
    assert "processorToken" not in allow.attribute_names
    assert "processorToken" in allow.never


def test_an_allow_list_naming_the_processor_token_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "allow.json"
    path.write_text(
        json.dumps(
            {"attributes": [{"attribute": "processorToken", "column": "processor_token", "type": "string"}]}
        )
    )
    with pytest.raises(AllowListError):
        load_allow_list(path)


def test_a_column_clashing_with_the_metadata_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "allow.json"
    path.write_text(
        json.dumps({"attributes": [{"attribute": "x", "column": "sequence_key", "type": "string"}]})
    )
    with pytest.raises(AllowListError):
        load_allow_list(path)


def test_every_allowed_attribute_has_old_and_new_columns_of_its_declared_type() -> None:
    allow = default_allow_list()
    schema = changes_schema(allow)
    for spec in allow.attributes:
        for field in spec.fields():
            assert schema.field(f"old_{field.name}").type == field.type
            assert schema.field(f"new_{field.name}").type == field.type
    assert schema.field("new_ttl").type == pa.int64()
    assert schema.field("new_ttl_raw").type == pa.string()
    assert schema.field("created_at").type == pa.timestamp("us", tz="UTC")


def test_every_dataset_carries_the_user_id() -> None:
    allow = default_allow_list()
    for schema in (changes_schema(allow), state_schema(allow), OUTCOMES_SCHEMA):
        assert "user_id" in schema.names


def test_a_string_attribute_named_as_a_time_lands_beside_its_utc_timestamp_twin(tmp_path: Path) -> None:
    path = tmp_path / "allow.json"
    attributes = [
        {"attribute": "shippedAt", "column": "shipped_at", "type": "string"},
        {"attribute": "note", "column": "note", "type": "string"},
    ]
    path.write_text(json.dumps({"attributes": attributes}))
    schema = changes_schema(load_allow_list(path))
    assert schema.field("new_shipped_at").type == pa.string()
    assert schema.field("new_shipped_at_ts").type == pa.timestamp("us", tz="UTC")
    assert "new_note_ts" not in schema.names


def test_an_attribute_taking_a_time_twins_column_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "allow.json"
    attributes = [
        {"attribute": "shippedAt", "column": "shipped_at", "type": "string"},
        {"attribute": "other", "column": "shipped_at_ts", "type": "string"},
    ]
    path.write_text(json.dumps({"attributes": attributes}))
    with pytest.raises(AllowListError):
        load_allow_list(path)


def test_the_declared_schemas_carry_no_comment_so_a_change_of_words_never_stops_a_writer() -> None:
    allow = default_allow_list()
    for schema in (changes_schema(allow), state_schema(allow), OUTCOMES_SCHEMA):
        assert all(not field.metadata for field in schema)
