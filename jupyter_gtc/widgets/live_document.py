"""``LiveDocument``: a Bokeh document of training scalars, shown as one ipywidget, that grows
while a job trains. ``LivePlot`` (one chart, a line per tag) and ``TagGrid`` (a chart per
tag, ``job.plot()``) are made of it; this module is what they share: the lines, the cap on
their points, and keeping every view of the widget complete.

How it reaches the browser
    ``LivePlot`` *is* a ``jupyter_bokeh.BokehModel``: one ipywidget that carries a Bokeh
    document and sends each change as a Bokeh patch over its comm, so it keeps updating
    while the kernel runs other cells and after a page reload. jupyter_bokeh's
    labextension does not bundle BokehJS: it calls ``window.Bokeh`` when a view is made.
    So displaying a plot first emits a small loader (``bokehjs_loader()``) that fetches
    ``{base_url}gtc/static/bokeh/js/bokeh.min.js`` and ``bokeh-widgets.min.js`` from our
    server extension (logged-in users only, cached for a year per bokeh version): never a
    CDN (unreachable offline) nor INLINE resources (8 MB in every saved notebook). It loads
    them synchronously, so ``window.Bokeh`` exists before the widget view after it in the
    same output is built, on the first run and after a reload alike.

Keeping every view complete
    A BokehModel view is built from the widget's ``render_bundle`` state and then applies
    the patches sent *while it exists*; patches sent before it exists are lost, and
    jupyter_bokeh never refreshes ``render_bundle`` after construction. So this class
    (1) builds ``render_bundle`` from the current document whenever a frontend asks for
    the state (a page reload), and (2) runs a handshake: until a view reports that it has
    rendered (Bokeh's ``document_ready`` event), changes are sent as whole-document state
    (throttled, from 0.1 s backing off to 5 s) instead of patches; once a view is ready it
    gets one last full state if anything changed, and from then on only patches. Displaying
    the plot, or a reload, starts the handshake again. So a plot filled before it is shown
    (a job panel that backfills a job's history, then adds the plot as a child) shows
    every point, and no point is lost between a display and its first render.

What a view sends back
    A view reports every change to its document, and that includes the changes our own
    patches made: jupyter_bokeh's view holds the events of a patch while applying it and
    then sends them all. Those echoes reach the kernel late, after newer changes of ours:
    applied, a new line's echoed ``renderers`` (or legend items, tag labels) would take
    the lines added since out of the document again, which stream into nothing from then
    on, and an echoed stream would draw its points twice. So the document takes from a view
    only what its user changes there (``_from_view``: the tags ticked, log y and what their
    callbacks set, a line shown or hidden), less the echoes of our own changes to those
    (``_echoes``), plus its events (``document_ready``). Auto-ranged starts and ends stay
    out too: a view built from a document with a start or end would pin it there.

Thread safety
    A Bokeh ``Document`` is not thread-safe (a Bokeh server only lets other threads change
    it through ``add_next_tick_callback``). jupyter_bokeh sends one patch as several comm
    messages (header, metadata, content, then each binary buffer) that the browser
    reassembles in order; ipykernel hands comm messages from any thread to its IOPub thread
    in call order, so a patch is safe to send from a background thread, but two threads
    sending patches at once would interleave their parts and corrupt both. One re-entrant
    lock per plot therefore covers every change to its document and every message it
    sends: ``add``, the state builder, and the changes the browser sends back (a tag
    unticked, log-y toggled), which jupyter_bokeh applies on the kernel's main thread.

Points kept per tag (``max_points_per_tag``, ``cap``)
    Points are appended with ``ColumnDataSource.stream`` (``rollover=cap`` as a guard). When
    a tag would exceed the cap, its source is rebuilt once: the newest ``cap // 2`` points
    stay at full resolution; everything older is cut into ``cap // 8`` equal step ranges
    and each range keeps only its lowest and highest point (plus the very first point), so
    spikes and divergences stay visible and the old part covers the whole run evenly in
    step, however long it gets. A tag then holds about ``3/4 cap`` points and streams
    again until it reaches the cap: the browser never holds more than ``cap`` points a tag,
    and rebuilding costs one full send per ``cap / 4`` new points.

"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import bokeh
import numpy as np
from bokeh.core.json_encoder import serialize_json
from bokeh.document.events import ModelChangedEvent
from bokeh.models import ColumnDataSource, GlyphRenderer
from jupyter_bokeh import BokehModel

from ..metrics.resumed import kept_mask

if TYPE_CHECKING:
    from ..metrics import Scalar

BOKEHJS_ROUTE = "gtc/static/bokeh"  # served by jupyter_gtc.server.routes
BOKEHJS_FILES = ("js/bokeh.min.js", "js/bokeh-widgets.min.js")  # core + the selector/toggle widgets
MIN_POINTS_PER_TAG = 64
_FIRST_FLUSH_S, _MAX_FLUSH_S = 0.1, 5.0
STEP_DTYPE = np.float64   # steps are integers; float64 holds them exactly and is a JS number
VALUE_DTYPE = np.float32  # TensorBoard stores scalars as float32: half the bytes of float64


class LiveDocument(BokehModel):
    """Lines of scalars in a Bokeh document; a subclass lays them out (``_build``) and makes
    each new line (``_new_line``). Display it, then call ``add``."""

    def __init__(self, max_points_per_tag: int = 5000):
        if max_points_per_tag < MIN_POINTS_PER_TAG:
            raise ValueError(f"max_points_per_tag={max_points_per_tag}: must be at least {MIN_POINTS_PER_TAG}")
        self.max_points_per_tag = max_points_per_tag
        self._lock = threading.RLock()
        self._lines: dict[tuple[str, str], Line] = {}
        self._live = False        # a view has rendered the latest full state: send patches
        self._dirty = False       # the document changed since the last full state was sent
        self._flush_timer: threading.Timer | None = None
        self._flush_delay = _FIRST_FLUSH_S
        self._closed = False
        self._from_view: set[tuple[str, str]] = set()  # (model id, attribute) a view's user may change
        self._echoes: deque[tuple[str, str, Any]] = deque(maxlen=64)  # our patches to those, not yet echoed
        super().__init__(self._build())

    # -- the public surface ----------------------------------------------------------------

    def add(self, scalars: Iterable[Scalar]) -> int:
        """Append the new points among ``scalars``; returns how many were added.

        New tags get a line (and the next colour) on the fly. Safe from any thread."""
        grouped: dict[tuple[str, str], list[Scalar]] = {}
        for s in scalars:
            grouped.setdefault((s.run, s.tag), []).append(s)
        added = 0
        with self._lock:
            for key, items in grouped.items():
                added += self._append(key, items)
        return added

    @property
    def point_count(self) -> dict[str, int]:
        """How many points each line holds now (at most ``max_points_per_tag``), by label."""
        with self._lock:
            return {line.label: len(line.steps) for line in self._lines.values()}

    def refresh(self) -> None:
        """Send the whole current document to the browser now (every view redraws)."""
        with self._lock:
            self._send_full_state()

    def close(self) -> None:
        if not hasattr(self, "_model"):
            return  # __init__ refused its arguments: nothing was built or opened
        with self._lock:
            self._closed = True
            if self._flush_timer is not None:
                self._flush_timer.cancel()
        super().close()

    def _ipython_display_(self, **kwargs) -> None:
        self.refresh()  # a new view is coming: it gets the whole document, then patches
        display_with_bokehjs(self, **kwargs)

    # -- what a subclass draws --------------------------------------------------------------

    def _build(self):
        """The document's root layout."""
        raise NotImplementedError

    def _new_line(self, key: tuple[str, str]) -> Line:
        """A line for (run, tag), added to the document and to ``self._lines``."""
        raise NotImplementedError

    # -- the points of a line ---------------------------------------------------------------

    def _append(self, key: tuple[str, str], items: list[Scalar]) -> int:
        line = self._lines.get(key) or self._new_line(key)
        wall = np.fromiter((s.wall_time for s in items), np.float64, len(items))
        steps = np.fromiter((s.step for s in items), STEP_DTYPE, len(items))
        values = np.fromiter((s.value for s in items), VALUE_DTYPE, len(items))
        last_wall, last_step = line.last
        newer = (wall > last_wall) | ((wall == last_wall) & (steps > last_step))
        if not newer.all():
            wall, steps, values = wall[newer], steps[newer], values[newer]
        if not len(steps):
            return 0
        line.last = (float(wall[-1]), float(steps[-1]))
        cap = self.max_points_per_tag
        if (len(line.steps) and steps[0] <= line.steps[-1]) or (np.diff(steps) <= 0).any():
            # A requeued attempt redoes the steps since its checkpoint: its points replace the
            # dead attempt's from there on, so the line shows each step once (metrics/resumed.py).
            all_steps, all_values = np.concatenate([line.steps, steps]), np.concatenate([line.values, values])
            kept = np.array(kept_mask(all_steps.tolist()), dtype=bool)
            line.steps, line.values = all_steps[kept], all_values[kept]
            if len(line.steps) > cap:
                line.steps, line.values = decimate(line.steps, line.values, cap)
            line.source.data = {"step": line.steps, "value": line.values}
        elif len(line.steps) + len(steps) <= cap:
            line.source.stream({"step": steps, "value": values}, rollover=cap)
            line.steps = np.concatenate([line.steps, steps])
            line.values = np.concatenate([line.values, values])
        else:
            line.steps, line.values = decimate(np.concatenate([line.steps, steps]),
                                               np.concatenate([line.values, values]), cap)
            line.source.data = {"step": line.steps, "value": line.values}
        return len(steps)

    # -- the handshake with the browser (see the module docstring) -------------------------

    def get_state(self, key=None):
        with self._lock:
            state = super().get_state(key)
            if "render_bundle" in state:  # jupyter_bokeh's is the document at construction
                state["render_bundle"] = serialize_json(self._model_to_traits(self._model))
                self._dirty = False
                if key is None:  # a frontend loads the whole widget (a reload): new views ahead
                    self._restart_handshake()
            return state

    def _document_patched(self, event) -> None:
        if event.setter is self:
            return
        with self._lock:
            if self._live:
                if isinstance(event, ModelChangedEvent) and (event.model.id, event.attr) in self._from_view:
                    self._echoes.append((event.model.id, event.attr, event.new))
                super()._document_patched(event)
            else:
                self._dirty = True
                self._schedule_flush()

    def _sync_model(self, model, content: dict[str, Any], buffers) -> None:
        if content.get("event") != "jsevent":
            return
        with self._lock:
            if content.get("kind") == "MessageSent":
                msg = content.get("msg_data")
                if isinstance(msg, dict) and msg.get("name") == "document_ready":
                    self._on_view_ready()
            elif not self._by_the_user(content):
                return  # an echo of our own patch, a range, a size: see the module docstring
            super()._sync_model(model, content, buffers)

    def _by_the_user(self, content: dict[str, Any]) -> bool:
        """Whether a change a view reports is its user's (a tag unticked, log y), not an echo."""
        key = (content.get("model", {}).get("id"), content.get("attr"))
        if content.get("kind") != "ModelChanged" or key not in self._from_view:
            return False
        echo = (*key, content.get("new"))
        if echo in self._echoes:
            self._echoes.remove(echo)
            return False
        return True

    def _on_view_ready(self) -> None:
        if not self._live:
            if self._dirty:
                self._send_full_state()
            self._live = True
            if self._flush_timer is not None:
                self._flush_timer.cancel()
                self._flush_timer = None

    def _restart_handshake(self) -> None:
        self._live = False
        self._flush_delay = _FIRST_FLUSH_S

    def _send_full_state(self) -> None:
        self._restart_handshake()
        self.send_state("render_bundle")  # get_state builds it from the current document

    def _schedule_flush(self) -> None:
        if self._flush_timer is None and not self._closed:
            self._flush_timer = threading.Timer(self._flush_delay, self._flush)
            self._flush_timer.daemon = True
            self._flush_timer.start()

    def _flush(self) -> None:
        with self._lock:
            self._flush_timer = None
            if self._live or self._closed or not self._dirty:
                return
            delay = min(self._flush_delay * 2, _MAX_FLUSH_S)  # a busy kernel: views redraw less often
            self.send_state("render_bundle")
            self._flush_delay = delay


@dataclass(eq=False)
class Line:
    """One line of a plot: its points, its source and its renderer."""

    label: str
    source: ColumnDataSource
    renderer: GlyphRenderer
    # What the source holds, kept here too (the source's columns are Bokeh's to manage).
    steps: np.ndarray = field(default_factory=lambda: np.empty(0, STEP_DTYPE))
    values: np.ndarray = field(default_factory=lambda: np.empty(0, VALUE_DTYPE))
    last: tuple[float, float] = (float("-inf"), float("-inf"))  # (wall_time, step) of the newest point


def decimate(steps: np.ndarray, values: np.ndarray, cap: int) -> tuple[np.ndarray, np.ndarray]:
    """At most ``3/4 cap + 1`` points of a line that has more than ``cap``: the newest ``cap // 2``
    as they are, and before them the lowest and the highest point of each of ``cap // 8``
    equal step ranges (and the first point), in their original order."""
    recent = cap // 2
    old_steps, old_values = steps[:-recent], values[:-recent]
    buckets = max(cap // 8, 1)
    lo, hi = old_steps.min(), old_steps.max()
    width = (hi - lo) / buckets or 1.0
    bucket = np.minimum(((old_steps - lo) / width).astype(np.int64), buckets - 1)
    order = np.lexsort((old_values, bucket))  # by bucket, then by value (NaN last)
    sorted_buckets = bucket[order]
    starts = np.flatnonzero(np.r_[True, sorted_buckets[1:] != sorted_buckets[:-1]])
    ends = np.r_[starts[1:], len(order)] - 1
    keep = np.unique(np.concatenate([[0], order[starts], order[ends]]))
    return (np.concatenate([old_steps[keep], steps[-recent:]]),
            np.concatenate([old_values[keep], values[-recent:]]))


def display_with_bokehjs(widget, **kwargs) -> None:
    """Display ``widget`` after the BokehJS loader, in one output.

    For any widget that shows ``LivePlot`` s, now or later (a panel that adds a plot as a
    child once a job writes metrics): call it from the widget's ``_ipython_display_``. A
    ``LivePlot`` displayed on its own does this itself."""
    from IPython.display import display

    display(bokehjs_loader(), raw=True)
    display(widget._repr_mimebundle_(**kwargs), raw=True)


def bokehjs_loader() -> dict[str, str]:
    """A display bundle that loads BokehJS from this server's ``gtc/static/bokeh`` route.

    Rendered by jupyter_bokeh's ``application/vnd.bokehjs_load.v0+json`` renderer (trusted
    outputs only), which runs it as a script: it does nothing when this BokehJS version and
    its widgets are loaded already; else it fetches each file with a *synchronous* request
    and evaluates it, so BokehJS exists before any output after it renders. The base URL
    comes from the page's ``jupyter-config-data``, which JupyterLab and Notebook 7 pages carry.
    """
    version = bokeh.__version__
    urls = [f"{BOKEHJS_ROUTE}/{name}?v={version}" for name in BOKEHJS_FILES]
    js = _LOADER_JS.replace("VERSION", json.dumps(version)).replace("URLS", json.dumps(urls))
    return {"application/vnd.bokehjs_load.v0+json": js, "application/javascript": js}


_LOADER_JS = """(function () {
  const version = VERSION, urls = URLS;
  const loaded = () => window.Bokeh != null && window.Bokeh[version] != null;
  if (loaded() && window.Bokeh[version].Widgets != null) return;
  let base = "/";
  const config = document.getElementById("jupyter-config-data");
  if (config != null) {
    try { base = JSON.parse(config.textContent).baseUrl || "/"; } catch (e) { /* keep "/" */ }
  }
  if (!base.endsWith("/")) base += "/";
  for (const [i, url] of urls.entries()) {
    if (i === 0 && loaded()) continue;
    const request = new XMLHttpRequest();
    request.open("GET", base + url, false);  // synchronous on purpose: see bokehjs_loader()
    request.send();
    if (request.status !== 200) {
      console.error("jupyter_gtc: could not load BokehJS from " + base + url + ": HTTP " + request.status);
      return;
    }
    (0, eval)(request.responseText + "\\n//# sourceURL=" + base + url);
  }
})();
"""
