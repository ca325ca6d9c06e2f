"""``LivePlot``: a Bokeh plot of training scalars that grows while a job trains.

One line per tag (x = step, y = value); a tag selector and a log-y toggle beside the plot;
hovering shows tag, step and value. ``add(scalars)`` may be called from any thread (the
poller's, a reader's, the kernel's): it streams only the new points to the browser.

Drawing, the cap on points and keeping every view complete are ``LiveDocument``'s
(``widgets/live_document.py``); this module lays out the one chart.

Lines are keyed by (run, tag): a line is labelled ``tag``, or ``tag (run)`` for an event
file below the job's log dir. ``add`` drops points that are not newer, by (wall_time, step),
than the last one its line got, so passing the same scalars twice draws them once.
"""

from __future__ import annotations

import numpy as np
from bokeh.layouts import column, row
from bokeh.models import (CheckboxGroup, ColumnDataSource, CustomJS, Div, HoverTool, Legend, LegendItem,
                          LinearScale, LogScale, LogTicker, LogTickFormatter, Toggle)
from bokeh.palettes import Category10_10
from bokeh.plotting import figure

from .live_document import (STEP_DTYPE, VALUE_DTYPE, BOKEHJS_FILES, BOKEHJS_ROUTE, MIN_POINTS_PER_TAG, LiveDocument, Line,
                            bokehjs_loader, decimate, display_with_bokehjs)

__all__ = ["BOKEHJS_FILES", "BOKEHJS_ROUTE", "MIN_POINTS_PER_TAG", "LivePlot", "bokehjs_loader", "decimate",
           "display_with_bokehjs"]


class LivePlot(LiveDocument):
    """A live line plot of scalars, one line per tag; display it, then call ``add``."""

    def __init__(self, title: str = "", max_points_per_tag: int = 5000):
        self._title = title
        super().__init__(max_points_per_tag)

    def __repr__(self) -> str:
        title = self.figure.title.text if self.figure.title is not None else ""
        return f"<LivePlot {title!r}: {self.point_count}>"

    # -- building the document -------------------------------------------------------------

    def _build(self):
        fig = figure(title=self._title or None, height=340, sizing_mode="stretch_width", x_axis_label="step",
                     y_axis_label="value", tools="pan,box_zoom,wheel_zoom,reset,save", output_backend="canvas")
        fig.x_range.only_visible = fig.y_range.only_visible = True  # ranges follow the ticked tags
        fig.add_tools(HoverTool(tooltips=[("tag", "$name"), ("step", "@step{0,0}"), ("value", "@value{%.6g}")],
                                formatters={"@value": "printf"}, mode="vline"))
        self._legend = Legend(items=[], location="top_right", click_policy="none", background_fill_alpha=0.7,
                              label_text_font_size="9pt", spacing=0, padding=4)
        fig.add_layout(self._legend)
        self.tag_selector = CheckboxGroup(labels=[], active=[], width=180)
        self.tag_selector.js_on_change("active", CustomJS(args={"fig": fig, "selector": self.tag_selector}, code="""
            const shown = new Set(selector.active.map((i) => selector.labels[i]))
            for (const r of fig.renderers) {
              if (r.name != null) r.visible = shown.has(r.name)
            }"""))
        self.log_y = Toggle(label="log y", active=False, width=80)
        axis = fig.left[0]
        # Both scales, tickers and formatters live in the document, so the browser swaps them
        # without the kernel (which may be busy running another cell).
        self.log_y.js_on_change("active", CustomJS(args={
            "fig": fig, "axis": axis, "linear": [LinearScale(), axis.ticker, axis.formatter],
            "log": [LogScale(), LogTicker(), LogTickFormatter()]}, code="""
            const [scale, ticker, formatter] = cb_obj.active ? log : linear
            fig.y_range.scale_hint = cb_obj.active ? "log" : "auto"
            axis.setv({ticker, formatter})
            fig.y_scale = scale"""))
        self._from_view |= {(self.tag_selector.id, "active"), (self.log_y.id, "active"), (fig.id, "y_scale"),
                            (axis.id, "ticker"), (axis.id, "formatter"), (fig.y_range.id, "scale_hint")}
        side = column(Div(text="<b>tags</b>"), self.tag_selector, self.log_y, width=190)
        self.figure = fig
        return row(fig, side, sizing_mode="stretch_width")

    def _new_line(self, key: tuple[str, str]) -> Line:
        run, tag = key
        label = f"{tag} ({run})" if run else tag
        source = ColumnDataSource(data={"step": np.empty(0, STEP_DTYPE), "value": np.empty(0, VALUE_DTYPE)}, name=label)
        renderer = self.figure.line("step", "value", source=source, name=label, line_width=1.6,
                                    color=Category10_10[len(self._lines) % len(Category10_10)])
        self._from_view.add((renderer.id, "visible"))  # the tag selector's callback hides it
        self._legend.items = [*self._legend.items, LegendItem(label=label, renderers=[renderer])]
        selector = self.tag_selector
        selector.update(labels=[*selector.labels, label], active=[*selector.active, len(selector.labels)])
        self._lines[key] = Line(label, source, renderer)
        return self._lines[key]

