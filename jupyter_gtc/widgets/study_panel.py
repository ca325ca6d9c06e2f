"""The live panel of a tuning study: its state and counts, the best trial so far, a table of
trials (state, parameters, latest and final metric, stopped early or not), a best-so-far
curve and a parallel-coordinates plot (Bokeh), and Stop study / Stop trial buttons.

The panel asks nothing itself: it subscribes to the study (``study.subscribe``), whose
driver publishes a snapshot after each change in the driving process, and whose feed
re-reads the storage once a second in any other process. Rendering only.
"""

from __future__ import annotations

import html
import math
import threading
from typing import Any

import ipywidgets as w
from jupyter_bokeh import BokehModel

from .. import api
from ..exceptions import GtcError
from ..metrics import Scalar
from .plot import LivePlot, display_with_bokehjs

_STATE_COLOURS = {"RUNNING": "#0969da", "COMPLETE": "#1a7f37", "SUCCEEDED": "#1a7f37", "PRUNED": "#9a6700",
                  "STOPPING": "#9a6700", "STOPPED": "#9a6700"}
_FAILURE_COLOUR = "#cf222e"
MAX_ROWS = 200  # the table shows the newest trials beyond this


class StudyPanel(w.VBox):
    """A live view of ``study``; displaying an ``api.Study`` in a notebook shows one."""

    def __init__(self, study: api.Study):
        spec = study.spec
        self.study = study
        self.spec = spec
        self.title_html = w.HTML(
            f"<b>study {html.escape(study.name)}</b> &nbsp;<span style='color:#57606a'>on "
            f"{html.escape(study.cluster)} &middot; {html.escape(spec.metric.metric_id)} "
            f"({spec.metric.direction}) &middot; {html.escape(spec.algorithm)}</span>"
            # which sampler runs the algorithm, and why (bayesian is a GP or TPE, by the space);
            # a study on Vertex AI has none of ours
            + (f"<br><span style='color:#57606a'>{html.escape(study.sampler)}</span>"
               if getattr(study, "sampler", "") else ""))
        self.state_label = w.Label()
        self.counts_label = w.Label()
        self.best_html = w.HTML()
        self.reason_html = w.HTML()
        self.stop_button = w.Button(description="Stop study", icon="stop", button_style="danger",
                                    tooltip="cancel the running trials and end the study",
                                    layout=w.Layout(width="auto"))
        self.trial_picker = w.Dropdown(options=[], description="", layout=w.Layout(width="9em"))
        self.stop_trial_button = w.Button(description="Stop trial", icon="stop", tooltip="cancel this trial's job; "
                                          "it is recorded as stopped early", layout=w.Layout(width="auto"))
        self.table_html = w.HTML()
        self.best_plot = LivePlot(title=f"best {spec.metric.metric_id} so far", max_points_per_tag=10_000)
        self.best_plot.figure.xaxis.axis_label = "completed trials"
        self.coords_box = w.VBox()
        fields = w.HBox([_field("state", self.state_label), _field("trials", self.counts_label), self.stop_button,
                         self.trial_picker, self.stop_trial_button], layout=w.Layout(align_items="center"))
        super().__init__([self.title_html, fields, self.reason_html, self.best_html, self.best_plot,
                          self.coords_box, self.table_html])

        self._lock = threading.Lock()  # the driver's thread and a button click may update at once
        self._plotted = 0                # completed trials already on the best-so-far plot
        self._coords_key: tuple = ()     # what the parallel-coordinates plot shows now
        self.snapshot = None
        self.stop_button.on_click(self._stop_study)
        self.stop_trial_button.on_click(self._stop_trial)
        self._unsubscribe = None
        unsubscribe = study.subscribe(self.update)  # shows the study at once, then each change
        with self._lock:
            if self.snapshot.finished and not self.snapshot.driven:
                unsubscribe()  # an ended study (from an earlier session): nothing will change
            else:
                self._unsubscribe = unsubscribe

    @property
    def following(self) -> bool:
        return self._unsubscribe is not None

    def update(self, snapshot) -> None:
        """Show ``snapshot`` (a ``StudySnapshot``)."""
        with self._lock:
            self.snapshot = snapshot
            self._show_fields(snapshot)
            self._show_best(snapshot)
            self._show_table(snapshot)
            self._show_coords(snapshot)
            if snapshot.finished and not snapshot.driven and self._unsubscribe is not None:
                self._unsubscribe()
                self._unsubscribe = None
            if snapshot.finished:  # nothing left to stop: the controls go
                self.stop_button.disabled = self.stop_trial_button.disabled = True
                for control in (self.stop_button, self.trial_picker, self.stop_trial_button):
                    control.layout.display = "none"

    def close(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        for widget in (self.best_plot, *self.coords_box.children):
            widget.close()
        super().close()

    def _ipython_display_(self, **kwargs) -> None:
        display_with_bokehjs(self, **kwargs)  # BokehJS first: the panel holds Bokeh plots

    def __repr__(self) -> str:
        return repr(self.study)

    # -- rendering ------------------------------------------------------------------------

    def _show_fields(self, snap) -> None:
        state = snap.state if snap.driven or snap.finished else f"{snap.state} (no driver: resume it)"
        self.state_label.value = state
        self.state_label.style.text_color = _STATE_COLOURS.get(snap.state, _FAILURE_COLOUR)
        c = snap.counts
        self.counts_label.value = (f"{len(snap.trials)}/{snap.max_trials}: {c['RUNNING']} running, "
                                   f"{c['COMPLETE']} complete, {c['PRUNED']} stopped early, {c['FAIL']} failed")
        self.reason_html.value = (f"<span style='color:#57606a'>{html.escape(snap.reason)}</span>"
                                  if snap.reason else "")
        running = [t.trial_id for t in snap.trials if t.state == "RUNNING"]
        options = [(f"trial {t}", t) for t in running]
        picker = self.trial_picker
        if list(picker.options) != options:
            chosen = picker.value
            picker.options = options
            # Chosen here: ipywidgets selects nothing when options reach an empty dropdown (the
            # panel of a study whose trials have not started), and the first one when they
            # change; the user's pick stays while that trial runs.
            picker.index = running.index(chosen) if chosen in running else (0 if running else None)
        self.stop_trial_button.disabled = not running

    def _show_best(self, snap) -> None:
        best = snap.best
        if best is None:
            self.best_html.value = "<span style='color:#57606a'>no completed trial yet</span>"
        else:
            params = ", ".join(f"{html.escape(k)}={html.escape(_short(v))}" for k, v in best.params.items())
            self.best_html.value = (f"best: <b>trial {html.escape(best.trial_id)}</b> &nbsp;{html.escape(snap.metric)}"
                                    f" = <b>{best.value:.6g}</b> &nbsp;<span style='color:#57606a'>{params}</span>")
        curve = snap.best_so_far()
        new = curve[self._plotted:]
        if new:
            scalars = []
            for k, best_value, value in new:
                scalars.append(Scalar(f"best {snap.metric}", k, float(k), best_value))
                scalars.append(Scalar(f"trial {snap.metric}", k, float(k), value))
            self.best_plot.add(scalars)
            self._plotted = len(curve)

    def _show_table(self, snap) -> None:
        names = list(dict.fromkeys(p.parameter_id for p in self.spec.parameters()))
        head = "".join(f"<th>{html.escape(c)}</th>" for c in
                       ["trial", "state", *names, "latest (step)", snap.metric, "stopped early", "job"])
        rows = []
        for t in snap.trials[-MAX_ROWS:]:
            colour = _STATE_COLOURS.get(t.state, _FAILURE_COLOUR)
            latest = "" if t.latest is None else f"{t.latest:.6g} ({t.step})"
            value = "" if t.value is None or t.state != "COMPLETE" else f"{t.value:.6g}"
            early = "yes" if t.stopped_early else ""
            reason = f" title='{html.escape(t.reason, quote=True)}'" if t.reason else ""
            cells = [t.trial_id, f"<span style='color:{colour}'{reason}>{t.state}</span>",
                     *(html.escape(_short(t.params[n])) if n in t.params else "" for n in names),
                     latest, value, f"<span{reason}>{early}</span>", html.escape(t.job_id or "")]
            rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
            if t.state == "FAIL" and t.reason:  # why, in words under its row: its log's first error line
                rows.append(f"<tr class='gtc-trial-failure'><td></td><td colspan='{len(cells) - 1}' "
                            f"style='color:{_FAILURE_COLOUR}; text-align:left; white-space:pre-wrap'>"
                            f"{html.escape(t.reason)}</td></tr>")
        self.table_html.value = (
            "<div style='max-height:22em; overflow:auto'><table style='font-size:90%'><thead><tr>"
            f"{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>")

    def _show_coords(self, snap) -> None:
        done = [t for t in snap.trials if t.state in ("COMPLETE", "PRUNED") and t.value is not None]
        key = tuple((t.number, t.state) for t in done)
        if key == self._coords_key or len(done) < 2:
            return
        self._coords_key = key
        old = self.coords_box.children
        self.coords_box.children = [_Figure(parallel_coordinates(done, self.spec, snap.metric, snap.direction))]
        for widget in old:
            widget.close()

    # -- buttons ------------------------------------------------------------------------

    def _stop_study(self, _button) -> None:
        self.stop_button.disabled = True
        # In a thread: stopping waits for the driver's turn, and a click must not block the kernel.
        threading.Thread(target=self._quietly, args=(self.study.stop,), daemon=True).start()

    def _stop_trial(self, _button) -> None:
        trial = self.trial_picker.value
        if trial is not None:
            self._quietly(lambda: self.study.stop_trial(trial))

    def _quietly(self, action) -> None:
        try:
            action()
        except GtcError as e:
            self.reason_html.value = f"<span style='color:{_FAILURE_COLOUR}'>{html.escape(str(e))}</span>"


class _Figure(BokehModel):
    """A static Bokeh figure as a widget, replaced whole when the data changes (trials finish
    seldom). Closing it twice is harmless (jupyter_bokeh's own close raises the second time,
    which its ``__del__`` would do after ours)."""

    def close(self) -> None:
        if not getattr(self, "_gtc_closed", False):
            self._gtc_closed = True
            super().close()


def parallel_coordinates(trials, spec, metric: str, direction: str):
    """A Bokeh figure: one vertical axis per parameter (log axes where the scale is) and one for
    the metric, one line per trial, coloured by its value (the best are yellow)."""
    from bokeh.models import ColumnDataSource, HoverTool, LabelSet
    from bokeh.palettes import Viridis256
    from bokeh.plotting import figure
    from bokeh.transform import linear_cmap

    params = list({p.parameter_id: p for p in spec.parameters()}.values())
    axes = [p.parameter_id for p in params] + [metric]
    values = [t.value for t in trials]
    lo, hi = min(values), max(values)
    xs, ys = [], []
    for t in trials:
        # A conditional parameter the trial did not have is skipped: its line goes on to the next axis.
        points = [(i, _position(p, t.params[p.parameter_id])) for i, p in enumerate(params)
                  if p.parameter_id in t.params]
        points.append((len(params), (t.value - lo) / (hi - lo) if hi > lo else 0.5))
        xs.append([x for x, _ in points])
        ys.append([y for _, y in points])
    palette = Viridis256 if direction == "maximize" else Viridis256[::-1]
    source = ColumnDataSource({"xs": xs, "ys": ys, "trial": [t.trial_id for t in trials], "value": values,
                               "state": [t.state for t in trials]})
    fig = figure(height=300, sizing_mode="stretch_width", x_range=(-0.3, len(axes) - 0.7), y_range=(-0.12, 1.12),
                 tools="hover,save,reset", toolbar_location="right", title="parameters and result")
    fig.multi_line("xs", "ys", source=source, line_width=2, line_alpha=0.8,
                   line_color=linear_cmap("value", palette, lo, hi if hi > lo else lo + 1))
    fig.segment(x0=list(range(len(axes))), y0=[0] * len(axes), x1=list(range(len(axes))), y1=[1] * len(axes),
                line_color="#57606a", line_width=1)
    lows = [_label(p, 0.0) for p in params] + [f"{lo:.4g}"]
    highs = [_label(p, 1.0) for p in params] + [f"{hi:.4g}"]
    labels = ColumnDataSource({"x": list(range(len(axes))) * 2, "y": [1.06] * len(axes) + [-0.06] * len(axes),
                               "text": highs + lows})
    fig.add_layout(LabelSet(x="x", y="y", text="text", source=labels, text_font_size="8pt", text_align="center",
                            text_color="#57606a"))
    fig.xaxis.ticker = list(range(len(axes)))
    fig.xaxis.major_label_overrides = dict(enumerate(axes))
    fig.yaxis.visible = False
    fig.ygrid.visible = False
    hover = fig.select_one(HoverTool)
    hover.tooltips = [("trial", "@trial"), (metric, "@value{%.6g}"), ("state", "@state")]
    hover.formatters = {"@value": "printf"}
    return fig


def _position(p, value: Any) -> float:
    """Where ``value`` sits on ``p``'s axis, 0 (bottom) to 1 (top)."""
    if p.kind in ("categorical", "discrete"):
        choices = list(p.value_spec.values)
        index = choices.index(value) if value in choices else 0
        return index / (len(choices) - 1) if len(choices) > 1 else 0.5
    lo, hi, v = float(p.value_spec.min_value), float(p.value_spec.max_value), float(value)
    if p.scale in ("log", "reverse_log") and lo > 0:
        lo, hi, v = math.log(lo), math.log(hi), math.log(max(v, 1e-300))
    return (v - lo) / (hi - lo) if hi > lo else 0.5


def _label(p, at: float) -> str:
    if p.kind in ("categorical", "discrete"):
        choices = list(p.value_spec.values)
        if len(choices) == 1:
            return _short(choices[0]) if at else ""
        return _short(choices[-1] if at else choices[0])
    return _short(p.value_spec.max_value if at else p.value_spec.min_value)


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _field(name: str, value: w.Widget) -> w.HBox:
    return w.HBox([w.HTML(f"<span style='color:#57606a; padding-right:0.4em'>{name}</span>"), value],
                  layout=w.Layout(align_items="center", margin="0 1.5em 0 0"))
