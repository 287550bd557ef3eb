"""The entitlements service: its HTTP API (`service.app`), its table writes (`service.writes`,
`service.dynamo`), the one Array link implementation (`service.arraylink`) and the relinker worker
(`service.relinker`). Built from the settings by `entitlements.compose`; served by `entitlements serve`.

The face is the names other packages import (the composition root, the in-process workload, the
relinker's commands); they are loaded on first use, so importing one light name (`is_user_id`) loads
neither FastAPI nor the table layer.
"""

from __future__ import annotations

__all__ = [
    "SERVICE_ERRORS",
    "USER_ID_RULE",
    "ArrayLink",
    "ConcurrentRequestError",
    "EntitlementNotActiveError",
    "EntitlementService",
    "EntitlementTable",
    "LinkTable",
    "OutcomeRecorder",
    "Relinker",
    "ServiceParts",
    "ServiceRefusal",
    "create_app",
    "enqueue_relinks",
    "is_user_id",
    "link_and_record",
]

from typing import TYPE_CHECKING

from schema.faces import lazy_names

if TYPE_CHECKING:
    from service.app import create_app
    from service.arraylink import ArrayLink, LinkTable, link_and_record
    from service.clients import SERVICE_ERRORS
    from service.dynamo import EntitlementTable
    from service.errors import ConcurrentRequestError, EntitlementNotActiveError, ServiceRefusal
    from service.ids import USER_ID_RULE, is_user_id
    from service.outcomes import OutcomeRecorder
    from service.parts import ServiceParts
    from service.relinker import Relinker, enqueue_relinks
    from service.writes import EntitlementService

_HOME = {
    "SERVICE_ERRORS": "service.clients",
    "USER_ID_RULE": "service.ids",
    "ArrayLink": "service.arraylink",
    "ConcurrentRequestError": "service.errors",
    "EntitlementNotActiveError": "service.errors",
    "EntitlementService": "service.writes",
    "EntitlementTable": "service.dynamo",
    "LinkTable": "service.arraylink",
    "OutcomeRecorder": "service.outcomes",
    "Relinker": "service.relinker",
    "ServiceParts": "service.parts",
    "ServiceRefusal": "service.errors",
    "create_app": "service.app",
    "enqueue_relinks": "service.relinker",
    "is_user_id": "service.ids",
    "link_and_record": "service.arraylink",
}


__getattr__ = lazy_names(__name__, _HOME)
