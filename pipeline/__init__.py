"""The stream side: a record decoded into a typed event, events handed to the registered handlers, the
shard checkpointed once they are durable.

The face names what the rest of the project calls; everything else is imported from its module
(`pipeline.parking`, `pipeline.quarantine`, `pipeline.dead_letter`, `pipeline.clock`, ...). The names are
loaded on first use, so importing a light module (`pipeline.clock`) does not load the consumer.
"""

from __future__ import annotations

__all__ = [
    "DecodeError",
    "Handler",
    "HandlerRegistry",
    "ShardConsumer",
    "StreamEvent",
    "decode_record",
    "decode_stream_record",
]

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pipeline.decode import decode_record, decode_stream_record
    from pipeline.errors import DecodeError
    from pipeline.events import StreamEvent
    from pipeline.handlers import Handler, HandlerRegistry
    from pipeline.shard_consumer import ShardConsumer

_HOME = {
    "DecodeError": "pipeline.errors",
    "Handler": "pipeline.handlers",
    "HandlerRegistry": "pipeline.handlers",
    "ShardConsumer": "pipeline.shard_consumer",
    "StreamEvent": "pipeline.events",
    "decode_record": "pipeline.decode",
    "decode_stream_record": "pipeline.decode",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'pipeline' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
