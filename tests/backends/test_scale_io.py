"""A step run right after a scale gets every node's output (issue 11), on a cluster made before
scales ran live (its slurm.conf has no room for nodes added at run time).

Such a scale restarts slurmctld, whose fresh node table knows no node's Slurm version until the
node registers. A new node whose first registration came too early (slurmctld not yet
listening: its slurmd tries again 1 s later) still turned IDLE as soon as it answered the
`scontrol reconfigure` that follows (slurmctld marks any node that answers an RPC as up), so
"scaled and ready" came back before it had registered. A step on it was then launched with
the oldest protocol slurmctld supports (20.11, the version it assumes for a node that never
registered); each slurmstepd answered srun's I/O in that old format, which srun 22.05 cannot
read: `io_init_msg_unpack: unpack error`, no output, exit 0.

Under load that race came by itself (2 scale-ups in 15 here); here it is made to happen every time:
the new node's first registration is held unanswered until slurmctld shows the node IDLE.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import threading
import time

import pytest

from jupyter_gtc import api
from jupyter_gtc.backends import daemons, local_scale
from tests.conftest import slurm, small_gpu_spec

pytestmark = pytest.mark.slurm

NAME = "scaleio"


@pytest.fixture(scope="module")
def cluster(slurm_available):
    # A cluster as made before scales ran live (tests/backends/test_scale_live.py): its scale
    # restarts slurmctld, which this race is about.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(local_scale, "new_runtime", lambda: None)
        cluster = api.create_cluster(small_gpu_spec(NAME, nodes=3))
    assert not cluster.runtime.get("live_scale")
    yield cluster
    api.delete_cluster(NAME)


def test_a_step_right_after_scaling_up_prints_every_nodes_output(cluster, monkeypatch):
    job = _submit_sleep("gpu-0")  # slurmctld's restart recovers it; it must run on untouched
    for _ in range(3):
        with _first_registration_held(monkeypatch, cluster.runtime["controller_port"]):
            scaled = api.scale_cluster(NAME, "gpu", 4)
        assert [n.name for n in scaled.nodes] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
        _assert_each_node_prints_its_name(["gpu-1", "gpu-2", "gpu-3"])
        api.scale_cluster(NAME, "gpu", 3)
        _assert_each_node_prints_its_name(["gpu-1", "gpu-2"])
    assert _job_state(job) == "RUNNING"
    slurm(NAME, "scancel", job)


@contextlib.contextmanager
def _first_registration_held(monkeypatch, port: int):
    """While in the block, the scale's new slurmctld starts only once the new node's slurmd
    has sent its first registration to a listener on slurmctld's port, which holds that
    connection unanswered until slurmctld shows the node IDLE (as it does when the node
    answers any RPC, registered or not), then hangs up: the slurmd registers again 1 s later.
    So the node is IDLE and not registered for about a second, as a slow slurmctld start under
    load made it."""
    real_start = daemons.start
    held: dict = {}
    let_go = threading.Event()

    def release_when_idle(node: str, conn: socket.socket) -> None:
        env = {**os.environ, **api.cluster_env(NAME)}
        while not let_go.is_set():
            out = subprocess.run(["scontrol", "-o", "show", "node", node], env=env, capture_output=True, text=True,
                                 timeout=30).stdout
            if " State=IDLE " in out:
                break
            let_go.wait(0.05)
        conn.close()

    def start(label, *args, **kwargs):
        if label == "slurmctld" and not held:  # once: a rollback's restart is left alone
            listener = socket.socket()
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("0.0.0.0", port))
            listener.listen()
            listener.settimeout(30)
            held.update(listener=listener, start=(label, args, kwargs))
            return 0
        pid = real_start(label, *args, **kwargs)
        if label.startswith("slurmd-") and "start" in held:
            with held["listener"]:
                conn, _ = held["listener"].accept()  # the new node's first registration
            ctld_label, ctld_args, ctld_kwargs = held.pop("start")
            real_start(ctld_label, *ctld_args, **ctld_kwargs)
            held["releaser"] = threading.Thread(target=release_when_idle, args=(label.removeprefix("slurmd-"), conn))
            held["releaser"].start()
        return pid

    monkeypatch.setattr(daemons, "start", start)
    try:
        yield
    finally:
        monkeypatch.setattr(daemons, "start", real_start)
        let_go.set()
        if "releaser" in held:
            held["releaser"].join()
        if "listener" in held:
            held["listener"].close()
    assert "releaser" in held, "the scale started no new node, so no registration was held"


def _assert_each_node_prints_its_name(nodes: list[str]) -> None:
    step = slurm(NAME, "srun", f"-N{len(nodes)}", "-x", "gpu-0", "bash", "-c", "echo $SLURMD_NODENAME")
    assert sorted(step.stdout.split()) == nodes, f"rc={step.returncode} stdout={step.stdout!r}\n{step.stderr}"
    assert "io_init" not in step.stderr, step.stderr


def _job_state(job_id: str) -> str:
    return slurm(NAME, "squeue", "-h", "-j", job_id, "-o", "%T").stdout.strip()


def _submit_sleep(node: str) -> str:
    out = slurm(NAME, "sbatch", "--parsable", "-w", node, "-o", "/dev/null", "--wrap", "sleep 303").stdout
    job_id = out.strip().split(";")[0]
    deadline = time.monotonic() + 30
    while _job_state(job_id) != "RUNNING":
        assert time.monotonic() < deadline, f"job {job_id} did not start"
        time.sleep(0.2)
    return job_id
