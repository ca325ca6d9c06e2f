"""The sidebar's Models section in a real JupyterLab, in a real headless Chromium, on a real
local Slurm cluster: a model registered from a finished job, its versions and aliases, an alias
moved from the panel (and so in the registry, through REST and the api), its lineage, whose job
opens its log; then the tiny Llama deployed from the panel, its endpoint with its replica and
request figures, and undeployed from the panel."""

from __future__ import annotations

import re
import shlex
import urllib.parse

import pytest
from playwright.sync_api import expect

from jupyter_gtc import api
from tests.browser.lab import open_lab_with_sidebar
from tests.conftest import small_gpu_spec
from tests.server.test_wire_types import interface_fields
from tests.serving.tiny_model import save_tiny_llama

CLUSTER = "modelsui"
MODEL = "ui-llama"

# A training job as the job contract has it: its model (the tiny Llama) in AIP_MODEL_DIR, its
# final metrics through the hypertune file, a line in its log to find in the log tab.
TRAIN = """#!/bin/bash
#SBATCH --nodes=1 --cpus-per-task=1
cp -r {tiny}/. "$AIP_MODEL_DIR"/
printf '%s\\n' '{{"val_loss": "0.9", "global_step": "1"}}' '{{"val_loss": "0.5", "global_step": "2"}}' \\
    > "$CLOUD_ML_HP_METRIC_FILE"
echo "the ui-llama trainer finished"
"""


@pytest.fixture(scope="module")
def cluster(slurm_available):
    # Two nodes of one CPU: the trainer's job, then a replica's.
    api.create_cluster(small_gpu_spec(CLUSTER, nodes=2, machine="n2-standard-8"))
    yield CLUSTER
    for endpoint in api.list_endpoints():
        if endpoint.cluster == CLUSTER:
            endpoint.undeploy()
    api.delete_cluster(CLUSTER)


@pytest.fixture(scope="module")
def trained(cluster, tmp_path_factory):
    tiny = save_tiny_llama(tmp_path_factory.mktemp("llama") / "model")
    job = api.submit_job(cluster, TRAIN.format(tiny=shlex.quote(str(tiny))), ["--job-name=ui-trainer", "--time=5"])
    return job.wait(timeout=120)


def section(page):
    return page.locator("#jupyter-gtc-models")


def open_models(page) -> None:
    """Unfold the section: it starts folded (the jobs list and the cluster card keep the room)."""
    title = page.locator('#jupyter-gtc-sidebar .lm-AccordionPanel-title[aria-controls="jupyter-gtc-models"]')
    expect(title).to_have_text("Models")
    expect(title).to_have_attribute("aria-expanded", "false")
    expect(section(page)).to_be_hidden()
    title.click()
    expect(section(page)).to_be_visible()


def version_row(page, version: int):
    return section(page).locator(f'.jp-gtc-Model[data-model="{MODEL}"] .jp-gtc-ModelVersion[data-version="{version}"]')


# Each action of the section, scrolled into view: inside the panel, and what a click at its centre
# hits; each text either whole where it is laid out or whole in a tooltip.
_FITS = """sidebar => {
  const box = sidebar.getBoundingClientRect();
  const section = sidebar.querySelector('#jupyter-gtc-models');
  const bad = [];
  for (const b of section.querySelectorAll('[data-command]')) {
    b.scrollIntoView({ block: 'center', inline: 'nearest' });
    const r = b.getBoundingClientRect();
    const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    if (!(r.width > 0 && r.left >= box.left && r.right <= box.right && r.top >= box.top && r.bottom <= box.bottom
          && hit !== null && b.contains(hit))) {
      bad.push(`${b.dataset.command} at ${[r.left, r.top, r.right, r.bottom].map(Math.round)}`);
    }
  }
  for (const el of section.querySelectorAll('.jp-gtc-Chip, .jp-gtc-State, .jp-gtc-Job-name, .jp-gtc-Job-id, '
      + '.jp-gtc-Lineage-job, .jp-gtc-Lineage-metrics, .jp-gtc-Endpoint-id, .jp-gtc-Endpoint-detail > span')) {
    const titled = el.closest('[title]');
    const text = el.textContent.trim();
    if (el.scrollWidth > el.clientWidth + 1 && !(titled && titled.title.includes(text))) {
      bad.push(`cut: ${text}`);
    }
    const r = el.getBoundingClientRect();
    if (r.right > box.right + 0.5) {
      bad.push(`beyond the panel: ${text}`);
    }
  }
  return bad;
}"""


def assert_fits(page) -> None:
    bad = page.locator("#jupyter-gtc-sidebar").evaluate(_FITS)
    assert not bad, bad


def rest_model(lab, ref: str) -> dict:
    return lab.api("GET", f"gtc/api/models/{urllib.parse.quote(ref, safe='')}")


def test_versions_aliases_an_alias_moved_and_the_lineage_opens_the_jobs_log(jupyter_lab, page, trained, screenshots):
    assert trained.state == "COMPLETED"
    api.register_model(trained, MODEL, description="the tiny Llama of the browser test")
    api.register_model(trained, MODEL, alias="staging")
    open_lab_with_sidebar(jupyter_lab, page)
    open_models(page)

    item = section(page).locator(f'.jp-gtc-Model[data-model="{MODEL}"]')
    expect(item.locator(".jp-gtc-Model-name")).to_have_text(MODEL, timeout=30_000)
    expect(item.locator(".jp-gtc-Model-count")).to_have_text("2 versions")
    v1, v2 = version_row(page, 1), version_row(page, 2)
    expect(v1.locator(".jp-gtc-Alias")).to_have_text(["default"])
    expect(v2.locator(".jp-gtc-Alias")).to_have_text(["staging"])

    # Move "staging" to version 1 from the panel: the panel, the REST route and the api agree.
    v1.locator('[data-command="jupyter-gtc:set-model-alias"]').click()
    dialog = page.locator(".jp-Dialog")
    expect(dialog).to_contain_text(f"Alias of {MODEL}@1")
    dialog.locator("input").fill("staging")
    dialog.locator(".jp-mod-accept").click()
    expect(v1.locator(".jp-gtc-Alias")).to_have_text(["default", "staging"], timeout=15_000)
    expect(v2.locator(".jp-gtc-Alias")).to_have_count(0)
    assert rest_model(jupyter_lab, f"{MODEL}@staging")["version"] == 1
    assert set(rest_model(jupyter_lab, MODEL)["versions"][0]["lineage"]) == interface_fields("ILineage")
    assert api.get_model(f"{MODEL}@staging").version == 1
    assert api.get_model(MODEL).events[-1]["event"] == "alias"

    # A bad alias is refused, naming it; nothing moves.
    v2.locator('[data-command="jupyter-gtc:set-model-alias"]').click()
    dialog.locator("input").fill("9")
    dialog.locator(".jp-mod-accept").click()
    expect(page.locator(".jp-toastContainer .Toastify__toast", has_text="Alias 9 of")).to_be_visible(timeout=15_000)
    assert api.get_model(f"{MODEL}@2").aliases == []

    # The lineage: the job that trained each version, its final metrics; its name opens its log.
    item.locator(".jp-gtc-Model-toggle").click()
    lineage = v2.locator(".jp-gtc-Lineage")
    expect(lineage.locator(".jp-gtc-Lineage-job")).to_have_text(f"ui-trainer {trained.id}", timeout=15_000)
    expect(lineage.locator(".jp-gtc-Lineage-metrics")).to_contain_text("val_loss 0.5")
    assert_fits(page)
    section(page).screenshot(path=str(screenshots / "models_section.png"))
    lineage.locator(".jp-gtc-Lineage-job").click()
    expect(page.locator(".jp-gtc-JobLog-text")).to_contain_text("the ui-llama trainer finished", timeout=15_000)
    expect(page.locator(".lm-DockPanel-tabBar .lm-TabBar-tabLabel", has_text=f"ui-trainer {trained.id} log")) \
        .to_be_visible()
    lineage.locator('[data-command="jupyter-gtc:open-metrics"]').click()
    expect(page.locator(".lm-DockPanel-tabBar .lm-TabBar-tabLabel", has_text=f"ui-trainer {trained.id} metrics")) \
        .to_be_visible(timeout=15_000)

    # Left open, the section is open again after a reload.
    open_lab_with_sidebar(jupyter_lab, page)
    expect(section(page).locator(f'.jp-gtc-Model[data-model="{MODEL}"]')).to_be_visible(timeout=30_000)
    errors = [line for line in page.console_log if line.startswith("[pageerror]")]
    assert not errors, errors


def test_deploy_from_the_panel_shows_the_endpoint_its_replica_and_requests_then_undeploy(
        jupyter_lab, page, trained, screenshots):
    if not any(m.name == MODEL for m in api.list_models()):
        api.register_model(trained, MODEL)
    version = api.get_model(MODEL).versions[-1].version
    open_lab_with_sidebar(jupyter_lab, page)
    open_models(page)
    row = version_row(page, version)
    row.locator('[data-command="jupyter-gtc:deploy-model"]').click(timeout=30_000)
    dialog = page.locator(".jp-Dialog")
    expect(dialog).to_contain_text(f"Deploy {MODEL}@{version}")
    dialog.locator('select[aria-label="Cluster"]').select_option(CLUSTER)
    dialog.locator(".jp-mod-accept").click()
    # (DEPLOYING shows only until a replica answers: the route answers at once now, and the tiny
    # model may be ready before the section's next look, so the endpoint's READY is what is waited on)

    # Served by the Jupyter server: the endpoint, its one replica ready, no requests yet.
    # (this model's: the session's other tests may have endpoints of their own)
    endpoint = section(page).locator(".jp-gtc-Endpoint").filter(has_text=f"{MODEL}@{version}")
    expect(endpoint.locator(".jp-gtc-State")).to_have_text("READY", timeout=180_000)
    expect(endpoint.locator(".jp-gtc-Endpoint-model")).to_have_text(f"{MODEL}@{version}")
    expect(endpoint.locator(".jp-gtc-Endpoint-replicas")).to_have_text("1/1 replica ready (1–1)")
    endpoint_id = endpoint.get_attribute("data-endpoint")
    expect(row.locator(".jp-gtc-Version-endpoint")).to_have_text("deployed")
    expect(row.locator(".jp-gtc-Version-endpoint")).to_have_attribute("title", re.compile(f"^endpoint {endpoint_id}: "))
    assert api.get_model(f"{MODEL}@{version}").deployment["endpoint"] == endpoint_id
    assert set(jupyter_lab.api("GET", f"gtc/api/endpoints/{endpoint_id}")) == interface_fields("IEndpoint")

    # Requests through the REST route: the section's figures count them, with their latency.
    for prompt in ("The try statement", "A function definition", "The"):
        answer = jupyter_lab.api("POST", f"gtc/api/endpoints/{endpoint_id}/predict",
                                 {"instances": [{"prompt": prompt, "max_tokens": 4}]})
        assert answer["predictions"][0]["tokens"] == 4
    traffic = endpoint.locator(".jp-gtc-Endpoint-traffic")
    expect(traffic).to_have_attribute("title", re.compile(r": 3 requests$"), timeout=15_000)
    expect(traffic).to_have_text(re.compile(r"^\d+\.\d+ req/s · p50 \d+ ms · p95 \d+ ms · 0 errors$"))
    assert_fits(page)
    section(page).screenshot(path=str(screenshots / "models_section_endpoint.png"))

    # Undeploy from the panel: the endpoint goes, its replica's job ends, the version may deploy again.
    replica = jupyter_lab.api("GET", f"gtc/api/endpoints/{endpoint_id}")["replicas"][0]["job"]
    endpoint.locator('[data-command="jupyter-gtc:undeploy-endpoint"]').click()
    expect(dialog).to_contain_text(f"Undeploy endpoint {endpoint_id}?")
    dialog.locator(".jp-mod-accept").click()
    expect(endpoint).to_have_count(0, timeout=60_000)
    expect(row.locator('[data-command="jupyter-gtc:deploy-model"]')).to_be_visible()
    assert api.get_model(f"{MODEL}@{version}").deployment is None
    assert api.get_job(replica, CLUSTER).finished
    errors = [line for line in page.console_log if line.startswith("[pageerror]")]
    assert not errors, errors
