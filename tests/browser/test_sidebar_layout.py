"""The sidebar at its default width (about 250 px: JupyterLab in Chromium at 1400x1000), on a
real local Slurm cluster with the widest name the spec allows: every action of a cluster
card, a job row and a trial row inside the panel and clickable, long states and reasons
readable, the sections sharing the height; errors of "+" (a file gone, a bad spec) shown
whole; a cluster another process creates shown RUNNING once its create returns, and one
without GPUs saying nothing of GPUs. Screenshots in light and dark themes."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from jupyter_gtc import api
from jupyter_gtc.exceptions import SpecErrors
from jupyter_gtc.server.feed import CLUSTER_INTERVAL_ENV
from jupyter_gtc.spec.cluster import parse_cluster_spec
from tests.browser.geometry import assert_actions_reachable, assert_sections_share_height, assert_texts_whole
from tests.browser.jupyter import JupyterProcess
from tests.browser.lab import choose_file, job_row, open_lab_with_sidebar, set_theme
from tests.conftest import slurm, small_gpu_spec
from tests.server.api_client import wait_for
from tests.tuning.conftest import short_spec, trial_script

WIDE = "mmmmmmmmmm"  # ten characters, the most a name may have, of the widest letter
DEFAULT_WIDTH = (200, 320)  # what JupyterLab gives a left panel at first, in px


@pytest.fixture(scope="module")
def jupyter_lab_server(tmp_path_factory):
    """This module's server: its change feed re-reads node states only when something says
    they changed (no periodic read within a test's time), so what it shows of a create in
    another process can only come from that create's change."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv(CLUSTER_INTERVAL_ENV, "3600")
        lab = JupyterProcess(tmp_path_factory.mktemp("jupyter-lab"), app="lab")
        lab.start()
    try:
        yield lab
    finally:
        lab.stop()


@pytest.fixture(scope="module")
def cluster(slurm_available):
    created = api.create_cluster(small_gpu_spec(WIDE, nodes=3))
    yield created
    api.delete_cluster(created.name)


@pytest.fixture(autouse=True)
def _cancel_jobs_left(cluster):
    yield
    for job in api.list_jobs(cluster.name):
        if not job.finished:
            job.cancel()


def sidebar_width(page) -> float:
    width = page.locator("#jupyter-gtc-sidebar").bounding_box()["width"]
    assert DEFAULT_WIDTH[0] <= width <= DEFAULT_WIDTH[1], f"the sidebar is {width} px wide, not the default"
    return width


def test_every_action_fits_the_default_width_and_long_texts_stay_whole(jupyter_lab, page, cluster, screenshots):
    name = cluster.name
    wide = api.submit_job(name, "#!/bin/bash\nsleep 600\n",
                          ["--job-name=pretrain-llama-70b-with-a-long-name", "--nodes=3"])
    wide.wait_until_running(60)
    failed = api.submit_job(name, "#!/bin/bash\nexit 3\n", ["--job-name=evaluate-checkpoint-000120"])
    failed.wait(60)
    later = api.submit_job(name, "#!/bin/bash\nsleep 600\n", ["--job-name=later", "--begin=now+3600"])
    # A drained node (a health check's long reason) and a job that asks for it: Slurm's
    # long pending reason.
    slurm(name, "scontrol", "update", "nodename=gpu-2", "state=drain",
          "reason=XID 79: GPU has fallen off the bus on /dev/nvidia3, node needs a reboot")
    blocked = api.submit_job(name, "#!/bin/bash\nsleep 600\n", ["--job-name=wants-gpu-2", "--nodelist=gpu-2"])
    spec = short_spec("{lr: {double: [0.001, 0.1], scale: log}, layers: {integer: [1, 4]}}", trials=4, parallel=2,
                      script=trial_script("--steps=600", "--delay=0.2"))
    study = api.create_study(name, spec, name="wide-sweep")
    try:
        open_lab_with_sidebar(jupyter_lab, page)
        print("sidebar width:", sidebar_width(page))
        card = page.locator(f'.jp-gtc-Cluster[data-cluster="{name}"]')
        expect(card.locator('tr[data-node="gpu-2"] .jp-gtc-State')).to_contain_text("DRAIN", timeout=30_000)
        expect(job_row(page, wide.id).locator(".jp-gtc-State")).to_have_text("RUNNING", timeout=30_000)
        expect(job_row(page, failed.id).locator(".jp-gtc-State")).to_have_text(re.compile("^FAILED · exit code"))
        expect(job_row(page, later.id).locator(".jp-gtc-State")).to_contain_text("PENDING")
        expect(job_row(page, blocked.id).locator(".jp-gtc-State")).to_contain_text("PENDING")
        item = page.locator('.jp-gtc-Study[data-study="wide-sweep"]')
        expect(item.locator('.jp-gtc-Trial [data-command="jupyter-gtc:stop-trial"]')).to_have_count(2, timeout=60_000)
        print("pending reasons:", [job_row(page, j.id).locator(".jp-gtc-State").inner_text() for j in (later, blocked)])

        # Finished: nothing to cancel, so no Cancel button; unfinished ones have theirs.
        expect(job_row(page, failed.id).locator('[data-command="jupyter-gtc:cancel-job"]')).to_have_count(0)
        expect(job_row(page, wide.id).locator('[data-command="jupyter-gtc:cancel-job"]')).to_have_count(1)

        for theme, shade in (("JupyterLab Light", "light"), ("JupyterLab Dark", "dark")):
            set_theme(page, theme)
            shown = assert_actions_reachable(page)
            rows = {b["row"].split()[0] for b in shown}
            assert {"jp-gtc-Cluster", "jp-gtc-Job", "jp-gtc-Trial", "jp-gtc-Study"} <= rows, shown
            commands = {(b["row"], b["command"]) for b in shown}
            assert (f"jp-gtc-Cluster {name}", "jupyter-gtc:delete-cluster") in commands, shown
            assert (f"jp-gtc-Job {wide.id}", "jupyter-gtc:cancel-job") in commands, shown
            assert_texts_whole(page)
            # The sections share the height: the cluster card shows whole, down to its last node.
            assert_sections_share_height(page)
            section = page.locator("#jupyter-gtc-sidebar .jp-gtc-Section").first.bounding_box()
            last_node = card.locator('tr[data-node="gpu-2"]').bounding_box()
            assert last_node["y"] + last_node["height"] <= section["y"] + section["height"] + 0.5, (last_node, section)
            page.locator("#jupyter-gtc-sidebar .jp-gtc-Section").first.evaluate("s => s.scrollTo(0, 0)")
            page.locator("#jupyter-gtc-sidebar").screenshot(path=str(screenshots / f"sidebar_default_width_{shade}.png"))
        set_theme(page, "JupyterLab Light")

        # The trial buttons do what they say: a click at a stop button's centre stops that trial.
        first_running = item.locator('.jp-gtc-Trial:has([data-command="jupyter-gtc:stop-trial"])').first
        trial_id = first_running.get_attribute("data-trial")
        first_running.locator('[data-command="jupyter-gtc:stop-trial"]').click()
        expect(item.locator(f'.jp-gtc-Trial[data-trial="{trial_id}"] .jp-gtc-State')).to_have_text("PRUNED",
                                                                                                    timeout=15_000)

        # The palette's "Stop a Tuning Trial…" lists the running trials, the first chosen.
        running = wait_for(lambda: [t.trial_id for t in study.snapshot().trials if t.state == "RUNNING"] or None,
                           timeout=30, what="a running trial")
        page.keyboard.press("Control+Shift+C")
        page.locator(".lm-CommandPalette-input").fill("Stop a Tuning Trial")
        page.locator(".lm-CommandPalette-item", has_text="Stop a Tuning Trial").first.click()
        dialog = page.locator(".jp-Dialog")
        expect(dialog).to_contain_text("Stop a trial of a study")
        dialog.locator(".jp-mod-accept").click()  # the one study with running trials
        options = dialog.locator("select option")
        expect(options.first).to_contain_text("trial ", timeout=10_000)
        listed = [text.split(":")[0].removeprefix("trial ") for text in options.all_inner_texts()]
        print("the stop-trial list:", options.all_inner_texts())
        assert listed and set(listed) <= set(running) | {t.trial_id for t in study.snapshot().trials
                                                         if t.state == "RUNNING"}, (listed, running)
        assert dialog.locator("select").evaluate("s => s.selectedIndex") == 0
        dialog.locator(".jp-mod-reject").click()
    finally:
        slurm(name, "scontrol", "update", "nodename=gpu-2", "state=resume")
        if not study.finished:
            study.stop()
    errors = [line for line in page.console_log if line.startswith("[pageerror]")]
    assert not errors, errors


def test_the_sections_refit_when_the_header_changes_height(jupyter_lab, page, cluster):
    """A warning in the sidebar's header (say, "Reconnecting to the Jupyter server…") takes
    height from the sections by CSS alone, and gives it back when it goes: either way the
    sections share the new height by their content again, with no section cut while another
    has room to spare."""
    jobs = [api.submit_job(cluster.name, "#!/bin/bash\nsleep 600\n", [f"--job-name=queued-{i}", "--begin=now+3600"])
            for i in range(12)]
    open_lab_with_sidebar(jupyter_lab, page)
    expect(job_row(page, jobs[-1].id)).to_be_visible(timeout=30_000)
    assert_sections_share_height(page)
    before = page.evaluate("""() => [...document.querySelectorAll('#jupyter-gtc-sidebar .jp-gtc-Section')]
                                     .reduce((sum, s) => sum + s.offsetHeight, 0)""")
    for grow in (240, 0, 120, 0):
        page.evaluate("""grow => {
            let style = document.getElementById('gtc-test-header');
            if (!style) { style = document.createElement('style'); style.id = 'gtc-test-header';
                          document.head.appendChild(style); }
            style.textContent = `#jupyter-gtc-sidebar .jp-gtc-Header { padding-bottom: ${grow}px !important; }`;
        }""", grow)
        # The sections take what the header leaves (no band below them, none hidden under
        # the panel's edge), and share it.
        page.wait_for_function("""want => Math.abs(want - [...document.querySelectorAll('#jupyter-gtc-sidebar .jp-gtc-Section')]
                                                    .reduce((sum, s) => sum + s.offsetHeight, 0)) <= 2""",
                               arg=before - grow, timeout=10_000)
        shown = assert_sections_share_height(page)
        print(f"header +{grow} px: sections {[s['height'] for s in shown]}")


def spec_error(spec: dict) -> str:
    """The whole message the server answers for a bad spec (SpecErrors lists every problem
    and the valid values)."""
    try:
        parse_cluster_spec(spec)
    except SpecErrors as e:
        return str(e)
    raise AssertionError("the spec was accepted")


def details_of_error_toast(page, says: str) -> str:
    """Click the Details action of the error toast that says ``says``; the dialog's text."""
    toast = page.locator(".jp-toastContainer .Toastify__toast", has_text=says)
    expect(toast).to_be_visible(timeout=30_000)
    assert len(toast.locator(".jp-toast-message").inner_text()) <= 140  # what JupyterLab shows of a toast
    toast.locator(".jp-toast-button", has_text="Details").click()
    dialog = page.locator(".jp-Dialog")
    expect(dialog.locator(".jp-gtc-ErrorDetails")).to_be_visible()
    expect(toast).to_have_count(0)  # the action closes the toast: the dialog has it all
    return dialog.locator(".jp-gtc-ErrorDetails").inner_text()


def test_errors_of_plus_are_shown_whole(jupyter_lab, page, cluster, screenshots):
    bad = small_gpu_spec("badspec", machine="a3-bogus-8g")
    (jupyter_lab.root_dir / "badspec.json").write_text(json.dumps(bad))
    gone = jupyter_lab.root_dir / "gone.json"
    gone.write_text(json.dumps(small_gpu_spec("gone", nodes=1)))
    (jupyter_lab.root_dir / "notes.txt").write_text("not a spec")
    open_lab_with_sidebar(jupyter_lab, page)
    plus = page.locator('#jupyter-gtc-sidebar [data-command="jupyter-gtc:create-cluster"]')
    dialog = page.locator(".jp-Dialog")

    # A bad spec: the toast says what failed; Details holds every word of the server's
    # message, down to the last valid value it lists.
    plus.click()
    expect(dialog.locator(".jp-DirListing-itemText", has_text="badspec.json")).to_be_visible(timeout=30_000)
    expect(dialog.locator(".jp-DirListing-itemText", has_text="notes.txt")).to_have_count(0)  # specs only
    choose_file(page, "badspec.json")
    expected = spec_error(bad)
    assert len(expected) > 140, expected
    shown = details_of_error_toast(page, "Creating a cluster from badspec.json failed")
    assert " ".join(expected.split()) in " ".join(shown.split()), (expected, shown)
    page.screenshot(path=str(screenshots / "sidebar_error_details_light.png"))
    dialog.locator(".jp-mod-accept").click()
    expect(dialog).to_have_count(0)

    # A file gone between choosing it and reading it: a toast and its details, no uncaught 404.
    set_theme(page, "JupyterLab Dark")
    plus.click()
    item = dialog.locator(".jp-DirListing-item", has=page.locator(".jp-DirListing-itemText", has_text="gone.json"))
    item.click(timeout=30_000)
    gone.unlink()
    dialog.locator(".jp-mod-accept").click()
    shown = details_of_error_toast(page, "Creating a cluster from gone.json failed")
    assert "there is no file gone.json" in shown, shown
    page.screenshot(path=str(screenshots / "sidebar_error_details_dark.png"))
    dialog.locator(".jp-mod-accept").click()
    set_theme(page, "JupyterLab Light")
    assert "gone" not in [c.name for c in api.list_clusters(with_status=False)]
    uncaught = [line for line in page.console_log if line.startswith("[pageerror]") or "Uncaught" in line]
    assert not uncaught, uncaught


def cpu_spec(name: str) -> dict:
    """One node of a machine type without GPUs, in a pool called cpu."""
    spec = small_gpu_spec(name, nodes=1, machine="n2-standard-4")
    spec["nodePools"][0]["id"] = "cpu"
    spec["orchestratorSpec"]["slurmSpec"]["partitions"] = [{"id": "cpu", "nodePoolIds": ["cpu"]}]
    return spec


def test_a_cluster_created_elsewhere_shows_running_once_its_create_returns(jupyter_lab, page, cluster):
    """Another process (this test's, as a notebook's %%gtc_cluster would) creates a cluster of
    CPUs only. The server's feed reads node states only when told of a change, so the card
    reaching RUNNING is the state store's change reaching the sidebar."""
    open_lab_with_sidebar(jupyter_lab, page)
    expect(page.locator(f'.jp-gtc-Cluster[data-cluster="{cluster.name}"]')).to_be_visible(timeout=30_000)
    card = page.locator('.jp-gtc-Cluster[data-cluster="cpuonly"]')
    try:
        api.create_cluster(cpu_spec("cpuonly"))
        expect(card.locator(".jp-gtc-Cluster-header .jp-gtc-State")).to_have_text("RUNNING", timeout=30_000)
        # No GPUs: it says nothing of GPUs, and how many CPUs are allocated instead.
        expect(card.locator(".jp-gtc-Cluster-cpus")).to_have_text(re.compile(r"^0/\d+ CPUs allocated$"))
        expect(card.locator('tr[data-node="cpu-0"]')).to_be_visible()
        expect(card).not_to_contain_text(re.compile("gpu", re.IGNORECASE))
    finally:
        api.delete_cluster("cpuonly")
    expect(card).to_have_count(0, timeout=30_000)  # a delete elsewhere, as promptly
