"""Cluster routes on a real local Slurm cluster: create from spec text, list, describe,
scale, delete, and their errors."""

from __future__ import annotations

import yaml

from jupyter_gtc import api
from tests.conftest import small_gpu_spec
from tests.server.api_client import call, ok


def test_a_cluster_created_scaled_and_deleted_over_rest(jupyter_server, slurm_available):
    spec_text = yaml.safe_dump(small_gpu_spec("restlc", nodes=1))  # what the sidebar sends: a file's text
    try:
        status, created = call(jupyter_server, "POST", "clusters", {"spec": spec_text})
        assert status == 201, created
        assert (created["name"], created["backend"], created["state"]) == ("restlc", "local", "RUNNING")
        assert [n["name"] for n in created["nodes"]] == ["gpu-0"]
        node = created["nodes"][0]
        assert (node["gpus"], node["gpus_allocated"], node["ready"], node["reason"]) == (8, 0, True, None)
        assert node["cpus"] > 0 and node["memory_mb"] > 0

        status, again = call(jupyter_server, "POST", "clusters", {"spec": spec_text})
        assert (status, again["kind"]) == (409, "ClusterExists")

        listed = ok(jupyter_server, "GET", "clusters")["clusters"]
        assert "restlc" in [c["name"] for c in listed]
        described = ok(jupyter_server, "GET", "clusters/restlc")
        assert described["spec"]["node_pools"][0]["id"] == "gpu" and described["reachable"] is True

        scaled = ok(jupyter_server, "POST", "clusters/restlc/scale", {"pool": "gpu", "nodes": 2})
        assert sorted(n["name"] for n in scaled["nodes"]) == ["gpu-0", "gpu-1"]
        assert scaled["spec"]["node_pools"][0]["scaling_spec"]["min_node_count"] == 2
        assert len(api.get_cluster("restlc").nodes) == 2  # the same cluster every front end sees

        status, body = call(jupyter_server, "POST", "clusters/restlc/scale", {"pool": "nope", "nodes": 2})
        assert (status, body["kind"]) == (400, "SpecError") and "gpu" in body["message"]
        status, body = call(jupyter_server, "POST", "clusters/restlc/scale", {"pool": "login", "nodes": 2})
        assert status == 400, body  # the login pool runs no slurmd: not a compute pool

        status, _ = call(jupyter_server, "DELETE", "clusters/restlc")
        assert status == 204
        status, body = call(jupyter_server, "GET", "clusters/restlc")
        assert (status, body["kind"]) == (404, "ClusterNotFound")
        status, body = call(jupyter_server, "DELETE", "clusters/restlc")
        assert status == 404
    finally:
        if "restlc" in [c.name for c in api.list_clusters(with_status=False)]:
            api.delete_cluster("restlc")


def test_spec_text_that_looks_like_a_file_name_is_not_read_as_one(jupyter_server):
    status, body = call(jupyter_server, "POST", "clusters", {"spec": "/etc/passwd.yaml"})
    assert (status, body["kind"]) == (400, "SpecErrors"), body
