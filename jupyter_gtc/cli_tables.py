"""The `gtc ... list` tables, fitted to the terminal: what identifies a row stays whole.

rich shrank every column alike to fit 80 columns, so `gtc job list` printed `longtr…` and
`CANCEL…` while CLUSTER, USER and OURS (the same on every row) kept their width. Here each
column says how it gives way: ``keep`` columns (ids, states: CANCELLED, OUT_OF_MEMORY,
NODE_FAIL) are never cut; the ``flex`` column (a name) gets what is left; ``drop`` columns
go when the table does not fit, by their ``drop`` rank, first the ``shared`` ones whose value is
the same on every row (a job list's cluster, user, "ours": said once, above the table).

The width is the terminal's, or ``COLUMNS`` where set (as rich did). Piped with neither
(`gtc job list | grep NAME`, a script), nothing is cut: a cut name is not found.
"""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
from dataclasses import dataclass

GAP = 2  # spaces between columns
FLEX_MIN = 12  # a name is cut below this only where the kept columns leave no more
ELLIPSIS = "…"


@dataclass
class Column:
    header: str
    kind: str = "keep"  # "keep", "flex" or "drop"
    drop: int = 0  # for "drop": lower goes first
    right: bool = False  # numbers align right
    shared: bool = False  # for "drop": where every row has one value, it goes first and is said once above


def render(columns: list[Column], rows: list[list[str]], width: int | None = None) -> str:
    """``rows`` (one string per column) as text lines of at most ``width`` characters (where
    the kept columns fit), with a line above naming what every row shares where its column went."""
    width = width or _width()
    shown = list(range(len(columns)))
    natural = [max([len(columns[i].header), *(len(r[i]) for r in rows)]) for i in range(len(columns))]

    def needed(flex_cap: int | None) -> int:
        return sum(min(natural[i], flex_cap) if flex_cap and columns[i].kind == "flex" else natural[i]
                   for i in shown) + GAP * (len(shown) - 1)

    same = {i for i in shown if columns[i].shared and rows and len({r[i] for r in rows}) == 1}
    droppable = sorted((i for i in shown if columns[i].kind == "drop"), key=lambda i: (i not in same, columns[i].drop))
    shared = []
    # Columns go while even a name cut to FLEX_MIN would not fit; none go for a whole name alone.
    while droppable and needed(None) > width:
        i = droppable.pop(0)
        if i not in same and needed(FLEX_MIN) <= width:
            break
        shown.remove(i)
        if i in same:
            shared.append(f"{columns[i].header.lower()} {rows[0][i]}")
    widths = dict((i, natural[i]) for i in shown)
    flex = [i for i in shown if columns[i].kind == "flex"]
    if flex and needed(None) > width:
        widths[flex[0]] = max(len(ELLIPSIS) + 3, natural[flex[0]] - (needed(None) - width))
    lines = textwrap.wrap(f"(every row: {', '.join(shared)})", width) if shared else []
    for cells in [[c.header for c in columns], *rows]:
        parts = []
        for i in shown:
            text = cells[i] if len(cells[i]) <= widths[i] else cells[i][:widths[i] - len(ELLIPSIS)] + ELLIPSIS
            parts.append(text.rjust(widths[i]) if columns[i].right else text.ljust(widths[i]))
        lines.append((" " * GAP).join(parts).rstrip())
    return "\n".join(lines)


def _width() -> int:
    if "COLUMNS" not in os.environ and not sys.stdout.isatty():
        return UNCUT
    return shutil.get_terminal_size().columns


UNCUT = 1 << 20


# What identifies a row and how it ended stay whole; who and where go first when narrow.
JOBS = [Column("ID"), Column("NAME", "flex"), Column("CLUSTER", "drop", 3, shared=True),
        Column("USER", "drop", 1, shared=True), Column("OURS", "drop", 0, shared=True), Column("STATE"),
        Column("EXIT", right=True), Column("NODES", "drop", 4), Column("ELAPSED", "drop", 5, right=True),
        Column("SUBMITTED", "drop", 2)]
CLUSTERS = [Column("NAME", "flex"), Column("BACKEND", "drop", 1), Column("STATE"), Column("NODES", right=True),
            Column("GPUS", right=True), Column("AGE", "drop", 0, right=True)]
STUDIES = [Column("NAME", "flex"), Column("CLUSTER", "drop", 1, shared=True), Column("STATE"),
           Column("TRIALS", right=True), Column("BEST", "drop", 2), Column("SAMPLER", "drop", 0)]
