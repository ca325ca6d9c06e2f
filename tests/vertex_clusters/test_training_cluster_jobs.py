"""Jobs on a Vertex AI training cluster, through its login node: ``--backend vertex`` creates the
cluster on the local Vertex endpoint (a second GTC_HOME serving training clusters as local
clusters), which reports the login pool's node in ``nodesStatus`` (``<cluster>-login-0``); the
client reaches that node over SSH by its instance name, an alias of the ssh config that
``gtc config vertex.ssh_config`` names (as ``gcloud compute config-ssh`` would write it), here a
real sshd on this machine whose shell reaches the endpoint's cluster (its slurm.conf, given by
the spec's ``login.slurm_conf``). Jobs, logs, metrics, the queue and cancel go through it; the
jobs notebook, written against a local cluster, runs unchanged against a training cluster made
beforehand under its name.

No request leaves the machine: proxies point at a port where nothing listens."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import jupyter_gtc
from jupyter_gtc import api
from jupyter_gtc.state import default_home
from tests.conftest import sleep_until, small_gpu_spec
from tests.vertex_clusters.conftest import local_vertex_endpoint

pytestmark = pytest.mark.slurm

EXAMPLE = Path(jupyter_gtc.__file__).parent / "examples" / "clusters" / "local-a3.yaml"

TWO_NODE_JOB = """#!/bin/bash
#SBATCH --nodes=2
srun bash -c 'echo "STEP=$SLURMD_NODENAME"'
echo "MODEL=$AIP_MODEL_DIR"
printf '{"loss": "%s", "global_step": "%s", "timestamp": 1}\\n' 0.25 7 > "$CLOUD_ML_HP_METRIC_FILE"
"""


@pytest.fixture(scope="module")
def endpoint(slurm_available, sshd, tmp_path_factory):
    """This test's GTC_HOME, with ``vertex.api_endpoint`` set to a local endpoint serving from another
    (yielded too), and ``vertex.ssh_config`` to a config in which every ``*-login-0`` instance is
    the test sshd."""
    ssh_config = tmp_path_factory.mktemp("ssh") / "config"
    ssh_config.write_text(sshd.config.read_text().replace(f"Host {sshd.alias}\n", "Host *-login-0\n"))
    with local_vertex_endpoint("vxjhost", second_home="gtc-vxjobs-",
                               settings={"vertex.ssh_config": str(ssh_config)}) as served:
        yield served.own, served.home


def _login(other: Path, name: str, jobs_root: Path, jobs: str = "ssh") -> dict:
    """The spec's login section: the endpoint's cluster ``name`` reached from the login node's shell
    through its slurm.conf, jobs under ``jobs_root``, with this interpreter's environment."""
    return {"jobs": jobs, "slurm_conf": f"{other}/clusters/{name}/etc/slurm.conf", "jobs_root": str(jobs_root),
            "python": f"{sys.prefix}/bin/python", "poll_interval": 1}


@pytest.fixture(scope="module")
def vxjobs(endpoint, tmp_path_factory):
    """A 2-node training cluster made from examples/clusters/local-a3.yaml with ``--backend vertex``."""
    import yaml

    own, other = endpoint
    spec = yaml.safe_load(EXAMPLE.read_text()) | {"display_name": "vxjobs"}
    spec["login"] = _login(other, "vxjobs", tmp_path_factory.mktemp("jobs"))
    lines: list[str] = []
    cluster = api.create_cluster(spec, backend="vertex", progress=lines.append)
    assert "jobs go through login node vxjobs-login-0 (over SSH)" in lines, lines
    yield cluster
    api.delete_cluster("vxjobs")


def test_a_two_node_job_runs_through_the_login_node_its_log_followed_and_its_metrics_read(vxjobs):
    cluster = api.get_cluster("vxjobs")
    assert cluster.status.details["login_node"] == "vxjobs-login-0", cluster.status.details
    # Slurm's own nodes, read through the login node, with Vertex's pool beside each.
    assert [(n.name, n.ready, n.gpus, n.extra["pool"]) for n in cluster.nodes] == \
        [("a3-0", True, 8, "a3"), ("a3-1", True, 8, "a3")], cluster.nodes
    assert [(p.name, p.nodes) for p in cluster.partitions] == [("a3", ("a3-0", "a3-1"))]

    job = api.submit_job("vxjobs", TWO_NODE_JOB, python_env=None)
    follower = job.follow()
    job.wait(timeout=120)
    assert job.state == "COMPLETED", job.logs()
    followed = follower.read_new()
    assert sorted(line for line in followed.splitlines() if line.startswith("STEP=")) == ["STEP=a3-0", "STEP=a3-1"]
    assert f"MODEL={job.job_dir}/model/" in job.logs().splitlines()
    assert str(job.job_dir).startswith(cluster.runtime["login"]["jobs_root"] + "/vxjobs/")
    metrics = job.metrics()
    assert list(metrics["tag"]) == ["loss"] and list(metrics["value"]) == [0.25]


def test_a_two_node_job_runs_through_the_slurm_job_api_its_files_through_the_login_node(endpoint, tmp_path):
    """``login.jobs: api``: sbatch, squeue and scancel are calls of ``:callSlurmRestApi`` (the
    endpoint's slurmrestd); the job's folder, log and metrics are read through the login node."""
    import yaml

    own, other = endpoint
    spec = yaml.safe_load(EXAMPLE.read_text()) | {"display_name": "vxapi"}
    spec["login"] = _login(other, "vxapi", tmp_path / "jobs", jobs="api")
    api.create_cluster(spec, backend="vertex")
    log = other / "vertex" / "requests.log"
    try:
        assert api.get_cluster("vxapi").status.details["jobs"] == "api"
        calls = log.read_text().count(":callSlurmRestApi")
        job = api.submit_job("vxapi", TWO_NODE_JOB, python_env=None)
        job.wait(timeout=120)
        assert job.state == "COMPLETED" and job.exit_code == 0, job.logs()
        assert sorted(line for line in job.logs().splitlines() if line.startswith("STEP=")) == \
            ["STEP=a3-0", "STEP=a3-1"]
        assert str(job.job_dir).startswith(f"{tmp_path}/jobs/vxapi/")
        assert list(job.metrics()["value"]) == [0.25]
        assert log.read_text().count(":callSlurmRestApi") > calls  # the submit and the polls went through the API
        sleeper = api.submit_job("vxapi", "#!/bin/bash\nsleep 300\n", ["--job-name=sleeper"], python_env=None)
        sleeper.wait_until_running(60)
        api.cancel_job(sleeper.id, "vxapi")
        assert sleeper.wait(60).state == "CANCELLED", sleeper
    finally:
        api.delete_cluster("vxapi")


def test_the_queue_and_cancel_go_through_the_login_node(vxjobs):
    sleeper = api.submit_job("vxjobs", "#!/bin/bash\nsleep 300\n", ["--job-name=sleeper"], python_env=None)
    sleeper.wait_until_running(60)
    assert [j.state for j in api.cluster_queue("vxjobs") if j.id == sleeper.id] == ["RUNNING"]
    api.cancel_job(sleeper.id, "vxjobs")
    sleeper.wait(60)
    assert sleeper.state == "CANCELLED", sleeper


def test_a_job_is_refused_before_anything_is_made_where_the_login_node_does_not_answer(endpoint, tmp_path):
    from jupyter_gtc.exceptions import GtcError

    _, other = endpoint
    spec = small_gpu_spec("vxnologin", nodes=1)
    del spec["local"]  # Vertex has no such block
    spec["login"] = _login(other, "vxnologin", tmp_path / "jobs") | {"ssh": {"host": "nowhere-login-9"}}
    api.create_cluster(spec, backend="vertex")
    try:
        with pytest.raises(GtcError) as refused:
            api.submit_job("vxnologin", "#!/bin/bash\ntrue\n")
        message = str(refused.value)
        assert "login node nowhere-login-9" in message and "vertex.ssh_config" in message, message
        assert "Slurm Job API alone cannot carry a job" in message, message
        assert not (tmp_path / "jobs").exists()  # nothing made
        # Every cluster's jobs are still listed (this one's poller keeps the refusal as its warning).
        assert "vxnologin" not in {j.cluster for j in api.list_jobs()}
    finally:
        api.delete_cluster("vxnologin")


def test_the_jobs_notebook_runs_unchanged_on_a_training_cluster_created_under_its_name(endpoint, tmp_path):
    """notebooks/jobs.ipynb, as a user wrote it against a local cluster: its %%gtc_cluster finds
    `nbjobs`, a training cluster created beforehand with --backend vertex, with the partition,
    nodes and GPUs its spec asks, and uses it as it is; its last cell deletes it (on Vertex)."""
    import nbformat
    from nbclient import NotebookClient

    _, other = endpoint
    spec = small_gpu_spec("nbjobs", nodes=2)
    del spec["local"]  # Vertex has no such block
    spec["login"] = _login(other, "nbjobs", tmp_path / "jobs")
    api.create_cluster(spec, backend="vertex")
    try:
        notebook = nbformat.read(Path(__file__).parents[2] / "notebooks" / "jobs.ipynb", as_version=4)
        NotebookClient(notebook, timeout=300, kernel_name="python3",
                       resources={"metadata": {"path": str(tmp_path)}}).execute()
        assert not (default_home() / "clusters" / "nbjobs").exists()  # no local cluster was made here
        assert (tmp_path / "jobs" / "nbjobs").is_dir()  # its jobs' folders: on the cluster, by its login node
        assert "nbjobs" not in [c.name for c in api.list_clusters(with_status=False)]
    finally:
        if "nbjobs" in [c.name for c in api.list_clusters(with_status=False)]:
            api.delete_cluster("nbjobs")


def test_a_model_served_on_a_training_cluster_answers_through_its_login_node_and_undeploys(vxjobs, tmp_path):
    """Serving, as on an attached cluster: the replica is a job of the training cluster, listening on
    its node; the front reaches it over a forward of the login node's connection."""
    user_server = Path(__file__).parents[1] / "serving" / "user_server.py"
    model = tmp_path / "echo"
    model.mkdir()
    (model / "ready").touch()
    api.register_model(artifact_uri=str(model), model="echo-vx")
    ep = api.deploy_model("echo-vx", "vxjobs", command=[sys.executable, str(user_server)])
    try:
        assert ep.predict([{"x": 1}])[0]["echo"] == {"x": 1}
        # The registry's row says where the front reached it once its health thread wrote it.
        assert sleep_until(lambda: ep.deployment["replicas"][0].get("forward"), 60), ep.deployment
        replica = ep.deployment["replicas"][0]
        assert replica["forward"]["node"] in ("a3-0", "a3-1"), replica  # on the cluster's node, forwarded
        job = api.get_job(replica["job"], "vxjobs")
        assert not job.finished
    finally:
        ep.undeploy()
    assert job.wait(timeout=60).finished and ep.id not in [e.id for e in api.list_endpoints()]


def test_a_scaled_training_cluster_takes_jobs_on_its_new_node(vxjobs):
    """The spec's login section goes through a scale, and Slurm's partitions are read again
    through the login node: a 3-node job fits."""
    cluster = api.scale_cluster("vxjobs", "a3", 3)
    assert cluster.spec.login.jobs == "ssh" and cluster.spec.pool("a3").node_count == 3
    assert [(p.name, p.nodes) for p in cluster.partitions] == [("a3", ("a3-0", "a3-1", "a3-2"))]
    job = api.submit_job("vxjobs", TWO_NODE_JOB, ["--nodes=3"], python_env=None)
    assert job.wait(timeout=120).state == "COMPLETED", job.logs()
    assert sorted(line for line in job.logs().splitlines() if line.startswith("STEP=")) == \
        ["STEP=a3-0", "STEP=a3-1", "STEP=a3-2"]
