"""Everything the CLI prints: JSON for scripts (only the API's data, on stdout), rich
tables for people, errors on stderr."""
import json
import os
import re
import sys
from typing import Any, Callable, Iterable, Optional

from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from kbcli.client import CliError

IDENTIFIER = re.compile(r"^[a-z]+(_[a-z]+)*_[0-9a-f]{6,}$")
# Piped into a file or a log, a table gets the width it needs (up to 160) instead of 80 columns.
_WIDTH = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 160
out = Console(highlight=False, soft_wrap=False, width=_WIDTH)
err = Console(stderr=True, highlight=False)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def emit(json_mode: bool, data: Any, render: Callable[[Any], None]) -> None:
    if json_mode:
        print_json(data)
    else:
        render(data)


def show_error(error: CliError, json_mode: bool) -> None:
    if json_mode:
        sys.stderr.write(json.dumps({"error": error.as_dict()}) + "\n")
    else:
        err.print(f"[bold red]Error[/] [red]{escape(error.code)}[/]: {escape(error.message)}")


def warn(message: str, json_mode: bool) -> None:
    """A warning on stderr: a JSON line with --json, else a line for people."""
    if json_mode:
        sys.stderr.write(json.dumps({"warning": message}, ensure_ascii=False) + "\n")
    else:
        err.print(f"[yellow]Warning[/]: {escape(message)}")


def note(message: str) -> None:
    """A line for people; only render functions call it, so never in --json mode."""
    out.print(message)


class Styled(str):
    """Text already in rich markup (anything else is escaped before printing)."""


def cell(value: Any) -> str:
    if isinstance(value, Styled):
        return value
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return escape(str(value))


def when(iso: Optional[str]) -> str:
    """An ISO timestamp to the second, without the zone noise."""
    if not iso:
        return "-"
    return iso[:19].replace("T", " ")


def table(columns: Iterable[str], rows: Iterable[Iterable[Any]], *, title: Optional[str] = None,
          empty: str = "nothing to show") -> None:
    rows = [list(r) for r in rows]
    if not rows:
        out.print(f"[dim]{escape(empty)}[/]")
        return
    rows = [[cell(value) for value in row] for row in rows]
    grid = Table(title=title, title_justify="left", header_style="bold")
    for index, name in enumerate(columns):
        values = [row[index] for row in rows]
        plain = [Text.from_markup(v).plain for v in values]
        # Identifiers are copied from tables, so they are never cut or wrapped; the rest folds.
        ids = all(v == "-" or IDENTIFIER.match(v) for v in plain) and any(v != "-" for v in plain)
        grid.add_column(name, no_wrap=ids, min_width=max(map(cell_len, plain)) if ids else None,
                        overflow="fold")
    for row in rows:
        grid.add_row(*row)
    out.print(grid)


def fields(pairs: Iterable[tuple[str, Any]], *, title: Optional[str] = None) -> None:
    """One object as a two-column table."""
    grid = Table(show_header=False, title=title, title_justify="left", box=None, padding=(0, 2, 0, 0))
    grid.add_column(style="bold")
    grid.add_column(overflow="fold")
    for name, value in pairs:
        grid.add_row(escape(name), cell(value))
    out.print(grid)
