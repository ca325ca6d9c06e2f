"""A job submitted with plain ``sbatch`` from a terminal (not through jupyter_gtc), in the
"Training Clusters" sidebar of a real JupyterLab, in a real headless Chromium, on a real local
Slurm cluster: it is listed with ours, marked as not ours, its log opens where Slurm says it
writes, and the sidebar's Cancel cancels it."""

from __future__ import annotations

import os
import subprocess

import pytest
from playwright.sync_api import expect

from jupyter_gtc import api
from tests.conftest import slurm, small_gpu_spec

SIDEBAR_TAB = '.jp-SideBar .lm-TabBar-tab[data-id="jupyter-gtc-sidebar"]'


@pytest.fixture(scope="module")
def cluster(slurm_available):
    """A name no other test uses: a process's job poller outlives a deleted cluster of its name."""
    created = api.create_cluster(small_gpu_spec("terminal", nodes=1))
    yield created.name
    api.delete_cluster(created.name)


def terminal_sbatch(cluster: str, folder, file: str, script: str) -> str:
    """What a user types in a terminal: ``export SLURM_CONF=...; sbatch FILE`` in ``folder``."""
    (folder / file).write_text(script)
    env = {**os.environ, **api.cluster_env(cluster)}
    done = subprocess.run(["sbatch", "--parsable", file], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=60, check=True)
    return done.stdout.strip().split(";")[0]


def job_row(page, job_id: str):
    return page.locator(f'#jupyter-gtc-sidebar .jp-gtc-Job[data-job="{job_id}"]')


def test_a_terminal_sbatch_job_shows_as_not_ours_and_cancels_from_the_sidebar(jupyter_lab, page, cluster,
                                                                               tmp_path, screenshots):
    ours = api.submit_job(cluster, "#!/bin/bash\nsleep 600\n", ["--job-name=ours"])
    theirs = terminal_sbatch(cluster, tmp_path, "from_terminal.sh",
                             "#!/bin/bash\necho hello from the terminal\nsleep 600\n")
    try:
        page.goto(f"{jupyter_lab.url}lab?reset&token={jupyter_lab.token}")
        page.locator(SIDEBAR_TAB).click(timeout=60_000)
        page.locator(f'.jp-gtc-Cluster[data-cluster="{cluster}"] .jp-gtc-Cluster-name').click(timeout=30_000)

        row = job_row(page, theirs)
        expect(row).to_have_attribute("data-managed", "false", timeout=30_000)
        expect(row.locator(".jp-gtc-Job-name")).to_have_text("from_terminal.sh")  # as sbatch named it
        expect(row.locator(".jp-gtc-Job-origin")).to_have_text("external")
        expect(row.locator(".jp-gtc-State")).to_have_text("RUNNING", timeout=30_000)
        expect(row.locator('[data-command="jupyter-gtc:open-metrics"]')).to_have_count(0)  # no log dir of ours
        mine = job_row(page, ours.id)
        expect(mine).to_have_attribute("data-managed", "true")
        expect(mine.locator(".jp-gtc-Job-origin")).to_have_count(0)
        page.locator("#jupyter-gtc-sidebar").screenshot(path=str(screenshots / "sidebar_terminal_job.png"))

        # Its log, from where Slurm says the job writes (sbatch's default, in the terminal's folder).
        row.locator('[data-command="jupyter-gtc:open-log"]').click()
        expect(page.locator(".jp-gtc-JobLog-text")).to_contain_text("hello from the terminal", timeout=30_000)

        row.locator('[data-command="jupyter-gtc:cancel-job"]').click()
        expect(row.locator(".jp-gtc-State")).to_contain_text("CANCELLED", timeout=30_000)
        state = slurm(cluster, "squeue", "-h", "-t", "all", "-j", theirs, "-o", "%T").stdout.strip()
        assert state == "CANCELLED"  # Slurm's own word, not the panel's
        expect(mine.locator(".jp-gtc-State")).to_have_text("RUNNING")  # only that one
        errors = [line for line in page.console_log if line.startswith("[pageerror]")]
        assert not errors, errors
    finally:
        slurm(cluster, "scancel", ours.id, theirs, check=False)
