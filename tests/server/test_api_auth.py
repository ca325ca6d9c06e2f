"""Every REST route of the sidebar needs a login, and writes by a cookie login need the
XSRF token, as JupyterLab's own API does (the extension template's checks)."""

from __future__ import annotations

import http.cookies
import json

import pytest

from tests.server.api_client import EventStream, call

ROUTES = [
    ("GET", "clusters"), ("POST", "clusters"), ("GET", "clusters/any"), ("DELETE", "clusters/any"),
    ("POST", "clusters/any/scale"), ("GET", "jobs"), ("GET", "jobs?cluster=any"), ("GET", "jobs/any/1"),
    ("POST", "jobs/any/1/cancel"), ("POST", "jobs/any/1/requeue"), ("POST", "jobs/any/1/hold"),
    ("POST", "jobs/any/1/release"), ("GET", "jobs/any/1/log?offset=0"), ("GET", "jobs/any/1/metrics?since=0"),
    ("GET", "operations"), ("GET", "operations/any"), ("GET", "studies"), ("GET", "studies?cluster=any"),
    ("GET", "studies/any"), ("POST", "studies/any/stop"), ("POST", "studies/any/resume"),
    ("POST", "studies/any/trials/1/stop"),
]


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_every_route_refuses_a_request_without_a_login(jupyter_server, method, path):
    status, body = call(jupyter_server, method, path, b"{}" if method == "POST" else None, token=False)
    assert status == 403, (method, path, status, body)
    assert body["kind"] == "HTTPError"  # writes meet the XSRF check first, reads the login check


def test_the_change_feed_refuses_a_request_without_a_login(jupyter_server):
    stream = EventStream(jupyter_server, token=False)
    try:
        assert stream.status == 403
    finally:
        stream.close()


def test_no_route_of_ours_lacks_a_login_check(jupyter_server):
    # With unauthenticated access off, the server lists such routes in its log at start-up.
    flagged = [line for line in jupyter_server.log().splitlines() if "registered for" in line and "/gtc/" in line]
    assert not flagged, flagged


def _cookie_login(server) -> dict[str, str]:
    """The cookies a browser holds after opening the server with ``?token=``: the login
    cookie, and the ``_xsrf`` cookie that pages set."""
    cookies = {}
    for path in (f"api/status?token={server.token}", "login"):
        _, headers, _ = server.request("GET", path, token=False)
        for header in headers.get_all("Set-Cookie") or []:
            jar = http.cookies.SimpleCookie()
            jar.load(header)
            cookies.update({name: morsel.value for name, morsel in jar.items()})
    assert "_xsrf" in cookies and any(name.startswith("username-") for name in cookies), cookies
    return cookies


WRITES = [("POST", "jobs/none/1/cancel", b"", "JobNotFound"),
          ("POST", "clusters/none/scale", b'{"pool": "gpu", "nodes": 2}', "ClusterNotFound"),
          ("DELETE", "clusters/none", None, "ClusterNotFound"),
          ("POST", "studies/none/stop", b"", "StudyNotFound")]


@pytest.mark.parametrize(("method", "write", "payload", "kind"), WRITES)
def test_writes_with_a_login_cookie_need_the_xsrf_token(jupyter_server, method, write, payload, kind):
    cookies = _cookie_login(jupyter_server)
    cookie_header = {"Cookie": "; ".join(f"{k}={v}" for k, v in cookies.items())}

    # Reads need only the cookie.
    for read in ("clusters", "operations"):
        status, body = call(jupyter_server, "GET", read, token=False, headers=cookie_header)
        assert status == 200 and read in body
    # A write without the XSRF header is refused before it reaches the handler...
    status, body = call(jupyter_server, method, write, payload, token=False, headers=cookie_header)
    assert status == 403 and "_xsrf" in body["message"], body
    # ... and with it, reaches it (nothing of that name: 404 from the api, not 403).
    status, body = call(jupyter_server, method, write, payload, token=False,
                        headers={**cookie_header, "X-XSRFToken": cookies["_xsrf"]})
    assert status == 404 and body["kind"] == kind, body
    # A token (what JupyterLab sends in its Authorization header) needs no XSRF token.
    status, body = call(jupyter_server, method, write, payload)
    assert status == 404 and body["kind"] == kind, body


def test_errors_are_json_with_kind_and_message_only(jupyter_server):
    for method, path, payload, status_wanted, kind in [
        ("GET", "clusters/none", None, 404, "ClusterNotFound"),
        ("GET", "jobs/none/7", None, 404, "JobNotFound"),
        ("POST", "clusters", b"not json", 400, "BadRequest"),
        ("POST", "clusters", {"spec": {"display_name": "Bad Name"}}, 400, "SpecErrors"),
        ("POST", "clusters/none/scale", {"pool": "gpu", "nodes": "two"}, 400, "BadRequest"),
        ("GET", "jobs/none/7/log?offset=minus", None, 400, "BadRequest"),
        ("GET", "jobs/none/7/log?offset=-5", None, 400, "BadRequest"),
        ("GET", "operations/none", None, 404, "OperationNotFound"),
        ("DELETE", "clusters/none", None, 404, "ClusterNotFound"),
    ]:
        status, body = call(jupyter_server, method, path, payload)
        assert (status, body["kind"]) == (status_wanted, kind), (method, path, body)
        assert set(body) == {"kind", "message"} and body["message"], body
    status, body = call(jupyter_server, "POST", "clusters", {"spec": {"display_name": "Bad Name"}})
    assert "node_pools" in body["message"] and "Traceback" not in json.dumps(body)  # names the field
