"""What the audits and the mining reports share to render themselves: jinja2 templates (in
analytics/reports/templates/) and matplotlib charts embedded as base64 PNG.

The names are loaded on first use: `counted` (the demo's summary) does not load matplotlib."""

from __future__ import annotations

__all__ = [
    "Chart",
    "bar_chart",
    "counted",
    "grouped_bar_chart",
    "line_chart",
    "png_base64",
    "render",
]

from typing import TYPE_CHECKING

from schema.faces import lazy_names

if TYPE_CHECKING:
    from analytics.reports._charts import Chart, bar_chart, grouped_bar_chart, line_chart, png_base64
    from analytics.reports._templates import counted, render

_HOME = {
    "Chart": "analytics.reports._charts",
    "bar_chart": "analytics.reports._charts",
    "counted": "analytics.reports._templates",
    "grouped_bar_chart": "analytics.reports._charts",
    "line_chart": "analytics.reports._charts",
    "png_base64": "analytics.reports._charts",
    "render": "analytics.reports._templates",
}


__getattr__ = lazy_names(__name__, _HOME)
