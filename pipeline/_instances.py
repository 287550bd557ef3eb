"""Model instances given their state directly, as `BaseModel.model_construct` leaves them, without
pydantic's validator: for the decoder's fast paths, which check every field themselves.

A pydantic model instance holds its state in four places: ``__dict__`` (the fields, in the model's
order) and three slots, ``__pydantic_fields_set__``, ``__pydantic_extra__`` and ``__pydantic_private__``.
`new_instance` makes a new object of the class and sets exactly those four, and nothing else runs: no
validator, no ``__init__``, no post-init (the fast paths are switched off for models that have one:
`pipeline._fast_events.FAST_PATH_ENABLED`).

Two builds of it, the same state:

- the compiled one (`pipeline._instances_c`, Cython, built by ``pip install -e .``): allocates the object
  and stores the four directly, about 0.2 us an instance;
- this module's Python one, used when the extension is not built: the same four stores through the slots'
  descriptors, about 0.5 us. `model_construct` itself costs about 3 us.

A stream record's event is four instances (the event, its position, the old and the new item), so the
compiled build saves about 1.2 us a record: a fifth of `decode_record`'s time (bench/bench_decode.py).
tests/pipeline/test_instances.py holds both builds to `model_construct`'s state.
"""

from __future__ import annotations

__all__ = ["COMPILED", "new_instance", "new_instance_in_python"]

from collections.abc import Callable
from collections.abc import Set as AbstractSet
from typing import Any, TypeVar

from pydantic import BaseModel

_M = TypeVar("_M", bound=BaseModel)
_new = object.__new__
# The slots' descriptors: their setters are what `object.__setattr__(instance, name, value)` ends in.
_set_dict: Callable[[Any, Any], None] = BaseModel.__dict__["__dict__"].__set__
_set_fields_set: Callable[[Any, Any], None] = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra: Callable[[Any, Any], None] = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private: Callable[[Any, Any], None] = BaseModel.__dict__["__pydantic_private__"].__set__


def new_instance_in_python(
    cls: type[_M], values: dict[str, Any], fields_set: AbstractSet[str], extra: dict[str, Any] | None
) -> _M:
    """A new `cls` whose fields are `values` (the dict itself, not a copy), whose fields set is a new
    set of the names in `fields_set`, with these extras and no private state."""
    instance = _new(cls)
    _set_dict(instance, values)
    _set_fields_set(instance, set(fields_set))
    _set_extra(instance, extra)
    _set_private(instance, None)
    return instance


try:
    from pipeline._instances_c import new_instance
except ImportError:  # not built (a checkout without `pip install -e .`): the same state, slower
    new_instance = new_instance_in_python
    COMPILED = False
else:
    COMPILED = True
