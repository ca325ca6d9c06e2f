"""Every route of ours guards itself: without a login it refuses even on a server that lets
unauthenticated requests through to extensions (the server's default), and it asks the
deployment's Authorizer: "read" for GET and HEAD, "write" for POST and DELETE, and "execute"
as well for a cluster spec whose scripts run as root on the nodes.

The routes come from the extension's own route table (``app_routes``), so a new one is
checked without anyone listing it here."""

from __future__ import annotations

import yaml

from jupyter_gtc import api
from tests.conftest import small_gpu_spec
from tests.server.api_client import READ_METHODS, answer, app_routes, call, ok, wait_for

ROUTES = app_routes()
WRITES = [(m, p) for m, p in ROUTES if m not in READ_METHODS]
READS = [(m, p) for m, p in ROUTES if m in READ_METHODS]
# An XSRF cookie and header that match: what a page of any origin can send, so a write
# without a login gets past the XSRF check to our handlers' own checks.
FORGED_XSRF = {"Cookie": "_xsrf=forged", "X-XSRFToken": "forged"}


def test_the_route_table_has_reads_and_writes():
    assert len(READS) >= 10 and len(WRITES) >= 9, ROUTES
    assert ("GET", "gtc/api/events") in READS and ("POST", "gtc/api/clusters") in WRITES


def test_without_a_login_every_route_refuses_by_its_own_checks(authz_server):
    served = []
    for method, path in ROUTES:
        status, headers, body = answer(authz_server, method, path, token=False,
                                       headers=None if method in READ_METHODS else FORGED_XSRF)
        message = (body or {}).get("message", "")
        to_login = status == 302 and "/login" in headers.get("Location", "")  # a page's GET: the login page
        if not (status == 403 or to_login) or "_xsrf" in message:
            served.append((method, path, status, body))
    assert not served, f"answered without a login: {served}"


def test_an_authorizer_that_refuses_writes_gets_403_on_every_write_route(authz_server, policy):
    policy("write")
    wrong = []
    for method, path in ROUTES:
        status, _, body = answer(authz_server, method, path)
        if method in READ_METHODS:
            if not _reached(path, status, body):
                wrong.append((method, path, status, body))
        elif status != 403 or "not authorized to write" not in body["message"]:
            wrong.append((method, path, status, body))
    assert not wrong, wrong


def test_an_authorizer_that_refuses_reads_gets_403_on_every_read_route(authz_server, policy):
    policy("read")
    wrong = []
    for method, path in ROUTES:
        status, _, body = answer(authz_server, method, path)
        if method in READ_METHODS:
            if status != 403 or (body is not None and "not authorized to read" not in body["message"]):
                wrong.append((method, path, status, body))
        elif status == 403 or body["kind"] == "HTTPError":  # a write reaches the api: 404, or 400 for "{}"
            wrong.append((method, path, status, body))
    assert not wrong, wrong


def _reached(path: str, status: int, body) -> bool:
    """Whether a read passed every check: 200, or 404 from the api itself (its own error kind,
    not tornado's) for a name or id that does not exist (``_EXAMPLES``: "none", endpoint "1")."""
    from_the_api = status == 404 and bool(body) and body["kind"] != "HTTPError"
    return from_the_api if "/none" in path else status == 200 or from_the_api


# -- scripts that run as root: "execute" ---------------------------------------------------

def _spec(name: str, prolog: bool = False, startup: bool = False) -> dict:
    spec = small_gpu_spec(name, nodes=1)
    if prolog:
        spec["orchestratorSpec"]["slurmSpec"]["prologBashScripts"] = ["true"]
    if startup:
        spec["nodePools"][0]["startupScript"] = "echo started"
    return spec


def _follow(server, started: dict) -> dict:
    done = wait_for(lambda: (op := ok(server, "GET", f"operations/{started['id']}"))["state"] != "RUNNING" and op,
                    timeout=180, interval=0.3, what=f"{started['action']} {started['cluster']}")
    assert done["state"] == "DONE", done
    return done


def _names() -> list[str]:
    return [c.name for c in api.list_clusters(with_status=False)]


def test_a_create_with_scripts_needs_execute_and_creates_nothing_without(authz_server, policy, slurm_available):
    policy("execute")
    try:
        for spec, field in [(_spec("azprolog", prolog=True), "prolog_bash_scripts"),
                            (_spec("azprolog", startup=True), "node_pools[gpu].startup_script")]:
            # The sidebar sends a file's text; the spec is read before anything is claimed.
            status, body = call(authz_server, "POST", "clusters", {"spec": yaml.safe_dump(spec)})
            assert status == 403 and "execute" in body["message"] and field in body["message"], body
            assert "azprolog" not in _names()
            operations = ok(authz_server, "GET", "operations")["operations"]
            assert "azprolog" not in [op["cluster"] for op in operations]

        # Without scripts, "write" is enough, to create and to scale.
        status, started = call(authz_server, "POST", "clusters", {"spec": _spec("azplain")})
        assert status == 202, started
        assert _follow(authz_server, started)["result"]["state"] == "RUNNING"
        status, scaling = call(authz_server, "POST", "clusters/azplain/scale", {"pool": "gpu", "nodes": 2})
        assert status == 202, scaling
        assert len(_follow(authz_server, scaling)["result"]["nodes"]) == 2
    finally:
        _delete_when_idle(authz_server, "azplain")


def test_a_scale_of_a_cluster_whose_spec_has_scripts_needs_execute(authz_server, policy, slurm_available):
    try:
        # Created while the Authorizer allows "execute"...
        status, started = call(authz_server, "POST", "clusters", {"spec": _spec("azscripts", prolog=True)})
        assert status == 202, started
        _follow(authz_server, started)
        # ... a user who may not "execute" may not scale it: the scale applies its scripts again.
        policy("execute")
        status, body = call(authz_server, "POST", "clusters/azscripts/scale", {"pool": "gpu", "nodes": 2})
        assert status == 403 and "prolog_bash_scripts" in body["message"], body
        assert len(ok(authz_server, "GET", "clusters/azscripts")["nodes"]) == 1
        assert not [op for op in ok(authz_server, "GET", "operations")["operations"]
                    if op["cluster"] == "azscripts" and op["action"] == "scale"]
        # An unknown cluster is still a 404, whatever the Authorizer says of "execute".
        status, body = call(authz_server, "POST", "clusters/aznone/scale", {"pool": "gpu", "nodes": 2})
        assert (status, body["kind"]) == (404, "ClusterNotFound"), body
        # Deleting runs no script: "write" is enough.
        status, deleting = call(authz_server, "DELETE", "clusters/azscripts")
        assert status == 202, deleting
        _follow(authz_server, deleting)
        assert "azscripts" not in _names()
    finally:
        _delete_when_idle(authz_server, "azscripts")


def _delete_when_idle(server, name: str) -> None:
    """Delete what a failed test left, once the server's operations on it have ended."""
    if name in _names():
        wait_for(lambda: not [op for op in ok(server, "GET", "operations")["operations"]
                              if op["cluster"] == name and op["state"] == "RUNNING"], timeout=180)
        api.delete_cluster(name)


# -- bodies: read only from a sender who may write, and only so much ------------------------

def test_a_body_is_not_read_before_the_login_and_is_bounded(authz_server, policy):
    """A write without a login, or by a user who may not write, is refused before its body
    is read (the review sent 300 MiB without a token); a logged-in writer's body is capped."""
    import socket

    from jupyter_gtc.server.base import MAX_BODY_BYTES

    def send_headers_only(length: int, token: bool) -> bytes:
        """Headers announcing ``length`` bytes, and none of them: the answer must come anyway."""
        with socket.create_connection(("127.0.0.1", authz_server.port), timeout=30) as conn:
            auth = f"Authorization: token {authz_server.token}\r\n" if token else ""
            conn.sendall(f"POST /gtc/api/clusters HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Cookie: _xsrf=f\r\n"
                         f"X-XSRFToken: f\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n".encode())
            return conn.recv(65536)

    assert send_headers_only(300 * 1024 * 1024, token=False).startswith(b"HTTP/1.1 403")
    policy("write")
    assert send_headers_only(300 * 1024 * 1024, token=True).startswith(b"HTTP/1.1 403")
    policy()
    too_big = send_headers_only(MAX_BODY_BYTES + 1, token=True)
    assert too_big.startswith(b"HTTP/1.1 413") and b"at most" in too_big
    status, _, body = answer(authz_server, "POST", "gtc/api/clusters", body=b"{}")
    assert status == 400 and "spec" in body["message"]  # a small body is read as before


def test_requeue_and_resume_run_stored_scripts_so_they_need_execute(authz_server, policy, slurm_available):
    """A user who may "write" but not "execute" could requeue a job or resume a study: both run
    scripts stored earlier on the nodes, as a scale runs a spec's. Now they ask "execute"."""
    cluster = api.create_cluster(small_gpu_spec("azrequeue", nodes=1))
    try:
        job = api.submit_job(cluster.name, "sleep 300", ["--requeue"])
        policy("execute")
        for path in (f"gtc/api/jobs/{cluster.name}/{job.id}/requeue", "gtc/api/studies/none/resume"):
            status, _, body = answer(authz_server, "POST", path)
            assert status == 403 and "not authorized to execute" in body["message"], (path, body)
        status, _, body = answer(authz_server, "POST", f"gtc/api/jobs/{cluster.name}/{job.id}/hold")
        assert status == 200, body  # what runs nothing new still needs only "write"
    finally:
        api.delete_cluster(cluster.name)
