"""`gtc capacity` through google-cloud-compute (the official client, REST, unpatched) against
the local Vertex endpoint, which serves Compute's zone routes (vertex_endpoint/compute.py):
machine and accelerator types from our catalogue, reservations from its compute.json. And
Google's refusals of those calls, as Compute sends them, through vertex_clusters/errors.py.

No request may leave the machine: proxies point at a port where nothing listens."""

from __future__ import annotations

from pathlib import Path

import json
import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import jupyter_gtc
from jupyter_gtc import api
from jupyter_gtc.spec.machines import MACHINE_TYPES
from tests.non_root import normal_user, normal_user_account  # noqa: F401  (fixtures)
from tests.conftest import no_egress

EXAMPLE = Path(jupyter_gtc.__file__).parent / "examples" / "clusters" / "local-a3.yaml"
H100_RESERVATION = {
    "name": "h100-res", "status": "READY", "specificReservationRequired": True,
    "specificReservation": {"count": "4", "inUseCount": "1", "instanceProperties": {
        "machineType": "a3-highgpu-8g",
        "guestAccelerators": [{"acceleratorType": "nvidia-h100-80gb", "acceleratorCount": 8}]}}}
FULL_RESERVATION = {"name": "l4-full", "status": "READY", "specificReservation": {
    "count": "2", "inUseCount": "2", "instanceProperties": {"machineType": "g2-standard-8"}}}
DENSE_RESERVATION = {
    "name": "h200-dense", "status": "READY", "deploymentType": "DENSE",
    "specificReservation": {"count": "36", "inUseCount": "20", "instanceProperties": {"machineType": "a3-ultragpu-8g"}},
    "reservationBlocks": [{"name": "block-1", "count": "18", "inUseCount": "16"},
                          {"name": "block-2", "count": "18", "inUseCount": "4"}]}
COMPUTE_FIXTURE = {"zones": {
    "us-central1-a": {"reservations": [H100_RESERVATION, FULL_RESERVATION, DENSE_RESERVATION]},
    # A zone without A3 High: a spec asking for it there must be told before a create.
    "us-central1-b": {"machineTypes": ["a3-megagpu-8g", "a3-ultragpu-8g", "n2-standard-8"]},
}}


TOKEN = "the-endpoints-token"


@pytest.fixture(scope="module")
def no_proxy():
    with pytest.MonkeyPatch.context() as env:
        no_egress(env)
        yield


@pytest.fixture(scope="module")
def endpoint(no_proxy):
    """The local Vertex endpoint's server (its guard, routing and handlers), in this process."""
    from jupyter_gtc.vertex_endpoint import compute
    from jupyter_gtc.vertex_endpoint.server import Endpoint, EndpointServer

    fixture = compute.fixture_path()
    with open(os.open(fixture, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        json.dump(COMPUTE_FIXTURE, f)
    server = EndpointServer(("127.0.0.1", 0), Endpoint("unused"), TOKEN, api.vertex_request_log())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        fixture.unlink()


@dataclass
class Done:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def gtc(capsys):
    """`gtc ARGS` as its console script runs it (cli.main), in this process: google-cloud-compute
    takes seconds to import, once here rather than in each child."""
    from jupyter_gtc.cli import main

    def run(*args: str) -> Done:
        capsys.readouterr()
        code = main(list(args))
        out, err = capsys.readouterr()
        return Done(code, out, err)

    return run


def test_capacity_prints_free_reservations_accelerators_and_the_cost_of_a_spec(endpoint, gtc):
    done = gtc("capacity", "--zone", "us-central1-a", "--api-endpoint", endpoint, "--spec", str(EXAMPLE))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    reservations = out.split("Reservations with free nodes:")[1].split("Accelerator types:")[0]
    row = next(line for line in reservations.splitlines() if line.startswith("h100-res"))
    assert "a3-highgpu-8g" in row and "8 x nvidia-h100-80gb" in row and "3 of 4" in row, row  # 4 - 1, int64 strings
    assert "l4-full" not in reservations  # 2 of 2 in use: nothing free
    assert "h200-dense (dense), free by block: block-1 2 of 18, block-2 14 of 18" in reservations
    accelerators = out.split("Accelerator types:")[1]
    assert any(line.split()[:2] == ["nvidia-h100-80gb", "NVIDIA_H100_80GB"] for line in accelerators.splitlines())
    # local-a3.yaml: 2 x a3-highgpu-8g and a n2-standard-8 login node, at the table's prices.
    assert "every pool in us-central1-a is offered there" in out
    assert "pool a3: 2 x a3-highgpu-8g: $88.25/h each, $176.51/h" in out
    assert "pool login: 1 x n2-standard-8: $0.39/h each, $0.39/h" in out
    assert "estimate: $176.90/hour: on-demand list prices in us-central1 as of 20" in out
    paths = [json.loads(line)["path"] for line in api.vertex_request_log().read_text().splitlines()]
    assert "/compute/v1/projects/local-project/zones/us-central1-a/reservations" in paths  # the client came here


def test_a_machine_type_the_zone_lacks_is_named_with_the_zones_close_ones(endpoint, gtc, tmp_path):
    spec = tmp_path / "b.yaml"
    spec.write_text(EXAMPLE.read_text().replace("zone: us-central1-a", "zone: us-central1-b"))
    done = gtc("capacity", "--zone", "us-central1-b", "--api-endpoint", endpoint, "--spec", str(spec))
    assert done.returncode == 1
    assert ("problem: nodePools[0] (a3): machine type 'a3-highgpu-8g' is not offered in zone us-central1-b; "
            "close ones there: a3-megagpu-8g") in done.stdout, done.stdout
    assert f"error: {spec}: 1 problem(s) in zone us-central1-b" in done.stderr
    done = gtc("capacity", "--zone", "us-central1-b", "--api-endpoint", endpoint, "--machine-type", "a3-highgpu-8g")
    assert "Machine type a3-highgpu-8g: not offered in us-central1-b; close ones there: a3-megagpu-8g" in done.stdout


def test_a_stockout_prone_type_on_demand_without_free_reserved_nodes_is_named(endpoint, gtc, tmp_path):
    spec = tmp_path / "mega.yaml"
    spec.write_text(EXAMPLE.read_text().replace("zone: us-central1-a", "zone: us-central1-b")
                    .replace("a3-highgpu-8g", "a3-megagpu-8g").replace("NVIDIA_H100_80GB", "NVIDIA_H100_MEGA_80GB"))
    done = gtc("capacity", "--zone", "us-central1-b", "--api-endpoint", endpoint, "--spec", str(spec))
    assert done.returncode == 1
    assert ("problem: nodePools[0] (a3): a3-megagpu-8g on demand often meets a stockout (ZONE_RESOURCE_POOL_EXHAUSTED) "
            "and the zone's reservations have 0 free node(s) of it for 2") in done.stdout, done.stdout
    assert "pool a3: 2 x a3-megagpu-8g: no price in our table" in done.stdout
    assert "(without a3-megagpu-8g)" in done.stdout  # the total says what it leaves out, never a guess


# Another local user (run as gtc-test) reading the zone's reservations: refused without the
# endpoint's token (403), with a wrong one (401); with it, served.
AS_ANOTHER_USER = """
import http.client, json, sys
port, path, token = int(sys.argv[1]), sys.argv[2], sys.stdin.read()  # the token never in argv
def get(headers):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("GET", path, headers=headers)
    r = c.getresponse()
    return [r.status, json.loads(r.read() or b"{}")]
print(json.dumps({"none": get({})[0], "wrong": get({"Authorization": "Bearer nope"})[0],
                  "token": get({"Authorization": "Bearer " + token})}))
"""


def test_another_local_user_reads_the_compute_routes_only_with_the_token(endpoint, normal_user):
    port = endpoint.rsplit(":", 1)[1]
    path = "/compute/v1/projects/local-project/zones/us-central1-a/reservations"
    ran = subprocess.run(["runuser", "-u", normal_user.name, "--", sys.executable, "-c", AS_ANOTHER_USER, port, path],
                         input=TOKEN, env=normal_user.env(), capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    got = json.loads(ran.stdout)
    assert (got["none"], got["wrong"]) == (403, 401), got
    status, answer = got["token"]
    assert status == 200 and [r["name"] for r in answer["items"]] == ["h100-res", "l4-full", "h200-dense"], got


def test_compute_and_vertex_accelerator_names_map_both_ways():
    from jupyter_gtc.vertex_clusters.accelerators import COMPUTE_TO_VERTEX, to_compute, to_vertex

    assert to_vertex("nvidia-h200-141gb") == "NVIDIA_H200_141GB"
    assert to_compute("NVIDIA_H200_141GB") == "nvidia-h200-141gb"
    assert to_vertex("projects/p/zones/us-central1-a/acceleratorTypes/nvidia-h100-mega-80gb") == "NVIDIA_H100_MEGA_80GB"
    assert to_vertex("nvidia-h300") is None and to_compute("NVIDIA_H300") is None  # unknown: never guessed
    for compute_name, vertex_name in COMPUTE_TO_VERTEX.items():
        assert to_compute(to_vertex(compute_name)) == compute_name and to_vertex(to_compute(vertex_name)) == vertex_name
    for machine in MACHINE_TYPES.values():  # every GPU of our catalogue has its Compute name
        if machine.gpu_type:
            assert to_vertex(to_compute(machine.gpu_type)) == machine.gpu_type, machine.name


class ComputeRefuses(BaseHTTPRequestHandler):
    """Compute Engine's answer to a caller without the permission, or in a project without the API."""

    def do_GET(self) -> None:
        raw = json.dumps({"error": self.server.error}).encode()
        self.send_response(self.server.error["code"])
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args) -> None:
        pass


PERMISSION = {"code": 403, "message": "Required 'compute.reservations.list' permission for 'projects/p1'",
              "errors": [{"message": "Required 'compute.reservations.list' permission for 'projects/p1'",
                          "domain": "global", "reason": "forbidden"}]}
DISABLED = {"code": 403, "message": "Compute Engine API has not been used in project 123 before or it is disabled. "
                                    "Enable it by visiting https://console.developers.google.com/apis/api/"
                                    "compute.googleapis.com/overview?project=123 then retry.",
            "errors": [{"message": "...", "domain": "usageLimits", "reason": "accessNotConfigured"}],
            "status": "PERMISSION_DENIED",
            "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "SERVICE_DISABLED",
                         "domain": "googleapis.com",
                         "metadata": {"service": "compute.googleapis.com", "consumer": "projects/123"}}]}


@pytest.mark.parametrize("error, said", [
    (PERMISSION, "list reservations of zone us-central1-a: permission compute.reservations.list denied in project "
                 "p1: grant it to whoever runs this (the role roles/compute.viewer"),
    (DISABLED, "list reservations of zone us-central1-a: the API compute.googleapis.com is not enabled in project "
               "p1: enable it with `gcloud services enable compute.googleapis.com --project=p1`"),
], ids=["permission", "api-disabled"])
def test_a_refusal_from_compute_says_what_and_the_fix(no_proxy, gtc, error, said):
    server = ThreadingHTTPServer(("127.0.0.1", 0), ComputeRefuses)
    server.error = error
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        done = gtc("capacity", "--zone", "us-central1-a", "--project", "p1",
                   "--api-endpoint", f"http://127.0.0.1:{server.server_address[1]}")
    finally:
        server.shutdown()
        server.server_close()
    assert done.returncode == 1
    assert done.stderr.startswith(f"error: {said}"), done.stderr
