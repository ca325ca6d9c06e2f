"""SlurmJobApi (vertex_clusters/slurm_api.py) drives a training cluster's jobs through the Slurm
Job API alone, end to end: our client -> the local Vertex endpoint's ``:callSlurmRestApi`` ->
a real slurmrestd (JWT) -> slurmctld, slurmd and slurmdbd of a 2-node training cluster the
endpoint created. The job's folder is on this machine (the cluster's nodes are), so ``host`` is
LOCAL here; on Google's clusters it is the login node. One endpoint and cluster per module."""

from __future__ import annotations

from pathlib import Path

import pytest

import jupyter_gtc
from jupyter_gtc.exceptions import CommandError
from jupyter_gtc.hosts import LOCAL
from jupyter_gtc.slurm.commands import state_refusal
from jupyter_gtc.spec.cluster import load_cluster_spec
from jupyter_gtc.vertex_clusters.client import TrainingClusters
from jupyter_gtc.vertex_clusters.job_desc import OptionRefused
from jupyter_gtc.vertex_clusters.slurm_api import SlurmJobApi
from tests.conftest import sleep_until
from tests.vertex_clusters.conftest import local_vertex_endpoint, training_clusters

pytestmark = pytest.mark.slurm

EXAMPLE = Path(jupyter_gtc.__file__).parent / "examples" / "clusters" / "local-a3.yaml"
CLUSTER = "vxsjapi"


class CountingClusters(TrainingClusters):
    """The real client, counting its Slurm Job API calls (what a quota counts)."""

    calls = 0

    def call_slurm_rest_api(self, *args, **kwargs):
        self.calls += 1
        return super().call_slurm_rest_api(*args, **kwargs)


@pytest.fixture(scope="module")
def slurm_api(slurm_available):
    with local_vertex_endpoint("vxahost", made=(CLUSTER,)) as served:
        clusters = training_clusters(served.endpoint, CountingClusters)
        clusters.create(CLUSTER, load_cluster_spec(EXAMPLE).to_vertex())  # accounting on: the default
        yield SlurmJobApi(clusters, CLUSTER, LOCAL)


def state(slurm_api: SlurmJobApi, job_id: str) -> str | None:
    return next((j.state for j in slurm_api.queue() if j.job_id == job_id), None)


def job_folder(tmp_path_factory, name: str, script: str) -> Path:
    folder = tmp_path_factory.mktemp(name)
    (folder / "job.sbatch").write_text(script)
    return folder


def test_a_two_node_job_runs_and_ends_seen_by_queue_and_accounting(slurm_api, tmp_path_factory):
    # The script asks one node; the options (as our services pass them) ask two and win.
    folder = job_folder(tmp_path_factory, "api2", "#!/bin/bash\n#SBATCH --nodes=1 --job-name=from-script\n"
                                                  "while [ ! -e go ]; do sleep 0.1; done\n"
                                                  "srun printenv SLURMD_NODENAME\necho \"greeting=$GREETING\"\n")
    options = ["--job-name=api2", "--nodes=2", "--ntasks-per-node=1", "--time=5", f"--output={folder}/slurm-%j.out",
               "--open-mode=append"]
    job_id = slurm_api.submit(folder / "job.sbatch", options, {"GREETING": "hello there"}, folder, str(folder))
    assert sleep_until(lambda: state(slurm_api, job_id) == "RUNNING"), state(slurm_api, job_id)

    before = slurm_api.clusters.calls
    running = next(j for j in slurm_api.queue() if j.job_id == job_id)
    assert slurm_api.clusters.calls == before + 1  # the poller's tick: one call, however many jobs
    assert (running.name, running.nodes, running.work_dir) == ("api2", "a3-[0-1]", str(folder))
    assert slurm_api.job_ids(nodes=["a3-1"], states=["RUNNING"]) == [job_id]

    (folder / "go").touch()
    assert sleep_until(lambda: state(slurm_api, job_id) == "COMPLETED"), state(slurm_api, job_id)
    out = (folder / f"slurm-{job_id}.out").read_text().splitlines()
    assert sorted(line for line in out if not line.startswith("greeting=")) == ["a3-0", "a3-1"], out
    assert "greeting=hello there" in out  # env reached the job

    def accounted():
        found = slurm_api.finished_jobs(0, [job_id])[0]
        return found[0] if found and found[0].finished else None

    assert sleep_until(accounted), slurm_api.accounted([job_id])
    done = accounted()
    # (not its name: the local slurmdbd 22.05 recorded such a job as "allocation", with no work
    # dir and one node; sacct -j shows the same, so it is accounting's record, not the API's)
    assert (done.job_id, done.state, done.exit_code) == (job_id, "COMPLETED", 0)
    assert slurm_api.job_ids() == [] or job_id not in slurm_api.job_ids()


def test_cancel_hold_and_release(slurm_api, tmp_path_factory):
    folder = job_folder(tmp_path_factory, "apilong", "#!/bin/bash\nsleep 600\n")
    long = slurm_api.submit(folder / "job.sbatch", ["--job-name=apilong", "--nodes=1"], {}, folder, str(folder))
    held = slurm_api.submit(folder / "job.sbatch", ["--job-name=apiheld", "--hold"], {}, folder, str(folder))
    assert sleep_until(lambda: state(slurm_api, long) == "RUNNING"), state(slurm_api, long)
    status = next(j for j in slurm_api.queue() if j.job_id == held)
    assert (status.state, status.reason) in (("PENDING", "JobHeldUser"), ("PENDING", "JobHeldAdmin")), status

    slurm_api.cancel([long])
    assert sleep_until(lambda: state(slurm_api, long) == "CANCELLED"), state(slurm_api, long)
    with pytest.raises(CommandError) as refused:  # what services/jobs.py turns into JobStateConflict
        slurm_api.hold(long)
    assert state_refusal(refused.value), refused.value
    slurm_api.release(held)
    assert sleep_until(lambda: state(slurm_api, held) == "RUNNING"), state(slurm_api, held)
    slurm_api.cancel([held])
    assert sleep_until(lambda: state(slurm_api, held) == "CANCELLED"), state(slurm_api, held)


def test_nodes_and_ping(slurm_api):
    nodes = {n.name: n for n in slurm_api.nodes()}
    assert set(nodes) == {"a3-0", "a3-1"}
    for node in nodes.values():
        assert node.state in ("IDLE", "MIXED", "ALLOCATED") and node.partitions == ("a3",), node
        assert node.gpus == 8 and node.cpus > 0
    assert slurm_api.ping()


def test_an_option_with_no_rest_field_is_refused_and_nothing_is_submitted(slurm_api, tmp_path_factory):
    folder = job_folder(tmp_path_factory, "apiref", "#!/bin/bash\n#SBATCH --container-image=ubuntu:24.04\ntrue\n")
    before = slurm_api.clusters.calls
    with pytest.raises(OptionRefused, match="`jobs: ssh`"):
        slurm_api.submit(folder / "job.sbatch", ["--job-name=apiref"], {}, folder, str(folder))
    assert slurm_api.clusters.calls == before  # refused here, before any call
    assert "apiref" not in [j.name for j in slurm_api.queue()]


def test_a_submit_with_arguments_that_slurm_refuses_leaves_nothing_behind(slurm_api, tmp_path_factory):
    """argv is the REST API's field for a script's arguments; the local endpoint keeps the script to
    run it with them (slurm/rest_v42.py: slurmrestd 22.05 mishandles argv), and forgets it again
    where Slurm refuses the job."""
    from jupyter_gtc.state import default_home
    from jupyter_gtc.vertex_clusters.client import SlurmApiError

    folder = job_folder(tmp_path_factory, "apiargs", "#!/bin/bash\necho \"$@\"\n")
    kept = default_home() / "clusters" / CLUSTER / "job-scripts"
    before = sorted(kept.iterdir()) if kept.exists() else []
    with pytest.raises(SlurmApiError, match="(?i)partition"):
        slurm_api.submit(folder / "job.sbatch", ["--job-name=apiargs", "--partition=nosuch"], {}, folder,
                         str(folder), ["--lr=0.1"])
    assert "apiargs" not in [j.name for j in slurm_api.queue()]
    assert (sorted(kept.iterdir()) if kept.exists() else []) == before


def test_a_jobs_kept_script_goes_once_the_job_ended(slurm_api, tmp_path_factory):
    """The script kept to run a job with its arguments stays while the job may run it again (a
    requeue), and goes once the job has ended: at the next submit with arguments, not at the
    cluster's delete, so a cluster that runs many jobs does not pile them up."""
    from jupyter_gtc.state import default_home

    kept = default_home() / "clusters" / CLUSTER / "job-scripts"
    folder = job_folder(tmp_path_factory, "apikept", "#!/bin/bash\nwhile [ ! -e \"$1\" ]; do sleep 0.1; done\n")
    first = slurm_api.submit(folder / "job.sbatch", ["--job-name=apikept"], {}, folder, str(folder), [f"{folder}/go"])
    assert sleep_until(lambda: state(slurm_api, first) == "RUNNING"), state(slurm_api, first)
    scripts = set(kept.glob("*.script"))
    assert scripts
    second = slurm_api.submit(folder / "job.sbatch", ["--job-name=apikept"], {}, folder, str(folder),
                              [f"{folder}/go2"])
    assert scripts < set(kept.glob("*.script"))  # the first still runs: its script stays
    (folder / "go").touch()
    assert sleep_until(lambda: state(slurm_api, first) in (None, "COMPLETED")), state(slurm_api, first)
    third = slurm_api.submit(folder / "job.sbatch", ["--job-name=apikept", "--hold"], {}, folder, str(folder), ["x"])
    left = set(kept.glob("*.script"))
    slurm_api.cancel([second, third])
    assert not scripts & left and len(left) == 2, left  # the second's and the third's
