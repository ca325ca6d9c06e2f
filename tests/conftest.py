"""Fixtures shared by all tests. The real local Slurm cluster fixtures live here.

GTC_HOME is a fresh folder per session (see the conftest.py at the repository root).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

SLURM_PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "srun", "tini", "unshare")


def small_gpu_spec(name: str, nodes: int = 3, machine: str = "a3-highgpu-8g", accounting: bool | None = False,
                   **local) -> dict:
    """A cluster spec in Vertex's camelCase: one GPU pool, one partition, a login pool.

    ``accounting``: False (here) turns slurmdbd off, True turns it on, None leaves the key out
    (on: the default a user gets). Off for most tests, which do not use sacct: with it every
    create takes about a third of a second more (slurmdbd's start, slurmctld's registration:
    MariaDB making Slurm's 31 tables); a scale no longer restarts slurmctld, whose stop waited
    on a thread of Slurm's that sleeps 2 s at a time (backends/local_scale.py). When
    tests/backends/test_local.py and tests/test_magics.py were measured they took 51-54 s with
    it against 32-45 s without, which the suite's time limit cannot absorb
    (bench/bringup_defaults.py; tests/backends/test_accounting.py tests the default)."""
    slurm = {"partitions": [{"id": "train", "nodePoolIds": ["gpu"]}], "loginNodePoolId": "login"}
    if accounting is not None:
        slurm["accounting"] = {"enabled": accounting}
    return {
        "displayName": name,
        "nodePools": [
            {"id": "gpu", "machineSpec": {"machineType": machine},
             "scalingSpec": {"minNodeCount": nodes, "maxNodeCount": nodes}},
            {"id": "login", "machineSpec": {"machineType": "n2-standard-4"},
             "scalingSpec": {"minNodeCount": 1, "maxNodeCount": 1}},
        ],
        "orchestratorSpec": {"slurmSpec": slurm},
        # Declare a small share of the machine type: real sizes work too, but small
        # numbers keep `scontrol` output readable when a test fails.
        "local": {"resourceScale": 0.125, **local},
    }


@pytest.fixture(scope="session")
def slurm_available() -> None:
    """Skip where the local backend cannot run here (Slurm not installed: its problems()), except
    in CI, where that is a failure. A normal user runs these tests too, as root does."""
    from jupyter_gtc.backends.local import LocalBackend

    missing = [p for p in SLURM_PROGRAMS if shutil.which(p) is None]
    problems = [f"Slurm programs missing: {', '.join(missing)}"] if missing else []
    problems += LocalBackend(Path(os.environ["GTC_HOME"])).problems()
    if problems:
        problem = "; ".join(dict.fromkeys(problems))
        if os.environ.get("CI"):
            pytest.fail(f"{problem}; CI must run the local-cluster tests (make test installs Slurm)")
        pytest.skip(f"{problem}; `make test` installs Slurm (as root) and runs them")


@pytest.fixture(scope="module")
def cluster3(slurm_available):
    """A running 3-node cluster, 8 emulated GPUs per node, shared by a test module."""
    from jupyter_gtc import api

    cluster = api.create_cluster(small_gpu_spec("three", nodes=3))
    yield cluster
    api.delete_cluster(cluster.name)


@pytest.fixture(scope="session")
def sshd(tmp_path_factory):
    """A real OpenSSH server on loopback (tests/hosts/sshd.py), shared by the session."""
    from tests.hosts.sshd import SSHD, start_sshd

    if SSHD is None:
        pytest.skip("no sshd: apt-get install openssh-server (make setup does)")
    if os.getuid() != 0:
        pytest.skip("the test sshd runs as root (it needs /run/sshd); run the suite as root")
    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


PROXIES = ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy")


def no_egress(env) -> None:
    """No request may leave the machine: every HTTP(S) client's proxy (``env``, a MonkeyPatch) is
    a port where nothing listens, loopback excepted, so a call meant for Google fails at once."""
    for proxy in PROXIES:
        env.setenv(proxy, "http://127.0.0.1:9")  # discard: nothing answers there
    env.setenv("NO_PROXY", "127.0.0.1,localhost")
    env.setenv("no_proxy", "127.0.0.1,localhost")


def sleep_until(condition, timeout: float = 60) -> bool:
    """Wait, as an idle kernel would, until ``condition()`` holds; False after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@contextlib.contextmanager
def create_fails_halfway(cluster_name: str):
    """While in the block, creating ``cluster_name`` on the local backend fails after it
    started (a file where munge's socket folder must go: ClusterStartError naming the file)
    and is rolled back. Yields the file."""
    root = Path(os.environ["GTC_HOME"]) / "clusters" / cluster_name
    blocker = Path("/run/jupyter_gtc") / hashlib.sha1(str(root).encode()).hexdigest()[:6]
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_text("in the way")
    try:
        yield blocker
    finally:
        blocker.unlink()


def slurm(cluster_name: str, *argv: str, timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess:
    """Run one of Slurm's own commands against a cluster, as a user in a terminal would."""
    from jupyter_gtc import api

    env = {**os.environ, **api.cluster_env(cluster_name)}
    return subprocess.run(list(argv), env=env, capture_output=True, text=True, timeout=timeout, check=check)
