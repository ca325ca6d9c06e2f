"""The ``slurm`` backend against real Slurm: a local cluster stands for a cluster that exists
without us, reached the two ways users have, from its login node (its slurm.conf, no ssh) and
over SSH through a real sshd. Attach reads it and changes nothing; jobs get the contract from
their script; detach leaves the cluster and its jobs as they were."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from jupyter_gtc import api
from jupyter_gtc.exceptions import GtcError, HostUnreachable, SpecError, SpecErrors
from jupyter_gtc.state import default_home
from tests.conftest import sleep_until, slurm
from tests.test_magics import shell  # noqa: F401 - the IPython shell fixture, with jupyter_gtc loaded

pytestmark = pytest.mark.usefixtures("slurm_available")

# What a job prints of its contract, one KEY=value a line.
CONTRACT_JOB = """#!/bin/bash
#SBATCH --nodes=2
echo "MODEL=$AIP_MODEL_DIR"
echo "JOBID=$CLOUD_ML_JOB_ID/$SLURM_JOB_ID"
echo "PYTHON=$(command -v python)"
echo "SETUP=$GTC_SETUP_RAN"
srun -N2 bash -c 'echo "STEP=$SLURMD_NODENAME"'
printf '{"loss": "%s", "global_step": "%s", "timestamp": 1}\\n' 0.5 10 > "$CLOUD_ML_HP_METRIC_FILE"
"""


SHARED = "/cluster/scratch"  # the attached cluster's shared file system, as its nodes and login node see it
LOGIN_INDEX = 200  # the login node's place on the cluster's network (nodes take 0, 1, ...)


@pytest.fixture(scope="module")
def cluster_behind_login(slurm_available, tmp_path_factory):
    """A local cluster whose nodes are machines of their own (network namespaces, each with its
    IP) sharing a filestore at /cluster/scratch, and a login node to it: an sshd that is one
    more machine on the cluster's network, with its own IP, and sees that filestore there in a
    mount namespace of its own. This process sees an empty folder at /cluster/scratch, so
    anything read without SSH is not found."""
    from jupyter_gtc.backends import netns
    from jupyter_gtc.backends.storage import folder
    from tests.conftest import small_gpu_spec
    from tests.hosts.sshd import SSHD, start_sshd

    if SSHD is None or os.getuid() != 0:
        pytest.skip("the login node's sshd runs as root, from Debian's openssh-server (make setup installs it)")
    # A site's cluster, as the attached backend finds one: no supervisor of ours asking
    # slurmctld for its jobs (the poller's own requests are counted below).
    spec = small_gpu_spec("behind", nodes=2, network="namespaces", supervisor=False)
    instance = "projects/p/locations/z/instances/scratch"
    spec["nodePools"][0]["filestores"] = [{"filestore": instance, "mountPath": SHARED}]
    cluster = api.create_cluster(spec)
    net = netns.ClusterNet(cluster.runtime["network"]["cluster_id"], cluster.runtime["network"]["subnet"])
    netns.add_node(net, "login", LOGIN_INDEX)
    try:
        server = start_sshd(tmp_path_factory.mktemp("login"), address=net.address(LOGIN_INDEX),
                            netns_prefix=netns.exec_prefix(net, "login"),
                            mounts={SHARED: folder(Path(cluster.runtime["dir"]), instance)})
        yield cluster, server
        server.stop()
    finally:
        netns.remove_node(net, "login")
        api.delete_cluster(cluster.name)


@pytest.fixture(scope="module")
def behind(cluster_behind_login) -> api.Cluster:
    """The cluster every attached one of this module stands for."""
    return cluster_behind_login[0]


def _attach_spec(cluster: api.Cluster, jobs_root: str, **more) -> dict:
    return {"slurm_conf": api.cluster_env(cluster.name)["SLURM_CONF"], "jobs_root": jobs_root,
            "poll_interval": 1, **more}


def _attach_over_login(cluster: api.Cluster, login, name: str, **more) -> api.Cluster:
    """``cluster`` attached as ``name`` through the login node, jobs under /cluster/scratch,
    with this interpreter's environment as the cluster's Python."""
    spec = _attach_spec(cluster, f"{SHARED}/jobs", python=f"{sys.prefix}/bin/python",
                        ssh={"host": login.alias, "config_file": str(login.config)}, **more)
    return api.attach_cluster(api.parse_spec(spec, "slurm", display_name=name))


def _printed(log: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in log.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out.setdefault(key, []).append(value)
    return out


def _check_contract_job(job: api.Job, root: str, python_env: str) -> None:
    job.wait(timeout=120)
    assert job.state == "COMPLETED", job.logs()
    printed = _printed(job.logs())
    assert str(job.job_dir).startswith(f"{root}/") and printed["MODEL"] == [f"{job.job_dir}/model/"]
    assert printed["JOBID"] == [f"{job.id}/{job.id}"]
    assert printed["PYTHON"] == [f"{python_env}/bin/python"]
    assert printed["SETUP"] == ["yes"]
    assert len(set(printed["STEP"])) == 2
    metrics = job.metrics()
    assert list(metrics["tag"]) == ["loss"] and list(metrics["value"]) == [0.5]


def test_on_a_login_node_the_cluster_is_attached_as_it_is_and_runs_jobs_with_the_contract(behind, tmp_path):
    env = str(Path(sys.prefix))
    spec = _attach_spec(behind, str(tmp_path / "jobs"), python=f"{env}/bin/python",
                        setup=["export GTC_SETUP_RAN=yes"])
    hpc = api.attach_cluster(api.parse_spec(spec, "slurm", display_name="hpc"))
    try:
        assert hpc.attached and hpc.backend == "slurm" and hpc.state == "RUNNING"
        assert [(p.name, len(p.nodes), set(p.node_gpus), p.default) for p in hpc.partitions] == \
            [("train", 2, {8}, True)]
        assert (hpc.node_count, hpc.gpu_count) == (2, 16)
        assert hpc.status.details["slurm_version"].startswith("22.05")
        assert hpc.status.details["login"] == "this machine"
        assert sorted(n.name for n in hpc.nodes) == sorted(n.name for n in api.get_cluster(behind.name).nodes)

        job = api.submit_job("hpc", CONTRACT_JOB, python_env=None)
        _check_contract_job(job, f"{tmp_path}/jobs/hpc", env)
        # The job is the cluster's own: its Slurm knows it by the same id.
        assert job.id in slurm(behind.name, "squeue", "-h", "-t", "all", "-o", "%i").stdout.split()

        with pytest.raises(SpecError) as refused:
            api.submit_job("hpc", "#!/bin/bash\ntrue\n", ["--partition=gpu"])
        assert refused.value.field == "partition" and "partitions of hpc: train" in str(refused.value)
        with pytest.raises(GtcError, match="never resizes"):
            api.scale_cluster("hpc", "train", 1)
        with pytest.raises(GtcError, match="delete_cluster"):
            api.detach_cluster(behind.name)  # a cluster we created is deleted, not detached
    finally:
        api.detach_cluster("hpc")
    assert "hpc" not in [c.name for c in api.list_clusters(with_status=False)]
    # Nothing of the cluster went with the detach: its nodes, and the job's folder.
    assert api.get_cluster(behind.name).state == "RUNNING" and job.job_dir.is_dir()


def test_over_ssh_one_connection_carries_the_attach_the_jobs_their_logs_and_metrics(behind, sshd):
    env = str(Path(sys.prefix))
    folder = f"gtc-attach-{uuid.uuid4().hex[:8]}"
    spec = _attach_spec(behind, f"~/{folder}", python=f"{env}/bin/python", setup=["export GTC_SETUP_RAN=yes"],
                        ssh={"host": sshd.alias, "config_file": str(sshd.config)})
    before = sshd.logins()
    hpc = api.attach_cluster(api.parse_spec(spec, "slurm", display_name="far"))
    home = str(Path.home())  # the sshd's user is root, as this process is: its $HOME
    try:
        assert hpc.runtime["jobs_root"] == f"{home}/{folder}"
        assert hpc.status.details["login"] == sshd.alias and hpc.status.reachable
        job = api.submit_job("far", CONTRACT_JOB)
        _check_contract_job(job, f"{home}/{folder}/far", env)

        sleeper = api.submit_job("far", "#!/bin/bash\nsleep 300\n")
        sleeper.wait_until_running(timeout=60)
        api.cancel_job(sleeper.id, "far")
        sleeper.wait(timeout=60)
        assert sleeper.state == "CANCELLED"
        assert sshd.logins() - before == 1  # attach, submits, polls, log and metrics reads: one login
    finally:
        api.detach_cluster("far")
        shutil.rmtree(f"{home}/{folder}", ignore_errors=True)


@pytest.mark.parametrize(("spec", "field"), [
    ({"ssh": {"host": "-oProxyCommand=touch /tmp/pwned"}}, "ssh.host"),
    ({"ssh": {"host": "login", "user": "-l root"}}, "ssh.user"),
    ({"ssh": {"host": "login", "port": 0}}, "ssh.port"),
    ({"jobs_root": "relative/jobs"}, "jobs_root"),
    ({"python": "bin/python"}, "python"),
    ({"poll_interval": 0}, "poll_interval"),
    ({"setup": ["module load a\nrm -rf ~"]}, "setup"),
    ({"partitions": ["a"]}, "partitions"),
])
def test_a_bad_attach_spec_names_the_field_and_records_nothing(spec, field):
    with pytest.raises(SpecErrors) as refused:
        api.attach_cluster({"display_name": "bad", **spec})
    assert [e.field for e in refused.value.errors] == [field]
    assert "bad" not in [c.name for c in api.list_clusters(with_status=False)]


def test_a_login_node_that_does_not_answer_fails_the_attach_and_records_nothing(tmp_path):
    from jupyter_gtc._ports import free_ports

    config = tmp_path / "config"  # a host of its own: no ~/.ssh/config is read
    config.write_text(f"Host nowhere\n  HostName 127.0.0.1\n  Port {free_ports(1)[0]}\n  ConnectTimeout 5\n")
    with pytest.raises(HostUnreachable):
        api.attach_cluster({"display_name": "gone", "ssh": {"host": "nowhere", "config_file": str(config)}})
    assert "gone" not in [c.name for c in api.list_clusters(with_status=False)]


def test_a_slurm_conf_that_is_not_there_is_named_at_once(tmp_path):
    with pytest.raises(SpecError) as refused:
        api.attach_cluster({"display_name": "noslurm", "slurm_conf": str(tmp_path / "no-such.conf")})
    assert refused.value.field == "slurm_conf" and "no such file on this machine" in str(refused.value)
    assert "noslurm" not in [c.name for c in api.list_clusters(with_status=False)]


def test_a_cluster_whose_slurm_does_not_answer_says_what_is_missing(tmp_path):
    conf = tmp_path / "slurm.conf"  # a cluster whose controller is not there
    conf.write_text("ClusterName=gone\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort=9\n")
    with pytest.raises(GtcError) as refused:
        api.attach_cluster({"display_name": "noslurm", "slurm_conf": str(conf)})
    assert "Slurm did not answer on this machine" in str(refused.value)
    assert "noslurm" not in [c.name for c in api.list_clusters(with_status=False)]


def test_the_cluster_json_says_it_is_attached_and_lists_its_partitions(behind, tmp_path):
    hpc = api.attach_cluster(api.parse_spec(_attach_spec(behind, str(tmp_path)), "slurm", display_name="js"))
    try:
        data = json.loads(json.dumps(hpc.to_json()))
        assert data["attached"] is True and data["backend"] == "slurm"
        assert data["partitions"][0]["name"] == "train" and len(data["partitions"][0]["nodes"]) == 2
        assert data["spec"]["slurm_conf"] == api.cluster_env(behind.name)["SLURM_CONF"]
    finally:
        api.detach_cluster("js")


def test_gtc_cluster_attach_describe_and_detach_from_the_command_line(behind, tmp_path):
    from tests.test_cli import gtc

    conf = api.cluster_env(behind.name)["SLURM_CONF"]
    attached = gtc("cluster", "attach", "cli", "--slurm-conf", conf, "--jobs-root", str(tmp_path))
    assert attached.returncode == 0, attached.stderr
    assert "cluster cli attached" in attached.stderr and "gpu-0" in attached.stdout
    described = gtc("cluster", "describe", "cli")
    assert described.returncode == 0 and "train*" in described.stdout and "slurm_version: 22.05" in described.stdout
    refused = gtc("cluster", "scale", "cli", "--pool", "train", "--nodes", "1")
    assert refused.returncode == 1 and "never resizes" in refused.stderr
    assert gtc("cluster", "detach", "cli").returncode == 0
    assert "cli" not in [c.name for c in api.list_clusters(with_status=False)]
    not_attached = gtc("cluster", "detach", behind.name)
    assert not_attached.returncode == 1 and "delete_cluster" in not_attached.stderr


def test_the_gtc_cluster_magic_attaches_with_backend_slurm_and_sbatch_runs_there(behind, shell, tmp_path):
    ip = shell
    cell = f"slurm_conf: {api.cluster_env(behind.name)['SLURM_CONF']}\njobs_root: {tmp_path}\npoll_interval: 1\n"
    panel = ip.run_cell_magic("gtc_cluster", "mag --backend slurm", cell)
    try:
        assert panel.cluster.attached and "partition" in panel.pools_html.value and "train" in panel.pools_html.value
        result = ip.run_cell("%%sbatch --cluster mag --job-name m\necho magic $AIP_MODEL_DIR")
        assert result.success
        job = ip.user_ns["_"]
        job.wait(timeout=60)
        assert job.logs().strip() == f"magic {job.job_dir}/model/"
    finally:
        api.detach_cluster("mag")


def test_over_ssh_every_file_of_a_job_is_read_on_the_login_node(cluster_behind_login):
    cluster, login = cluster_behind_login
    env = str(Path(sys.prefix))
    hpc = _attach_over_login(cluster, login, "shared", setup=["export GTC_SETUP_RAN=yes"])
    try:
        # A machine of its own: its sshd listens on an address of the cluster's network only.
        assert not login.address.startswith("127.") and f"Server listening on {login.address}" in login.log
        assert hpc.runtime["jobs_root"] == f"{SHARED}/jobs"
        job = api.submit_job("shared", CONTRACT_JOB)
        _check_contract_job(job, f"{SHARED}/jobs/shared", env)
        assert not job.job_dir.exists()  # here: the log and metrics above came over SSH
        assert job.log_path is not None and job.host.stat(job.log_path).size > 0
    finally:
        api.detach_cluster("shared")


def _job_info_requests(cluster: str) -> int:
    """slurmctld's own count of job-info requests (what one squeue sends), from sdiag."""
    out = slurm(cluster, "sdiag").stdout
    found = re.search(r"REQUEST_JOB_INFO\s*\(\s*\d+\)\s*count:(\d+)", out)
    return int(found.group(1)) if found else 0


def test_300_watched_jobs_cost_one_squeue_per_tick_and_never_more_than_the_interval_allows(behind, sshd,
                                                                                         tmp_path):
    spec = _attach_spec(behind, str(tmp_path), ssh={"host": sshd.alias, "config_file": str(sshd.config)},
                        poll_interval=2)
    api.attach_cluster(api.parse_spec(spec, "slurm", display_name="kind"))
    try:
        jobs = [api.submit_job("kind", "true", ["--hold", f"--job-name=held-{i}"]) for i in range(300)]
        poller = api.job_poller("kind")
        seen = threading.Event()
        unsubscribe = poller.subscribe(lambda _: seen.set() if all(poller.view(j.id) for j in jobs) else None)
        assert seen.wait(120), "the poller never saw every job"
        unsubscribe()
        ticks, requests, began = poller.ticks, _job_info_requests(behind.name), time.monotonic()
        assert sleep_until(lambda: poller.ticks >= ticks + 4, timeout=120)
        asked, elapsed = _job_info_requests(behind.name) - requests, time.monotonic() - began
        assert 1 <= asked <= poller.ticks - ticks + 1  # one squeue per tick for all 300 (+1: a tick under way)
        assert asked <= elapsed / 2 + 2           # and at most one per poll_interval
        assert all(j.state == "PENDING" and "JobHeld" in (j.reason or "") for j in jobs)
    finally:
        slurm(behind.name, "scancel", "--name", ",".join(f"held-{i}" for i in range(300)), check=False)
        api.detach_cluster("kind")


def test_a_connection_killed_while_a_job_runs_is_replaced_and_the_job_is_followed_to_its_end(behind, sshd,
                                                                                             tmp_path):
    import psutil

    spec = _attach_spec(behind, str(tmp_path), ssh={"host": sshd.alias, "config_file": str(sshd.config)})
    api.attach_cluster(api.parse_spec(spec, "slurm", display_name="drop"))
    try:
        release = tmp_path / "release"
        job = api.submit_job("drop", f"#!/bin/bash\nwhile [ ! -e {release} ]; do sleep 0.2; done\necho done\n")
        job.wait_until_running(timeout=60)
        before = sshd.logins()
        for child in psutil.Process(sshd.process.pid).children(recursive=True):
            child.send_signal(signal.SIGKILL)  # as a network drop or a login node's reboot ends it
        release.touch()
        job.wait(timeout=120)
        assert job.state == "COMPLETED" and job.logs() == "done\n"
        assert sshd.logins() - before == 1
    finally:
        api.detach_cluster("drop")


def test_a_study_of_4_trials_runs_as_the_attached_clusters_jobs_its_files_only_there(cluster_behind_login):
    from tests.tuning.conftest import short_spec

    cluster, login = cluster_behind_login
    _attach_over_login(cluster, login, "tuned")
    try:
        study = api.create_study("tuned", short_spec("{x: {double: [0, 1]}}", trials=4, parallel=2), name="far")
        study.wait(timeout=300)
        assert (study.state, study.reason) == ("SUCCEEDED", None)
        trials = study.snapshot().trials
        assert [t.state for t in trials] == ["COMPLETE"] * 4 and all(t.value is not None for t in trials)
        for t in trials:
            assert t.job_dir == f"{SHARED}/jobs/tuned/studies/far/{t.trial_id}" and not Path(t.job_dir).exists()
    finally:
        api.detach_cluster("tuned")


def test_the_jobs_notebook_runs_unchanged_on_a_cluster_attached_under_its_name(cluster_behind_login, tmp_path):
    """notebooks/jobs.ipynb, as a user wrote it against a local cluster, on the real one: its
    %%gtc_cluster finds `nbjobs` attached (over SSH), with the partition, nodes and GPUs its spec
    asks, and uses it as it is; its last cell detaches it."""
    import nbformat
    from nbclient import NotebookClient

    cluster, login = cluster_behind_login
    _attach_over_login(cluster, login, "nbjobs")
    try:
        notebook = nbformat.read(Path(__file__).parents[2] / "notebooks" / "jobs.ipynb", as_version=4)
        NotebookClient(notebook, timeout=300, kernel_name="python3",
                       resources={"metadata": {"path": str(tmp_path)}}).execute()
        # It ran on the cluster behind the login node: no local cluster was made, and that
        # cluster's slurmctld ran the notebook's jobs.
        assert not (default_home() / "clusters" / "nbjobs").exists()
        ran = slurm(cluster.name, "squeue", "-h", "-t", "all", "-o", "%j %T").stdout.split("\n")
        assert "hello COMPLETED" in ran and "sleeper CANCELLED" in ran
    finally:
        if "nbjobs" in [c.name for c in api.list_clusters(with_status=False)]:
            api.detach_cluster("nbjobs")
    assert api.get_cluster(cluster.name).state == "RUNNING"  # detached: the cluster behind is as it was


def test_a_spec_the_attached_cluster_does_not_fit_is_refused_naming_the_partition(cluster_behind_login, tmp_path):
    from tests.conftest import small_gpu_spec

    cluster, _ = cluster_behind_login
    api.attach_cluster(api.parse_spec(_attach_spec(cluster, str(tmp_path)), "slurm", display_name="fits"))
    try:
        assert api.apply_cluster_spec(small_gpu_spec("fits", nodes=2)).attached
        with pytest.raises(SpecError) as refused:
            api.apply_cluster_spec(small_gpu_spec("fits", nodes=4))
        assert "partition train of the attached cluster fits has 2 node(s)" in str(refused.value)
    finally:
        api.detach_cluster("fits")


def test_gtc_cluster_connect_opens_the_connection_every_later_call_reuses(behind, sshd, tmp_path):
    from tests.test_cli import gtc

    before = sshd.logins()
    opened = gtc("cluster", "connect", sshd.alias, "--ssh-config", str(sshd.config))
    assert opened.returncode == 0, opened.stderr
    assert "reuses the connection" in opened.stderr
    spec = _attach_spec(behind, str(tmp_path), ssh={"host": sshd.alias, "config_file": str(sshd.config)})
    api.attach_cluster(api.parse_spec(spec, "slurm", display_name="mfa"))
    try:
        api.submit_job("mfa", "true").wait(timeout=60)
        assert sshd.logins() - before == 1  # the one login `connect` made: no prompt would come again
    finally:
        api.detach_cluster("mfa")  # and its close ends that connection


def test_a_login_that_asks_for_a_password_is_refused_saying_how_to_connect_once(tmp_path):
    from tests.hosts.sshd import SSHD, start_sshd

    if SSHD is None or os.getuid() != 0:
        pytest.skip("the test sshd runs as root, from Debian's openssh-server (make setup installs it)")
    server = start_sshd(tmp_path / "sshd", password_only=True)
    try:
        with pytest.raises(HostUnreachable) as refused:
            api.attach_cluster({"display_name": "pw", "ssh": {"host": server.alias, "config_file": str(server.config)}})
        assert "Permission denied" in str(refused.value) and f"gtc cluster connect {server.alias}" in str(refused.value)
        assert "pw" not in [c.name for c in api.list_clusters(with_status=False)]
    finally:
        server.stop()


def test_a_requeued_job_on_an_attached_cluster_keeps_its_first_attempts_output(behind, tmp_path):
    hpc = api.attach_cluster(api.parse_spec(_attach_spec(behind, str(tmp_path)), "slurm", display_name="again"))
    try:
        script = '#!/bin/bash\necho "run ${SLURM_RESTART_COUNT:-0}"\n[ -n "$SLURM_RESTART_COUNT" ] || sleep 300\n'
        job = api.submit_job(hpc.name, script, ["--requeue"]).wait_until_running(timeout=60)
        assert sleep_until(lambda: "run 0" in job.logs(), 60)
        job.requeue()
        job.wait(timeout=120)
        first, marker, second = job.logs().partition("--- jupyter_gtc: attempt 2 (requeued)")
        assert "run 0" in first and marker and second.endswith("run 1\n"), job.logs()
    finally:
        api.detach_cluster("again")


def test_tensorboard_of_a_job_on_the_login_nodes_side_reads_a_mirror_that_keeps_up(cluster_behind_login):
    import urllib.request

    cluster, login = cluster_behind_login
    _attach_over_login(cluster, login, "board")
    board = None
    try:
        job = api.submit_job("board", "#!/bin/bash\npython -m jupyter_gtc.examples.tiny_regression --steps 40\n")
        job.wait(timeout=180)
        assert job.state == "COMPLETED" and not job.log_dir.exists()  # the events are on the far side only
        board = api.job_tensorboard(job.id, "board")

        def steps() -> int:
            url = f"{board.url}data/plugin/scalars/scalars?run=.&tag=train/loss"
            try:
                with urllib.request.urlopen(url, timeout=5) as answer:
                    return len(json.loads(answer.read()))
            except OSError:
                return 0

        assert sleep_until(lambda: steps() == 40, timeout=90), steps()
    finally:
        if board is not None:
            board.stop()
        api.detach_cluster("board")
