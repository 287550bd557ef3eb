"""The jinja2 environment over analytics/reports/templates/: HTML autoescaped, undefined names fatal."""

from __future__ import annotations

__all__ = ["TEMPLATES_DIR", "counted", "render"]

import re
from functools import cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup, escape

TEMPLATES_DIR = Path(__file__).with_name("templates")


def _md_cell(value: object) -> str:
    """A value as one Markdown table cell: pipes escaped, on one line."""
    if value is None:
        return ""
    text = str(value)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")


_TICKED = re.compile(r"`([^`]+)`")


def _ticks(value: object) -> Markup:
    """Text for HTML, escaped, with `backticked` spans as <code>."""
    return Markup(_TICKED.sub(r"<code>\1</code>", str(escape(str(value)))))  # noqa: S704  (escaped first)


def _number(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def counted(value: object, noun: str) -> str:
    """`1 row`, `2 rows`, `1,000 rows`: a count with its noun, plural unless the count is one."""
    return f"{_number(value)} {noun if value == 1 else noun + 's'}"


# The project's own folder, when the package runs from a clone: its docs and SQL files can be linked.
_PROJECT_ROOT = Path(__file__).resolve().parents[2]


def _project_link(path: object) -> Markup:
    """A project path (`docs/operations/audits.md`) as a link to the file when it is there, else as
    code: a report read on the machine that wrote it opens the page in one click."""
    text = str(path)
    file, _, anchor = text.partition("#")
    target = (_PROJECT_ROOT / file).resolve()
    code = Markup("<code>{}</code>").format(text)
    if not target.is_file() or _PROJECT_ROOT not in target.parents:
        return code
    return Markup('<a href="{}">{}</a>').format(target.as_uri() + (f"#{anchor}" if anchor else ""), code)


@cache
def _environment() -> Environment:
    environment = Environment(
        loader=FileSystemLoader(TEMPLATES_DIR),
        autoescape=select_autoescape(enabled_extensions=("html", "html.j2"), default_for_string=False),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    environment.filters["md"] = _md_cell
    environment.filters["number"] = _number
    environment.filters["ticks"] = _ticks
    environment.filters["counted"] = counted
    environment.filters["project_link"] = _project_link
    return environment


def render(template: str, **context: Any) -> str:
    """Render `template` (e.g. `audit.html.j2`) with `context`."""
    return _environment().get_template(template).render(**context)
