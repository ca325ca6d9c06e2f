"""One contract, every backend: what services ask of a backend, run against each kind of
cluster as Optuna runs one storage suite over every storage. A local cluster; the same kind of
cluster attached from its login node (its slurm.conf); and attached over SSH through a real
sshd. Create or attach, status, submit, queue, finish, cancel, scale where allowed, delete or
detach, and what a half-failed create or attach leaves (nothing)."""

from __future__ import annotations

import shutil
import sys
import uuid
from pathlib import Path

import pytest

from jupyter_gtc import api
from jupyter_gtc.exceptions import ClusterStartError, GtcError, HostUnreachable
from tests.conftest import create_fails_halfway, small_gpu_spec

pytestmark = pytest.mark.usefixtures("slurm_available")

KINDS = ["local", "slurm-login", "slurm-ssh"]
BEHIND = "cbehind"  # the existing cluster the slurm kinds attach


@pytest.fixture(scope="module")
def behind(slurm_available):
    cluster = api.create_cluster(small_gpu_spec(BEHIND, nodes=2))
    yield cluster
    api.delete_cluster(BEHIND)


def _make(kind: str, name: str, request) -> api.Cluster:
    """A cluster of ``kind`` named ``name``: created, or ``behind`` attached."""
    if kind == "local":
        return api.create_cluster(small_gpu_spec(name, nodes=2))
    request.getfixturevalue("behind")
    spec = {"slurm_conf": api.cluster_env(BEHIND)["SLURM_CONF"], "python": f"{sys.prefix}/bin/python",
            "poll_interval": 1}
    if kind == "slurm-ssh":
        sshd = request.getfixturevalue("sshd")
        spec.update(ssh={"host": sshd.alias, "config_file": str(sshd.config)},
                    jobs_root=f"~/gtc-contract-{uuid.uuid4().hex[:8]}")
    else:
        spec["jobs_root"] = str(request.getfixturevalue("tmp_path_factory").mktemp("jobs"))
    return api.attach_cluster(api.parse_spec(spec, "slurm", display_name=name))


def _remove(cluster: api.Cluster) -> None:
    if cluster.attached:
        api.detach_cluster(cluster.name)
        if cluster.runtime.get("ssh"):
            shutil.rmtree(cluster.runtime["jobs_root"], ignore_errors=True)  # the sshd's home is this machine's
    else:
        api.delete_cluster(cluster.name)


@pytest.fixture(scope="module", params=KINDS)
def made(request) -> api.Cluster:
    cluster = _make(request.param, {"local": "clocal", "slurm-login": "clogin", "slurm-ssh": "cssh"}[request.param],
                    request)
    yield cluster
    _remove(cluster)


def test_status_reports_the_nodes_and_the_default_partition(made):
    cluster = api.get_cluster(made.name)
    assert cluster.state == "RUNNING" and cluster.status.reachable
    assert len(cluster.nodes) == 2 and all(n.gpus == 8 for n in cluster.nodes)
    assert [(p.name, len(p.nodes), p.default) for p in cluster.partitions] == [("train", 2, True)]


def test_a_job_is_queued_then_finished_with_its_exit_code_and_log(made):
    job = api.submit_job(made.name, "#!/bin/bash\n#SBATCH --nodes=2\nsrun -N2 bash -c 'echo on-$SLURMD_NODENAME'\n"
                                    "exit 3\n", ["--job-name=contract"])
    assert job.id in [j.id for j in api.list_jobs(made.name)]
    job.wait(timeout=120)
    assert (job.state, job.exit_code) == ("FAILED", 3)
    assert sorted(line for line in job.logs().splitlines() if line.startswith("on-")) == \
        sorted(f"on-{n.name}" for n in made.nodes)


def test_a_running_job_is_cancelled(made):
    job = api.submit_job(made.name, "#!/bin/bash\necho started\nsleep 300\n")
    job.wait_until_running(timeout=60)
    api.cancel_job(job.id, made.name)
    job.wait(timeout=60)
    assert job.state == "CANCELLED"


def test_scale_where_the_backend_allows_it(made):
    if not made.attached:
        assert len(api.scale_cluster(made.name, "gpu", 3).nodes) == 3
        assert len(api.scale_cluster(made.name, "gpu", 2).nodes) == 2
        return
    with pytest.raises(GtcError, match="never resize"):
        api.scale_cluster(made.name, "train", 3)
    assert len(api.get_cluster(BEHIND).nodes) == 2  # the cluster behind is as it was


@pytest.mark.parametrize("kind", KINDS)
def test_delete_or_detach_leaves_nothing_of_ours_and_an_attached_cluster_as_it_was(kind, request):
    cluster = _make(kind, "cgone", request)
    folder = Path(cluster.runtime["dir"]) if not cluster.attached else None
    _remove(cluster)
    assert "cgone" not in [c.name for c in api.list_clusters(with_status=False)]
    if folder is not None:
        assert not folder.exists()
    else:
        assert api.get_cluster(BEHIND).state == "RUNNING"


@pytest.mark.parametrize("kind", KINDS)
def test_a_create_or_attach_that_fails_halfway_records_nothing(kind, request, tmp_path):
    if kind == "local":
        with create_fails_halfway("chalf"), pytest.raises(ClusterStartError):
            api.create_cluster(small_gpu_spec("chalf", nodes=2))
    elif kind == "slurm-login":
        conf = tmp_path / "slurm.conf"  # a cluster whose controller is not there
        conf.write_text("ClusterName=gone\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort=1\n"
                        "NodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n")
        with pytest.raises(GtcError, match="Slurm did not answer"):
            api.attach_cluster({"display_name": "chalf", "slurm_conf": str(conf)})
    else:
        from jupyter_gtc._ports import free_ports

        config = tmp_path / "config"
        config.write_text(f"Host nowhere\n  HostName 127.0.0.1\n  Port {free_ports(1)[0]}\n  ConnectTimeout 5\n")
        with pytest.raises(HostUnreachable):
            api.attach_cluster({"display_name": "chalf", "ssh": {"host": "nowhere", "config_file": str(config)}})
    assert "chalf" not in [c.name for c in api.list_clusters(with_status=False)]
