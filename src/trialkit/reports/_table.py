"""The tables every command prints, laid out for where they go.

On a terminal a table fits the console's width. The columns always shown (the run, task or
trial id first) are never wrapped or cut; when space is short the least important columns go
first, then names and notes wrap, and headers wrap only between words. When even the ids do
not fit, each row becomes a block: its id on a line, then one line per other column.

Anywhere else (a pipe, a file, a CI log) a table is plain text with no width limit, like
`kubectl get`: a header line, then one line per row, each column as wide as its widest cell,
nothing wrapped or cut, no box characters and no colour.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from trialkit.reports._format import escape_controls

Fit = Literal["whole", "words", "fold", "cut"]
Cell = str | Text

GAP = 2
"""Spaces between two columns."""
FOLD_MIN = 16
"""The narrowest a `fold` or `cut` column is made, unless all its cells are narrower."""


@dataclass(frozen=True)
class Column:
    header: str
    fit: Fit = "whole"
    """`whole`: never wrapped (ids, figures); `words`: wraps between words only (short phrases,
    text naming ids); `fold`: wraps between words, and inside a word too long for the column
    (names, notes); `cut`: one line, cut with "…" where the column ends."""
    drop: int = 0
    """0: always shown. Otherwise the column may go when space is short, the highest first;
    columns of the same number are shown together or not at all."""
    justify: Literal["left", "right"] = "left"
    short: str | None = None
    """The header when `header` does not fit, e.g. `A` for `A · gpt-4o-mini`."""


def print_table(
    console: Console,
    columns: Sequence[Column],
    rows: Sequence[Sequence[Cell]],
    *,
    header: bool = True,
) -> None:
    cells = [[c if isinstance(c, Text) else Text(escape_controls(c)) for c in row] for row in rows]
    if not console.is_terminal:
        _print_plain(console, columns, cells, header)
        return
    widths = fit_widths(columns, cells, console.width, header=header)
    if widths is None:
        _print_blocks(console, columns, cells)
        return
    console.print(_rich_table(columns, cells, widths, header))


def print_figures(console: Console, rows: Sequence[tuple[Cell, Cell]]) -> None:
    """Label and value pairs, labels in bold on a terminal."""
    labels = [Column("", fit="words"), Column("", fit="words")]
    bold = [(_bold(label), value) for label, value in rows]
    print_table(console, labels, bold, header=False)


def print_line(console: Console, text: Text, *, indent: int = 0) -> None:
    """A line of prose: wrapped between words on a terminal (under its first word, when
    indented), never in a log."""
    if console.is_terminal:
        console.print(Padding(text, (0, 0, 0, indent), expand=False))
    else:
        console.print(Text.assemble(" " * indent, text), soft_wrap=True)


def fit_widths(
    columns: Sequence[Column], cells: Sequence[Sequence[Text]], width: int, *, header: bool
) -> dict[int, int] | None:
    """The width of each shown column, by index; `None` when the columns that are always shown
    do not fit in `width`."""
    least, most, wide = [], [], []
    for i, column in enumerate(columns):
        texts = [row[i] for row in cells]
        least.append(_least(column, texts, header))
        most.append(max([least[-1], *(_widest(t) for t in texts)]))
        wide.append(max(most[-1], cell_len(column.header) if header else 0))

    def total(shown: list[int]) -> int:
        return sum(least[i] for i in shown) + GAP * (len(shown) - 1)

    shown = [i for i, column in enumerate(columns) if not column.drop]
    if total(shown) > width:
        return None
    for drop in sorted({column.drop for column in columns} - {0}):
        group = [i for i, column in enumerate(columns) if column.drop == drop]
        if total([*shown, *group]) <= width:
            shown += group
    widths = {i: least[i] for i in shown}
    spare = width - total(shown)
    by_importance = sorted(shown, key=lambda i: columns[i].drop)
    # Room goes first to the headers of figures (short, and they read badly wrapped), then to
    # the cells that wrap, then to the other headers. Columns with short headers get room for
    # their long ones only if all of them then fit on a line, so they read alike.
    figures = [i for i in by_importance if columns[i].fit == "whole" and not columns[i].short]
    for limit, order in ((wide, figures), (most, by_importance), (wide, by_importance)):
        for i in order:
            if columns[i].short is None or limit is most:
                grow = max(0, min(spare, limit[i] - widths[i]))
                widths[i] += grow
                spare -= grow
    with_short = [i for i in shown if columns[i].short is not None]
    if sum(wide[i] - widths[i] for i in with_short) <= spare:
        for i in with_short:
            widths[i] = wide[i]
    return widths


def _least(column: Column, texts: list[Text], header: bool) -> int:
    heading = column.short or column.header
    least = _longest_word(heading) if header else 0
    if column.fit == "whole":
        content = max((_widest(t) for t in texts), default=0)
    elif column.fit == "words":
        content = max((_longest_word(t.plain) for t in texts), default=0)
    else:
        content = min(max((_widest(t) for t in texts), default=0), FOLD_MIN)
    return max(least, content, 1)


def _widest(text: Text) -> int:
    return max(cell_len(line) for line in text.plain.split("\n"))


def _longest_word(text: str) -> int:
    return max((cell_len(word) for word in text.split()), default=0)


def _rich_table(
    columns: Sequence[Column], cells: list[list[Text]], widths: dict[int, int], header: bool
) -> Table:
    table = Table(
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        padding=(0, GAP - 1, 0, 0),
        show_header=header,
    )
    shown = sorted(widths)
    with_short = [i for i in shown if columns[i].short is not None]
    long_headers = all(_longest_word(columns[i].header) <= widths[i] for i in with_short)
    for i in shown:
        column = columns[i]
        heading = column.header if long_headers or column.short is None else column.short
        table.add_column(heading, justify=column.justify, width=widths[i], overflow="fold")
    for row in cells:
        table.add_row(*(_cell(columns[i], row[i]) for i in shown))
    return table


def _cell(column: Column, text: Text) -> Text:
    if column.fit != "cut":
        return text
    one_line = text.copy()
    one_line.no_wrap, one_line.overflow = True, "ellipsis"
    return one_line


def _print_plain(
    console: Console, columns: Sequence[Column], cells: list[list[Text]], header: bool
) -> None:
    rows = [[" ".join(t.plain.split("\n")) for t in row] for row in cells]
    if header:
        rows.insert(0, [column.header for column in columns])
    widths = [max((cell_len(row[i]) for row in rows), default=0) for i in range(len(columns))]
    for row in rows:
        parts = [
            _pad(text, widths[i], columns[i].justify) for i, text in enumerate(row) if widths[i]
        ]
        console.print(Text((" " * GAP).join(parts).rstrip()), soft_wrap=True)


def _pad(text: str, width: int, justify: str) -> str:
    space = " " * (width - cell_len(text))
    return space + text if justify == "right" else text + space


def _print_blocks(console: Console, columns: Sequence[Column], cells: list[list[Text]]) -> None:
    """Each row as its first cell on a line, then `header value` for each other cell."""
    for row in cells:
        console.print(_bold(row[0]))
        for column, text in zip(columns[1:], row[1:], strict=True):
            if text.plain:
                heading = column.header or column.short
                line = Text.assemble(_bold(heading), " ", text) if heading else text
                console.print(Padding(line, (0, 0, 0, 2)))


def _bold(cell: Cell) -> Text:
    text = cell.copy() if isinstance(cell, Text) else Text(escape_controls(cell))
    text.stylize("bold")
    return text
