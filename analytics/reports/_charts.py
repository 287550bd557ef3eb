"""Charts as base64 PNG, drawn with matplotlib's object API on the Agg canvas (no pyplot, no global
state, no display needed).

One clock per chart: a chart's times are all on one clock (business time, stream time or the
processor's), and the caller names it (`xlabel`, e.g. "day (business time)"); times of two clocks go to
two charts, never one (negative durations and days from two calendars otherwise)."""

from __future__ import annotations

__all__ = ["Chart", "bar_chart", "grouped_bar_chart", "line_chart", "png_base64"]

import base64
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

_PALETTE = ("#2f6db5", "#e07b39", "#3a9a5b", "#c23b3b", "#7c5cb5", "#8a6d3b", "#d45fa6", "#5f7f8f")


@dataclass(frozen=True, slots=True)
class Chart:
    """A rendered chart: its title, a text alternative, and the PNG as base64."""

    title: str
    alt: str
    png: str

    @property
    def data_uri(self) -> str:
        return f"data:image/png;base64,{self.png}"


def png_base64(figure: Figure) -> str:
    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _legend_beside(axes: Any) -> None:
    """The legend to the right of the plot, never over a bar or a line (the saved figure is cropped to
    what it draws, so the legend widens the picture instead)."""
    axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


def _figure(width: float, height: float) -> Figure:
    figure = Figure(figsize=(width, height))
    figure.patch.set_facecolor("white")
    return figure


def bar_chart(
    title: str,
    labels: Sequence[str],
    values: Sequence[float],
    *,
    colors: Sequence[str] | None = None,
    xlabel: str = "",
    horizontal: bool = True,
    alt: str = "",
) -> Chart:
    """One bar per label (horizontal by default: long labels stay readable)."""
    height = max(2.5, 0.32 * len(labels) + 1.2) if horizontal else 4.0
    figure = _figure(9.0, height)
    axes = figure.add_subplot()
    positions = list(range(len(labels)))
    shades = list(colors) if colors else [_PALETTE[0]] * len(labels)
    if horizontal:
        axes.barh(positions, values, color=shades)
        axes.set_yticks(positions, labels=list(labels), fontsize=8)
        axes.invert_yaxis()
        axes.set_xlabel(xlabel)
        for position, value in zip(positions, values, strict=True):
            if value:
                axes.annotate(f"{value:,.0f}", (value, position), xytext=(3, 0), textcoords="offset points",
                              va="center", fontsize=8)  # fmt: skip
    else:
        axes.bar(positions, values, color=shades)
        axes.set_xticks(positions, labels=list(labels), rotation=45, ha="right", fontsize=8)
        axes.set_ylabel(xlabel)
    (axes.xaxis if horizontal else axes.yaxis).set_major_locator(MaxNLocator(integer=True))
    axes.set_title(title)
    axes.grid(axis="x" if horizontal else "y", alpha=0.3)
    return Chart(title=title, alt=alt or title, png=png_base64(figure))


def line_chart(
    title: str,
    x: Sequence[object],
    series: Mapping[str, Sequence[float | None]],
    *,
    ylabel: str = "",
    xlabel: str = "",
    stacked_bars: bool = False,
    alt: str = "",
) -> Chart:
    """Several series over one x axis (dates or numbers): lines, or stacked bars per x. `xlabel` names
    the axis and, for times, their one clock."""
    figure = _figure(9.0, 4.0)
    axes = figure.add_subplot()
    if stacked_bars:
        positions = list(range(len(x)))
        bottom = [0.0] * len(x)
        for index, (name, values) in enumerate(series.items()):
            heights = [float(v or 0) for v in values]
            axes.bar(positions, heights, bottom=bottom, label=name, color=_PALETTE[index % len(_PALETTE)])
            bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
        axes.yaxis.set_major_locator(MaxNLocator(integer=True))
        step = max(1, len(x) // 12)
        axes.set_xticks(positions[::step], labels=[str(v) for v in x][::step], rotation=45, ha="right",
                        fontsize=8)  # fmt: skip
    else:
        xs: list[Any] = list(x)
        for index, (name, values) in enumerate(series.items()):
            points = [float("nan") if v is None else float(v) for v in values]
            axes.plot(xs, points, label=name, color=_PALETTE[index % len(_PALETTE)], linewidth=1.6)
        figure.autofmt_xdate()
    axes.set_title(title)
    axes.set_ylabel(ylabel)
    axes.set_xlabel(xlabel)
    axes.grid(alpha=0.3)
    if series:  # a series is named even when it is alone: the title names the chart, not the line
        _legend_beside(axes)
    return Chart(title=title, alt=alt or title, png=png_base64(figure))


def grouped_bar_chart(
    title: str,
    labels: Sequence[str],
    series: Mapping[str, Sequence[float | None]],
    *,
    xlabel: str = "",
    log_scale: bool = False,
    alt: str = "",
) -> Chart:
    """Horizontal bars, one group per label and one bar per series in it; `log_scale` (symmetric log,
    linear below 0.1) keeps small values visible beside large ones."""
    count = max(1, len(series))
    height = max(2.5, 0.3 * len(labels) * count + 1.2)
    figure = _figure(9.0, height)
    axes = figure.add_subplot()
    width = 0.8 / count
    for index, (name, values) in enumerate(series.items()):
        positions = [p + index * width for p in range(len(labels))]
        axes.barh(positions, [float(v or 0) for v in values], height=width, label=name,
                  color=_PALETTE[index % len(_PALETTE)])  # fmt: skip
    axes.set_yticks(
        [p + width * (count - 1) / 2 for p in range(len(labels))], labels=list(labels), fontsize=8
    )
    axes.invert_yaxis()
    if log_scale:
        axes.set_xscale("symlog", linthresh=0.1)
    axes.set_xlabel(xlabel)
    axes.set_title(title)
    axes.grid(axis="x", alpha=0.3)
    if series:
        _legend_beside(axes)
    return Chart(title=title, alt=alt or title, png=png_base64(figure))
