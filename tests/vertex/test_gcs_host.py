"""The vertex backend's host: a Cloud Storage bucket through google-cloud-storage, against the
local endpoint's storage emulator (gcp-storage-emulator over a folder, with the files jobs
write there through the mount); and its client never shows the local endpoint's token."""

from __future__ import annotations

import re

import pytest

from jupyter_gtc.hosts.gcs import GcsHost, gcs_path, gcs_uri
from jupyter_gtc.services.logs import LogFollower
from jupyter_gtc.services.vertex_local import start_storage
from tests.non_root import normal_user, normal_user_account  # noqa: F401  (fixtures)

TOKEN = "storage-token-for-others-0123456789"
NAMES = ["plain", "with space", "quote's \"both\"", "$(touch pwned)", "-dash", "ünï"]


@pytest.fixture(scope="module")
def buckets(tmp_path_factory):
    root = tmp_path_factory.mktemp("gcs")
    server, port = start_storage(root, "127.0.0.1", "b", token=TOKEN)
    yield root, port
    server.stop()


@pytest.fixture
def host(buckets, monkeypatch):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    _, port = buckets
    return GcsHost("test bucket", lambda: storage.Client(
        project="p", credentials=AnonymousCredentials(), client_options={"api_endpoint": f"http://127.0.0.1:{port}"}))


def test_paths_are_where_vertex_mounts_buckets():
    assert gcs_path("gs://b/jobs/x/") == "/gcs/b/jobs/x" and gcs_uri("/gcs/b/jobs/x") == "gs://b/jobs/x"
    with pytest.raises(ValueError, match="/gcs/BUCKET/OBJECT"):
        gcs_uri("/tmp/x")


@pytest.mark.parametrize("uri", ["gs:///etc/passwd", "gs://b/../../etc/passwd", "gs://b/x/../../../etc/passwd",
                                 "gs://../etc/passwd"])
def test_a_uri_without_a_bucket_or_stepping_out_of_it_is_refused_naming_it(uri, tmp_path, monkeypatch):
    from jupyter_gtc.exceptions import InvalidArgument, SpecError
    from jupyter_gtc.recipes.paths import output_path
    from jupyter_gtc.services.vertex import gcs_path as local_file

    with pytest.raises(InvalidArgument, match=re.escape(repr(uri))):
        gcs_path(uri)  # the vertex backend's job folders
    monkeypatch.setenv("GTC_GCS_MOUNT", str(tmp_path))
    with pytest.raises(InvalidArgument, match=re.escape(repr(uri))):
        output_path(uri)  # a program's AIP_MODEL_DIR in a job
    with pytest.raises(SpecError) as info:
        local_file(tmp_path, uri, "job_spec.worker_pool_specs[0].python_package_spec.package_uris")  # the endpoint's
    assert info.value.field.endswith("package_uris") and info.value.value == uri
    assert local_file(tmp_path, "gs://b//x/y", "f") == tmp_path / "b" / "x" / "y"


@pytest.mark.parametrize("name", NAMES)
def test_files_are_written_read_listed_and_removed(host, name):
    folder = f"/gcs/b/t/{name}/sub"
    host.make_dirs(folder)
    assert host.stat(folder).is_dir and host.list_dir(folder) == []  # a folder made exists, empty
    host.write(f"{folder}/{name}", b"0123456789")
    assert host.read(f"{folder}/{name}") == b"0123456789"
    assert host.read(f"{folder}/{name}", 3, 4) == b"3456"
    assert host.read(f"{folder}/{name}", 8, 100) == b"89"  # fewer only at the end
    assert host.read(f"{folder}/{name}", 10) == b""
    st = host.stat(f"{folder}/{name}")
    assert (st.size, st.is_dir) == (10, False)
    assert [(e.name, e.is_dir, e.is_file) for e in host.list_dir(folder)] == [(name, False, True)]
    assert [(e.name, e.is_dir) for e in host.list_dir(f"/gcs/b/t/{name}")] == [("sub", True)]
    host.remove_tree(f"/gcs/b/t/{name}")
    assert host.stat(f"/gcs/b/t/{name}") is None and host.list_dir(f"/gcs/b/t/{name}") is None


def test_what_is_not_there(host):
    assert host.stat("/gcs/b/none") is None and host.list_dir("/gcs/b/none") is None
    with pytest.raises(FileNotFoundError):
        host.read("/gcs/b/none")
    host.remove_tree("/gcs/b/none")  # nothing there is fine
    host.make_dirs("/gcs/b/once")
    with pytest.raises(FileExistsError):
        host.make_dirs("/gcs/b/once", exist_ok=False)


def test_a_log_a_job_appends_through_the_mount_is_followed_by_its_new_bytes(host, buckets):
    root, _ = buckets
    log = root / "b" / "jobs" / "j1" / "slurm-1.out"  # what the job writes, as through Cloud Storage FUSE
    log.parent.mkdir(parents=True)
    log.write_text("epoch 1\n")
    follower = LogFollower("/gcs/b/jobs/j1/slurm-1.out", host=host)
    assert follower.read_new() == "epoch 1\n"
    with log.open("a") as f:
        f.write("epoch 2 ü\n")
    assert follower.read_new() == "epoch 2 ü\n" and follower.read_new() == ""
    assert [e.name for e in host.list_dir("/gcs/b/jobs/j1")] == ["slurm-1.out"]


def test_a_connection_failure_never_shows_the_local_endpoints_token(tmp_path, monkeypatch):
    from jupyter_gtc._ports import free_ports
    from jupyter_gtc._process import this_process
    from jupyter_gtc.backends.vertex import VertexCommands
    from jupyter_gtc.exceptions import CommandError
    from jupyter_gtc.vertex.local_endpoint import LocalEndpoint, write_endpoint_file

    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    port = free_ports(1, "127.0.0.1")[0]  # nothing listens there
    token = "TOKEN-that-must-never-be-shown-0123456789"
    write_endpoint_file(tmp_path, LocalEndpoint("c", "127.0.0.1", port, token, this_process(), port))
    runtime = {"name": "vx", "project": "local-project", "region": "us-central1", "staging_bucket": "gs://b",
               "api_endpoint": f"local:{port}"}
    with pytest.raises(CommandError) as info:
        VertexCommands(runtime, tmp_path, host=None).queue()
    assert token not in str(info.value) and token not in info.value.stderr


# Another local user, as in the attack: uploads (a pickle into a checkpoint folder) and reads.
AS_ANOTHER_USER = """
import http.client, json, sys
port, token = int(sys.argv[1]), sys.argv[2]
def call(method, path, body=b"", headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    return r.status, r.read().decode(errors="replace")
upload = "/upload/storage/v1/b/b/o?uploadType=media&name=run1/checkpoints/step-99/states.pt"
print(json.dumps({
    "upload": call("POST", upload, b"not a pickle", {"Content-Type": "application/octet-stream"}),
    "list": call("GET", "/storage/v1/b/b/o"),
    "wipe": call("GET", "/wipe"),
    "wrong_token": call("GET", "/storage/v1/b/b/o", headers={"Authorization": "Bearer nope"}),
    "with_token": call("GET", "/storage/v1/b/b/o", headers={"Authorization": "Bearer " + token}),
}))
"""


def test_another_local_user_is_refused_and_stores_nothing(buckets, normal_user):
    import json
    import sys

    root, port = buckets
    ran = normal_user.run([sys.executable, "-c", AS_ANOTHER_USER, str(port), TOKEN])
    assert ran.returncode == 0, ran.stderr
    got = json.loads(ran.stdout)
    assert got["upload"][0] == 403 and "Authorization: Bearer" in got["upload"][1], got
    assert got["list"][0] == 403 and got["wipe"][0] == 403 and got["wrong_token"][0] == 401, got
    assert not (root / "b" / "run1").exists()
    assert got["with_token"][0] == 200  # the token lets a caller in that the endpoint cannot look up


def test_a_half_sent_request_stalls_no_other_client(host, buckets):
    import socket

    _, port = buckets
    stalled = socket.create_connection(("127.0.0.1", port), timeout=60)
    stalled.sendall(f"POST /upload/storage/v1/b/b/o?uploadType=media&name=half HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                    f"Content-Length: 1000\r\n\r\n0123456789".encode())  # 990 bytes never come
    try:
        host.write("/gcs/b/while-stalled/x", b"written")  # the client's own timeout: 60 s
        assert host.read("/gcs/b/while-stalled/x") == b"written"
    finally:
        stalled.close()


def test_the_emulator_never_listens_beyond_loopback(tmp_path):
    from jupyter_gtc.exceptions import GtcError

    with pytest.raises(GtcError, match="loopback only, not 0.0.0.0"):
        start_storage(tmp_path, "0.0.0.0", "b")


def call(port: int, method: str, path: str, body: bytes = b"", headers: dict | None = None) -> tuple[int, dict]:
    """A plain HTTP request (http.client names the Host it connects to unless ``headers`` do)."""
    import http.client
    import json

    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        reply = connection.getresponse()
        return reply.status, json.loads(reply.read() or b"{}")
    finally:
        connection.close()


# What a browser adds to a request a web page makes (fetch(..., {mode: "no-cors"}), a form): any one refuses it.
BROWSER_HEADERS = [{"Origin": "http://evil.example"}, {"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Mode": "no-cors"},
                   {"Sec-Fetch-Dest": "empty"}]


@pytest.mark.parametrize("browser", BROWSER_HEADERS, ids=lambda h: next(iter(h)))
def test_a_web_pages_upload_is_refused_and_stores_nothing(buckets, browser):
    # The user's browser connects from loopback as the user: without this, any page it shows could upload.
    root, port = buckets
    upload = "/upload/storage/v1/b/b/o?uploadType=media&name=from-a-page/states.pt"
    status, answer = call(port, "POST", upload, b"a pickle", {"Content-Type": "text/plain", **browser})
    assert (status, answer["error"]["status"]) == (403, "PERMISSION_DENIED"), answer
    assert next(iter(browser)) in answer["error"]["message"], answer
    assert not (root / "b" / "from-a-page").exists()


def test_a_request_to_a_name_that_is_not_the_emulators_address_is_refused(buckets):
    # DNS rebinding: a page's own name made to resolve to 127.0.0.1; the browser then sends that name as Host.
    root, port = buckets
    status, answer = call(port, "GET", "/storage/v1/b/b/o", headers={"Host": f"evil.example:{port}"})
    assert status == 403 and "evil.example" in answer["error"]["message"], answer
    upload = "/upload/storage/v1/b/b/o?uploadType=media&name=rebound/x"
    assert call(port, "POST", upload, b"x", {"Host": f"evil.example:{port}"})[0] == 403
    assert call(port, "GET", "/storage/v1/b/b/o", headers={"Host": f"127.0.0.1:{port + 1}"})[0] == 403
    assert not (root / "b" / "rebound").exists()
    for name in ("localhost", "127.0.0.1", "LOCALHOST"):  # its own addresses, as a program names them
        assert call(port, "GET", "/storage/v1/b/b/o", headers={"Host": f"{name}:{port}"})[0] == 200


# Another local user holds every place the emulator keeps for callers other than its own user,
# each connection sending its headers a byte a second (never idle long enough for a socket
# timeout), while a token holder keeps asking.
TRICKLING = """
import http.client, json, socket, sys, threading, time
port, token, count = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
head = ("GET /storage/v1/b/b/o HTTP/1.1\\r\\nHost: 127.0.0.1:%d\\r\\nX-Slow: " % port).encode() + b"." * 600
def call():
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("GET", "/storage/v1/b/b/o", headers={"Authorization": "Bearer " + token})
    return c.getresponse().status
closed = [threading.Event() for _ in range(count)]
answered = [0] * count
def watch(i, s):  # until the emulator closes the connection; what it answered, if anything
    try:
        while data := s.recv(4096):
            answered[i] += len(data)
    except OSError:
        pass
    closed[i].set()
def trickle(i, s):
    for byte in head[1:]:
        if closed[i].wait(1):
            return
        try:
            s.sendall(bytes([byte]))
        except OSError:
            return
slow = [socket.create_connection(("127.0.0.1", port), timeout=600) for _ in range(count)]
for i, s in enumerate(slow):
    s.sendall(head[:1])
    threading.Thread(target=watch, args=(i, s), daemon=True).start()
first = call()  # taken after the slow ones: none of the places is left
for i, s in enumerate(slow):
    threading.Thread(target=trickle, args=(i, s), daemon=True).start()
last, give_up = first, time.monotonic() + 60
while last != 200 and time.monotonic() < give_up:
    time.sleep(0.5)
    last = call()
print(json.dumps({"first": first, "last": last, "closed": sum(c.is_set() for c in closed),
                  "answered": sum(answered)}))
"""


def test_connections_trickling_their_headers_hold_no_place_past_a_deadline(buckets, normal_user):
    import json
    import sys

    from jupyter_gtc.vertex.guard import MAX_OTHER_CONNECTIONS

    _, port = buckets
    ran = normal_user.run([sys.executable, "-c", TRICKLING, str(port), TOKEN, str(MAX_OTHER_CONNECTIONS)])
    assert ran.returncode == 0, ran.stderr
    got = json.loads(ran.stdout)
    assert got["first"] == 503, got  # the tricklers hold every place for others
    assert got["last"] == 200, got  # ... until the deadline for their headers closed them
    assert (got["closed"], got["answered"]) == (MAX_OTHER_CONNECTIONS, 0), got  # closed unanswered, by the emulator
