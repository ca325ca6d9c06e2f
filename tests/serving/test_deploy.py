"""Serving on a real local cluster over real HTTP: a tiny Llama (saved with save_pretrained)
deployed as a Slurm job running our LM server, predictions through the endpoint's address,
our API and the CLI, a bad request's 400, the registry's deployment row and the refused delete,
another local user refused, and an undeploy that leaves no job and no port; a user's own
Vertex serving container (tests/serving/user_server.py) run unchanged, 429 while it is not
ready and when it is full, without the deploying process's environment."""

from __future__ import annotations

import http.client
import json
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import jupyter_gtc as gtc
from jupyter_gtc import api
from jupyter_gtc._ports import listening
from jupyter_gtc.exceptions import ModelConflict, PredictionError, SpecError
from jupyter_gtc.serving.front import MAX_OUTSTANDING
from tests.conftest import small_gpu_spec
from tests.non_root import normal_user, normal_user_account  # noqa: F401  (fixtures)
from tests.serving.tiny_model import generate_here, save_tiny_llama

pytestmark = pytest.mark.slurm
CLUSTER = "serving"
USER_SERVER = Path(__file__).parent / "user_server.py"
PROMPTS = ["The try statement", "A function definition", "The"]


@pytest.fixture(scope="module")
def cluster(slurm_available):
    # Two nodes of one CPU each here: a replica's job takes one, so two replicas can run (scaling).
    api.create_cluster(small_gpu_spec(CLUSTER, nodes=2, machine="n2-standard-8"))
    yield CLUSTER
    api.delete_cluster(CLUSTER)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return save_tiny_llama(tmp_path_factory.mktemp("llama") / "model")


def post(url: str, body: bytes) -> tuple[int, dict]:
    host, _, rest = url.removeprefix("http://").partition("/")
    name, port = host.split(":")
    connection = http.client.HTTPConnection(name, int(port), timeout=120)
    try:
        connection.request("POST", "/" + rest, body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def headers_only(url: str, length: int) -> tuple[int, dict]:
    """A POST's headers announcing ``length`` bytes, and the answer, the body never sent (a client
    sending it would meet a closed connection: the refusal comes first)."""
    host, _, rest = url.removeprefix("http://").partition("/")
    name, port = host.split(":")
    with socket.create_connection((name, int(port)), timeout=60) as sock:
        sock.sendall(f"POST /{rest} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {length}\r\n\r\n".encode())
        response = http.client.HTTPResponse(sock)
        response.begin()
        return response.status, json.loads(response.read())


def gtc_cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "jupyter_gtc.cli", *argv], capture_output=True, text=True,
                          timeout=120)


# As another user of this machine: the endpoint's front, and the replica behind it directly.
OTHER_USER = """
import http.client, json, sys
for port, path in json.loads(sys.argv[1]):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("POST", path, body=b'{"instances": [{"prompt": "x"}]}', headers={"Content-Type": "application/json"})
    print(c.getresponse().status)
"""


def test_the_tiny_llama_is_deployed_answers_and_is_undeployed(cluster, tiny, monkeypatch, normal_user):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the shared cores (notes/recipes.md)
    api.register_model(artifact_uri=str(tiny), model="llama-tiny")
    api.register_model(artifact_uri=str(tiny), model="llama-tiny", alias="prod")
    ep = gtc.models.get("llama-tiny@prod").deploy(cluster=CLUSTER, min_replicas=1, max_replicas=1)

    # Through our API: greedy generation, the same text as in this process, batched or not.
    expected = generate_here(tiny, PROMPTS, 8)
    predictions = ep.predict(instances=[{"prompt": p, "max_tokens": 8} for p in PROMPTS])
    assert [p["text"] for p in predictions] == expected
    assert [p["tokens"] for p in predictions] == [8, 8, 8]
    # Over plain HTTP, as any client of the user's; max_tokens as the SDK sends it (a float).
    status, answer = post(ep.url, json.dumps({"instances": [{"prompt": PROMPTS[0], "max_tokens": 8.0}]}).encode())
    assert status == 200 and answer["predictions"][0]["text"] == expected[0]
    # Concurrent requests, batched by the server, each still gets its own answer.
    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(lambda p: ep.predict([{"prompt": p, "max_tokens": 8}])[0]["text"], PROMPTS * 2))
    assert answers == expected * 2

    # A bad request: 400 naming the field.
    status, answer = post(ep.url, b'{"instances": [{"prompt": "x", "max_tokens": 0}]}')
    assert status == 400 and "instances[0].max_tokens" in answer["error"]["message"]
    with pytest.raises(PredictionError) as refused:
        ep.predict([{"prompt": ""}])
    assert refused.value.status == 400 and "instances[0].prompt" in str(refused.value)
    status, answer = post(ep.url, b"not json")
    assert status == 400 and "body" in answer["error"]["message"]
    status, answer = headers_only(ep.url, 1_500_001)  # over Vertex's 1.5 MB: refused before any body is read
    assert status == 413 and "1500000 bytes at most" in answer["error"]["message"]

    # The registry: the deployment row, a deploy event, and a deployed version cannot go.
    model = api.get_model("llama-tiny@2")
    assert model.deployment["endpoint"] == ep.id and model.deployment["cluster"] == CLUSTER
    assert model.events[-1]["event"] == "deploy" and model.events[-1]["detail"]["endpoint"] == ep.id
    with pytest.raises(ModelConflict, match="deployed"):
        api.delete_model("llama-tiny@2")
    with pytest.raises(SpecError, match="deployed already"):
        model.deploy(cluster=CLUSTER)

    # The CLI, another process of the same user.
    listed = gtc_cli("endpoint", "list", "--json")
    assert listed.returncode == 0 and [e["id"] for e in json.loads(listed.stdout)] == [ep.id]
    body = json.dumps({"instances": [{"prompt": PROMPTS[1], "max_tokens": 8}]})
    cli = gtc_cli("endpoint", "predict", ep.id, "--json", body)
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["predictions"][0]["text"] == expected[1]

    # Another user of this machine: refused by the front, and by the replica (no token).
    replica = ep.deployment["replicas"][0]
    front = ep.deployment["front"]
    targets = [[front["port"], f"/v1/endpoints/{ep.id}:predict"],
               [replica["port"], f"/v1/endpoints/{ep.id}/deployedModels/{ep.deployment['deployed_model_id']}"
                                 f":predict"]]
    other = normal_user.python(OTHER_USER.replace("sys.argv[1]", repr(json.dumps(targets))))
    assert other.stdout.split() == ["403", "401"], other.stderr

    # Every request recorded, its status and latency.
    statuses = [r["status"] for r in ep.requests()]
    assert statuses.count(200) == 9 and statuses.count(400) == 3
    assert all(r["seconds"] > 0 for r in ep.requests())

    ep.undeploy()
    job = api.get_job(replica["job"], CLUSTER)
    assert job.finished
    assert not listening(replica["port"]) and not listening(front["port"])
    assert api.list_endpoints() == []
    model = api.get_model("llama-tiny@2")
    assert model.deployment is None and model.events[-1]["event"] == "undeploy"
    api.delete_model("llama-tiny@2")  # no longer deployed: it may go


def test_a_users_own_vertex_server_runs_unchanged_and_429_when_not_ready_or_full(cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("GTC_TEST_SECRET", "the Jupyter server's")  # must not reach the replica
    folder = tmp_path / "echo"
    folder.mkdir()
    (folder / "model.txt").write_text("an echo")
    api.register_model(artifact_uri=str(folder), model="echo")
    ep = api.deploy_model("echo", CLUSTER, command=[sys.executable, str(USER_SERVER)], wait=False)

    # Not ready: 429 at once, saying so.
    with pytest.raises(PredictionError) as refused:
        ep.predict([{"x": 1}])
    assert refused.value.status == 429 and "not ready" in str(refused.value)

    (folder / "ready").touch()
    deadline = time.monotonic() + 120
    while not any(r["healthy"] for r in ep.replicas):
        assert time.monotonic() < deadline, ep.replicas
        time.sleep(0.1)
    assert ep.predict([{"x": 1}]) == [{"echo": {"x": 1}, "model_name": "echo", "mode": "PREDICTION",
                                       "endpoint": ep.id, "secret": None}]

    # Full: as many requests as a replica holds wait in it; the next is 429 at once.
    (folder / "hold").touch()
    with ThreadPoolExecutor(MAX_OUTSTANDING) as pool:
        held = [pool.submit(ep.predict, [{"x": i}]) for i in range(MAX_OUTSTANDING)]
        while sum(r["outstanding"] for r in ep.replicas) < MAX_OUTSTANDING:
            time.sleep(0.05)
        with pytest.raises(PredictionError) as refused:
            ep.predict([{"x": "one too many"}])
        assert refused.value.status == 429 and "full" in str(refused.value)
        (folder / "hold").unlink()
        assert [f.result()[0]["echo"] for f in held] == [{"x": i} for i in range(MAX_OUTSTANDING)]
    assert sorted(r["status"] for r in ep.requests()) == [200] * (MAX_OUTSTANDING + 1) + [429, 429]
    ep.undeploy()
    assert api.get_model("echo").deployment is None


def test_gtc_model_deploy_serves_until_ctrl_c_or_an_undeploy_elsewhere(cluster, tmp_path):
    from tests.cli_process import running_gtc

    folder = tmp_path / "echo"
    folder.mkdir()
    (folder / "ready").touch()
    api.register_model(artifact_uri=str(folder), model="cli-echo")
    argv = ("model", "deploy", "cli-echo", "--cluster", CLUSTER, "--command", sys.executable, str(USER_SERVER))
    with running_gtc(*argv) as proc:
        endpoint = proc.stdout.readline().split()[1].rstrip(":")
        assert api.predict(endpoint, [{"x": 1}])[0]["echo"] == {"x": 1}  # served by the CLI's process
        job = api.get_endpoint(endpoint).deployment["replicas"][0]["job"]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 0 and f"endpoint {endpoint} undeployed" in proc.stdout.read()
    assert api.list_endpoints() == [] and api.get_job(job, CLUSTER).finished

    with running_gtc(*argv) as proc:
        endpoint = proc.stdout.readline().split()[1].rstrip(":")
        undeployed = gtc_cli("model", "undeploy", "cli-echo")
        assert undeployed.returncode == 0, undeployed.stderr
        assert proc.wait(timeout=120) == 0 and "was undeployed" in proc.stdout.read()
    assert api.get_model("cli-echo").events[-1]["event"] == "undeploy"


def test_a_replica_whose_job_ends_is_replaced(cluster, tmp_path):
    folder = tmp_path / "echo"
    folder.mkdir()
    (folder / "ready").touch()
    api.register_model(artifact_uri=str(folder), model="phoenix")
    ep = api.deploy_model("phoenix", CLUSTER, command=[sys.executable, str(USER_SERVER)])
    first = ep.replicas[0]["job"]
    api.cancel_job(first, CLUSTER)  # as a node failure or a time limit would end it
    deadline = time.monotonic() + 120
    while not (ep.replicas[0]["job"] != first and ep.replicas[0]["healthy"]):
        assert time.monotonic() < deadline, ep.replicas
        time.sleep(0.1)
    second = ep.replicas[0]["job"]
    assert ep.predict([{"x": 1}])[0]["echo"] == {"x": 1}
    assert [r["job"] for r in ep.deployment["replicas"]] == [second]  # the registry's row follows
    ep.undeploy()
    assert api.get_job(first, CLUSTER).finished and api.get_job(second, CLUSTER).finished


def test_replicas_follow_the_load_between_min_and_max(cluster, tmp_path, monkeypatch):
    from jupyter_gtc.services import endpoints

    monkeypatch.setattr(endpoints, "SCALE_DOWN_IDLE", 2.0)  # not a minute: the test waits on it
    folder = tmp_path / "echo"
    folder.mkdir()
    (folder / "ready").touch()
    api.register_model(artifact_uri=str(folder), model="elastic")
    ep = api.deploy_model("elastic", CLUSTER, min_replicas=1, max_replicas=2,
                          command=[sys.executable, str(USER_SERVER)])
    first = ep.replicas[0]["job"]

    def wait_until(predicate):
        deadline = time.monotonic() + 120
        while not predicate():
            if time.monotonic() > deadline:  # what Slurm says of each replica's job and each node
                jobs = [(r, api.get_job(r["job"], CLUSTER)) for r in ep.replicas]
                nodes = api.get_cluster(CLUSTER).nodes
                raise AssertionError([(r, job.state, job.reason) for r, job in jobs]
                                     + [(n.name, n.state, n.flags, n.reason) for n in nodes])
            time.sleep(0.1)

    (folder / "hold").touch()  # every request waits in the replica: a full replica, 100% utilised
    with ThreadPoolExecutor(MAX_OUTSTANDING) as pool:
        try:
            held = [pool.submit(ep.predict, [{"x": i}]) for i in range(MAX_OUTSTANDING)]
            wait_until(lambda: len(ep.replicas) == 2 and all(r["healthy"] for r in ep.replicas))
            assert len(ep.deployment["replicas"]) == 2  # the registry's row follows
        finally:
            (folder / "hold").unlink()
        assert [f.result()[0]["echo"]["x"] for f in held] == list(range(MAX_OUTSTANDING))
    # Both idle now: requests take turns, so the new replica serves too.
    assert [ep.predict([{"x": i}])[0]["echo"]["x"] for i in range(2)] == [0, 1]
    assert all(r["served"] >= 1 for r in ep.replicas)
    second = next(r["job"] for r in ep.replicas if r["job"] != first)
    # Idle: back to min_replicas, never below. The front drops the replica, then the health thread
    # writes the registry's row: another process reads the row a moment later (wait on both).
    wait_until(lambda: len(ep.replicas) == 1 and len(ep.deployment["replicas"]) == 1)
    assert [r["job"] for r in ep.replicas] == [first] and [r["job"] for r in ep.deployment["replicas"]] == [first]
    wait_until(lambda: api.get_job(second, CLUSTER).finished)  # its job is cancelled once out of rotation
    time.sleep(3 * endpoints.SCALE_DOWN_IDLE)  # a wait for what must not happen: going below min
    assert len(ep.replicas) == 1 and ep.replicas[0]["healthy"]
    ep.undeploy()


def test_deleting_a_cluster_undeploys_the_endpoints_serving_from_it(slurm_available, tmp_path):
    folder = tmp_path / "echo"
    folder.mkdir()
    (folder / "ready").touch()
    api.create_cluster(small_gpu_spec("servgone", nodes=1, machine="n2-standard-8"))
    try:
        api.register_model(artifact_uri=str(folder), model="ephemeral")
        ep = api.deploy_model("ephemeral", "servgone", command=[sys.executable, str(USER_SERVER)])
        lines: list[str] = []
        api.delete_cluster("servgone", progress=lines.append)
    finally:
        if "servgone" in [c.name for c in api.list_clusters(with_status=False)]:
            api.delete_cluster("servgone")
    assert f"undeploying endpoint {ep.id} (its replicas run on servgone)" in lines, lines
    assert ep.id not in [e.id for e in api.list_endpoints()]
    assert api.get_model("ephemeral").deployment is None  # the registry no longer says "deployed"
