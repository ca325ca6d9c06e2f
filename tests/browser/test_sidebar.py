"""The "Training Clusters" sidebar in a real JupyterLab, in a real headless Chromium, on a
real local Slurm cluster: nodes, live jobs (from the api and from a notebook's %%sbatch),
cancel, hold and release from the panel, a crashed node's remediation history, a log tab
that grows, a metrics plot that grows and shows a resumed job's steps once,
create / scale / delete with their progress, a tuning study's trials and its stop, the
chosen cluster kept across a reload, light and dark themes, a server restart."""

from __future__ import annotations

import os
import pwd
import re
import sys
import time
from pathlib import Path

import pytest
import yaml
from playwright.sync_api import expect

from jupyter_gtc import api
from jupyter_gtc.state import JobRecord, default_home, open_store
from tests.browser.geometry import assert_sections_share_height
from tests.browser.lab import choose_file, job_row, open_and_run_all, open_lab_with_sidebar, open_sidebar, set_theme
from tests.conftest import create_fails_halfway, slurm, small_gpu_spec
from tests.server.api_client import wait_for
from tests.tuning.conftest import short_spec, trial_script

STEPS = "#!/bin/bash\nfor i in $(seq 1 3000); do echo \"step $i loss=$((3000 - i))\"; sleep 0.1; done\n"


@pytest.fixture(scope="module")
def cluster(slurm_available):
    """3 nodes of 8 GPUs, and a supervisor. A name no other test uses: a process's job poller
    outlives a deleted cluster of the same name, so its views of job 1, 2, ... would be the old
    cluster's."""
    created = api.create_cluster(small_gpu_spec("llama", nodes=3, supervisor=True, supervisor_cooldown=1))
    yield created
    api.delete_cluster(created.name)


@pytest.fixture(autouse=True)
def _cancel_jobs_left(cluster):
    yield
    for job in api.list_jobs(cluster.name):
        if not job.finished:
            job.cancel()


def test_nodes_live_jobs_cancel_and_a_growing_log(jupyter_lab, page, cluster, screenshots):
    open_lab_with_sidebar(jupyter_lab, page)
    card = page.locator(f'.jp-gtc-Cluster[data-cluster="{cluster.name}"]')
    for node in ("gpu-0", "gpu-1", "gpu-2"):
        expect(card.locator(f'tr[data-node="{node}"]')).to_be_visible(timeout=30_000)
    expect(card.locator(".jp-gtc-Cluster-gpus")).to_have_text("0/24 GPUs allocated")

    job = api.submit_job(cluster.name, STEPS, ["--job-name=pretrain", "--nodes=2", "--gpus-per-node=4"])
    idle = api.submit_job(cluster.name, "#!/bin/bash\nsleep 600\n", ["--job-name=eval", "--begin=now+3600"])
    row = job_row(page, job.id)
    expect(row.locator(".jp-gtc-State")).to_have_text("RUNNING", timeout=15_000)
    expect(job_row(page, idle.id).locator(".jp-gtc-State")).to_contain_text("PENDING")
    expect(card.locator(".jp-gtc-Cluster-gpus")).to_have_text("8/24 GPUs allocated", timeout=10_000)
    # A drained node shows its reason (a health check's, say) under it.
    slurm(cluster.name, "scontrol", "update", "nodename=gpu-2", "state=drain", "reason=XID 79: GPU fell off the bus")
    expect(card.locator(".jp-gtc-Node-reason")).to_contain_text("XID 79: GPU fell off the bus", timeout=10_000)
    expect(card.locator('tr[data-node="gpu-2"] .jp-gtc-State')).to_have_text("IDLE+DRAIN")
    time.sleep(1.5)  # elapsed counts on between the feed's updates
    page.locator("#jupyter-gtc-sidebar").screenshot(path=str(screenshots / "sidebar_light.png"))
    slurm(cluster.name, "scontrol", "update", "nodename=gpu-2", "state=resume")

    # The log tab follows the file by range reads: it grows while the job writes.
    row.locator('[data-command="jupyter-gtc:open-log"]').click()
    log = page.locator(".jp-gtc-JobLog-text")
    expect(log).to_contain_text("step 1 loss=2999", timeout=15_000)
    first = log.inner_text().count("\n")
    wait_for(lambda: log.inner_text().count("\n") >= first + 10, timeout=15, what="the log tab to grow")
    expect(page.locator(".lm-DockPanel-tabBar .lm-TabBar-tabLabel", has_text="pretrain")).to_be_visible()
    page.screenshot(path=str(screenshots / "sidebar_and_log_light.png"))

    # Cancel from the panel: the panel, and any other process (a notebook), see CANCELLED.
    row.locator('[data-command="jupyter-gtc:cancel-job"]').click()
    expect(row.locator(".jp-gtc-State")).to_contain_text("CANCELLED", timeout=15_000)
    wait_for(lambda: api.get_job(job.id, cluster.name).state == "CANCELLED", timeout=10, what="CANCELLED here")
    expect(page.locator(".jp-gtc-JobLog-status")).to_have_text("The job has finished.", timeout=10_000)

    # The state filter.
    page.locator(".jp-gtc-JobList-filter select").select_option("PENDING")
    expect(job_row(page, idle.id)).to_be_visible()
    expect(row).to_have_count(0)
    page.locator(".jp-gtc-JobList-filter select").select_option("")

    set_theme(page, "JupyterLab Dark")
    page.locator("#jupyter-gtc-sidebar").screenshot(path=str(screenshots / "sidebar_dark.png"))
    page.screenshot(path=str(screenshots / "sidebar_and_log_dark.png"))
    set_theme(page, "JupyterLab Light")  # the setting persists on the module's server
    errors = [line for line in page.console_log if line.startswith("[pageerror]")]
    assert not errors, errors


def test_hold_then_release_a_pending_job_from_the_panel(jupyter_lab, page, cluster):
    job = api.submit_job(cluster.name, "#!/bin/bash\nsleep 600\n", ["--job-name=later", "--begin=now+3600"])
    open_lab_with_sidebar(jupyter_lab, page)
    row = job_row(page, job.id)
    state = row.locator(".jp-gtc-State")
    expect(state).to_have_text("PENDING · BeginTime", timeout=15_000)
    expect(row.locator(".jp-gtc-Job-user")).to_have_text(pwd.getpwuid(os.getuid()).pw_name)  # the Slurm user

    row.locator('[data-command="jupyter-gtc:hold-job"]').click()
    expect(state).to_contain_text("JobHeld", timeout=15_000)  # JobHeldAdmin as root, JobHeldUser otherwise
    expect(row.locator('[data-command="jupyter-gtc:hold-job"]')).to_have_count(0)
    assert job_reason(cluster, job) == "held"

    row.locator('[data-command="jupyter-gtc:release-job"]').click()
    expect(state).to_have_text("PENDING · BeginTime", timeout=15_000)
    expect(row.locator('[data-command="jupyter-gtc:release-job"]')).to_have_count(0)
    expect(row.locator('[data-command="jupyter-gtc:hold-job"]')).to_be_visible()
    assert job_reason(cluster, job) == "waiting"


def test_a_crashed_nodes_remediation_history_shows_under_its_cluster(jupyter_lab, page, cluster, screenshots):
    open_lab_with_sidebar(jupyter_lab, page)
    card = page.locator(f'.jp-gtc-Cluster[data-cluster="{cluster.name}"]')
    node_state = card.locator('tr[data-node="gpu-1"] .jp-gtc-State')
    expect(node_state).to_have_text("IDLE", timeout=30_000)
    before = len(api.cluster_events(cluster.name))
    api.inject_fault(cluster.name, "gpu-1", "crash")
    wait_for(lambda: "restarted" in [e["event"] for e in api.cluster_events(cluster.name)[before:]], timeout=60,
             what="the supervisor to restart gpu-1")
    history = card.locator(".jp-gtc-History")
    summary = history.locator("summary")
    expect(summary).to_have_text(re.compile(r"^History \(\d+\)$"), timeout=15_000)
    expect(history.locator(".jp-gtc-History-event").first).not_to_be_visible()  # folded until opened
    summary.click()
    events = api.cluster_events(cluster.name)
    expect(summary).to_have_text(f"History ({len(events)})", timeout=15_000)
    rows = history.locator(".jp-gtc-History-event")
    expect(rows).to_have_count(min(len(events), 50))
    newest = events[-1]
    expect(rows.first).to_have_attribute("data-event", newest["event"])  # newest first
    restarted = history.locator('.jp-gtc-History-event[data-event-node="gpu-1"][data-event="restarted"]')
    expect(restarted).to_be_visible()
    expect(history.locator('.jp-gtc-History-event[data-event-node="gpu-1"][data-event="detected"]')).to_be_visible()
    expect(history.locator(".jp-gtc-History-detail", has_text="its slurmd exited")).to_be_visible()
    clock = time.strftime("%H:%M:%S", time.localtime(newest["time"]))  # the browser's zone is this machine's
    expect(rows.first.locator("td").first).to_have_text(clock)
    # The node comes back; the list stays open across the updates that brings.
    expect(node_state).to_have_text("IDLE", timeout=60_000)
    expect(history).to_have_attribute("open", "")
    page.locator("#jupyter-gtc-sidebar").screenshot(path=str(screenshots / "sidebar_history.png"))
    errors = [line for line in page.console_log if line.startswith("[pageerror]")]
    assert not errors, errors


def job_reason(cluster, job) -> str:
    """Slurm's own word (squeue), not the panel's."""
    reason = slurm(cluster.name, "squeue", "-h", "-j", job.id, "-o", "%r").stdout.strip()
    return "held" if reason.startswith("JobHeld") else "waiting" if reason == "BeginTime" else reason


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_metrics_tab_plots_a_training_job_as_it_writes(jupyter_lab, page, cluster, screenshots):
    """examples/train/tiny_regression.py writes TensorBoard scalars (train/loss, train/lr,
    progress/total_steps) under AIP_TENSORBOARD_LOG_DIR, as in notebooks/metrics.ipynb."""
    script = (f'#!/bin/bash\n"{sys.executable}" "{EXAMPLES}/train/tiny_regression.py" '
              "--steps 100000 --step_delay 0.05\n")  # it trains until the test cancels it
    job = api.submit_job(cluster.name, script, ["--job-name=tiny", "--cpus-per-task=2"])
    open_lab_with_sidebar(jupyter_lab, page)
    row = job_row(page, job.id)
    expect(row.locator(".jp-gtc-State")).to_have_text("RUNNING", timeout=30_000)
    row.locator('[data-command="jupyter-gtc:open-metrics"]').click()
    expect(page.locator(".lm-DockPanel-tabBar .lm-TabBar-tabLabel", has_text="tiny")).to_be_visible(timeout=10_000)
    loss = page.locator('.jp-gtc-Metrics path[data-tag="train/loss"]')
    expect(loss).to_have_count(1, timeout=90_000)  # torch's import takes a while on a busy machine
    first = wait_for(lambda: points(loss), timeout=30, what="train/loss points")
    assert points(page.locator('.jp-gtc-Metrics path[data-tag="train/lr"]')) > 0
    # progress/total_steps is listed, but not drawn: a bookkeeping tag.
    expect(page.locator('.jp-gtc-Metrics-tag[data-tag="progress/total_steps"] input')).not_to_be_checked()
    expect(page.locator('.jp-gtc-Metrics path[data-tag="progress/total_steps"]')).to_have_count(0)
    grown = wait_for(lambda: (n := points(loss)) >= first + 10 and n, timeout=30, what="the plot to grow")
    print(f"train/loss points: {first} -> {grown}")
    assert api.get_job(job.id, cluster.name).state == "RUNNING"  # it grew while the job trained

    # Hovering shows the step and each tag's value there; a log scale redraws.
    box = page.locator('.jp-gtc-Metrics-chart[data-tag="train/loss"] svg').bounding_box()  # a chart per tag
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.5)
    expect(page.locator(".jp-gtc-Metrics-cursor")).to_contain_text("step ")
    page.locator(".jp-gtc-Metrics-logy input").check()
    expect(loss).to_have_count(1)
    for theme, name in (("JupyterLab Light", "light"), ("JupyterLab Dark", "dark")):
        set_theme(page, theme)
        page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + box["height"] * 0.5)
        expect(page.locator(".jp-gtc-Metrics-hover circle")).to_have_count(2)  # on train/loss and train/lr
        page.screenshot(path=str(screenshots / f"metrics_tab_{name}.png"))
    set_theme(page, "JupyterLab Light")

    job.cancel()
    expect(page.locator(".jp-gtc-Metrics-status")).to_have_text("The job has finished.", timeout=15_000)
    errors = [line for line in page.console_log if line.startswith("[pageerror]")]
    assert not errors, errors


RESUMED = """#!/bin/bash
"{python}" - <<'EOF'
import os
from tensorboard.compat.proto import event_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter

def attempt(suffix, steps, offset):  # each attempt its own event file, as a requeued job's writer
    writer = EventFileWriter(os.environ["AIP_TENSORBOARD_LOG_DIR"], filename_suffix=suffix)
    for step in steps:
        event = event_pb2.Event(step=step)
        event.summary.value.add(tag="loss", simple_value=offset + step)
        writer.add_event(event)
    writer.close()

attempt(".first", range(1, 9), 0)      # steps 1..8; its checkpoint was at step 5
attempt(".second", range(6, 11), 100)  # resumed from it: 6..10 again
EOF
"""


def test_the_metrics_tab_shows_each_step_once_after_a_resume(jupyter_lab, page, cluster):
    job = api.submit_job(cluster.name, RESUMED.format(python=sys.executable), ["--job-name=resumed"])
    job.wait(timeout=60)
    assert job.state == "COMPLETED", job.logs()
    job.metrics_feed.refresh()
    written = [s.step for s in job.metrics_feed.all() if s.tag == "loss"]  # as read: both attempts
    assert sorted(written) == sorted([*range(1, 9), *range(6, 11)]), written
    open_lab_with_sidebar(jupyter_lab, page)
    job_row(page, job.id).locator('[data-command="jupyter-gtc:open-metrics"]').click()
    expect(page.locator(".jp-gtc-Metrics-status")).to_have_text("The job has finished.", timeout=30_000)
    loss = page.locator('.jp-gtc-Metrics path[data-tag="loss"]')
    expect(loss).to_have_attribute("data-points", "10", timeout=15_000)  # 1..10 once, not 13 points
    expect(page.locator(".jp-gtc-Metrics")).to_have_attribute("data-points", "10")
    xs = [float(x) for x in re.findall(r"[ML](-?[\d.]+),", loss.get_attribute("d"))]
    assert len(xs) == 10 and xs == sorted(xs) and len(set(xs)) == 10, xs  # drawn left to right, once each
    # The redone steps are the second attempt's: its last value is the latest.
    expect(page.locator('.jp-gtc-Metrics-tag[data-tag="loss"] .jp-gtc-Metrics-value')).to_have_text("110")


def points(path) -> int:
    """How many points the chart holds for a line (every point, not only those drawn)."""
    value = path.get_attribute("data-points") if path.count() else None
    return int(value or 0)


def test_a_job_from_a_notebook_cell_shows_and_its_cancel_reaches_the_notebook(jupyter_lab, page, cluster,
                                                                               screenshots):
    cells = ["%load_ext jupyter_gtc",
             f"%%sbatch --cluster {cluster.name} --job-name from-notebook\n#!/bin/bash\necho started\nsleep 600\n"]
    open_and_run_all(jupyter_lab, page, "submit.ipynb", cells)
    notebook_state = page.locator(".jp-OutputArea-output .widget-label", has_text="RUNNING")
    expect(notebook_state).to_be_visible(timeout=30_000)
    # The job panel: its log follows its state line, with no blank band between them (the
    # progress, warning and plot parts take no room while they have nothing to show).
    expect(page.locator(".jp-OutputArea-output pre", has_text="started")).to_be_visible(timeout=30_000)
    gap = notebook_state.evaluate("""label => {
      const panel = label.closest('.widget-vbox');
      const parts = [...panel.children];
      const fields = parts.find(p => p.contains(label)).getBoundingClientRect();
      const log = parts.find(p => p.querySelector('pre')).getBoundingClientRect();
      return log.top - fields.bottom;
    }""")
    assert 0 <= gap <= 16, f"{gap} px between the job panel's state line and its log"
    open_sidebar(page)
    row = page.locator("#jupyter-gtc-sidebar .jp-gtc-Job", has_text="from-notebook")
    expect(row.locator(".jp-gtc-State")).to_have_text("RUNNING", timeout=10_000)

    row.locator('[data-command="jupyter-gtc:cancel-job"]').click()
    expect(row.locator(".jp-gtc-State")).to_contain_text("CANCELLED", timeout=15_000)
    expect(page.locator(".jp-OutputArea-output .widget-label", has_text="CANCELLED")).to_be_visible(timeout=15_000)
    # A finished job has nothing to cancel: the panel's red Cancel button goes.
    expect(page.locator(".jp-OutputArea-output .widget-button", has_text="Cancel")).to_be_hidden()
    page.screenshot(path=str(screenshots / "sidebar_with_notebook.png"))


# Every text an operation line (.jp-gtc-Operation) shows, in order: a create may take
# less than a second, so the test records the lines as they render instead of looking.
# Also, in order with each other: each state a card shows ("scratch RUNNING"), and the
# moment a toast says a create has ended ("toast: Cluster scratch is running").
RECORD_OPERATIONS = """
window.__operations = [];
window.__states = [];
const last = list => list[list.length - 1];
new MutationObserver(() => {
  for (const line of document.querySelectorAll('.jp-gtc-Operation')) {
    const text = line.textContent;
    if (last(window.__operations) !== text) window.__operations.push(text);
  }
  for (const card of document.querySelectorAll('.jp-gtc-Cluster[data-cluster]')) {
    const state = card.querySelector('.jp-gtc-Cluster-header .jp-gtc-State');
    const text = `${card.dataset.cluster} ${state ? state.textContent : ''}`;
    if (!window.__states.filter(s => s.startsWith(card.dataset.cluster + ' ')).slice(-1).includes(text)) {
      window.__states.push(text);
    }
  }
  for (const toast of document.querySelectorAll('.jp-toastContainer .Toastify__toast')) {
    const text = `toast: ${toast.textContent}`;
    if (text.includes(' is running') && !window.__states.includes(text)) window.__states.push(text);
  }
}).observe(document, { subtree: true, childList: true, characterData: true });
"""


def test_create_scale_and_delete_show_their_progress_and_the_choice_outlives_a_reload(
        jupyter_lab, page, cluster, screenshots):
    (jupyter_lab.root_dir / "scratch.yaml").write_text(yaml.safe_dump(small_gpu_spec("scratch", nodes=2)))
    page.add_init_script(RECORD_OPERATIONS)
    open_lab_with_sidebar(jupyter_lab, page)
    try:
        page.locator('#jupyter-gtc-sidebar [data-command="jupyter-gtc:create-cluster"]').click()
        dialog = page.locator(".jp-Dialog")
        choose_file(page, "scratch.yaml")  # JupyterLab's own file dialog
        card = page.locator('.jp-gtc-Cluster[data-cluster="scratch"]')
        expect(card.locator('tr[data-node="gpu-1"]')).to_be_visible(timeout=60_000)
        expect(card.locator(".jp-gtc-Cluster-header .jp-gtc-State")).to_have_text("RUNNING")
        expect(card.locator(".jp-gtc-Operation")).to_have_count(0)  # done: the card's state says the rest
        # The toast said so. (Recorded as it showed: under load it can come and go, autoClose
        # 4 s, before the checks above have run.)
        page.wait_for_function("() => window.__states.includes('toast: Cluster scratch is running')",
                               timeout=15_000)
        shown = page.evaluate("() => window.__operations")
        print("operation lines while creating:", shown)
        # Which lines showed, if any, is the browser's pace: a create here ends in 0.3 s, and a
        # loaded browser can paint its card first when it is already RUNNING.
        assert all(text.startswith("Creating…") for text in shown), shown
        # Once the create has returned (its toast), the card never goes back to CREATING: no
        # read of the clusters from before the create ended overtakes its end. (Which of the
        # toast and the card's RUNNING paints first is the browser's call: a fresh-clone run
        # saw the toast a frame first, even with the toast waiting for the next paint.)
        states = [s for s in page.evaluate("() => window.__states") if s.startswith(("scratch ", "toast:"))]
        print("card states and the toast while creating:", states)
        done = states.index("toast: Cluster scratch is running")
        cards = [s for s in states if s.startswith("scratch ")]
        assert cards[-1] == "scratch RUNNING" and "scratch CREATING" not in states[done + 1:], states

        # The chosen cluster outlives a reload, even one that resets JupyterLab's workspace.
        card.locator(".jp-gtc-Cluster-name").click()
        expect(card).to_have_class(re.compile("jp-mod-selected"))
        open_lab_with_sidebar(jupyter_lab, page)
        expect(card).to_have_class(re.compile("jp-mod-selected"), timeout=30_000)
        expect(page.locator(f'.jp-gtc-Cluster[data-cluster="{cluster.name}"]')).not_to_have_class(
            re.compile("jp-mod-selected"))
        jobs_title = page.locator("#jupyter-gtc-sidebar .lm-AccordionPanel-title", has_text="Jobs on scratch")
        expect(jobs_title).to_be_visible()

        page.evaluate("() => window.__operations.splice(0)")
        card.locator('[data-command="jupyter-gtc:scale-pool"]').click()
        dialog.locator("input").fill("3")
        dialog.locator(".jp-mod-accept").click()
        expect(card.locator('tr[data-node="gpu-2"]')).to_be_visible(timeout=60_000)
        # The new node's row shows as soon as slurmctld lists it; the scale ends only once
        # every node has registered, and a delete meanwhile is refused as busy: wait for it.
        expect(card.locator(".jp-gtc-Operation")).to_have_count(0, timeout=60_000)
        assert len(api.get_cluster("scratch").nodes) == 3
        shown = page.evaluate("() => window.__operations.splice(0)")
        print("operation lines while scaling:", shown)
        assert all(text.startswith("Scaling…") for text in shown), shown

        card.locator('[data-command="jupyter-gtc:delete-cluster"]').click()
        expect(dialog).to_contain_text("Delete cluster scratch?")
        page.screenshot(path=str(screenshots / "sidebar_delete_dialog.png"))
        dialog.locator(".jp-mod-accept").click()
        expect(card).to_have_count(0, timeout=60_000)
        assert "scratch" not in [c.name for c in api.list_clusters(with_status=False)]
        shown = page.evaluate("() => window.__operations.splice(0)")
        print("operation lines while deleting:", shown)
        assert all(text.startswith("Deleting…") for text in shown), shown
        # Its jobs' place goes to the cluster left.
        expect(page.locator(f'.jp-gtc-Cluster[data-cluster="{cluster.name}"]')).to_have_class(
            re.compile("jp-mod-selected"))
    finally:  # the server's operations end first: a second delete beside its own would race it
        wait_for(lambda: all(op["state"] != "RUNNING"
                             for op in jupyter_lab.api("GET", "gtc/api/operations")["operations"]), timeout=120)
        if "scratch" in [c.name for c in api.list_clusters(with_status=False)]:
            api.delete_cluster("scratch")


def test_a_create_that_fails_says_why_in_the_panel_until_dismissed(jupyter_lab, page, cluster, screenshots):
    (jupyter_lab.root_dir / "doomed.yaml").write_text(yaml.safe_dump(small_gpu_spec("doomed", nodes=1)))
    (jupyter_lab.root_dir / "taken.yaml").write_text(yaml.safe_dump(small_gpu_spec(cluster.name, nodes=1)))
    open_lab_with_sidebar(jupyter_lab, page)
    dialog = page.locator(".jp-Dialog")

    def create(path: str) -> None:
        page.locator('#jupyter-gtc-sidebar [data-command="jupyter-gtc:create-cluster"]').click()
        choose_file(page, path)

    with create_fails_halfway("doomed") as blocker:
        create("doomed.yaml")
        # Failed after it started, and rolled back: no card, but a line that says why.
        failed = page.locator('.jp-gtc-Cluster-stray[data-cluster="doomed"] .jp-gtc-Operation[data-state="FAILED"]')
        expect(failed).to_contain_text("Creating failed:", timeout=60_000)
        expect(failed).to_contain_text(str(blocker))
        expect(page.locator(".jp-toastContainer", has_text="failed")).to_be_visible()
        page.locator("#jupyter-gtc-sidebar").screenshot(path=str(screenshots / "sidebar_create_failed.png"))
    assert "doomed" not in [c.name for c in api.list_clusters(with_status=False)]
    failed.locator(".jp-ToolbarButtonComponent").click()  # dismiss
    expect(page.locator('.jp-gtc-Cluster[data-cluster="doomed"]')).to_have_count(0)

    # A taken name is refused before anything starts: a toast says why, nothing else changes.
    create("taken.yaml")
    expect(page.locator(".jp-toastContainer", has_text="already exists")).to_be_visible(timeout=15_000)
    expect(page.locator(".jp-gtc-Cluster")).to_have_count(len(api.list_clusters(with_status=False)))


def test_five_hundred_jobs_render_and_stay_responsive(jupyter_lab, page, cluster, screenshots):
    """The list from earlier sessions (rows in the state store, as a busy user accumulates
    them) plus a running job whose elapsed time re-renders the list every second. (How fast
    it renders and filters, and its longest tasks: bench/sidebar_responsiveness.py.)"""
    store = open_store(default_home())
    for i in range(500):
        store.add_job(JobRecord(cluster.name, str(900_000 + i), f"sweep-{i}", "FAILED" if i % 7 == 0 else "COMPLETED",
                                "/nonexistent", exit_code=1 if i % 7 == 0 else 0))
    running = api.submit_job(cluster.name, "#!/bin/bash\nsleep 600\n", ["--job-name=live"])
    total = len(api.list_jobs(cluster.name))  # these, and those of the tests before
    open_lab_with_sidebar(jupyter_lab, page)
    expect(page.locator(".jp-gtc-Job")).to_have_count(100, timeout=60_000)  # the newest; the rest on demand
    more = page.locator(".jp-gtc-More")
    expect(more).to_have_text(f"Show 100 more of {total - 100} older jobs")
    live = job_row(page, running.id)
    expect(live.locator(".jp-gtc-State")).to_have_text("RUNNING", timeout=30_000)
    # The clock ticks with 500 rows in the list: the running job's elapsed time counts on.
    elapsed = live.locator(".jp-gtc-Job-elapsed")
    before = elapsed.inner_text()
    expect(elapsed).not_to_have_text(before, timeout=30_000)
    select = page.locator(".jp-gtc-JobList-filter select")
    select.select_option("FAILED")
    expect(page.locator(".jp-gtc-Job")).to_have_count(72, timeout=30_000)
    select.select_option("")
    more.click()
    expect(page.locator(".jp-gtc-Job")).to_have_count(200, timeout=30_000)
    # The jobs scroll in their own section; the cluster card and the studies keep the room
    # their content takes, and the card shows whole.
    shown = assert_sections_share_height(page)
    assert shown[0]["content"] <= shown[0]["height"] + 1, shown
    page.locator("#jupyter-gtc-sidebar").screenshot(path=str(screenshots / "sidebar_500_jobs.png"))


def test_a_studys_trials_show_live_and_stop_from_the_panel(jupyter_lab, page, cluster, screenshots):
    """A study this process drives, as a notebook would: the panel shows its trials as they
    run, stops one, plots one's metrics, and stops the study; the driver here obeys."""
    spec = short_spec("{lr: {double: [0.001, 0.1], scale: log}, layers: {integer: [1, 4]}}", trials=6, parallel=2,
                      script=trial_script("--steps=300", "--delay=0.2"))
    study = api.create_study(cluster.name, spec, name="lr-sweep")
    try:
        open_lab_with_sidebar(jupyter_lab, page)
        item = page.locator('.jp-gtc-Study[data-study="lr-sweep"]')
        study_state = item.locator(".jp-gtc-Job-line .jp-gtc-State").first
        expect(study_state).to_have_text("RUNNING", timeout=30_000)
        expect(item.locator(".jp-gtc-Trial[data-trial]")).to_have_count(2, timeout=30_000)
        expect(item.locator(".jp-gtc-Study-progress")).to_have_text("0/6 trials · 2 running")
        first = item.locator('.jp-gtc-Trial[data-trial="1"]')
        expect(first.locator(".jp-gtc-State")).to_have_text("RUNNING")
        expect(first.locator(".jp-gtc-Trial-params")).to_contain_text("layers=")
        # The latest report shows, and moves on as the trial reports (val_loss falls with each step).
        value = first.locator(".jp-gtc-Trial-value")
        shown = wait_for(lambda: (t := value.inner_text()) != "–" and t, timeout=20, what="trial 1's first report")
        wait_for(lambda: value.inner_text() != shown, timeout=20, what="a newer report")
        page.locator("#jupyter-gtc-sidebar").screenshot(path=str(screenshots / "sidebar_study_light.png"))

        # Its job's metrics, in the same tab as any job's.
        item.locator('.jp-gtc-Trial[data-trial="2"] [data-command="jupyter-gtc:open-metrics"]').click()
        expect(page.locator('.jp-gtc-Metrics path[data-tag="val_loss (hypertune)"]')).to_have_count(1, timeout=30_000)

        first.locator('[data-command="jupyter-gtc:stop-trial"]').click()
        expect(first.locator(".jp-gtc-State")).to_contain_text("PRUNED", timeout=15_000)
        expect(first.locator(".jp-gtc-Trial-reason")).to_have_text("stopped by the user")
        assert study.snapshot().trials[0].state == "PRUNED"  # what the driver here recorded
        expect(item.locator('.jp-gtc-Trial[data-trial="3"] .jp-gtc-State')).to_have_text("RUNNING", timeout=15_000)

        set_theme(page, "JupyterLab Dark")
        page.locator("#jupyter-gtc-sidebar").screenshot(path=str(screenshots / "sidebar_study_dark.png"))
        set_theme(page, "JupyterLab Light")

        item.locator('.jp-gtc-Job-line [data-command="jupyter-gtc:stop-study"]').click()
        dialog = page.locator(".jp-Dialog")
        expect(dialog).to_contain_text("Stop study lr-sweep?")
        dialog.locator(".jp-mod-accept").click()
        expect(study_state).to_contain_text("STOPPED", timeout=30_000)
        expect(item.locator(".jp-gtc-Study-progress")).not_to_contain_text("running")
        study.wait(timeout=30)
        assert study.state == "STOPPED" and study.snapshot().counts["RUNNING"] == 0
        # Stopped and driven by no process: it can be resumed from here, and nothing else.
        expect(item.locator('[data-command="jupyter-gtc:resume-study"]')).to_be_visible()
        expect(item.locator('[data-command="jupyter-gtc:stop-study"]')).to_have_count(0)
    finally:
        if not study.finished:
            study.stop()
    errors = [line for line in page.console_log if line.startswith("[pageerror]")]
    assert not errors, errors


def test_the_sidebar_reconnects_after_a_server_restart(jupyter_lab, page, cluster):
    """Runs last in this module: it restarts the module's server (same port and token)."""
    open_lab_with_sidebar(jupyter_lab, page)
    expect(page.locator(f'.jp-gtc-Cluster[data-cluster="{cluster.name}"]')).to_be_visible(timeout=30_000)
    jupyter_lab.stop()
    expect(page.locator(".jp-gtc-Header-problem")).to_contain_text("Reconnecting", timeout=15_000)
    jupyter_lab.start()
    job = api.submit_job(cluster.name, "#!/bin/bash\nsleep 600\n", ["--job-name=after-restart"])
    expect(job_row(page, job.id).locator(".jp-gtc-State")).to_have_text("RUNNING", timeout=20_000)
    expect(page.locator(".jp-gtc-Header-problem")).to_have_count(0)
