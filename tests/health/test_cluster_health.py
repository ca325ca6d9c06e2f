"""Node health on a real local cluster: Slurm runs the checks as its HealthCheckProgram, a
fault injected into a node drains it with the failed check as the reason, clearing the fault
resumes it, and a node an admin drained by hand is never resumed by the checks."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import psutil
import pytest

from jupyter_gtc import api
from jupyter_gtc.exceptions import SpecError
from tests.conftest import sleep_until, slurm, small_gpu_spec
from tests.test_magics import shell  # noqa: F401 - the IPython shell fixture, with jupyter_gtc loaded

pytestmark = pytest.mark.usefixtures("slurm_available")
INTERVAL = 3  # seconds between HealthCheckProgram runs: short, for the test


@pytest.fixture(scope="module")
def checked(slurm_available):
    # Slurm's HealthCheckProgram alone: a supervisor would remediate the faults these tests inject.
    cluster = api.create_cluster(small_gpu_spec("checked", nodes=2, health_check_interval=INTERVAL, supervisor=False))
    yield cluster
    api.delete_cluster(cluster.name)


def _node(cluster: api.Cluster, name: str):
    return next(n for n in api.get_cluster(cluster.name).nodes if n.name == name)


def _run_after(cluster: api.Cluster, node: str, moment: float) -> bool:
    """Whether the HealthCheckProgram has run on ``node`` since ``moment`` (its record says)."""
    path = Path(cluster.runtime["dir"]) / "health" / f"{node}.json"
    try:
        return json.loads(path.read_text())["time"] > moment
    except FileNotFoundError:
        return False


def test_slurm_runs_the_checks_on_every_node_and_they_pass(checked):
    assert "HealthCheckInterval=3" in slurm(checked.name, "scontrol", "show", "config").stdout.replace(" ", "")
    began = time.time()
    assert sleep_until(lambda: all(_run_after(checked, n, began) for n in ("gpu-0", "gpu-1")), timeout=60)
    rows = api.cluster_health(checked.name, now=False)
    assert [r["node"] for r in rows] == ["gpu-0", "gpu-1"]
    for row in rows:
        assert row["verdict"] in ("pass", "warn") and row["ecc"] == "n/a" and row["correctness"] == "pass", row
        assert row["state"] in ("idle", "mixed", "allocated"), row


def test_an_injected_ecc_error_drains_the_node_naming_the_check_and_clearing_it_resumes_the_node(checked):
    api.inject_fault(checked.name, "gpu-1", "ecc")
    try:
        assert sleep_until(lambda: "DRAIN" in _node(checked, "gpu-1").flags, timeout=60)
        node = _node(checked, "gpu-1")
        assert node.reason.startswith("gtc-health: ecc: injected: ecc injected by gtc fault"), node.reason
        assert "DRAIN" not in _node(checked, "gpu-0").flags
        row = next(r for r in api.cluster_health(checked.name) if r["node"] == "gpu-1")
        assert row["ecc"] == "fail" and row["verdict"] == "fail" and "ecc: injected" in row["evidence"]
    finally:
        api.inject_fault(checked.name, "gpu-1", "ecc", clear=True)
    # Resumed by the next passing run (slurmctld may show it NOT_RESPONDING for a moment, until
    # its next ping of the node): ready to take jobs again.
    assert sleep_until(lambda: _node(checked, "gpu-1").ready, timeout=60), _node(checked, "gpu-1")


def test_a_node_an_admin_drained_stays_drained_though_its_checks_pass(checked):
    slurm(checked.name, "scontrol", "update", "NodeName=gpu-0", "State=DRAIN", "Reason=disk swap by admin")
    try:
        drained = time.time()
        # Two runs of the checks since, both passing: neither may resume it.
        assert sleep_until(lambda: _run_after(checked, "gpu-0", drained + INTERVAL), timeout=60)
        node = _node(checked, "gpu-0")
        assert "DRAIN" in node.flags and node.reason.startswith("disk swap by admin")
    finally:
        slurm(checked.name, "scontrol", "update", "NodeName=gpu-0", "State=RESUME")


def test_health_now_shows_a_full_disk_at_once_with_its_evidence(checked):
    api.inject_fault(checked.name, "gpu-0", "disk_full")
    try:
        rows = {r["node"]: r for r in api.cluster_health(checked.name, now=True)}
        assert rows["gpu-0"]["disk"] == "fail" and "disk: injected: disk_full injected" in rows["gpu-0"]["evidence"]
        assert rows["gpu-1"]["disk"] == "pass"
    finally:
        api.inject_fault(checked.name, "gpu-0", "disk_full", clear=True)


def test_a_crash_stops_the_nodes_slurmd_at_once_its_clear_restarts_it_and_bad_faults_are_named(checked):
    with pytest.raises(SpecError) as unknown:
        api.inject_fault(checked.name, "gpu-9", "ecc")
    assert unknown.value.field == "node" and "gpu-0, gpu-1" in str(unknown.value)
    with pytest.raises(SpecError) as bad:
        api.inject_fault(checked.name, "gpu-1", "meteor")
    assert bad.value.field == "fault" and "crash" in str(bad.value)

    def slurmd_of(node: str) -> list[psutil.Process]:
        conf = api.cluster_env(checked.name)["SLURM_CONF"]
        return [p for p in psutil.process_iter(["cmdline", "environ"])
                if p.info["cmdline"] and p.info["cmdline"][:1] == ["slurmd"] and node in p.info["cmdline"]
                and (p.info["environ"] or {}).get("SLURM_CONF") == conf]

    assert slurmd_of("gpu-1")
    api.inject_fault(checked.name, "gpu-1", "crash")
    assert not slurmd_of("gpu-1") and slurmd_of("gpu-0")
    api.inject_fault(checked.name, "gpu-1", "crash", clear=True)  # the restart a supervisor does
    assert slurmd_of("gpu-1") and sleep_until(lambda: _node(checked, "gpu-1").ready, timeout=60)


def test_faults_are_refused_on_an_attached_cluster(checked, tmp_path):
    api.attach_cluster({"display_name": "real", "slurm_conf": api.cluster_env(checked.name)["SLURM_CONF"],
                        "jobs_root": str(tmp_path)})
    try:
        with pytest.raises(api.GtcError, match="only into local clusters"):
            api.inject_fault("real", "gpu-0", "ecc")
    finally:
        api.detach_cluster("real")
    assert os.path.isdir(checked.runtime["dir"])


def test_the_health_and_fault_magics_and_the_cli(checked, shell):
    from tests.test_cli import gtc

    shell.run_line_magic("gtc_fault", f"{checked.name} gpu-1 slow")
    try:
        table = shell.run_line_magic("gtc_health", checked.name)
        rows = {r["node"]: r for r in (table.to_dict("records") if hasattr(table, "to_dict") else table)}
        assert rows["gpu-1"]["speed"] == "fail" and rows["gpu-1"]["verdict"] == "fail"
        assert "speed: injected: slow injected" in rows["gpu-1"]["evidence"] and rows["gpu-0"]["speed"] == "pass"
        assert rows["gpu-1"]["checked"]  # a time of day
        printed = gtc("cluster", "health", checked.name, "--last", "--json")
        assert printed.returncode == 0 and {r["node"] for r in json.loads(printed.stdout)} == {"gpu-0", "gpu-1"}
    finally:
        shell.run_line_magic("gtc_fault", f"{checked.name} gpu-1 slow --clear")
    refused = gtc("cluster", "fault", checked.name, "gpu-1", "meteor")
    assert refused.returncode == 1 and "fault: 'meteor' is not valid" in refused.stderr
