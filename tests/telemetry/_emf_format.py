"""The CloudWatch Embedded Metric Format's structure, as the specification states it: a root object with
`_aws` (`Timestamp` in epoch milliseconds, `CloudWatchMetrics`: directives of `Namespace`, `Dimensions`
and `Metrics`), every dimension and every declared metric present as a root member."""

from __future__ import annotations

from typing import Any

# CloudWatch's units (the PutMetricData `StandardUnit` list).
UNITS = {
    "Seconds", "Microseconds", "Milliseconds", "Bytes", "Kilobytes", "Megabytes", "Gigabytes", "Terabytes",
    "Bits", "Kilobits", "Megabits", "Gigabits", "Terabits", "Percent", "Count", "Bytes/Second",
    "Kilobytes/Second", "Megabytes/Second", "Gigabytes/Second", "Terabytes/Second", "Bits/Second",
    "Kilobits/Second", "Megabits/Second", "Gigabits/Second", "Terabits/Second", "Count/Second", "None",
}  # fmt: skip


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def emf_problems(document: Any) -> list[str]:
    """What keeps `document` from being a valid EMF document (empty: nothing)."""
    if not isinstance(document, dict):
        return ["not an object"]
    metadata = document.get("_aws")
    if not isinstance(metadata, dict):
        return ["no _aws object"]
    problems: list[str] = []
    if not isinstance(metadata.get("Timestamp"), int) or metadata["Timestamp"] <= 0:
        problems.append("_aws.Timestamp is not epoch milliseconds")
    directives = metadata.get("CloudWatchMetrics")
    if not isinstance(directives, list) or not directives:
        return [*problems, "_aws.CloudWatchMetrics is not a non-empty list"]
    for directive in directives:
        namespace = directive.get("Namespace")
        if not isinstance(namespace, str) or not 1 <= len(namespace) <= 255:
            problems.append("a directive's Namespace is not a string of 1 to 255 characters")
        for dimension_set in directive.get("Dimensions", []):
            if not isinstance(dimension_set, list) or len(dimension_set) > 30:
                problems.append("a dimension set is not a list of at most 30 names")
                continue
            for name in dimension_set:
                if not isinstance(document.get(name), str):
                    problems.append(f"dimension {name} is not a string member")
        metrics = directive.get("Metrics")
        if not isinstance(metrics, list) or not 1 <= len(metrics) <= 100:
            problems.append("a directive's Metrics is not a list of 1 to 100 definitions")
            continue
        for metric in metrics:
            name = metric.get("Name")
            member = document.get(name)
            values = member if isinstance(member, list) else [member]
            if not values or len(values) > 100 or not all(_number(value) for value in values):
                problems.append(f"declared metric {name} is not a member holding 1 to 100 numbers")
            if metric.get("Unit", "None") not in UNITS:
                problems.append(f"metric {name} has an unknown unit")
    return problems
