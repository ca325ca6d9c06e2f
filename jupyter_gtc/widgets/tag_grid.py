"""``TagGrid``: a job's scalars as a grid of small charts, one per tag, each with its own y
range, as TensorBoard draws them (``job.plot()``).

One axis for every tag draws ``perf/tokens_per_s`` (~8,000) and flattens loss, lr and
grad_norm to a line at 0; a chart per tag shows each on its own scale. Charts are in order of
tag name, so tags under one prefix (``train/``, ``perf/``) sit together; each chart has a
line per run (an event file's folder below the log dir), in the same colour in every chart.
The charts share their x range (steps): zooming one zooms all.

A chart is made when its tag's first point comes and added to the grid then; after that a
new point is streamed into its line (``LiveDocument``), so an update costs the same however
many charts there are. Where a requeued attempt resumed (``metrics/resumed.py``), every
chart has a dashed vertical line and a label at that step.

Above the grid, a line says what the charts cannot: why there is nothing yet ("waiting for
the first metrics: job is PENDING"), or why the job failed (its failure line).
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np
from bokeh.layouts import column, row
from bokeh.models import (ColumnDataSource, CustomJS, DataRange1d, Div, GridBox, HoverTool, Label, Legend,
                          LegendItem, LogScale, LogTicker, LogTickFormatter, Node, Span, Toggle)
from bokeh.palettes import Category10_10
from bokeh.plotting import figure

from ..metrics.resumed import Resume, ResumeFinder
from .live_document import STEP_DTYPE, VALUE_DTYPE, LiveDocument, Line

if TYPE_CHECKING:
    from ..metrics import Scalar

CHART_HEIGHT = 220
MARKER_COLOR = "#7f7f7f"


class TagGrid(LiveDocument):
    """A live chart per tag, in a grid; display it, then call ``add``."""

    def __init__(self, title: str = "", max_points_per_tag: int = 5000):
        self._title = title
        self._charts: dict[str, figure] = {}
        self._runs: list[str] = []  # in order of their first point: a run's colour in every chart
        self._resumes = ResumeFinder()
        self._marked: list[Resume] = []
        self._spanned: set[str] = set()  # charts whose flat-line span is set
        self._markers: dict[str, list[tuple[Span, Label]]] = {}  # by tag: each resume's line and label
        super().__init__(max_points_per_tag)

    def add(self, scalars: Iterable[Scalar]) -> int:
        scalars = list(scalars)
        with self._lock:
            charts = len(self._charts)
            added = super().add(scalars)
            if len(self._charts) > charts:
                self._span_flat_lines()
            if self._resumes.add(scalars):
                self._mark_resumes()
            return added

    @property
    def charts(self) -> dict[str, figure]:
        """Each tag's chart, by tag, in the grid's order."""
        with self._lock:
            return dict(sorted(self._charts.items()))

    @property
    def resumes(self) -> list[Resume]:
        """The resume points marked on the charts."""
        with self._lock:
            return list(self._marked)

    @property
    def status(self) -> str:
        """The line above the charts ("" when there is nothing to say)."""
        return html.unescape(self._status.text)

    def set_status(self, text: str) -> None:
        """Say ``text`` above the charts (why there are none, why the job failed); "" hides it."""
        with self._lock:
            escaped = html.escape(text)
            if self._status.text != escaped:
                self._status.update(text=escaped, visible=bool(text))

    def __repr__(self) -> str:
        return f"<TagGrid {self._title!r}: {self.point_count}>"

    # -- building the document -------------------------------------------------------------

    def _build(self):
        self._x_range = DataRange1d()  # shared: zooming one chart's steps zooms every chart's
        self._status = Div(text="", visible=False, styles={"color": "var(--jp-ui-font-color1, #333)"},
                           sizing_mode="stretch_width")
        self.log_y = Toggle(label="log y", active=False, width=80)
        self._from_view.add((self.log_y.id, "active"))
        self.grid = GridBox(children=[], sizing_mode="stretch_width", spacing=8)
        heading = Div(text=f"<b>{html.escape(self._title)}</b>" if self._title else "")
        return column(row(heading, self._status, self.log_y, sizing_mode="stretch_width"), self.grid,
                      sizing_mode="stretch_width")

    def _new_chart(self, tag: str) -> figure:
        fig = figure(title=tag, height=CHART_HEIGHT, sizing_mode="stretch_width", x_range=self._x_range,
                     x_axis_label="step", tools="pan,box_zoom,wheel_zoom,reset,save", output_backend="canvas",
                     name=tag)
        fig.toolbar.autohide = True
        fig.add_tools(HoverTool(tooltips=[("tag", "$name"), ("step", "@step{0,0}"), ("value", "@value{%.6g}")],
                                formatters={"@value": "printf"}, mode="vline"))
        fig.add_layout(Legend(items=[], location="top_right", background_fill_alpha=0.7, label_text_font_size="8pt",
                              spacing=0, padding=2, visible=False))
        self._add_log_toggle(fig)
        self._charts[tag] = fig
        self._markers[tag] = []
        for resume in self._marked:
            self._add_marker(tag, resume)
        charts = [self._charts[t] for t in sorted(self._charts)]
        cols = 1 if len(charts) == 1 else 2 if len(charts) <= 4 else 3
        self.grid.children = [(chart, i // cols, i % cols) for i, chart in enumerate(charts)]
        return fig

    def _add_log_toggle(self, fig: figure) -> None:
        """The log-y toggle swaps this chart's scale, ticker and formatter in the browser (the
        kernel may be busy running another cell); a chart made while it is on starts on log."""
        axis = fig.left[0]
        linear = [fig.y_scale, axis.ticker, axis.formatter]
        log = [LogScale(), LogTicker(), LogTickFormatter()]
        self.log_y.js_on_change("active", CustomJS(args={"fig": fig, "axis": axis, "linear": linear, "log": log},
                                                   code="""
            const [scale, ticker, formatter] = cb_obj.active ? log : linear
            fig.y_range.scale_hint = cb_obj.active ? "log" : "auto"
            axis.setv({ticker, formatter})
            fig.y_scale = scale"""))
        if self.log_y.active:
            fig.y_range.scale_hint = "log"
            axis.update(ticker=log[1], formatter=log[2])
            fig.y_scale = log[0]
        self._from_view |= {(fig.id, "y_scale"), (axis.id, "ticker"), (axis.id, "formatter"),
                            (fig.y_range.id, "scale_hint")}

    def _new_line(self, key: tuple[str, str]) -> Line:
        run, tag = key
        fig = self._charts.get(tag) or self._new_chart(tag)
        if run not in self._runs:
            self._runs.append(run)
        label = f"{tag} ({run})" if run else tag
        source = ColumnDataSource(data={"step": np.empty(0, STEP_DTYPE), "value": np.empty(0, VALUE_DTYPE)},
                                  name=label)
        renderer = fig.line("step", "value", source=source, name=label, line_width=1.6,
                            color=Category10_10[self._runs.index(run) % len(Category10_10)])
        legend = fig.legend[0]
        legend.items = [*legend.items, LegendItem(label=run or "(log dir)", renderers=[renderer])]
        if len(legend.items) > 1:  # a lone line needs no key: the chart's title names it
            legend.visible = True
        self._lines[key] = Line(label, source, renderer)
        return self._lines[key]

    def _span_flat_lines(self) -> None:
        """Bokeh draws a flat line (a constant learning rate) on a range 2 wide around it,
        which puts 3e-4 at "0" again: a new chart's range spans a fifth of its first value."""
        for (_, tag), line in self._lines.items():
            fig = self._charts[tag]
            if tag not in self._spanned and len(line.values):
                first = abs(float(line.values[0]))
                fig.y_range.default_span = first * 0.2 if np.isfinite(first) and first > 0 else 2.0
                self._spanned.add(tag)

    # -- resume markers --------------------------------------------------------------------

    def _mark_resumes(self) -> None:
        resumes = self._resumes.resumes
        for i, resume in enumerate(resumes):
            if i < len(self._marked):
                if self._marked[i] != resume:  # a sparser tag came first: a lower step now
                    for markers in self._markers.values():
                        span, label = markers[i]
                        span.location = label.x = resume.step
                        label.text = _marker_text(resume)
            else:
                for tag in self._charts:
                    self._add_marker(tag, resume)
        self._marked = resumes

    def _add_marker(self, tag: str, resume: Resume) -> None:
        fig = self._charts[tag]
        span = Span(location=resume.step, dimension="height", line_color=MARKER_COLOR, line_dash="dashed",
                    line_width=1)
        label = Label(x=resume.step, y=Node(target="frame", symbol="top"), y_units="screen", x_offset=3,
                      anchor="top_left", text=_marker_text(resume), text_font_size="8pt", text_color=MARKER_COLOR)
        fig.add_layout(span)
        fig.add_layout(label)
        self._markers[tag].append((span, label))


def _marker_text(resume: Resume) -> str:
    return f"requeued: attempt {resume.attempt} from step {resume.step}"
