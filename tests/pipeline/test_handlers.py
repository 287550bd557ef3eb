"""The handler registry: flush order puts producers before the sinks they feed, whatever the
registration order; a cycle or an unknown sink is refused."""

from __future__ import annotations

import pytest

from pipeline.handlers import HandlerRegistry
from tests.pipeline._consumer_fakes import Recorder


def names(registry: HandlerRegistry) -> list[str]:
    return [handler.name for handler in registry]


def test_handlers_that_feed_nothing_flush_in_registration_order() -> None:
    registry = HandlerRegistry()
    for name in ("journal", "cleanup", "lake"):
        registry.register(Recorder(name))
    assert names(registry) == ["journal", "cleanup", "lake"]


def test_a_producer_registered_after_its_sink_flushes_before_it() -> None:
    registry = HandlerRegistry()
    registry.register(Recorder("lake"))
    registry.register(Recorder("journal"))
    registry.register(Recorder("cleanup"), feeds=("lake",))
    assert names(registry) == ["journal", "cleanup", "lake"]


def test_a_chain_of_producers_flushes_upstream_first() -> None:
    registry = HandlerRegistry()
    registry.register(Recorder("c"))
    registry.register(Recorder("b"), feeds=("c",))
    registry.register(Recorder("a"), feeds=("b",))
    assert names(registry) == ["a", "b", "c"]


def test_a_sink_may_be_registered_after_the_producer_that_names_it() -> None:
    registry = HandlerRegistry()
    registry.register(Recorder("cleanup"), feeds=("lake",))
    registry.register(Recorder("lake"))
    assert names(registry) == ["cleanup", "lake"]


def test_a_sink_no_handler_is_named_is_refused_when_the_order_is_asked_for() -> None:
    registry = HandlerRegistry()
    registry.register(Recorder("cleanup"), feeds=("lake",))
    with pytest.raises(ValueError, match="not registered"):
        registry.ordered()


def test_handlers_feeding_each_other_in_a_cycle_are_refused_at_registration() -> None:
    registry = HandlerRegistry()
    registry.register(Recorder("a"), feeds=("b",))
    with pytest.raises(ValueError, match="cycle"):
        registry.register(Recorder("b"), feeds=("a",))
    assert "b" not in registry


def test_a_handler_feeding_itself_is_refused() -> None:
    with pytest.raises(ValueError, match="itself"):
        HandlerRegistry().register(Recorder("a"), feeds=("a",))


def test_two_handlers_of_one_name_are_refused() -> None:
    registry = HandlerRegistry()
    registry.register(Recorder("lake"))
    with pytest.raises(ValueError, match="already registered"):
        registry.register(Recorder("lake"))


def test_downstream_names_every_sink_reached_directly_or_through_another() -> None:
    registry = HandlerRegistry()
    registry.register(Recorder("journal"))
    registry.register(Recorder("lake"))
    registry.register(Recorder("audit"), feeds=("lake",))
    registry.register(Recorder("cleanup"), feeds=("audit",))
    assert registry.downstream("cleanup") == ("audit", "lake")
    assert registry.upstream("lake") == ("cleanup", "audit")


def test_a_replaying_registry_gives_events_to_one_handler_and_flushes_its_sinks_only() -> None:
    registry = HandlerRegistry()
    registry.register(Recorder("journal"))
    registry.register(Recorder("lake"))
    registry.register(Recorder("cleanup"), feeds=("lake",))
    part = registry.replaying("cleanup")
    assert names(part) == ["cleanup", "lake"]
    assert [handler.name for handler in part.receivers()] == ["cleanup"]
