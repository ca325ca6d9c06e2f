"""The study panel's best-so-far chart (a LivePlot) in a page, without a cluster or a browser:
a view (tests/widgets/bokeh_view.py) that answers each patch as BokehJS does, with the
echoes of our own changes. tests/tuning/test_front_ends.py runs it on a real study."""

from __future__ import annotations

import pytest

from jupyter_gtc.metrics import Scalar
from jupyter_gtc.widgets.plot import LivePlot
from tests.widgets.bokeh_view import BokehView

LOSSES = [0.0195, 0.118, 0.0207, 0.205]  # four finished trials, in the order they finished


def trial_points(first: int, last: int) -> list[Scalar]:
    """What the panel adds for finished trials ``first``..``last`` (1-based): best so far and the trial's value."""
    out = []
    for k in range(first, last + 1):
        best = min(LOSSES[:k])
        out += [Scalar("best loss", k, float(k), best), Scalar("trial loss", k, float(k), LOSSES[k - 1])]
    return out


def kernel_idles(view: BokehView) -> None:
    """The kernel between cells: it hands the page's messages to the widget."""
    while not view.inbox.empty():
        view.deliver(view.inbox.get())


def test_lines_that_appear_after_the_page_shows_the_chart_get_every_later_point():
    plot = LivePlot("best loss so far")
    view = BokehView(plot)
    kernel_idles(view)  # document_ready: patches from now on
    plot.add(trial_points(1, 2))  # both lines are made by this one add, as patches
    kernel_idles(view)  # ... whose echoes come back after both
    plot.add(trial_points(3, 4))
    kernel_idles(view)
    expected = {"best loss": [0.0195] * 4, "trial loss": LOSSES}
    for name, values in expected.items():
        assert view.sources()[name]["step"] == [1.0, 2.0, 3.0, 4.0]
        assert view.sources()[name]["value"] == pytest.approx(values, rel=1e-6)  # float32 on the wire
    # The kernel's document still holds both lines, each point once (an echoed stream is not applied).
    assert {r.name: len(r.data_source.data["step"]) for r in plot.figure.renderers} == {"best loss": 4, "trial loss": 4}
    assert plot.tag_selector.labels == ["best loss", "trial loss"] and plot.tag_selector.active == [0, 1]
    assert not view.errors


def test_a_late_echo_of_the_tags_ticked_does_not_untick_a_newer_line():
    plot = LivePlot()
    view = BokehView(plot)
    kernel_idles(view)
    plot.add([Scalar("a", 1, 1.0, 1.0)])
    plot.add([Scalar("b", 1, 1.0, 1.0)])
    selector = plot.tag_selector
    # The kernel reads the page's messages up to the echo of "a" ticked alone ...
    while (message := view.inbox.get(timeout=5)) != {"kind": "ModelChanged", "model": {"id": selector.id},
                                                       "attr": "active", "new": [0]}:
        view.deliver(message)
    view.deliver(message)
    plot.add([Scalar("c", 1, 1.0, 1.0)])  # ... when a third line comes: "b" stays ticked
    kernel_idles(view)
    assert selector.active == [0, 1, 2] and len(plot.figure.renderers) == 3 and not view.errors
    [shown] = [m for m in view.doc.models if m.id == selector.id]
    assert shown.labels == ["a", "b", "c"] and shown.active == [0, 1, 2]


def test_what_the_user_changes_in_the_page_is_kept():
    plot = LivePlot()
    view = BokehView(plot)
    kernel_idles(view)
    plot.add(trial_points(1, 1))
    selector = plot.tag_selector
    # The user unticks "best loss" in the page (after the echoes of the lines being made).
    view.inbox.put({"kind": "ModelChanged", "model": {"id": selector.id}, "attr": "active", "new": [1]})
    kernel_idles(view)
    assert selector.active == [1]  # kept: a reload shows it so
    # Nothing else of the page's goes into the document: its lines and data are the kernel's.
    view.deliver({"kind": "ModelChanged", "model": {"id": plot.figure.id}, "attr": "renderers", "new": []})
    assert len(plot.figure.renderers) == 2 and not view.errors
