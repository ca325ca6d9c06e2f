"""Every node of a local cluster resolves every node name, in both network modes, so the
usual multi-node script (head node from ``scontrol show hostnames``, ``srun torchrun``
with a c10d rendezvous there) runs unchanged."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from jupyter_gtc import api
from jupyter_gtc._ports import free_ports
from jupyter_gtc.backends.hosts import BEGIN, END
from tests.conftest import small_gpu_spec
from tests.non_root import needs_root

pytestmark = pytest.mark.slurm

# The job runs this interpreter's torchrun; jobs inherit the submitter's environment.
JOB_ENV = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", "OMP_NUM_THREADS": "1"}

RESOLVE = """#!/bin/bash
head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)
srun bash -c 'echo "$SLURMD_NODENAME head $(getent hosts '"$head"')"; echo "$SLURMD_NODENAME self $(getent hosts "$(hostname)")"'
"""

TORCHRUN = """#!/bin/bash
head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)
srun torchrun --nnodes=$SLURM_NNODES --nproc-per-node=1 --rdzv-backend=c10d \\
    --rdzv-endpoint=$head:$RDZV_PORT --rdzv-id=$SLURM_JOB_ID "$1"
"""

ALL_REDUCE = """\
import socket

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
value = torch.tensor([float(rank + 1)])
dist.all_reduce(value)
print(f"rank={rank} world_size={dist.get_world_size()} sum={value.item():g} host={socket.gethostname()}", flush=True)
dist.destroy_process_group()
"""


@pytest.fixture(scope="module", params=["host", pytest.param("namespaces", marks=needs_root)])
def named(request, slurm_available):
    """A 2-node cluster per network mode, shared by this module's tests."""
    name = {"host": "names-host", "namespaces": "names-ns"}[request.param]  # names: 10 characters at most
    cluster = api.create_cluster(small_gpu_spec(name, nodes=2, network=request.param))
    yield cluster
    api.delete_cluster(name)


def test_the_machines_etc_hosts_is_untouched(named):
    # The nodes' bind mounts stay in their own mount namespaces (/etc/hosts may itself be a
    # mount here, as in a container: look for ours, not for any).
    ours = f"/clusters/{named.name}/etc/hosts"
    assert ours not in Path("/proc/self/mountinfo").read_text()
    findmnt = subprocess.run(["findmnt", "/etc/hosts"], capture_output=True, text=True, timeout=30, check=False)
    assert ours not in findmnt.stdout
    assert BEGIN not in Path("/etc/hosts").read_text()
    hosts = (Path(named.runtime["dir"]) / "etc" / "hosts").read_text()
    assert [line.split()[1] for line in _block(hosts)] == [n.name for n in named.nodes]


def test_every_node_resolves_the_head_node_and_itself(named):
    job = api.submit_job(named.name, RESOLVE, ["--nodes=2", "--ntasks-per-node=1", "-J", "resolve"],
                         env=JOB_ENV).wait(timeout=120)
    assert job.state == "COMPLETED", job.logs()
    addresses = {n.name: n.address for n in named.nodes}
    head = min(addresses)
    if named.spec.local.network == "host":
        assert set(addresses.values()) == {"127.0.0.1"}
    lines = sorted(job.logs().splitlines())
    heads = [line.split() for line in lines if line.split()[1] == "head"]
    assert sorted(h[0] for h in heads) == sorted(addresses)
    assert all(h[2:4] == [addresses[head], head] for h in heads), lines
    if named.spec.local.network == "namespaces":
        # gloo finds its interface by resolving the hostname: it must be the node's own IP.
        selves = [line.split() for line in lines if line.split()[1] == "self"]
        assert all(s[2:4] == [addresses[s[0]], s[0]] for s in selves), lines


def test_srun_torchrun_with_a_c10d_rendezvous_all_reduces_over_gloo(named, tmp_path):
    script = tmp_path / "all_reduce.py"
    script.write_text(ALL_REDUCE)
    # In host mode both agents share this machine's ports (and other test runs may hold
    # 29500); with namespaces each node has its own, so the usual port is safe.
    port = 29500 if named.spec.local.network == "namespaces" else free_ports(1)[0]
    job = api.submit_job(named.name, TORCHRUN, ["--nodes=2", "--ntasks-per-node=1", "-J", "torchrun"],
                         script_args=[str(script)], env={**JOB_ENV, "RDZV_PORT": str(port)}).wait(timeout=240)
    log = job.logs()
    assert job.state == "COMPLETED", log
    results = sorted(line for line in log.splitlines() if line.startswith("rank="))
    assert [r.split()[:3] for r in results] == [["rank=0", "world_size=2", "sum=3"],
                                                ["rank=1", "world_size=2", "sum=3"]], log
    if named.spec.local.network == "namespaces":  # one rank on each node
        assert sorted(r.split()[3] for r in results) == [f"host={n.name}" for n in named.nodes]


def test_scale_rewrites_the_hosts_file_that_running_nodes_see(named):
    first = named.nodes[0].name
    bigger = api.scale_cluster(named.name, "gpu", 3)
    try:
        added = bigger.nodes[2]
        out = subprocess.run(["srun", "-w", first, "getent", "hosts", added.name], capture_output=True, text=True,
                             env={**os.environ, **api.cluster_env(named.name)}, timeout=60, check=True).stdout
        assert out.split() == [added.address, added.name]
    finally:
        api.scale_cluster(named.name, "gpu", 2)
    hosts = (Path(named.runtime["dir"]) / "etc" / "hosts").read_text()
    assert [line.split()[1] for line in _block(hosts)] == [n.name for n in named.nodes]


def _block(hosts: str) -> list[str]:
    lines = hosts.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(BEGIN))
    return lines[start + 1: lines.index(END)]
