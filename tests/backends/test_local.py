"""The local backend against real daemons: munged, slurmctld and one slurmd per node."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from jupyter_gtc import api
from jupyter_gtc.exceptions import BackendUnavailable, ClusterBusy, ClusterExists, ClusterNotFound, SpecError
from tests.conftest import sleep_until, slurm, small_gpu_spec
from tests.non_root import needs_root

pytestmark = pytest.mark.slurm


def wait_for(check, timeout=30.0, what="condition"):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def job_state(cluster: str, job_id: str) -> str:
    return slurm(cluster, "squeue", "-h", "-j", job_id, "-o", "%T").stdout.strip()


def submit_sleep(cluster: str, node: str, seconds: int = 300) -> str:
    out = slurm(cluster, "sbatch", "--parsable", "-w", node, "-o", "/dev/null", "--wrap", f"sleep {seconds}").stdout
    job_id = out.strip().split(";")[0]
    wait_for(lambda: job_state(cluster, job_id) == "RUNNING", what=f"job {job_id} to run")
    return job_id


def test_nodes_are_idle_with_the_machine_types_gpus(cluster3):
    cluster = api.get_cluster("three")
    assert [n.name for n in cluster.nodes] == ["gpu-0", "gpu-1", "gpu-2"]
    assert all(n.state == "IDLE" and n.ready for n in cluster.nodes)
    assert all(n.gpus == 8 and n.partitions == ("train",) for n in cluster.nodes)
    # a3-highgpu-8g (208 vCPUs, 1872 GB) at resource_scale 0.125
    assert cluster.nodes[0].cpus == 26 and cluster.nodes[0].memory_mb == 1872 * 1024 // 8


def test_srun_runs_on_all_three_nodes(cluster3):
    out = slurm("three", "srun", "-N3", "bash", "-c", "echo $SLURMD_NODENAME").stdout
    assert sorted(out.split()) == ["gpu-0", "gpu-1", "gpu-2"]


def test_a_gpu_job_sees_cuda_visible_devices(cluster3):
    out = slurm("three", "srun", "--gpus=2", "printenv", "CUDA_VISIBLE_DEVICES").stdout
    assert out.strip() == "0,1"


def test_more_gpus_than_a_node_has_are_refused_at_submit(cluster3):
    result = slurm("three", "sbatch", "--gpus-per-node=9", "--wrap", "true", check=False)
    assert result.returncode != 0
    assert "Requested node configuration is not available" in result.stderr


def test_arguments_reach_the_job_literally(cluster3):
    hostile = "a'; echo pwned; \"$(id)\" `id`"
    out = slurm("three", "srun", "printf", "%s", hostile).stdout
    assert out == hostile


def test_another_process_lists_and_describes_the_cluster(cluster3):
    listed = subprocess.run([sys.executable, "-m", "jupyter_gtc.cli", "cluster", "list", "--json"],
                            capture_output=True, text=True, check=True, timeout=60)
    clusters = {c["name"]: c for c in json.loads(listed.stdout)}
    assert clusters["three"]["state"] == "RUNNING"
    assert clusters["three"]["node_count"] == 3 and clusters["three"]["gpu_count"] == 24
    described = subprocess.run([sys.executable, "-m", "jupyter_gtc.cli", "cluster", "describe", "three"],
                               capture_output=True, text=True, check=True, timeout=60)
    for text in ("gpu-0", "gpu-2", "a3-highgpu-8g", "train", "0/8"):
        assert text in described.stdout


def test_a_second_cluster_with_the_same_name_is_refused_and_the_first_is_untouched(cluster3):
    with pytest.raises(ClusterExists):
        api.create_cluster(small_gpu_spec("three", nodes=1))
    assert len(api.get_cluster("three").nodes) == 3


def test_scale_up_and_down_keeps_a_job_on_a_surviving_node(cluster3):
    job = submit_sleep("three", "gpu-0")
    conf = api.cluster_env("three")["SLURM_CONF"]
    # RUNNING in Slurm comes a moment before the batch script has started its sleep.
    wait_for(lambda: _job_processes(conf, "sleep 300"), what="the job's sleep to start")
    pids_before = _job_processes(conf, "sleep 300")

    cluster = api.scale_cluster("three", "gpu", 4)
    assert [n.name for n in cluster.nodes] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    assert all(n.ready for n in cluster.nodes)
    step = slurm("three", "srun", "-N3", "-x", "gpu-0", "bash", "-c", "echo $SLURMD_NODENAME")
    assert sorted(step.stdout.split()) == ["gpu-1", "gpu-2", "gpu-3"], _step_report("three", step)
    assert job_state("three", job) == "RUNNING"

    cluster = api.scale_cluster("three", "gpu", 2)
    assert [n.name for n in cluster.nodes] == ["gpu-0", "gpu-1"]
    assert job_state("three", job) == "RUNNING"
    assert _job_processes(conf, "sleep 300") == pids_before  # the same processes, never restarted
    assert api.get_cluster("three").spec.pool("gpu").node_count == 2

    api.scale_cluster("three", "gpu", 3)
    slurm("three", "scancel", job)


def test_scale_down_refuses_to_remove_a_node_with_a_running_job(cluster3):
    job = submit_sleep("three", "gpu-2", seconds=301)
    with pytest.raises(ClusterBusy) as info:
        api.scale_cluster("three", "gpu", 2)
    assert "gpu-2" in str(info.value) and job in str(info.value)
    cluster = api.get_cluster("three")
    assert cluster.state == "RUNNING" and len(cluster.nodes) == 3
    assert job_state("three", job) == "RUNNING"
    slurm("three", "scancel", job)


def test_scale_errors_name_the_pool_or_count(cluster3):
    with pytest.raises(SpecError) as info:
        api.scale_cluster("three", "login", 2)
    assert info.value.field == "pool" and "gpu" in info.value.expected
    with pytest.raises(SpecError) as info:
        api.scale_cluster("three", "gpu", 0)
    assert info.value.field == "nodes"


def test_two_clusters_run_side_by_side_and_delete_leaves_nothing(cluster3):
    other = api.create_cluster(small_gpu_spec("side", nodes=2, machine="g2-standard-8"))
    runtime = other.runtime
    assert runtime["controller_port"] != cluster3.runtime["controller_port"]
    assert not set(runtime["node_ports"].values()) & set(cluster3.runtime["node_ports"].values())
    out = slurm("side", "srun", "-N2", "--gpus-per-node=1", "printenv", "CUDA_VISIBLE_DEVICES").stdout
    assert out.split() == ["0", "0"]

    submit_sleep("side", "gpu-1", seconds=302)
    conf = api.cluster_env("side")["SLURM_CONF"]
    root = Path(runtime["dir"])
    daemons = _cluster_processes(root)
    assert len(daemons) >= 4  # munged, slurmctld, 2 x slurmd (each with its wrapper and tini)
    wait_for(lambda: _job_processes(conf, "sleep 302"), what="the job's sleep to start")
    job_pids = _job_processes(conf, "sleep 302")
    ports = [runtime["controller_port"], *runtime["node_ports"].values()]

    api.delete_cluster("side")

    assert not [p for p in daemons + job_pids if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]
    assert not _job_processes(conf, "sleep 302")
    assert not [port for port in ports if _port_in_use(port)]
    assert not root.exists()
    with pytest.raises(ClusterNotFound):
        api.get_cluster("side")
    # The other cluster never noticed.
    out = slurm("three", "srun", "-N3", "hostname").stdout
    assert len(out.split()) == 3


def test_a_cluster_missing_from_the_store_is_reported_with_the_known_ones(cluster3):
    with pytest.raises(ClusterNotFound) as info:
        api.get_cluster("nope")
    assert "three" in str(info.value)


def test_gtc_home_with_spaces_is_refused_before_anything_starts(tmp_path, monkeypatch, slurm_available):
    home = tmp_path / "my home"
    monkeypatch.setenv("GTC_HOME", str(home))
    with pytest.raises(BackendUnavailable) as info:
        api.create_cluster(small_gpu_spec("spaced", nodes=1))
    assert "GTC_HOME" in str(info.value) and "my home" in str(info.value)
    assert api.list_clusters() == []
    assert not (home / "clusters" / "spaced").exists()


def test_prolog_scripts_from_the_spec_run_before_each_job(slurm_available, tmp_path):
    marker = tmp_path / "prolog-ran"
    spec = small_gpu_spec("prolog", nodes=1)
    spec["orchestratorSpec"]["slurmSpec"]["prologBashScripts"] = [f"echo $SLURM_JOB_ID >> '{marker}'"]
    api.create_cluster(spec)
    try:
        job = slurm("prolog", "sbatch", "--parsable", "--wait", "-o", "/dev/null", "--wrap", "true").stdout.strip()
        assert marker.read_text().split() == [job]
    finally:
        api.delete_cluster("prolog")


def _cluster_processes(root: Path) -> list[int]:
    """PIDs of the daemons (and their wrappers) whose command line points into ``root``
    or that are recorded in its run folder."""
    pids = []
    for entry in (root / "run").glob("*.json"):
        wrapper = psutil.Process(json.loads(entry.read_text())["pid"])
        pids += [wrapper.pid] + [c.pid for c in wrapper.children(recursive=True)]
    return pids


def _step_report(cluster: str, step: subprocess.CompletedProcess) -> str:
    """What a failed step printed, and the end of every daemon's log: the step's own
    daemons (slurmstepd) log into their node's slurmd log."""
    logs = Path(api.get_cluster(cluster).runtime["dir"]) / "log"
    tails = [f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-15:])
             for log in sorted(logs.glob("*.log"))]
    return "\n".join([f"rc={step.returncode} stdout={step.stdout!r}", f"stderr={step.stderr}", *tails])


def _job_processes(conf: str, cmdline: str) -> list[int]:
    """The processes running ``cmdline`` in jobs of the cluster whose slurm.conf is ``conf``
    (other tests and sessions on this machine run sleeps too; a job inherits its submitter's
    SLURM_CONF)."""
    return sorted(p.pid for p in psutil.process_iter(["cmdline", "status", "environ"])
                  if " ".join(p.info["cmdline"] or []) == cmdline and p.info["status"] != "zombie"
                  and (p.info["environ"] or {}).get("SLURM_CONF") == conf)


def _port_in_use(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return True
    return False


@needs_root
def test_network_namespaces_give_each_node_its_own_hostname_and_ip(slurm_available):
    cluster = api.create_cluster(small_gpu_spec("netns", nodes=2, network="namespaces"))
    net = cluster.runtime["network"]
    namespaces = [f"gtc-{net['cluster_id']}-gpu-{i}" for i in range(2)]
    bridge = f"gtcb{net['cluster_id']}"
    try:
        assert [n.address for n in cluster.nodes] == [f"10.213.{net['subnet']}.10", f"10.213.{net['subnet']}.11"]
        out = slurm("netns", "srun", "-N2", "bash", "-c", "echo $(hostname) $(ip -4 -o addr show eth0)").stdout
        lines = sorted(out.splitlines())
        assert [line.split()[0] for line in lines] == ["gpu-0", "gpu-1"]
        assert f"10.213.{net['subnet']}.10/24" in lines[0] and f"10.213.{net['subnet']}.11/24" in lines[1]
        assert set(namespaces) <= set(_ip("netns", "list").split())

        api.scale_cluster("netns", "gpu", 1)
        assert namespaces[1] not in _ip("netns", "list").split()
    finally:
        api.delete_cluster("netns")
    assert not set(namespaces) & set(_ip("netns", "list").split())
    assert bridge not in _ip("-br", "link")


@needs_root
def test_a_node_made_again_at_its_address_is_reached_by_the_nodes_that_knew_the_old_one():
    """A replaced node is a new machine at the old one's address. Node a learnt b's hardware
    address (ARP) by talking to it; after b is made again, what a has cached must still be b's,
    else a sends into nothing until the entry expires: a job started right after a replace
    failed so (srun: "Communication connection failure" on the new node)."""
    from jupyter_gtc.backends import netns

    net = netns.create_network(f"t{os.getpid() % 0xffff:04x}")
    b_address = net.address(1)
    try:
        netns.add_node(net, "a", 0)
        netns.add_node(net, "b", 1)
        send = [*netns.exec_prefix(net, "a"), sys.executable, "-c",
                f"import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ({b_address!r}, 9))"]

        def a_knows_b() -> str | None:
            subprocess.run(send, check=True, timeout=30)
            entry = _ip("-n", net.netns("a"), "neigh", "show", b_address).split()
            return entry[entry.index("lladdr") + 1] if "lladdr" in entry else None

        assert sleep_until(lambda: a_knows_b() is not None, 30)
        netns.remove_node(net, "b")
        netns.add_node(net, "b", 1)  # the replace: a new namespace and link at the same address
        new_b = _ip("-n", net.netns("b"), "-br", "link", "show", "eth0").split()[2]
        assert a_knows_b() == new_b
    finally:
        netns.remove_node(net, "a")
        netns.remove_node(net, "b")
        netns.remove_bridge(net)


def _ip(*argv: str) -> str:
    return subprocess.run(["ip", *argv], capture_output=True, text=True, check=True, timeout=30).stdout


@needs_root  # the blocker goes where root's munge socket folder goes
def test_a_create_that_fails_halfway_leaves_nothing_behind(slurm_available, tmp_path):
    import hashlib

    from jupyter_gtc.exceptions import ClusterStartError

    # Put a file where munge's socket folder must go: creation fails after the cluster's
    # folder, config and key were made, and must undo all of it.
    root = Path(os.environ["GTC_HOME"]) / "clusters" / "blocked"
    blocker = Path("/run/jupyter_gtc") / hashlib.sha1(str(root).encode()).hexdigest()[:6]
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_text("in the way")
    try:
        with pytest.raises(ClusterStartError) as info:
            api.create_cluster(small_gpu_spec("blocked", nodes=2))
        assert str(blocker) in str(info.value)
        assert "blocked" not in [c.name for c in api.list_clusters()]
        assert not root.exists()
    finally:
        blocker.unlink()
    cluster = api.create_cluster(small_gpu_spec("blocked", nodes=2))  # nothing left in the way
    assert len(cluster.nodes) == 2
    api.delete_cluster("blocked")


def daemons_of(run: Path) -> list[int]:
    """The PIDs of processes carrying ``run``'s mark (daemons.MARK): the cluster's daemons."""
    found = []
    for proc in psutil.process_iter(["environ"]):
        if (proc.info["environ"] or {}).get("GTC_DAEMON", "").startswith(f"{run}/"):
            found.append(proc.pid)
    return found


@needs_root
def test_roots_own_link_at_clusters_is_followed_and_the_cluster_deleted_with_its_daemons(slurm_available, tmp_path,
                                                                                       monkeypatch):
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    home.mkdir(mode=0o700)
    elsewhere.mkdir()
    (home / "clusters").symlink_to(elsewhere)  # root's link, in root's GTC_HOME
    monkeypatch.setenv("GTC_HOME", str(home))
    api.create_cluster(small_gpu_spec("linked", nodes=1))
    run = home / "clusters" / "linked" / "run"
    try:
        assert [n.state for n in api.get_cluster("linked").nodes] == ["IDLE"]
        assert daemons_of(run)
    finally:
        api.delete_cluster("linked")
    assert not (elsewhere / "linked").exists() and daemons_of(run) == []
    assert api.list_clusters(with_status=False) == []


@needs_root
def test_a_cluster_whose_folder_was_removed_by_hand_is_deleted_with_its_daemons_and_munge_folder(slurm_available):
    import hashlib

    api.create_cluster(small_gpu_spec("handgone", nodes=1))
    root = Path(os.environ["GTC_HOME"]) / "clusters" / "handgone"
    munge_dir = Path("/run/jupyter_gtc") / hashlib.sha1(str(root).encode()).hexdigest()[:6]
    assert munge_dir.is_dir() and daemons_of(root / "run")
    while root.exists():
        subprocess.run(["rm", "-rf", str(root)], check=False)
    api.delete_cluster("handgone")
    assert daemons_of(root / "run") == [] and not munge_dir.exists()
    assert "handgone" not in [c.name for c in api.list_clusters(with_status=False)]
