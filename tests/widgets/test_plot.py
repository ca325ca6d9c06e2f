"""LivePlot without a browser: its Bokeh document, the cap, and what it sends on its comm.

The comm is the wire between kernel and browser; a recording comm stands in for the
browser's end of it (tests/browser/ runs the real one)."""

from __future__ import annotations

import json
import math
import random
import threading
import time

import numpy as np
import pytest
from bokeh.document import Document
from bokeh.models import ColumnDataSource, HoverTool

from jupyter_gtc.metrics import Scalar
from jupyter_gtc.widgets.plot import LivePlot, bokehjs_loader, decimate
from tests.conftest import sleep_until

DOCUMENT_READY = {"event": "jsevent", "kind": "MessageSent", "msg_type": "bokeh_event",
                  "msg_data": {"type": "event", "name": "document_ready", "values": {"type": "map"}}}


def scalars(tag: str, steps, value=lambda step: 1.0 / (step + 1), run: str = "") -> list[Scalar]:
    return [Scalar(tag, step, 1_700_000_000.0 + step, value(step), run) for step in steps]


def source_lengths(plot: LivePlot) -> dict[str, int]:
    return {r.name: len(r.data_source.data["step"]) for r in plot.figure.renderers}


class Wire:
    """Records what the plot sends on its comm: ("state", render_bundle) or ("patch", ...)."""

    def __init__(self, plot: LivePlot):
        self.messages: list[tuple[str, object]] = []
        send = plot.comm.send

        def record(data=None, metadata=None, buffers=None):
            if data.get("method") == "update" and "render_bundle" in data.get("state", {}):
                self.messages.append(("state", data["state"]["render_bundle"]))
            elif data.get("method") == "custom" and data["content"].get("msg") == "patch":
                self.messages.append(("patch", data["content"].get("payload")))
            return send(data=data, metadata=metadata, buffers=buffers)

        plot.comm.send = record

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.messages]

    def last_state_points(self) -> dict[str, int]:
        bundle = json.loads(next(body for kind, body in reversed(self.messages) if kind == "state"))
        doc = Document.from_json(next(iter(bundle["docs_json"].values())))
        return {m.name: len(m.data["step"]) for m in doc.models if isinstance(m, ColumnDataSource)}


def test_sources_grow_while_a_thread_adds_points():
    plot = LivePlot("loss")
    stop = threading.Event()

    def feed():
        step = 0
        while not stop.is_set():
            plot.add(scalars("train/loss", [step]) + scalars("eval/loss", [step]))
            step += 1
            time.sleep(0.01)

    thread = threading.Thread(target=feed, daemon=True)
    thread.start()
    growth: list[int] = []

    def grew_twice() -> bool:  # the test thread only looks, as an idle kernel would
        growth.append(source_lengths(plot).get("train/loss", 0))
        return len(set(growth) - {0}) >= 3

    try:
        assert sleep_until(grew_twice, 60), growth
    finally:
        stop.set()
        thread.join(5)
    assert growth == sorted(growth), growth  # it only ever grew
    assert source_lengths(plot) == plot.point_count


def test_new_tags_get_new_lines_with_their_own_colour():
    plot = LivePlot()
    plot.add(scalars("train/loss", range(3)))
    assert [r.name for r in plot.figure.renderers] == ["train/loss"]
    plot.add(scalars("eval/loss", range(3)) + scalars("lr", range(2)) + scalars("loss", range(2), run="validation"))
    names = [r.name for r in plot.figure.renderers]
    assert names == ["train/loss", "eval/loss", "lr", "loss (validation)"]
    assert len({r.glyph.line_color for r in plot.figure.renderers}) == 4
    assert plot.tag_selector.labels == names and plot.tag_selector.active == [0, 1, 2, 3]
    assert [item.label["value"] for item in plot.figure.legend[0].items] == names
    assert plot.point_count == {"train/loss": 3, "eval/loss": 3, "lr": 2, "loss (validation)": 2}


def test_repr_shows_the_points_per_tag():
    plot = LivePlot()
    plot.add(scalars("loss", range(4)))
    assert repr(plot) == "<LivePlot '': {'loss': 4}>"
    assert "application/vnd.jupyter.widget-view+json" in plot._repr_mimebundle_()


def test_only_new_points_are_added():
    plot = LivePlot()
    first = scalars("loss", range(10))
    assert plot.add(first) == 10
    assert plot.add(first) == 0  # the same points again: nothing new
    assert plot.add(first + scalars("loss", range(10, 15))) == 5
    assert plot.point_count == {"loss": 15}


def attempt(tag: str, steps, began: float, value) -> list[Scalar]:
    """One attempt's points of ``tag``: written one a second from ``began``."""
    return [Scalar(tag, step, began + i, value(step)) for i, step in enumerate(steps)]


def test_a_resumed_attempt_replaces_the_steps_it_redid():
    """Killed after step 8 with a checkpoint at 5, the job redoes 6-8: the line keeps each step
    once, the new attempt's values from step 6 on, whether they come in the same call or later."""
    for together in (False, True):
        plot = LivePlot()
        first = attempt("loss", range(1, 9), 1_700_000_000.0, lambda step: 1.0)
        second = attempt("loss", range(6, 12), 1_700_000_100.0, lambda step: 2.0)
        if together:
            plot.add(first + second)
        else:
            plot.add(first)
            plot.add(second[:2])
            plot.add(second[2:])
        [source] = [r.data_source for r in plot.figure.renderers]
        assert list(source.data["step"]) == list(range(1, 12)), together
        assert list(source.data["value"]) == [1.0] * 5 + [2.0] * 6, together


def test_hover_shows_tag_step_and_value():
    plot = LivePlot()
    [hover] = [tool for tool in plot.figure.tools if isinstance(tool, HoverTool)]
    assert [name for name, _ in hover.tooltips] == ["tag", "step", "value"]
    assert dict(hover.tooltips)["tag"] == "$name"  # each line is named after its tag
    assert "@step" in dict(hover.tooltips)["step"] and "@value" in dict(hover.tooltips)["value"]


def test_a_million_points_stay_bounded_per_tag():
    cap = 5000
    plot = LivePlot("bulk", max_points_per_tag=cap)
    plot._sync_model(plot, dict(DOCUMENT_READY), [])  # shown: every batch is sent as a patch
    wire = Wire(plot)
    tags = ("train/loss", "eval/loss")
    total, batch = 1_000_000, 1000
    spike_step = 12_345  # a divergence early in training must survive every decimation
    largest = 0
    started = time.perf_counter()
    for first in range(0, total // len(tags), batch):
        steps = range(first, first + batch)
        batch_scalars = [Scalar(tag, step, 1e9 + step, 100.0 if step == spike_step else 1.0 / math.sqrt(step + 1))
                         for step in steps for tag in tags]
        plot.add(batch_scalars)
        largest = max(largest, *plot.point_count.values())
    elapsed = time.perf_counter() - started
    print(f"\n1,000,000 points streamed in {elapsed:.2f} s ({total / elapsed:,.0f} points/s) as "
          f"{wire.kinds().count('patch'):,} patch messages; kept {plot.point_count}")
    assert largest <= cap
    for renderer in plot.figure.renderers:
        data = renderer.data_source.data
        assert len(data["step"]) <= cap
        assert data["step"][0] == 0 and data["step"][-1] == total // len(tags) - 1  # covers the whole run
        assert data["value"].max() == 100.0  # the spike
        recent = np.diff(data["step"][-cap // 2:])
        assert (recent == 1).all()  # the newest half at full resolution
        gaps = np.diff(data["step"][: -cap // 2])
        assert gaps.max() < 4 * (total // len(tags)) / (cap // 8)  # the old part evenly spread


def test_decimate_keeps_extremes_in_order():
    rng = random.Random(7)
    steps = np.arange(10_000, dtype=np.float64)
    values = np.array([rng.random() for _ in steps], dtype=np.float32)
    values[777] = -5.0
    values[4321] = 9.0
    kept_steps, kept_values = decimate(steps, values, cap=1000)
    assert len(kept_steps) <= 3 * 1000 // 4 + 1
    assert (np.diff(kept_steps) > 0).all()  # original order
    assert -5.0 in kept_values and 9.0 in kept_values
    assert (kept_steps[-500:] == steps[-500:]).all()


def test_saved_state_of_ten_thousand_points_is_small():
    plot = LivePlot("noisy")
    rng = random.Random(1)
    for tag in ("train/loss", "eval/loss"):
        plot.add(scalars(tag, range(5000), value=lambda step: 2.0 / math.sqrt(step + 1) + rng.gauss(0, 0.05)))
    assert sum(plot.point_count.values()) == 10_000
    size = len(json.dumps(plot.get_state()))
    print(f"\nwidget state with 10,000 points: {size:,} bytes")
    assert size < 200_000  # binary arrays, gzip'd by Bokeh; INLINE BokehJS alone is ~8 MB


def test_the_state_holds_every_point_not_the_document_at_construction():
    plot = LivePlot()
    plot.add(scalars("loss", range(1234)))
    wire = Wire(plot)
    plot.send_state("render_bundle")
    assert wire.last_state_points() == {"loss": 1234}


def test_until_a_view_is_ready_changes_go_as_whole_states_then_as_patches():
    plot = LivePlot()
    wire = Wire(plot)
    # Nobody shows it yet, so a patch would be lost. Two adds in one throttle window (here:
    # made while the plot's lock is held, so its flush timer cannot send in between, as
    # when a busy thread adds in quick succession) go as one whole state, once.
    with plot._lock:
        plot.add(scalars("loss", range(100)))
        plot.add(scalars("loss", range(100, 150)))
    assert sleep_until(lambda: wire.messages, 30)
    assert wire.kinds() == ["state"]  # throttled: one state for both adds, no patch
    assert wire.last_state_points() == {"loss": 150}

    plot._sync_model(plot, dict(DOCUMENT_READY), [])  # the browser rendered it
    plot.add(scalars("loss", range(150, 160)))
    assert wire.kinds()[-1] == "patch"
    assert wire.kinds().count("state") == 1  # nothing changed between the state and the view


def test_a_view_that_rendered_an_old_state_gets_the_current_one():
    plot = LivePlot()
    wire = Wire(plot)
    plot.refresh()
    plot.add(scalars("loss", range(40)))  # after the state the new view is being built from
    plot._sync_model(plot, dict(DOCUMENT_READY), [])
    assert wire.kinds()[-1] == "state" and wire.last_state_points() == {"loss": 40}
    plot.add(scalars("loss", range(40, 45)))
    assert wire.kinds()[-1] == "patch"


def test_a_reload_starts_the_handshake_again():
    plot = LivePlot()
    wire = Wire(plot)
    plot._sync_model(plot, dict(DOCUMENT_READY), [])
    plot.add(scalars("loss", range(10)))
    assert wire.kinds()[-1] == "patch"
    state = plot.get_state()  # what a reloaded page asks for
    assert json.loads(state["render_bundle"])["docs_json"]
    patches = wire.kinds().count("patch")
    plot.add(scalars("loss", range(10, 20)))  # the new page's view may not exist yet
    assert sleep_until(lambda: wire.kinds()[-1] == "state", 30), wire.kinds()
    assert wire.kinds().count("patch") == patches
    assert wire.last_state_points() == {"loss": 20}


def test_auto_range_updates_from_the_browser_stay_out_of_the_document():
    plot = LivePlot()
    x_range = plot.figure.x_range
    assert math.isnan(x_range.start)  # unset: computed in the browser from the data
    plot._sync_model(plot, {"event": "jsevent", "kind": "ModelChanged", "model": {"id": x_range.id},
                            "attr": "start", "new": 3.5}, [])
    assert math.isnan(x_range.start)  # a view built later must still follow the data


def test_browser_changes_reach_python():
    plot = LivePlot()
    plot.add(scalars("a", range(3)) + scalars("b", range(3)))
    selector = plot.tag_selector
    plot._sync_model(plot, {"event": "jsevent", "kind": "ModelChanged", "model": {"id": selector.id},
                            "attr": "active", "new": [1]}, [])
    assert selector.active == [1]


def test_the_loader_uses_our_route_never_a_cdn():
    bundle = bokehjs_loader()
    js = bundle["application/vnd.bokehjs_load.v0+json"]
    assert bundle["application/javascript"] == js
    assert "gtc/static/bokeh/js/bokeh.min.js?v=" in js and "bokeh-widgets.min.js" in js
    assert "cdn" not in js.lower() and len(js) < 3000


def test_too_small_a_cap_is_refused():
    with pytest.raises(ValueError, match="max_points_per_tag"):
        LivePlot(max_points_per_tag=10)


# -- job.plot()'s grid: a chart per tag -----------------------------------------------------

def figures_by_tag(widget) -> dict[str, set[str]]:
    """Each Bokeh figure in the widget's document (by its id), and the tags its lines draw."""
    from bokeh.models import GlyphRenderer
    from bokeh.plotting import figure

    drawn: dict[str, set[str]] = {}
    for model in widget._model.references():
        if isinstance(model, figure):
            drawn[model.id] = {r.data_source.name.split(" (")[0] for r in model.renderers
                               if isinstance(r, GlyphRenderer)}
    return drawn


def test_the_grid_draws_each_tag_in_its_own_chart_on_its_own_scale():
    """perf/tokens_per_s (~8,000) beside loss, lr and grad_norm: on one axis the last three are
    a line at 0. Each gets a chart whose y range is computed from its own values only."""
    from bokeh.models import DataRange1d

    from jupyter_gtc.widgets.tag_grid import TagGrid

    scales = {"train/loss": 2.0, "train/lr": 3e-4, "train/grad_norm": 0.8, "perf/tokens_per_s": 8000.0}
    grid = TagGrid("job 1 scales")
    for tag, scale in scales.items():
        grid.add(scalars(tag, range(50), value=lambda step, scale=scale: scale * (1 + 0.1 * math.sin(step))))
    drawn = figures_by_tag(grid)
    assert sorted(tags for figure_tags in drawn.values() for tags in figure_tags) == sorted(scales)
    assert all(len(tags) == 1 for tags in drawn.values()), drawn  # one tag a chart, never two
    assert list(grid.charts) == sorted(scales)  # tags under one prefix side by side
    for tag, chart in grid.charts.items():
        values = np.concatenate([r.data_source.data["value"] for r in chart.renderers])
        assert values.min() >= 0.9 * scales[tag] - 1e-6 and values.max() <= 1.1 * scales[tag] + 1e-6, tag
        # Auto-ranged from this chart's own lines (no other chart's renderers, no fixed bounds).
        assert isinstance(chart.y_range, DataRange1d) and not chart.y_range.renderers, tag
        assert math.isnan(chart.y_range.start) and math.isnan(chart.y_range.end)
        assert chart.title.text == tag
    cells = {(r, c) for _, r, c in grid.grid.children}
    assert len(cells) == 4 and max(c for _, c in cells) == 1  # 2 x 2


def test_a_tag_that_comes_later_gets_its_chart_then_and_updates_stream():
    from jupyter_gtc.widgets.tag_grid import TagGrid

    grid = TagGrid()
    grid.add(scalars("train/loss", range(10)))
    grid._sync_model(grid, dict(DOCUMENT_READY), [])  # shown: changes go as patches
    wire = Wire(grid)
    first_chart = grid.charts["train/loss"]
    grid.add(scalars("train/loss", range(10, 20)))
    assert set(wire.kinds()) == {"patch"} and event_kinds(wire) == ["ColumnsStreamed"]  # no new models
    assert grid.charts["train/loss"] is first_chart
    grid.add(scalars("eval/loss", range(5)) + scalars("train/loss", range(20, 25), run="worker-1"))
    assert list(grid.charts) == ["eval/loss", "train/loss"] and grid.charts["train/loss"] is first_chart
    assert [r.name for r in first_chart.renderers] == ["train/loss", "train/loss (worker-1)"]
    assert first_chart.legend[0].visible and [i.label["value"] for i in first_chart.legend[0].items] == [
        "(log dir)", "worker-1"]
    assert "state" not in wire.kinds()
    assert grid.point_count == {"train/loss": 20, "eval/loss": 5, "train/loss (worker-1)": 5}


def event_kinds(wire: Wire) -> list[str]:
    """The kinds of document events in the patches sent (a patch is sent as several messages)."""
    kinds = []
    for kind, payload in wire.messages:
        if kind == "patch" and isinstance(payload, str) and payload.startswith('{"events"'):
            kinds += [event["kind"] for event in json.loads(payload)["events"]]
    return kinds


def test_a_requeued_jobs_resume_point_is_marked_on_every_chart():
    """Killed after step 8 with a checkpoint at 5, the job redoes 6 on: every chart has a
    vertical line at step 6 with a label, also a chart whose tag comes after the requeue."""
    from bokeh.models import Label, Span

    from jupyter_gtc.widgets.tag_grid import TagGrid

    grid = TagGrid()
    began, again = 1_700_000_000.0, 1_700_000_100.0
    grid.add(attempt("loss", range(1, 9), began, lambda step: 1.0) + attempt("lr", [4, 8], began + 4, lambda step: 0.1))
    assert grid.resumes == [] and not any(isinstance(m, Span) for m in grid._model.references())
    grid.add(attempt("lr", [8, 12], again, lambda step: 0.1))  # the sparse tag first: it resumed "at 8"
    grid.add(attempt("loss", range(6, 15), again, lambda step: 2.0))
    grid.add(attempt("grad_norm", range(6, 15), again + 0.5, lambda step: 3.0))
    for tag, chart in grid.charts.items():
        [span] = [m for m in chart.center if isinstance(m, Span)]
        [label] = [m for m in chart.center if isinstance(m, Label)]
        assert span.location == 6 and span.dimension == "height" and label.x == 6, tag
        assert label.text == "requeued: attempt 2 from step 6", tag
    [source] = [r.data_source for r in grid.charts["loss"].renderers]
    assert list(source.data["step"]) == list(range(1, 15))  # each step once, as before


def test_the_grid_says_what_the_charts_cannot():
    from bokeh.models import Div

    from jupyter_gtc.widgets.tag_grid import TagGrid

    grid = TagGrid()
    grid.set_status("FAILED (exit code 1): ModuleNotFoundError: No module named 'foo'")
    [div] = [m for m in grid._model.references() if isinstance(m, Div) and m.visible and "FAILED" in m.text]
    assert "No module named &#x27;foo&#x27;" in div.text  # escaped: a log line is not HTML
    assert grid.status == "FAILED (exit code 1): ModuleNotFoundError: No module named 'foo'"
    grid.set_status("")
    assert not div.visible


def test_a_flat_line_is_drawn_around_its_value_not_on_a_span_of_2():
    """A constant learning rate of 3e-4: Bokeh's default range for a flat line is 2 wide, which
    draws it at "0"; its chart spans a fifth of the value instead."""
    from jupyter_gtc.widgets.tag_grid import TagGrid

    grid = TagGrid()
    grid.add(scalars("train/lr", range(5), value=lambda step: 3e-4) + scalars("train/zero", range(5), value=lambda s: 0.0))
    assert grid.charts["train/lr"].y_range.default_span == pytest.approx(6e-5)
    assert grid.charts["train/zero"].y_range.default_span == 2.0
