"""Serving on an attached ``slurm`` cluster reached over SSH (issue 27: "works on local and slurm
clusters"): the tiny Llama deployed as a job of test_slurm_attach.py's cluster, whose nodes are
machines of their own (network namespaces) behind a real sshd login node. The replica binds its
node's address; the front reaches it through a loopback port forwarded over the login node's
shared SSH connection; an undeploy ends the job and the forward."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from jupyter_gtc import api
from jupyter_gtc._ports import listening
from jupyter_gtc.exceptions import SpecError
from tests.backends.test_slurm_attach import SHARED, _attach_over_login, cluster_behind_login  # noqa: F401
from tests.serving.tiny_model import generate_here, save_tiny_llama

pytestmark = pytest.mark.usefixtures("slurm_available")
PROMPTS = ["The try statement", "A function definition"]


@pytest.fixture(scope="module")
def attached(cluster_behind_login):
    cluster, login = cluster_behind_login
    _attach_over_login(cluster, login, "servefar")
    yield cluster, login
    api.detach_cluster("servefar")


def test_the_tiny_llama_deployed_on_an_attached_cluster_answers_through_a_forward_and_undeploys(
        attached, tmp_path, monkeypatch):
    from jupyter_gtc.backends.storage import folder

    cluster, login = attached
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    # The model where the cluster's nodes read it (its filestore at /cluster/scratch), and at the same
    # path here, as a shared file system gives both: the registry checks the folder where it is named.
    name = f"models-{uuid.uuid4().hex[:8]}/tiny"
    here = save_tiny_llama(Path(SHARED) / name)
    there = folder(Path(cluster.runtime["dir"]), "projects/p/locations/z/instances/scratch") / name
    shutil.copytree(here, there)
    try:
        api.register_model(artifact_uri=str(here), model="llama-far")
        ep = api.deploy_model("llama-far", "servefar", min_replicas=1)

        expected = generate_here(here, PROMPTS, 8)
        assert [p["text"] for p in ep.predict([{"prompt": p, "max_tokens": 8} for p in PROMPTS])] == expected

        # The replica listens on its node, not here; the front reaches it through a loopback port
        # forwarded over the login node's connection, which the row records.
        replica = ep.deployment["replicas"][0]
        forward = replica["forward"]
        nodes = {n.name: n.address for n in api.get_cluster("servefar").status.nodes}
        assert forward["node"] in nodes and forward["address"] == nodes[forward["node"]] != "127.0.0.1"
        assert (replica["host"], replica["port"]) == ("127.0.0.1", forward["local"])
        assert listening(forward["local"])
        job = api.get_job(replica["job"], "servefar")
        assert job.state == "RUNNING"

        ep.undeploy()
        assert api.get_job(replica["job"], "servefar").finished
        assert not listening(forward["local"])  # the forward is gone
        assert [e for e in api.list_endpoints() if e.cluster == "servefar"] == []  # (others' tests' are theirs)

        # Undeployed from another process (the CLI): it cancels the forward the row names, on the
        # login node's shared connection.
        ep = api.deploy_model("llama-far", "servefar")
        assert ep.predict([{"prompt": PROMPTS[0], "max_tokens": 8}])[0]["text"] == expected[0]
        deadline = time.monotonic() + 60
        while "forward" not in ep.deployment["replicas"][0]:  # the row follows within 2 s
            assert time.monotonic() < deadline, ep.deployment
            time.sleep(0.1)
        forward = ep.deployment["replicas"][0]["forward"]
        cli = subprocess.run([sys.executable, "-m", "jupyter_gtc.cli", "model", "undeploy", "llama-far"],
                             capture_output=True, text=True, timeout=120)
        assert cli.returncode == 0, cli.stdout + cli.stderr
        assert not listening(forward["local"])
        api.delete_model("llama-far")
    finally:
        shutil.rmtree(Path(SHARED) / name.split("/")[0], ignore_errors=True)
        shutil.rmtree(there.parent, ignore_errors=True)


def test_a_model_folder_the_attached_cluster_lacks_is_refused_naming_it_and_nothing_runs(attached):
    # Here only: /cluster/scratch is the filestore on the login node, an empty folder of ours here.
    local_only = save_tiny_llama(Path(SHARED) / f"here-{uuid.uuid4().hex[:8]}" / "tiny")
    try:
        api.register_model(artifact_uri=str(local_only), model="llama-here")
        before = [j.id for j in api.list_jobs("servefar")]
        with pytest.raises(SpecError) as refused:
            api.deploy_model("llama-here", "servefar")
        assert "artifact_uri" in str(refused.value) and str(local_only) in str(refused.value)
        assert [j.id for j in api.list_jobs("servefar")] == before
        assert [e for e in api.list_endpoints() if e.cluster == "servefar"] == []  # (others' tests' are theirs)
        assert api.get_model("llama-here").deployment is None
        api.delete_model("llama-here")
    finally:
        shutil.rmtree(local_only.parent, ignore_errors=True)


def test_on_a_local_cluster_of_network_namespaces_a_replica_answers_from_its_nodes_address(attached, tmp_path,
                                                                                            monkeypatch):
    """The same design with no SSH: the cluster behind the login node, deployed to as the local
    cluster it is; its nodes are network namespaces, each with an address this machine reaches."""
    cluster, _ = attached
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    tiny = save_tiny_llama(tmp_path / "tiny")  # the nodes see this machine's files but /cluster/scratch
    api.register_model(artifact_uri=str(tiny), model="llama-ns")
    ep = api.deploy_model("llama-ns", cluster.name)
    try:
        assert ep.predict([{"prompt": PROMPTS[0], "max_tokens": 8}])[0]["text"] == generate_here(tiny, PROMPTS[:1], 8)[0]
        replica = ep.replicas[0]
        nodes = {n.address for n in api.get_cluster(cluster.name).status.nodes}
        assert replica["address"].rsplit(":", 1)[0] in nodes  # no forward: the node's own address
        assert "forward" not in ep.deployment["replicas"][0]
    finally:
        ep.undeploy()
    assert api.get_job(replica["job"], cluster.name).finished
    api.delete_model("llama-ns")


def test_a_replica_whose_job_ends_is_replaced_and_its_forward_cancelled(attached, monkeypatch):
    from jupyter_gtc.backends.storage import folder

    cluster, _ = attached
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    name = f"models-{uuid.uuid4().hex[:8]}/tiny"
    here = save_tiny_llama(Path(SHARED) / name)
    there = folder(Path(cluster.runtime["dir"]), "projects/p/locations/z/instances/scratch") / name
    shutil.copytree(here, there)
    try:
        api.register_model(artifact_uri=str(here), model="llama-again")
        ep = api.deploy_model("llama-again", "servefar")
        try:
            expected = ep.predict([{"prompt": PROMPTS[0], "max_tokens": 4}])
            first = ep.deployment["replicas"][0]
            api.get_job(first["job"], "servefar").cancel()  # as a node's failure would end it
            deadline = time.monotonic() + 120
            while True:  # replaced, and the new one reached through its own forward
                now = ep.deployment["replicas"][0]
                if now["job"] != first["job"] and "forward" in now:
                    break
                assert time.monotonic() < deadline, ep.deployment
                time.sleep(0.2)
            assert not listening(first["forward"]["local"])  # the old replica's forward is gone
            while not any(r["healthy"] for r in ep.replicas):
                assert time.monotonic() < deadline, ep.replicas
                time.sleep(0.2)
            assert ep.predict([{"prompt": PROMPTS[0], "max_tokens": 4}]) == expected
        finally:
            ep.undeploy()
        assert not listening(now["forward"]["local"])
        api.delete_model("llama-again")
    finally:
        shutil.rmtree(Path(SHARED) / name.split("/")[0], ignore_errors=True)
        shutil.rmtree(there.parent, ignore_errors=True)
