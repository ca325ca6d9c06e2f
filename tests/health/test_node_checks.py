"""The node health program as Slurm's HealthCheckProgram or a prolog runs it: a real
process, its JSON and its exit status; faults injected through the node's fault folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from jupyter_gtc.health.checks import xid_verdict


def node_checks(tmp_path, *flags, faults: dict[str, str] | None = None, fault_dir=True):
    env = {k: v for k, v in os.environ.items() if k != "GTC_FAULT_DIR"}
    if fault_dir:
        folder = tmp_path / "faults"
        folder.mkdir(exist_ok=True)
        for fault, text in (faults or {}).items():
            (folder / fault).write_text(text)
        env["GTC_FAULT_DIR"] = str(folder)
    done = subprocess.run([sys.executable, "-m", "jupyter_gtc.health.node", "--json", "--path", str(tmp_path), *flags],
                          env=env, capture_output=True, text=True, timeout=120)
    report = json.loads(done.stdout)
    return done.returncode, {r["check"]: r for r in report["results"]}


def test_a_healthy_cpu_node_passes_and_says_the_gpu_checks_do_not_apply(tmp_path):
    code, results = node_checks(tmp_path)
    assert code == 0
    assert {name: r["verdict"] for name, r in results.items()} == {
        "ecc": "n/a", "xid": "n/a", "speed": "pass", "correctness": "pass", "disk": "pass"}
    assert "no NVIDIA GPU" in results["ecc"]["evidence"]  # n/a says why, never "pass"
    assert "GFLOP/s" in results["speed"]["evidence"] and "GiB free" in results["disk"]["evidence"]


@pytest.mark.parametrize("fault, check", [("ecc", "ecc"), ("xid", "xid"), ("slow", "speed"), ("disk_full", "disk")])
def test_an_injected_fault_fails_its_check_with_the_evidence_and_the_exit_status(tmp_path, fault, check):
    code, results = node_checks(tmp_path, faults={fault: f"test {fault} on gpu-1"})
    assert code == 1
    assert results[check]["verdict"] == "fail" and results[check]["evidence"] == f"injected: test {fault} on gpu-1"
    assert [name for name, r in results.items() if r["verdict"] == "fail"] == [check]


def test_a_hung_check_fails_when_the_budget_is_spent_and_the_others_still_report(tmp_path):
    code, results = node_checks(tmp_path, "--budget", "3", faults={"hang": ""})
    assert code == 1
    assert results["disk"] == {"check": "disk", "verdict": "fail", "evidence": "did not finish within 3 s",
                               "seconds": 3.0}
    assert results["correctness"]["verdict"] == "pass"


def test_a_fault_file_counts_only_in_the_folder_the_local_backend_names(tmp_path):
    (tmp_path / "faults").mkdir()
    (tmp_path / "faults" / "ecc").write_text("left behind")
    code, results = node_checks(tmp_path, fault_dir=False)  # no GTC_FAULT_DIR: a real node
    assert code == 0 and results["ecc"]["verdict"] == "n/a"


def test_critical_xids_in_the_kernel_log_fail_and_others_do_not():
    """The verdict on a GPU node's kernel log (lines as the NVIDIA driver writes them)."""
    log = ("[  12.3] NVRM: Xid (PCI:0000:3b:00): 13, pid=4242, Graphics Exception\n"
           "[  99.1] NVRM: Xid (PCI:0000:86:00): 79, pid=0, GPU has fallen off the bus.\n")
    result = xid_verdict(log)
    assert (result.verdict, result.evidence) == ("fail", "critical XIDs in the kernel log: 79")
    assert xid_verdict("[  12.3] NVRM: Xid (PCI:0000:3b:00): 13, pid=1, Graphics Exception\n").verdict == "pass"
