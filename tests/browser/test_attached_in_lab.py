"""An attached cluster (backend ``slurm``) in the sidebar of a real JupyterLab: its card says
where it is reached and which Slurm it runs, lists its partitions and nodes, offers no
scale, runs a job, and detaching it (after a confirmation that says its jobs keep running)
leaves the cluster it stands for as it was."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from jupyter_gtc import api
from tests.browser.lab import job_row, open_lab_with_sidebar
from tests.conftest import small_gpu_spec


@pytest.fixture(scope="module")
def behind(slurm_available):
    """The Slurm cluster the attached one is: a local cluster, reached from its login node."""
    created = api.create_cluster(small_gpu_spec("behind", nodes=2))
    yield created
    api.delete_cluster(created.name)


def test_an_attached_cluster_shows_its_login_and_partitions_runs_a_job_and_is_detached(
        jupyter_lab, page, behind, tmp_path, screenshots):
    api.attach_cluster({"display_name": "site", "slurm_conf": api.cluster_env(behind.name)["SLURM_CONF"],
                        "jobs_root": str(tmp_path), "poll_interval": 1})
    try:
        open_lab_with_sidebar(jupyter_lab, page)
        card = page.locator('.jp-gtc-Cluster[data-cluster="site"]')
        expect(card.locator(".jp-gtc-Chip")).to_have_text("slurm", timeout=30_000)
        detail = card.locator(".jp-gtc-Cluster-detail")
        expect(detail).to_contain_text("login: this machine")
        expect(detail).to_contain_text("Slurm 22.05")
        expect(detail).to_contain_text("partitions: train")
        for node in ("gpu-0", "gpu-1"):
            expect(card.locator(f'tr[data-node="{node}"]')).to_be_visible()
        expect(card.locator('[data-command="jupyter-gtc:scale-pool"]')).to_have_count(0)

        card.click()
        job = api.submit_job("site", "#!/bin/bash\nsleep 600\n", ["--job-name=remote"])
        expect(job_row(page, job.id).locator(".jp-gtc-State")).to_have_text("RUNNING", timeout=30_000)
        card.screenshot(path=str(screenshots / "sidebar_attached.png"))
        job.cancel()

        card.locator('[data-command="jupyter-gtc:delete-cluster"]').click()
        dialog = page.locator(".jp-Dialog")
        expect(dialog).to_contain_text("Detach cluster site?")
        expect(dialog).to_contain_text("Its jobs keep running")
        dialog.get_by_role("button", name="Detach").click()
        expect(card).to_have_count(0, timeout=60_000)
    finally:
        if "site" in [c.name for c in api.list_clusters(with_status=False)]:
            api.detach_cluster("site")
    assert api.get_cluster(behind.name).state == "RUNNING"
