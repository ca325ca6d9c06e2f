"""A normal user's local cluster: every daemon and job runs as that user, only that user may
submit, and deleting it leaves no process of that user behind.

The live tests run as root (CI does) and start the user's Python as ``gtc-test``
(tests/non_root.py); the checks a normal user's spec gets, and the rendering, run anywhere.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from jupyter_gtc.backends import daemons
from jupyter_gtc.backends.local import LocalBackend
from jupyter_gtc.exceptions import SpecErrors
from jupyter_gtc.slurm.render import render_job_submit_lua
from jupyter_gtc.spec import parse_cluster_spec
from tests.conftest import small_gpu_spec
from tests.non_root import normal_user, normal_user_account, processes_left  # noqa: F401  (fixtures)
from tests.slurm.test_render import layout

# -- what a normal user's spec and config get (no daemon) --------------------------------


@pytest.fixture
def as_user(monkeypatch):
    """The backend's checks as a normal user (uid 1001) sees them, in this process."""
    monkeypatch.setattr(os, "geteuid", lambda: 1001)


def test_network_namespaces_are_refused_to_a_normal_user_naming_the_field_and_what_to_use(as_user, tmp_path):
    spec = parse_cluster_spec(small_gpu_spec("nsx", nodes=2, network="namespaces"))
    with pytest.raises(SpecErrors) as info:
        LocalBackend(tmp_path).check_spec(spec)
    error = info.value.errors[0]
    assert (error.field, error.value) == ("local.network", "namespaces")
    assert "needs root" in error.expected and "local.network: host" in error.expected
    assert "--allow-root" in error.expected


def test_a_mount_path_a_normal_user_cannot_make_is_refused_before_anything_starts(as_user, tmp_path, monkeypatch):
    monkeypatch.setattr(daemons, "isolation", lambda: "userns")
    monkeypatch.setattr(os, "access", lambda path, mode: False)  # as /mnt is for a normal user
    spec = small_gpu_spec("mnt", nodes=1)
    spec["nodePools"][0]["filestores"] = [{"filestore": "projects/p/locations/z/instances/data",
                                           "mountPath": "/nonexistent-gtc/data"}]
    with pytest.raises(SpecErrors) as info:
        LocalBackend(tmp_path).check_spec(parse_cluster_spec(spec))
    error = info.value.errors[0]
    assert error.field == "node_pools[0].filestores[0].mount_path" and error.value == "/nonexistent-gtc/data"
    assert "mkdir -p /nonexistent-gtc/data" in error.expected


def test_without_user_namespaces_storage_is_refused_and_shared_hosts_are_said(as_user, tmp_path, monkeypatch):
    monkeypatch.setattr(daemons, "isolation", lambda: "none")
    spec = small_gpu_spec("plain", nodes=1)
    spec["nodePools"][0]["filestores"] = [{"filestore": "projects/p/locations/z/instances/data",
                                           "mountPath": "/mnt/data"}]
    backend = LocalBackend(tmp_path)
    with pytest.raises(SpecErrors) as info:
        backend.check_spec(parse_cluster_spec(spec))
    assert info.value.errors[0].field == "node_pools[0].filestores[0].mount_path"
    assert "user namespaces" in info.value.errors[0].expected
    said = [str(x) for x in backend.not_applied(parse_cluster_spec(small_gpu_spec("plain", nodes=1)))]
    assert any(s.startswith("local.network") and "/etc/hosts" in s for s in said)


def test_a_normal_users_slurm_conf_names_the_user_and_refuses_others_jobs():
    from jupyter_gtc.slurm.render import render_slurm_conf

    conf = render_slurm_conf(layout(slurm_user="gtc-test"))
    assert "SlurmUser=gtc-test\n" in conf and "SlurmdUser=gtc-test\n" in conf
    assert "JobSubmitPlugins=lua\n" in conf
    root = render_slurm_conf(layout())
    assert "SlurmUser=root\n" in root and "JobSubmitPlugins" not in root
    lua = render_job_submit_lua(1001, "gtc-test")
    assert "if submit_uid == 1001 then" in lua
    assert "only gtc-test can submit jobs to it; you are uid \" .. submit_uid" in lua


# -- a real cluster as gtc-test ----------------------------------------------------------


def run_as_user(user, home, *argv: str) -> dict:
    """``python -m tests.backends.as_user ARGV`` as ``user``; its JSON answer."""
    result = user.run([sys.executable, "-m", "tests.backends.as_user", *argv], user.env(home), timeout=300)
    assert result.returncode == 0, f"as {user.name}: {' '.join(argv)} failed:\n{result.stderr[-3000:]}"
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.slurm
@pytest.mark.parametrize("mode", ["userns", "plain"])
def test_a_normal_users_cluster_runs_its_jobs_as_that_user_and_leaves_nothing(slurm_available, normal_user, mode):
    if mode == "userns" and normal_user.python("from jupyter_gtc.backends import daemons; "
                                               "print(daemons.isolation())").stdout.strip() != "userns":
        pytest.skip("this kernel lets no normal user make user namespaces; the plain mode is tested instead")
    home = normal_user.new_home()
    flags = ["--plain"] if mode == "plain" else []
    try:
        made = run_as_user(normal_user, home, "create", "nr", *flags)
        assert made["nodes"] == ["gpu-0", "gpu-1"] and made["runs_as"] == normal_user.name
        resolves = "2" if mode == "userns" else "0"  # the nodes' own /etc/hosts, or the machine's
        want = sorted(f"node=gpu-{i} user={normal_user.name} resolves={resolves}" for i in range(2))
        assert made["step_rc"] == 0 and sorted(made["step"].splitlines()) == want, made["step_error"]
        job = made["job"]
        assert (job["state"], job["exit_code"]) == ("COMPLETED", 0), job["log"]
        assert sorted(job["log"].splitlines()) == want
        assert any(f.endswith("model/model.txt") for f in job["files"])
        assert job["owners"] == [normal_user.uid]  # the job's files are the user's
        assert any(s.startswith("local.network") for s in made["not_applied"]) == (mode == "plain")

        # Anyone else is refused at submit, by the cluster itself, saying whose it is.
        env = {**os.environ, "SLURM_CONF": made["slurm_conf"]}
        for argv in (["sbatch", "--wrap", "id"], ["srun", "-N1", "id"]):
            other = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
            assert other.returncode != 0, f"root's {argv[0]} ran on {normal_user.name}'s cluster: {other.stdout}"
            assert f"only {normal_user.name} can submit jobs to it; you are uid 0" in other.stderr

        done = run_as_user(normal_user, home, "finish", "nr", *flags)
        assert done["sleeps_before_delete"] == 2
        assert done["clusters"] == [] and not done["cluster_dir_left"]
        left = processes_left(normal_user.uid)
        assert not left, f"{normal_user.name} still runs, after its cluster was deleted: {left}"
    finally:
        killed = normal_user.cleanup()
    assert not killed


# What gtc-test runs: its own cluster (accounting on by default), a failing job, sacct as that user.
ACCOUNTING = """
import json, os, subprocess
from jupyter_gtc import api
from tests.conftest import sleep_until, small_gpu_spec
api.create_cluster(small_gpu_spec("nracct", nodes=1, accounting=None))
try:
    job = api.submit_job("nracct", "#!/bin/bash\\nexit 5\\n").wait(timeout=120)
    env = {**os.environ, **api.cluster_env("nracct")}
    def sacct():
        return subprocess.run(["sacct", "-n", "-P", "-X", "-j", job.id, "-o", "JobID,State,ExitCode,User"],
                              env=env, capture_output=True, text=True).stdout.split()
    sleep_until(sacct)
    print(json.dumps({"job": [job.id, job.state], "sacct": sacct()}))
finally:
    api.delete_cluster("nracct")
"""


@pytest.mark.slurm
def test_a_normal_users_cluster_keeps_accounting_as_that_user(slurm_available, normal_user):
    home = normal_user.new_home()
    try:
        result = normal_user.python(ACCOUNTING, home)
        assert result.returncode == 0, result.stderr[-3000:]
        answer = json.loads(result.stdout.strip().splitlines()[-1])
        job_id, state = answer["job"]
        # (Its user is the one Slurm saw submit: in a user namespace, the daemons see the user as root.)
        [line] = answer["sacct"]
        assert state == "FAILED" and line.startswith(f"{job_id}|FAILED|5:0|")
        left = processes_left(normal_user.uid)
        assert not left, f"{normal_user.name} still runs, after its cluster was deleted: {left}"
    finally:
        killed = normal_user.cleanup()
    assert not killed
