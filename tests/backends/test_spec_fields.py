"""Spec fields the local backend applies to its nodes (startup scripts, shared storage,
scheduling) and the ones it cannot apply and says so (boot disks, provisioning, networks),
against real daemons. One namespaced cluster serves the module; the failing create has its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jupyter_gtc import api
from jupyter_gtc.backends import storage
from jupyter_gtc.backends.local import LocalBackend
from jupyter_gtc.exceptions import ClusterNotFound, ClusterStartError, SpecErrors
from jupyter_gtc.spec import parse_cluster_spec
from tests.conftest import slurm, small_gpu_spec
from tests.non_root import needs_root

pytestmark = pytest.mark.slurm

NAME = "fields"
# Mount paths made for the cluster and removed with it; this process's own, so that two test
# sessions never share one.
BASE = f"/mnt/gtc-test-{os.getpid()}"
SHARED, LUSTRE = f"{BASE}/shared", f"{BASE}/fast"
# Runs on each node before its slurmd: records the node's own hostname, that no slurmd runs
# yet in the node's PID namespace, and that the storage is mounted already; refuses gpu-2.
STARTUP = """
echo "startup on $(hostname)"
echo "slurmd: $(pgrep -x slurmd || echo none)" > "@MARKS@/$(hostname)"
touch "@SHARED@/booted-$(hostname)"
if [ "$(hostname)" = gpu-2 ]; then echo "gpu-2 has no room here" >&2; exit 3; fi
"""


@pytest.fixture(scope="module")
def fields(slurm_available, tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip(needs_root.kwargs["reason"])  # network namespaces, and mount paths made in /mnt
    marks = tmp_path_factory.mktemp("startup-marks")
    spec = small_gpu_spec(NAME, nodes=2, network="namespaces")
    gpu = spec["nodePools"][0]
    gpu["startupScript"] = STARTUP.replace("@MARKS@", str(marks)).replace("@SHARED@", SHARED)
    gpu["filestores"] = [{"filestore": "projects/p/locations/z/instances/shared", "mountPath": SHARED}]
    gpu["lustres"] = [{"lustre": "projects/p/locations/z/instances/fast", "mountPath": LUSTRE}]
    gpu["bootDisk"] = {"bootDiskType": "hyperdisk-balanced", "bootDiskSizeGb": 200}
    slurm_spec = spec["orchestratorSpec"]["slurmSpec"]
    slurm_spec["homeDirectoryStorage"] = "projects/p/locations/z/instances/home"
    slurm_spec["scheduling"] = {"priorityType": "priority/multifactor", "priorityWeightAge": 1000,
                                "preemptType": "preempt/partition_prio", "preemptMode": "REQUEUE"}
    made_here = [p for p in (BASE, SHARED, LUSTRE) if not os.path.exists(p)]
    steps: list[str] = []
    cluster = api.create_cluster(spec, progress=steps.append)
    yield {"cluster": cluster, "steps": steps, "marks": marks, "made_here": made_here}
    try:
        api.delete_cluster(NAME)
    except ClusterNotFound:
        pass  # the last test deleted it


def on(node: str, command: str) -> str:
    return slurm(NAME, "srun", "-N1", "-w", node, "bash", "-c", command).stdout


def test_the_startup_script_ran_on_each_node_inside_its_namespaces_before_its_slurmd(fields):
    marks = fields["marks"]
    assert sorted(p.name for p in marks.iterdir()) == ["gpu-0", "gpu-1"]  # named by `hostname` on the node
    assert all(p.read_text() == "slurmd: none\n" for p in marks.iterdir())
    logs = Path(fields["cluster"].runtime["dir"]) / "log"
    assert (logs / "startup-gpu-1.log").read_text() == "startup on gpu-1\n"
    assert "running the startup script on 2 node(s)" in fields["steps"]


def test_a_filestore_is_one_folder_that_every_node_of_the_pool_mounts(fields):
    on("gpu-0", f"echo written on $(hostname) > {SHARED}/note")
    assert on("gpu-1", f"cat {SHARED}/note") == "written on gpu-0\n"
    listing = slurm(NAME, "srun", "-N2", "ls", SHARED).stdout.split()
    assert sorted(listing) == sorted(["booted-gpu-0", "booted-gpu-1", "note"] * 2)
    # The files live in the cluster's folder; the machine itself mounts nothing.
    storage = Path(fields["cluster"].runtime["dir"]) / "storage"
    [folder] = [p for p in storage.iterdir() if p.name.startswith("shared-")]
    assert (folder / "note").read_text() == "written on gpu-0\n"
    assert not os.path.ismount(SHARED) and not os.listdir(SHARED)
    assert f"{SHARED} <- {folder}" in api.get_cluster(NAME).status.details["storage"]


def test_home_storage_and_a_lustre_are_mounted_on_every_node(fields):
    slurm(NAME, "srun", "-N2", "bash", "-c", f"touch /home/$(hostname) {LUSTRE}/$(hostname)")
    for node in ("gpu-0", "gpu-1"):
        assert on(node, f"ls /home {LUSTRE}").split() == [
            "/home:", "gpu-0", "gpu-1", f"{LUSTRE}:", "gpu-0", "gpu-1"]
    assert not os.path.exists("/home/gpu-0")  # the machine's /home is not the cluster's


def test_scheduling_options_reach_slurm_conf(fields):
    config = slurm(NAME, "scontrol", "show", "config").stdout
    settings = {k.strip(): v.strip() for k, _, v in (line.partition("=") for line in config.splitlines())}
    assert settings["PriorityType"] == "priority/multifactor"
    assert settings["PriorityWeightAge"] == "1000"
    assert settings["PreemptType"] == "preempt/partition_prio"
    assert settings["PreemptMode"] == "REQUEUE"


def test_a_boot_disk_is_warned_about_at_create_and_shown_by_describe(fields):
    assert ("warning: not applied locally: node_pools[gpu].boot_disk (nodes use this machine's disk)"
            in fields["steps"])
    cluster = json.loads(_gtc("cluster", "describe", NAME, "--json"))
    assert {"field": "node_pools[gpu].boot_disk", "reason": "nodes use this machine's disk"} in cluster["not_applied"]
    assert "not applied locally: node_pools[gpu].boot_disk (nodes use this machine's disk)" in _gtc(
        "cluster", "describe", NAME)
    # Everything else in this spec is applied: nothing more is listed.
    assert [item["field"] for item in cluster["not_applied"]] == ["node_pools[gpu].boot_disk"]


def test_a_node_whose_startup_script_fails_fails_the_scale_which_restores_the_cluster(fields):
    with pytest.raises(ClusterStartError) as info:
        api.scale_cluster(NAME, "gpu", 3)
    message = str(info.value)
    assert "startup script of pool gpu failed on node gpu-2 with exit code 3" in message
    assert "gpu-2 has no room here" in message
    cluster = api.get_cluster(NAME)
    assert cluster.state == "RUNNING" and [n.name for n in cluster.nodes] == ["gpu-0", "gpu-1"]
    assert set(cluster.runtime["node_slots"]) == {"gpu-0", "gpu-1"}
    net = cluster.runtime["network"]
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    assert f"gtc-{net['cluster_id']}-gpu-2" not in namespaces
    assert not (Path(cluster.runtime["dir"]) / "run" / "slurmd-gpu-2.json").exists()
    assert sorted(slurm(NAME, "srun", "-N2", "hostname").stdout.split()) == ["gpu-0", "gpu-1"]


def test_delete_removes_the_storage_and_the_mount_paths_it_made(fields):
    root = Path(fields["cluster"].runtime["dir"])
    api.delete_cluster(NAME)
    assert not root.exists()
    assert [p for p in fields["made_here"] if os.path.exists(p)] == []


@needs_root  # its mount path is made in /mnt
def test_a_failing_startup_script_fails_the_create_with_its_output_and_leaves_nothing(slurm_available):
    # Host network mode: the storage is mounted in the node's own mount namespace all the same.
    mount = f"{BASE}-boots"
    spec = small_gpu_spec("boots", nodes=1)
    spec["nodePools"][0]["filestores"] = [{"filestore": "projects/p/locations/z/instances/data", "mountPath": mount}]
    spec["nodePools"][0]["startupScript"] = f"mountpoint {mount}\necho 'cannot go on' >&2\nexit 7\n"
    root = Path(os.environ["GTC_HOME"]) / "clusters" / "boots"
    with pytest.raises(ClusterStartError) as info:
        api.create_cluster(spec)
    message = str(info.value)
    assert "failed on node gpu-0 with exit code 7" in message
    assert f"{mount} is a mountpoint" in message and "cannot go on" in message
    assert "boots" not in [c.name for c in api.list_clusters(with_status=False)]
    assert not root.exists() and not os.path.exists(mount)


def test_a_mount_path_that_would_hide_what_nodes_need_is_refused_before_anything_starts():
    backend = LocalBackend(Path(os.environ["GTC_HOME"]))
    spec = small_gpu_spec("hide")
    spec["nodePools"][0]["filestores"] = [{"filestore": "fs-a", "mountPath": "/usr"},
                                          {"filestore": "fs-b", "mountPath": str(Path(os.environ["GTC_HOME"]).parent)},
                                          {"filestore": "fs-c", "mountPath": "/mnt/a"},
                                          {"filestore": "fs-d", "mountPath": "/mnt/a/b"},
                                          {"filestore": "x/same"}, {"filestore": "y/same"}]
    with pytest.raises(SpecErrors) as info:
        backend.check_spec(parse_cluster_spec(spec))
    found = {e.field: e.expected for e in info.value.errors}
    assert "would hide /usr" in found["node_pools[0].filestores[0].mount_path"]
    assert "would hide" in found["node_pools[0].filestores[1].mount_path"]
    assert "must not nest" in found["node_pools[0].filestores[3].mount_path"]
    assert "mounted there already" in found["node_pools[0].filestores[5].mount_path"]  # both at /mnt/filestore/same
    assert len(found) == 4
    # The home storage over a GTC_HOME under /home is refused, once, however many pools mount it.
    spec = small_gpu_spec("hide")
    spec["nodePools"].append({**spec["nodePools"][0], "id": "more"})
    spec["orchestratorSpec"]["slurmSpec"]["homeDirectoryStorage"] = "projects/p/locations/z/instances/home"
    with pytest.raises(SpecErrors) as info:
        LocalBackend(Path("/home/ada/gtc")).check_spec(parse_cluster_spec(spec))
    [error] = info.value.errors
    assert error.field == "orchestrator_spec.slurm_spec.home_directory_storage"
    assert "would hide /home/ada/gtc" in error.expected


def test_fields_that_mean_nothing_locally_are_listed_with_why():
    spec = small_gpu_spec("cloud")
    gpu, login = spec["nodePools"]
    gpu.update(provisioningModel="SPOT", zone="us-central1-a", enablePublicIps=True)
    login.update(startupScript="echo hi", filestores=[{"filestore": "fs"}])
    spec["orchestratorSpec"]["slurmSpec"]["accounting"] = {"accounting_storage_enforce": "limits"}
    spec["network"] = {"network": "projects/p/global/networks/n"}
    spec["runtimeSpec"] = {"serviceAccount": "sa@p.iam.gserviceaccount.com"}
    fields = [item.field for item in LocalBackend(Path(os.environ["GTC_HOME"])).not_applied(parse_cluster_spec(spec))]
    assert fields == ["node_pools[gpu].provisioning_model", "node_pools[gpu].zone", "node_pools[gpu].enable_public_ips",
                      "node_pools[login].startup_script", "node_pools[login].filestores",
                      "network", "runtime_spec.service_account"]  # accounting is applied: slurmdbd


def test_storage_without_a_mount_path_goes_under_mnt_by_kind_and_name():
    spec = small_gpu_spec("default")
    spec["nodePools"][0]["filestores"] = [{"filestore": "projects/p/locations/z/instances/fs1"}]
    spec["nodePools"][0]["lustres"] = [{"lustre": "projects/p/locations/z/instances/lu1"}]
    spec = parse_cluster_spec(spec)
    mounts = storage.pool_mounts(spec, spec.pool("gpu"), Path("/c"))
    assert [(m.path, m.field) for m in mounts] == [("/mnt/filestore/fs1", "node_pools[0].filestores[0]"),
                                                   ("/mnt/lustre/lu1", "node_pools[0].lustres[0]")]
    assert mounts[0].folder.parent == Path("/c/storage") and mounts[0].folder.name.startswith("fs1-")


def _gtc(*argv: str) -> str:
    return subprocess.run([sys.executable, "-m", "jupyter_gtc.cli", *argv], capture_output=True, text=True,
                          check=True, timeout=60).stdout
