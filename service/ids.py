"""The user ids the service accepts: in its route paths and, the same rule, in `relinker enqueue`.

1 to 128 characters of `A-Z a-z 0-9 . _ : -`, the first a letter or digit. The routes check it through
FastAPI (whose regex engine anchors `$` at the very end); `is_user_id` checks it with `re.fullmatch`,
so a trailing newline is refused here too.
"""

from __future__ import annotations

__all__ = ["USER_ID_PATTERN", "USER_ID_RULE", "is_user_id"]

import re

_BODY = r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}"
USER_ID_PATTERN = f"^{_BODY}$"
USER_ID_RULE = "1 to 128 of A-Z a-z 0-9 . _ : -, starting with a letter or digit"
_USER_ID = re.compile(_BODY)


def is_user_id(value: str) -> bool:
    return _USER_ID.fullmatch(value) is not None
