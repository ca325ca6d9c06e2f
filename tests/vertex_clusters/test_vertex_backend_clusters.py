"""``--backend vertex`` with a cluster spec: ``api.create_cluster(spec, backend="vertex")``
creates a Vertex AI training cluster (progress lines from its operation), ``get_cluster`` shows
Vertex's state and nodes, ``scale_cluster`` patches its pools, ``delete_cluster`` deletes it;
a job on it is refused where its login node cannot be reached (test_training_cluster_jobs.py runs them).

Vertex AI is the local endpoint, run on a second GTC_HOME: it serves training clusters as local
clusters in its own state store, which would otherwise hold this test's record of the same name.
The client reaches it at ``vertex.api_endpoint`` (``http://127.0.0.1:PORT``), as it would reach
Google's. No request may leave the machine: proxies point at a port where nothing listens."""

from __future__ import annotations

from pathlib import Path

import pytest

import jupyter_gtc
from jupyter_gtc import api
from jupyter_gtc.exceptions import GtcError, SpecError
from jupyter_gtc.spec.cluster import load_cluster_spec, parse_cluster_spec, parse_spec_text
from jupyter_gtc.state import config
from tests.vertex_clusters.conftest import local_vertex_endpoint

pytestmark = pytest.mark.slurm

EXAMPLE = Path(jupyter_gtc.__file__).parent / "examples" / "clusters" / "local-a3.yaml"


@pytest.fixture(scope="module")
def vertex_home(slurm_available):
    """This test's GTC_HOME, with ``vertex.api_endpoint`` set to a local endpoint serving from another."""
    with local_vertex_endpoint("vxbhost", made=("vxdemo", "vxcli"), second_home="gtc-vertex-") as served:
        yield served.own


def test_create_describe_scale_and_delete_a_training_cluster_through_the_vertex_backend(vertex_home):
    spec = EXAMPLE.read_text().replace("display_name: demo", "display_name: vxdemo")
    lines: list[str] = []
    cluster = api.create_cluster(spec, backend="vertex", progress=lines.append)
    assert cluster.backend == "vertex" and cluster.state == "RUNNING" and not cluster.attached
    assert lines[0] == "creating training cluster vxdemo in projects/local-project/locations/us-central1", lines
    assert lines[-1] == "training cluster vxdemo is RUNNING", lines
    assert len(lines) >= 3, lines  # the operation's own progressMessages between

    assert "vxdemo" in [c.name for c in api.list_clusters()]
    cluster = api.get_cluster("vxdemo")
    assert cluster.status.reachable and cluster.status.details["vertex_state"] == "RUNNING", cluster.status
    assert [(n.state, n.extra["pool"], n.partitions) for n in cluster.nodes] == [("RUNNING", "a3", ("a3",))] * 2
    assert cluster.node_count == 2 and cluster.gpu_count == 16

    with pytest.raises(GtcError) as refused:
        api.submit_job("vxdemo", "#!/bin/bash\nhostname\n")
    # Its login node (in nodesStatus) has no entry in ssh's config here: refused, saying how to reach it.
    assert "login node vxdemo-login-0" in str(refused.value) and "vertex.ssh_config" in str(refused.value)

    lines.clear()
    cluster = api.scale_cluster("vxdemo", "a3", 3, progress=lines.append)
    assert lines[0] == "scaling pool a3 of vxdemo to 3 node(s)", lines
    assert cluster.state == "RUNNING" and [n.state for n in cluster.nodes] == ["RUNNING"] * 3
    assert cluster.spec.pool("a3").node_count == 3 and cluster.node_count == 3

    lines.clear()
    api.delete_cluster("vxdemo", progress=lines.append)
    assert lines[-1] == "deleted training cluster vxdemo", lines
    assert "vxdemo" not in [c.name for c in api.list_clusters(with_status=False)]
    assert load_cluster_spec(EXAMPLE).name == "demo"  # the example itself untouched


def test_a_create_whose_id_is_taken_by_a_cluster_that_does_not_fit_is_refused_and_leaves_it_alone(vertex_home):
    # vxbhost is the endpoint's own cluster: on Vertex, a cluster of that id made elsewhere, whose
    # pool is "gpu", not the spec's "a3".
    spec = EXAMPLE.read_text().replace("display_name: demo", "display_name: vxbhost")
    with pytest.raises(SpecError) as refused:
        api.create_cluster(spec, backend="vertex")
    assert refused.value.field == "node_pools[0]" and refused.value.value == "a3", refused.value
    assert "exists on Vertex (made elsewhere) with pools gpu (" in str(refused.value), refused.value
    assert "vxbhost" not in [c.name for c in api.list_clusters(with_status=False)]  # nothing recorded here
    # The rollback deleted nothing there: a create of another id still runs on that cluster's endpoint.
    api.create_cluster(EXAMPLE.read_text().replace("display_name: demo", "display_name: vxdemo"), backend="vertex")
    api.delete_cluster("vxdemo")


def test_a_training_cluster_made_elsewhere_is_attached_as_it_is_and_never_resized_or_deleted(vertex_home):
    from jupyter_gtc.vertex_clusters.client import TrainingClusters

    # Made on Vertex by someone else (another notebook, the console): our create of the same spec attaches it.
    spec = EXAMPLE.read_text().replace("display_name: demo", "display_name: vxelse")
    vertex = TrainingClusters("local-project", "us-central1", config.load(vertex_home).get("vertex.api_endpoint"),
                              poll_s=0.5)
    vertex.create("vxelse", parse_cluster_spec(parse_spec_text(spec)).to_vertex())
    try:
        lines: list[str] = []
        cluster = api.create_cluster(spec, backend="vertex", progress=lines.append)
        assert cluster.state == "RUNNING" and cluster.node_count == 2, cluster
        assert any("training cluster vxelse exists in projects/local-project/locations/us-central1: attached as it "
                   "is" in line for line in lines), lines
        with pytest.raises(GtcError, match="never resizes a cluster made elsewhere"):
            api.scale_cluster("vxelse", "a3", 3)
        lines.clear()
        api.delete_cluster("vxelse", progress=lines.append)
        assert "forgot training cluster vxelse: it keeps running on Vertex, where it was made" in lines, lines
        assert "vxelse" not in [c.name for c in api.list_clusters(with_status=False)]
        state = vertex.get("vxelse")["clusterStatus"]["state"]
        assert state == "RUNNING" and len(vertex.get("vxelse")["clusterStatus"]["nodesStatus"]) >= 2, state
    finally:
        vertex.delete("vxelse")


def test_gtc_cluster_verbs_drive_a_training_cluster_on_vertex(vertex_home, tmp_path, capsys):
    from jupyter_gtc.cli import main

    def gtc(*args: str) -> str:
        capsys.readouterr()
        code = main(list(args))
        out, err = capsys.readouterr()
        assert code == 0, (args, out, err)
        return out + err

    spec = tmp_path / "vxcli.yaml"
    spec.write_text(EXAMPLE.read_text().replace("display_name: demo", "display_name: vxcli"))
    out = gtc("cluster", "create", "-f", str(spec), "--backend", "vertex")
    assert "creating training cluster vxcli in projects/local-project/locations/us-central1" in out, out
    assert "training cluster vxcli is RUNNING" in out, out
    row = next(line.split() for line in gtc("cluster", "list").splitlines() if line.startswith("vxcli"))
    assert row[1:3] == ["vertex", "RUNNING"] and row[3].endswith("/2") and row[4] == "16", row
    out = gtc("cluster", "describe", "vxcli")
    assert "vertex_state: RUNNING" in out and "modelDevelopmentClusters/vxcli" in out, out
    assert sum(line.split()[:2] in (["a3-0", "running"], ["a3-1", "running"]) for line in out.splitlines()) == 2, out
    out = gtc("cluster", "scale", "vxcli", "--pool", "a3", "--nodes", "3")
    assert "scaling pool a3 of vxcli to 3 node(s)" in out, out
    assert "a3-2" in gtc("cluster", "describe", "vxcli")
    out = gtc("cluster", "delete", "vxcli")
    assert "deleted training cluster vxcli" in out, out
    assert "vxcli" not in gtc("cluster", "list")
