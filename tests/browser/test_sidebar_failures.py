"""The sidebar follows what the user does and says why things failed: a cluster another
process (a notebook) creates after the user's last choice is shown, with the study running on
it; a failed trial's row and its job's row show the first error line of the job's log; the
Studies heading stays on screen under a long job list."""

from __future__ import annotations

import shlex
import sys

import pytest
from playwright.sync_api import expect

from jupyter_gtc import api
from jupyter_gtc.state import JobRecord, default_home, open_store
from tests.browser.geometry import assert_sections_share_height
from tests.browser.lab import job_row, open_lab_with_sidebar
from tests.conftest import small_gpu_spec
from tests.tuning.conftest import short_spec

pytestmark = pytest.mark.slurm

BROKEN = f"#!/bin/bash\n{shlex.quote(sys.executable)} -c 'import torchvision_not_installed' \"$@\"\n"
CAUSE = "ModuleNotFoundError: No module named 'torchvision_not_installed'"
SIDEBAR = "#jupyter-gtc-sidebar"


@pytest.fixture(scope="module")
def first(slurm_available):
    created = api.create_cluster(small_gpu_spec("first", nodes=1))
    yield created.name
    api.delete_cluster(created.name)


def section_title(page, text: str):
    return page.locator(f"{SIDEBAR} .lm-AccordionPanel-title", has_text=text)


def test_a_new_clusters_failed_study_shows_with_its_first_error_line(jupyter_lab, page, first, screenshots):
    open_lab_with_sidebar(jupyter_lab, page)
    card = page.locator(f'.jp-gtc-Cluster[data-cluster="{first}"]')
    card.locator(".jp-gtc-Cluster-name").click()  # the user's choice...
    expect(section_title(page, f"Jobs on {first}")).to_be_visible(timeout=30_000)
    # ... made ten minutes ago, as stored (what a click stores, with an earlier time).
    assert page.evaluate("""() => { for (const key of Object.keys(localStorage)) {
        if (key.startsWith('jupyter-gtc:cluster:')) {
          let stored;
          try {
            stored = JSON.parse(localStorage.getItem(key));
          } catch {
            return localStorage.getItem(key);  // a bare name, as versions before kept it
          }
          localStorage.setItem(key, JSON.stringify({ ...stored, at: Date.now() - 600000 }));
          return stored.name;
        } } }""") == first
    second = None
    try:
        # A notebook creates a cluster and tunes on it; its earlier jobs make a long list.
        second = api.create_cluster(small_gpu_spec("second", nodes=2)).name
        store = open_store(default_home())
        for i in range(150):
            store.add_job(JobRecord(second, str(800_000 + i), f"old-{i}", "COMPLETED", "/nonexistent", exit_code=0))
        spec = short_spec("{x: {double: [0, 1]}}", trials=4, parallel=1, extra="max_failed_trials: 2\n",
                          script=BROKEN)
        study = api.create_study(second, spec, name="first-tune")

        expect(section_title(page, "Jobs on second")).to_be_visible(timeout=60_000)
        item = page.locator(f'{SIDEBAR} .jp-gtc-Study[data-study="first-tune"]')
        expect(item).to_be_visible(timeout=60_000)
        study.wait(timeout=120)
        expect(item.locator(".jp-gtc-Study-reason")).to_contain_text(
            "stopped: 2 trials failed, reaching max_failed_trial_count=2; the first failure, trial 1", timeout=30_000)
        expect(item.locator(".jp-gtc-Study-reason")).to_contain_text(CAUSE)
        if item.locator(".jp-gtc-Trials").count() == 0:  # folded where it was first shown finished
            item.locator(".jp-gtc-Study-toggle").click()
        trial = item.locator('.jp-gtc-Trial[data-trial="1"]')
        expect(trial.locator(".jp-gtc-Trial-reason")).to_contain_text(f"FAILED (exit code 1): {CAUSE}")
        # Its job's row says it too, under the state and exit code (its tooltip the whole line).
        job_id = study.snapshot().trials[0].job_id
        failure = job_row(page, job_id).locator(".jp-gtc-Job-failure")
        expect(failure).to_have_text(CAUSE, timeout=30_000)
        expect(failure).to_have_attribute("title", f"FAILED (exit code 1): {CAUSE}")

        # Under 150 jobs, the Studies heading and the study are on screen.
        assert_sections_share_height(page)
        expect(section_title(page, "Studies")).to_be_in_viewport()
        expect(item.locator(".jp-gtc-Job-name")).to_be_in_viewport()
        page.locator(SIDEBAR).screenshot(path=str(screenshots / "sidebar_failed_trial.png"))
    finally:
        if second is not None:
            api.delete_cluster(second)
