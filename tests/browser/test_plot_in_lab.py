"""A LivePlot in a real JupyterLab, in a real headless Chromium: BokehJS comes from our
server extension, the plot grows while a background thread feeds it, it comes back after
a page reload, and the saved notebook stays small."""

from __future__ import annotations

import json
import time

import nbformat

from tests.browser.lab import open_and_run_all

NOTEBOOK = "live_plot.ipynb"
SETUP = ("from jupyter_gtc.widgets.plot import LivePlot\nfrom jupyter_gtc.metrics import Scalar\n"
         "import threading, time, math")
FEED = '''p = LivePlot("loss")

def feed():
    step = 0
    while True:
        now = time.time()
        p.add([Scalar("train/loss", step, now, 2.0 * math.exp(-step / 40) + 0.1 + 0.05 * math.sin(step)),
               Scalar("eval/loss", step, now, 2.2 * math.exp(-step / 50) + 0.2)])
        step += 1
        time.sleep(0.1)

threading.Thread(target=feed, daemon=True).start()
p'''

# The points each ColumnDataSource holds in the page, read from BokehJS's own documents.
COUNT_POINTS = """() => {
  const counts = {};
  if (window.Bokeh == null) return null;
  for (const root of window.Bokeh.index.roots) {
    const doc = root.model.document;  // null for a view of a document that was replaced
    if (doc == null) continue;
    for (const model of doc._all_models.values()) {
      if (model.data != null && model.data.step != null) counts[model.name] = model.data.step.length;
    }
  }
  return counts;
}"""
MAX_NOTEBOOK_BYTES = 200_000


def _snap(page, element, path) -> None:
    """A picture of a plot that is growing: Locator.screenshot waits for the element to hold
    still, which a live plot in a slowed browser did not do within its 15 s."""
    page.screenshot(path=str(path), clip=element.bounding_box())


def test_live_plot_grows_in_jupyterlab_and_survives_a_reload(jupyter_lab, page, screenshots):
    notebook_url = open_and_run_all(jupyter_lab, page, NOTEBOOK, [SETUP, FEED])
    canvas = page.locator(".jp-OutputArea-output canvas").first
    canvas.wait_for(timeout=60_000)
    plot = page.locator(".jp-OutputArea-output:has(canvas)").first
    first = _wait_for_points(page, minimum=3)
    _snap(page, plot, screenshots / "live_plot_1.png")
    page.screenshot(path=str(screenshots / "live_plot_lab_page.png"))
    # It grows in the page while the kernel's thread adds points (15 more on every line).
    second = _wait_for_points(page, minimum=max(first.values()) + 15)
    _snap(page, plot, screenshots / "live_plot_2.png")
    assert set(second) == {"train/loss", "eval/loss"}, second

    # Saved from the browser: the outputs are a widget reference and a ~2 KB loader, not BokehJS.
    page.locator(".jp-Notebook").first.click()
    page.keyboard.press("Control+s")
    saved = _wait_for_saved_outputs(jupyter_lab.root_dir / NOTEBOOK)
    size = (jupyter_lab.root_dir / NOTEBOOK).stat().st_size
    print(f"saved notebook: {size} bytes")
    assert size < MAX_NOTEBOOK_BYTES
    outputs = [o for o in saved.cells[1].outputs]
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs), outputs
    loader = next(o["data"]["application/vnd.bokehjs_load.v0+json"] for o in outputs
                  if "application/vnd.bokehjs_load.v0+json" in o.get("data", {}))
    assert "gtc/static/bokeh/js/bokeh.min.js" in loader and "cdn.bokeh.org" not in loader

    # A reload: the plot comes back with every point so far, and keeps growing.
    page.goto(notebook_url)
    page.locator(".jp-OutputArea-output canvas").first.wait_for(timeout=60_000)
    after_reload = _wait_for_points(page, minimum=max(second.values()))
    plot = page.locator(".jp-OutputArea-output:has(canvas)").first
    _wait_for_points(page, minimum=max(after_reload.values()) + 1)  # and grows on
    _snap(page, plot, screenshots / "live_plot_after_reload.png")
    errors = [line for line in page.console_log
              if line.startswith(("[error]", "[pageerror]")) and "bokeh" in line.lower()]
    assert not errors, errors


def test_a_plot_filled_before_it_is_shown_shows_every_point(jupyter_lab, page, screenshots):
    """What a job panel does: display a box (with the loader), and later, from another
    thread, fill a plot with a job's history and add it to the box as a child."""
    show_box = ("import ipywidgets as w\nfrom jupyter_gtc.widgets.plot import display_with_bokehjs\n"
                "box = w.VBox([w.Label('job 7 RUNNING')])\ndisplay_with_bokehjs(box)")
    fill_later = (
        "def panel_tick():\n"
        "    p = LivePlot('history')\n"
        "    p.add([Scalar(tag, step, 1e9 + step, 1 / (step + 1)) for step in range(2000) for tag in ('a', 'b')])\n"
        "    box.children = [*box.children, p]\n"
        "    for step in range(2000, 2300):\n"
        "        p.add([Scalar(tag, step, 1e9 + step, 1 / (step + 1)) for tag in ('a', 'b')])\n"
        "        time.sleep(0.02)\n"
        "threading.Thread(target=panel_tick, daemon=True).start()")
    open_and_run_all(jupyter_lab, page, "panel.ipynb", [SETUP, show_box, fill_later])
    page.locator(".jp-OutputArea-output canvas").first.wait_for(timeout=60_000)
    counts = _wait_for_points(page, minimum=2300)
    page.locator(".jp-OutputArea-output:has(canvas)").first.screenshot(path=str(screenshots / "panel_plot.png"))
    assert counts == {"a": 2300, "b": 2300}, counts


def _wait_for_points(page, minimum: int, timeout: float = 60) -> dict[str, int]:
    """Points per line in the page once every line has at least ``minimum``."""
    deadline = time.monotonic() + timeout
    counts = None
    while time.monotonic() < deadline:
        counts = page.evaluate(COUNT_POINTS)
        if counts and len(counts) >= 2 and min(counts.values()) >= minimum:
            return counts
        time.sleep(0.2)
    raise AssertionError(f"the page's plot has {counts} points, wanted at least {minimum} per line")


def _wait_for_saved_outputs(path, timeout: float = 30):
    deadline = time.monotonic() + timeout
    outputs = "the file was never whole"
    while time.monotonic() < deadline:
        try:
            nb = nbformat.reads(path.read_text(), as_version=4)
        except nbformat.reader.NotJSONError:
            # jupyter_server's "atomic" save rewrites the file in place (a backup beside it),
            # so a read during the save finds it empty or half written: not saved yet.
            time.sleep(0.2)
            continue
        outputs = nb.cells[1].get("outputs", [])
        if any(o.get("output_type") == "display_data" for o in outputs):
            return nb
        time.sleep(0.2)
    raise AssertionError(f"{path} was not saved with outputs: {json.dumps(outputs)[:500]}")


# Per figure in the page: its title and the points of its lines, from BokehJS's own documents.
FIGURES = """() => {
  const figures = {};
  if (window.Bokeh == null) return null;
  for (const root of window.Bokeh.index.roots) {
    const doc = root.model.document;
    if (doc == null) continue;
    for (const model of doc._all_models.values()) {
      if (model.type === "Figure" || model.constructor.name === "Figure") {
        const lines = model.renderers.filter(r => r.data_source != null && r.data_source.data.step != null);
        const marks = model.center.filter(a => a.location != null && a.dimension === "height").map(a => a.location);
        figures[model.title.text] = {points: lines.map(r => r.data_source.data.step.length), marks};
      }
    }
  }
  return figures;
}"""

GRID = '''from jupyter_gtc.widgets.tag_grid import TagGrid
g = TagGrid("job 7 grid")

def feed():
    for step in range(1, 200):
        now = time.time()
        batch = [Scalar("train/loss", step, now, 2.0 * math.exp(-step / 40)),
                 Scalar("perf/tokens_per_s", step, now, 8000 + 10 * math.sin(step))]
        if step >= 40:  # a tag that comes later gets its chart then
            batch.append(Scalar("train/lr", step, now, 3e-4))
        if step == 60:  # requeued: the next attempt resumes from its checkpoint at 50
            time.sleep(0.2)
            batch = [Scalar(tag, 51, time.time(), v) for tag, v in (("train/loss", 0.5), ("train/lr", 3e-4))]
        g.add(batch)
        time.sleep(0.05)

threading.Thread(target=feed, daemon=True).start()
g'''


def test_job_plots_grid_draws_a_figure_per_tag_in_the_page(jupyter_lab, page, screenshots):
    """``job.plot()``'s TagGrid in BokehJS: a figure per tag, added while it streams (a tag
    that comes later), and the resume marker, with no BokehJS error."""
    open_and_run_all(jupyter_lab, page, "grid.ipynb", [SETUP, GRID])
    page.locator(".jp-OutputArea-output canvas").first.wait_for(timeout=60_000)
    deadline = time.monotonic() + 90
    figures = None
    while time.monotonic() < deadline:
        figures = page.evaluate(FIGURES)
        if figures and len(figures) == 3 and figures["train/loss"]["marks"] and figures["train/loss"]["points"][0] >= 100:
            break
        time.sleep(0.3)
    assert figures and sorted(figures) == ["perf/tokens_per_s", "train/loss", "train/lr"], figures
    assert all(len(f["points"]) == 1 for f in figures.values()), figures  # a line per chart: its tag's
    assert all(f["marks"] == [51] for f in figures.values()), figures
    page.locator(".jp-OutputArea-output:has(canvas)").first.screenshot(path=str(screenshots / "job_plot_grid.png"))
    errors = [line for line in page.console_log
              if line.startswith(("[error]", "[pageerror]")) and "bokeh" in line.lower()]
    assert not errors, errors
