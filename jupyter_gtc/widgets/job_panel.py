"""The live panel of one job: its state, elapsed time, nodes and exit code, the tail of its
log, a Cancel button while it can still be cancelled, and the poller's warning when Slurm
cannot be reached. A part with nothing to show (no progress yet, no warning, no plot) takes
no room: the log follows the state line.

The panel never asks Slurm anything. It subscribes to the cluster's one poller
(``api.job_poller``), whose thread calls it after every tick; on each call it re-reads the
job's fields from the poller's snapshot and appends what the log file gained since the last
read. So any number of panels cost one ``squeue`` per tick, and a panel keeps updating while
the kernel runs other cells or sits idle.
"""

from __future__ import annotations

import html
import threading
from collections import deque

import ipywidgets as w

from .. import api
from ..metrics import progress
from .plot import display_with_bokehjs
from ..exceptions import GtcError

LOG_LINES = 40
_TAIL_BYTES = 256 * 1024  # a panel opened on a long log starts this far from its end
_STATE_COLOURS = {"PENDING": "#9a6700", "RUNNING": "#0969da", "COMPLETED": "#1a7f37"}
_FAILURE_COLOUR = "#cf222e"


class JobPanel(w.VBox):
    """A live view of ``job``; displaying an ``api.Job`` in a notebook shows one."""

    def __init__(self, job: api.Job, log_lines: int = LOG_LINES):
        self.title_html = w.HTML(
            f"<b>job {html.escape(str(job.id))}</b> &nbsp;{html.escape(job.name)}"
            f" &nbsp;<span style='color:#57606a'>on {html.escape(job.cluster)}</span>")
        self.state_label = w.Label()
        self.elapsed_label = w.Label()
        self.nodes_label = w.Label()
        self.exit_code_label = w.Label()
        # Shown once the job was requeued (a node failed, it hung): its attempt; and once a job
        # that reported steps has finished, the share of its wall time that made steps it kept.
        self.attempt_label = w.Label()
        self.goodput_label = w.Label()
        self.cancel_button = w.Button(description="Cancel", icon="stop", button_style="danger",
                                      tooltip="scancel this job", layout=w.Layout(width="auto"))
        self.warning_html = w.HTML(layout=_hidden())
        # Once a job failed: the line of its log that says why (a worker's error, not the end of
        # torchrun's own traceback that the log's tail shows), with what its exit code means.
        self.failure_html = w.HTML(layout=_hidden())
        self.log_html = w.HTML()
        # Shown once the job reports how far it is (progress/total_steps or tqdm lines).
        self.progress_bar = w.FloatProgress(min=0.0, max=1.0, layout=w.Layout(width="40%", display="none"))
        self.progress_label = w.Label()
        # The live plot appears here once the job has written its first scalars.
        self.plot_box = w.VBox(layout=_hidden())
        self._attempt_field = _field("attempt", self.attempt_label, hidden=True)
        self._goodput_field = _field("goodput", self.goodput_label, hidden=True)
        fields = w.HBox([_field("state", self.state_label), _field("elapsed", self.elapsed_label),
                         _field("nodes", self.nodes_label), _field("exit code", self.exit_code_label),
                         self._attempt_field, self._goodput_field, self.cancel_button],
                        layout=w.Layout(align_items="center", flex_flow="row wrap"))
        self._progress_row = w.HBox([self.progress_bar, self.progress_label],
                                    layout=w.Layout(align_items="center", display="none"))
        super().__init__([self.title_html, fields, self.failure_html, self._progress_row, self.warning_html,
                          self.plot_box, self.log_html])

        self.job = job
        self._poller = api.job_poller(job.cluster)
        # Remembers its offset: each read returns only new text. (None: Slurm does not say where
        # a job that others submitted writes.)
        self._follower = job.follow() if job.log_path is not None else None
        self._lines: deque[str] = deque(maxlen=log_lines)
        self._partial: str | None = ""  # the last line, while the job is still writing it
        self._start_near_end()
        self._lock = threading.Lock()  # the poller thread and a button click may update at once
        self.cancel_button.on_click(self._cancel)
        # Subscribe before the first update: the other order could miss the job's last change
        # if it happened in between (the poller stops ticking once its jobs have finished).
        # The poller reads its new lines with every other panel's, in one go (one round trip on a
        # login node over SSH, however many panels are open).
        self._unfollow = self._poller.follow(self._follower) if self._follower is not None else None
        self._unsubscribe = self._poller.subscribe(self._on_tick)
        if not job.finished:
            job.refresh()  # make sure the poller watches it (a handle from an earlier session)
        self.update()

    @property
    def following(self) -> bool:
        """Whether the panel is still subscribed to the poller (until the job has finished)."""
        return self._unsubscribe is not None

    def update(self) -> None:
        """Show the poller's latest snapshot and the log's new lines."""
        with self._lock:
            job = self.job
            finished = job.finished  # read state before the log, so the last read is complete
            self._show_fields(job)
            self._read_log()
            self._show_metrics(job)
            warning = self._poller.warning
            if warning and not finished:
                self._warn(f"⚠ {warning}")
            elif not warning and self.warning_html.value.startswith("<span"):
                self._warn("")
            if finished:
                # Nothing left to cancel: no red button on a finished job.
                self.cancel_button.disabled = True
                self.cancel_button.layout.display = "none"
                self._stop_following()

    def close(self) -> None:
        self._stop_following()
        super().close()

    def _stop_following(self) -> None:
        for stop in (self._unsubscribe, self._unfollow):
            if stop is not None:
                stop()
        self._unsubscribe = self._unfollow = None

    def _ipython_display_(self, **kwargs) -> None:
        # The loader first: the live plot that appears in the panel needs BokehJS.
        display_with_bokehjs(self, **kwargs)

    def __repr__(self) -> str:  # what a terminal, or a notebook without widgets, shows
        return repr(self.job)

    # -- internals ----------------------------------------------------------------------

    def _on_tick(self, changed) -> None:
        # Called after every tick, not only when our job changed: elapsed time and the log
        # move on while the state stays RUNNING.
        self.update()

    def _show_fields(self, job: api.Job) -> None:
        state = job.state
        self.state_label.value = state
        self.state_label.style.text_color = _STATE_COLOURS.get(state, _FAILURE_COLOUR)
        self.elapsed_label.value = _duration(job.elapsed)
        self.nodes_label.value = job.nodes or "-"
        self.exit_code_label.value = "-" if job.exit_code is None else str(job.exit_code)
        if job.attempts > 1:
            self.attempt_label.value = str(job.attempts)
            self._attempt_field.layout.display = ""
        if job.finished and job.managed and not self.goodput_label.value:  # once: it no longer changes
            g = job.goodput()
            if g.steps:
                self.goodput_label.value = goodput_text(g)
                self.goodput_label.tooltip = g.describe()
                self._goodput_field.layout.display = ""
        if job.finished and self.failure_html.layout.display == "none":  # once: read from its log's ends
            why = job.failure()
            if why:
                self.failure_html.value = (f"<div style='color:{_FAILURE_COLOUR}; font-family:var(--jp-code-font-family,"
                                           f" monospace); margin:0.2em 0'>{html.escape(why)}</div>")
                self.failure_html.layout.display = ""

    def _show_metrics(self, job: api.Job) -> None:
        metrics = job.metrics_feed
        metrics.refresh()  # every subscriber (this panel's plot too) gets what is new
        scalars = metrics.all()
        found = progress.from_scalars(scalars) or progress.from_log(self._partial or "\n".join(list(self._lines)[-3:]))
        if found is not None:
            self._progress_row.layout.display = self.progress_bar.layout.display = ""
            self.progress_bar.value = found.fraction
            self.progress_label.value = found.describe()
        if not self.plot_box.children and any(s.tag != progress.TOTAL_STEPS_TAG for s in scalars):
            self.plot_box.children = [job.plot()]
            self.plot_box.layout.display = ""

    def _start_near_end(self) -> None:
        if self._follower is None:
            return
        try:
            found = self.job.host.stat(self.job.log_path)  # on the login node, for an attached cluster
        except GtcError:  # not reachable now: the whole log is read once it is
            return
        size = found.size if found is not None else 0
        if size > _TAIL_BYTES:
            self._follower.offset = size - _TAIL_BYTES
            self._partial = None  # the first line read is cut: drop it

    def _read_log(self) -> None:
        if self._follower is None:
            return
        new = "".join(iter(self._follower.read_new, ""))  # everything new, however much
        if not new:
            return
        if self._partial is None:
            new = new.partition("\n")[2]
            self._partial = ""
        *complete, self._partial = (self._partial + new).split("\n")
        self._lines.extend(complete)
        shown = "\n".join([*self._lines, self._partial] if self._partial else self._lines)
        self.log_html.value = (
            "<pre style='max-height:24em; overflow:auto; margin:0.3em 0; padding:0.4em;"
            f" background:#f6f8fa; font-size:90%'>{html.escape(shown)}</pre>")

    def _cancel(self, _button) -> None:
        try:
            self.job.cancel()  # the poller is poked: the next tick shows CANCELLED
        except GtcError as e:
            self._warn(str(e))

    def _warn(self, text: str) -> None:
        """Show ``text`` in the warning line, or hide the line when ``text`` is empty."""
        self.warning_html.value = f"<span style='color:{_FAILURE_COLOUR}'>{html.escape(text)}</span>" if text else ""
        self.warning_html.layout.display = "" if text else "none"


def goodput_text(g) -> str:
    """Goodput with what the rest of the time went to, largest first: "75% (startup 20%, finish
    5%)". A bare "75%" on a job that was never interrupted read as a fault; said this way, it is
    what it is, the job's own start-up and ending, and a restart or recompute stands out."""
    wall = g.wall_s or 1.0
    rest = sorted(((v / wall, k) for k, v in g.badput_s.items() if v / wall >= 0.005), reverse=True)
    return f"{g.goodput:.0%}" + (f" ({', '.join(f'{k} {share:.0%}' for share, k in rest)})" if rest else "")


def _hidden() -> w.Layout:
    """The layout of a part that takes no room until it has something to show."""
    return w.Layout(display="none")


def _field(name: str, value: w.Widget, hidden: bool = False) -> w.HBox:
    return w.HBox([w.HTML(f"<span style='color:#57606a; padding-right:0.4em'>{name}</span>"), value],
                  layout=w.Layout(align_items="center", margin="0 1.5em 0 0", display="none" if hidden else None))


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
