"""The shipped notebooks' text renders as written: no sentence split by a line that Markdown
reads as a list item.

A wrapped sentence whose next line happens to start with ``+ 1 s:``, ``- 2`` or ``3.`` becomes
a list in JupyterLab (CommonMark lets a bullet list interrupt a paragraph): the resilience
notebook's introduction rendered "Slurm alone holds it `cred_expire`" and then a list item
"1 s: 11 s here, ...". Each markdown cell is rendered with markdown-it (CommonMark, as
JupyterLab's renderer is) and a list that starts inside a paragraph, right after a line
that does not announce it (a colon), is refused.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

NOTEBOOKS = sorted(Path(__file__).resolve().parents[1].glob("notebooks/**/*.ipynb"))


def accidental_lists(text: str) -> list[str]:
    """The lines of ``text`` that begin a list which cuts a paragraph short, each with the
    line it cut."""
    lines = text.splitlines()
    tokens = MarkdownIt("commonmark").parse(text)
    found = []
    # markdown-it gives a paragraph's map on its open token: [first line, line after the last]
    opens = [(t.type, t.map) for t in tokens if t.map and t.level == 0]
    for (kind, span), (next_kind, next_span) in zip(opens, opens[1:]):
        interrupted = kind == "paragraph_open" and next_kind in ("bullet_list_open", "ordered_list_open")
        if interrupted and span[1] == next_span[0] and not lines[span[1] - 1].rstrip().endswith(":"):
            found.append(f"{lines[span[1] - 1]!r} then {lines[next_span[0]]!r}")
    return found


def test_the_check_finds_the_resilience_notebooks_old_introduction():
    old = ("Slurm requeues the job, lets the job start again at once (Slurm alone holds it `cred_expire`\n"
           "+ 1 s: 11 s here, 121 s by default), and restarts the node.")
    assert accidental_lists(old) == ["'Slurm requeues the job, lets the job start again at once (Slurm alone "
                                     "holds it `cred_expire`' then '+ 1 s: 11 s here, 121 s by default), and "
                                     "restarts the node.'"]
    assert accidental_lists("Steps:\n- one\n- two\n") == []  # announced: meant
    assert accidental_lists("A paragraph.\n\n- a list after a blank line\n") == []


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: str(p.relative_to(p.parents[1])))
def test_no_sentence_is_split_into_a_list(notebook):
    cells = json.loads(notebook.read_text())["cells"]
    found = [f"cell {i}: {line}" for i, cell in enumerate(cells) if cell["cell_type"] == "markdown"
             for line in accidental_lists("".join(cell["source"]))]
    assert not found, "\n".join(found)
