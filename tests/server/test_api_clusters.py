"""Cluster routes on a real local Slurm cluster: create from spec text, list, describe,
scale, delete (in the background, followed through operations and the feed), and their errors."""

from __future__ import annotations

import time

import yaml

from jupyter_gtc import api
from tests.conftest import create_fails_halfway, small_gpu_spec
from tests.server.api_client import EventStream, call, ok, wait_for


def follow(server, answer: dict, timeout: float = 120) -> dict:
    """The operation that a 202 answer started, once it has finished."""
    return wait_for(lambda: (op := ok(server, "GET", f"operations/{answer['id']}"))["state"] != "RUNNING" and op,
                    timeout=timeout, interval=0.3, what=f"{answer['action']} {answer['cluster']} to finish")


def test_a_cluster_created_scaled_and_deleted_over_rest(jupyter_server, slurm_available):
    spec_text = yaml.safe_dump(small_gpu_spec("restlc", nodes=1))  # what the sidebar sends: a file's text
    stream = EventStream(jupyter_server)
    try:
        stream.next("snapshot")
        asked = time.monotonic()
        status, started = call(jupyter_server, "POST", "clusters", {"spec": spec_text})
        answered = time.monotonic() - asked
        assert status == 202, started
        assert (started["action"], started["cluster"], started["state"]) == ("create", "restlc", "RUNNING")
        # Claimed before the answer: every process sees the name taken, and the cluster CREATING.
        status, again = call(jupyter_server, "POST", "clusters", {"spec": spec_text})
        assert status == 409 and again["kind"] in ("ClusterExists", "ClusterBusy"), again
        created = follow(jupyter_server, started)
        took = created["finished_at"] - created["started_at"]
        print(f"create: answered in {answered:.2f} s, done in {took:.2f} s")
        assert created["state"] == "DONE" and created["error"] is None, created
        cluster = created["result"]
        assert (cluster["name"], cluster["backend"], cluster["state"]) == ("restlc", "local", "RUNNING")
        assert [n["name"] for n in cluster["nodes"]] == ["gpu-0"]
        node = cluster["nodes"][0]
        assert (node["gpus"], node["gpus_allocated"], node["ready"], node["reason"]) == (8, 0, True, None)
        assert node["cpus"] > 0 and node["memory_mb"] > 0
        # The feed sent its steps as they happened, and the cluster once it runs.
        steps = [d["message"] for name, d in stream.history if name == "operation" and d["id"] == started["id"]]
        assert any("slurmd" in m for m in steps) and stream.seen("operation", lambda d: d["state"] == "DONE"), steps
        stream.next("clusters", where=lambda d: any(c["name"] == "restlc" and c["state"] == "RUNNING"
                                                    for c in d["clusters"]))

        listed = ok(jupyter_server, "GET", "clusters")["clusters"]
        assert "restlc" in [c["name"] for c in listed]
        described = ok(jupyter_server, "GET", "clusters/restlc")
        assert described["spec"]["node_pools"][0]["id"] == "gpu" and described["reachable"] is True

        status, scaling = call(jupyter_server, "POST", "clusters/restlc/scale", {"pool": "gpu", "nodes": 2})
        assert status == 202 and scaling["action"] == "scale", scaling
        scaled = follow(jupyter_server, scaling)["result"]
        assert sorted(n["name"] for n in scaled["nodes"]) == ["gpu-0", "gpu-1"]
        assert scaled["spec"]["node_pools"][0]["scaling_spec"]["min_node_count"] == 2
        assert len(api.get_cluster("restlc").nodes) == 2  # the same cluster every front end sees
        assert scaling["id"] in [op["id"] for op in ok(jupyter_server, "GET", "operations")["operations"]]

        # Checked before it starts: a 4xx at once, no operation.
        status, body = call(jupyter_server, "POST", "clusters/restlc/scale", {"pool": "nope", "nodes": 2})
        assert (status, body["kind"]) == (400, "SpecError") and "gpu" in body["message"]
        status, body = call(jupyter_server, "POST", "clusters/restlc/scale", {"pool": "login", "nodes": 2})
        assert status == 400, body  # the login pool runs no slurmd: not a compute pool

        status, deleting = call(jupyter_server, "DELETE", "clusters/restlc")
        assert status == 202 and deleting["action"] == "delete", deleting
        deleted = follow(jupyter_server, deleting)
        assert deleted["state"] == "DONE" and deleted["result"] is None, deleted
        status, body = call(jupyter_server, "GET", "clusters/restlc")
        assert (status, body["kind"]) == (404, "ClusterNotFound")
        status, body = call(jupyter_server, "DELETE", "clusters/restlc")
        assert status == 404
    finally:
        stream.close()
        if "restlc" in [c.name for c in api.list_clusters(with_status=False)]:
            wait_for(lambda: all(op.finished for op in api.cluster_operations().list()), timeout=120)
            api.delete_cluster("restlc")


def test_a_spec_the_backend_refuses_is_a_400_at_once(jupyter_server, slurm_available):
    bad = small_gpu_spec("restbad", nodes=1)
    bad["orchestratorSpec"]["slurmSpec"]["partitions"][0]["nodePoolIds"] = ["nope"]
    status, body = call(jupyter_server, "POST", "clusters", {"spec": bad})
    assert status == 400 and body["kind"] in ("SpecError", "SpecErrors"), body
    assert "restbad" not in [c.name for c in api.list_clusters(with_status=False)]


def test_a_create_that_fails_in_the_background_ends_with_its_error(jupyter_server, slurm_available):
    with create_fails_halfway("restfail") as blocker:
        status, started = call(jupyter_server, "POST", "clusters", {"spec": small_gpu_spec("restfail", nodes=1)})
        assert status == 202, started
        failed = follow(jupyter_server, started)
    assert failed["state"] == "FAILED" and failed["result"] is None, failed
    assert failed["error"]["kind"] == "ClusterStartError" and str(blocker) in failed["error"]["message"]
    assert "restfail" not in [c.name for c in api.list_clusters(with_status=False)]  # rolled back


def test_an_unknown_operation(jupyter_server):
    status, body = call(jupyter_server, "GET", "operations/0-0")
    assert (status, body["kind"]) == (404, "OperationNotFound") and set(body) == {"kind", "message"}


def test_spec_text_that_looks_like_a_file_name_is_not_read_as_one(jupyter_server):
    status, body = call(jupyter_server, "POST", "clusters", {"spec": "/etc/passwd.yaml"})
    assert (status, body["kind"]) == (400, "SpecErrors"), body
