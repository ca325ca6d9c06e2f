"""Which worker pool each node of a CustomJob's allocation runs, and the CLUSTER_SPEC and
TF_CONFIG its replica sees: Vertex's numbering, an empty placeholder pool included."""

import json

import pytest

from jupyter_gtc.vertex.task import cluster_env, replica_of

POOLS = [{"replicas": 1}, {"replicas": 2}, None, {"replicas": 1}]  # pool 2 left empty, as the SDK sends it
HOSTS = ["n0", "n1", "n2", "n3"]


def test_nodes_are_handed_out_in_pool_order():
    assert [replica_of(POOLS, node) for node in range(4)] == [(0, 0), (1, 0), (1, 1), (3, 0)]
    with pytest.raises(ValueError, match="node 4 is past the 4 replicas"):
        replica_of(POOLS, 4)


def test_cluster_spec_and_tf_config_name_every_replica():
    env = cluster_env(POOLS, HOSTS, 2, {"job_id": "123", "trial": "4"})
    spec, tf = json.loads(env["CLUSTER_SPEC"]), json.loads(env["TF_CONFIG"])
    assert spec["cluster"] == {"workerpool0": ["n0:2222"], "workerpool1": ["n1:2222", "n2:2222"],
                               "workerpool3": ["n3:2222"]}
    assert spec["task"] == {"type": "workerpool1", "index": 1, "trial": "4"}
    assert tf["cluster"] == {"chief": ["n0:2222"], "worker": ["n1:2222", "n2:2222"], "evaluator": ["n3:2222"]}
    assert tf["task"] == {"type": "worker", "index": 1}


def test_several_replicas_get_pytorchs_rendezvous(monkeypatch):
    monkeypatch.setenv("GTC_VERTEX_MASTER_PORT", "41000")
    env = cluster_env(POOLS, HOSTS, 3, {})
    assert {k: env[k] for k in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK")} == {
        "MASTER_ADDR": "n0", "MASTER_PORT": "41000", "WORLD_SIZE": "4", "RANK": "3"}
    assert "RANK" not in cluster_env([{"replicas": 1}], ["n0"], 0, {})  # one replica: a world of one
