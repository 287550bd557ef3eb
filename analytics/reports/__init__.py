"""What the audits and the mining reports share to render themselves: jinja2 templates (in
analytics/reports/templates/) and matplotlib charts embedded as base64 PNG."""

from analytics.reports._charts import Chart, bar_chart, grouped_bar_chart, line_chart, png_base64
from analytics.reports._templates import render

__all__ = ["Chart", "bar_chart", "grouped_bar_chart", "line_chart", "png_base64", "render"]
