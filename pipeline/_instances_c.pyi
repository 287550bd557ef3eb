from collections.abc import Set as AbstractSet
from typing import Any, TypeVar

from pydantic import BaseModel

_M = TypeVar("_M", bound=BaseModel)

def new_instance(
    cls: type[_M], values: dict[str, Any], fields_set: AbstractSet[str], extra: dict[str, Any] | None
) -> _M: ...
