"""Google's refusals, as Google sends them, through the training clusters' client: each
becomes a message naming what (the permission, the API, the quota, the zone) and the fix.
Google is a small HTTP server here, answering at the wire what the real API answers."""

from __future__ import annotations

from pathlib import Path

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import jupyter_gtc
from jupyter_gtc.exceptions import CloudApiError
from jupyter_gtc.spec.cluster import load_cluster_spec
from jupyter_gtc.vertex_clusters.client import TrainingClusters

EXAMPLE = Path(jupyter_gtc.__file__).parent / "examples" / "clusters" / "local-a3.yaml"
RESOURCE = "projects/p1/locations/us-central1/modelDevelopmentClusters/demo"
INFO = "type.googleapis.com/google.rpc.ErrorInfo"
PERMISSION = {"code": 403, "status": "PERMISSION_DENIED",
              "message": f"Permission 'aiplatform.modelDevelopmentClusters.create' denied on resource "
                         f"'//aiplatform.googleapis.com/{RESOURCE}' (or it may not exist).",
              "details": [{"@type": INFO, "reason": "IAM_PERMISSION_DENIED", "domain": "aiplatform.googleapis.com",
                           "metadata": {"permission": "aiplatform.modelDevelopmentClusters.create"}}]}
DISABLED = {"code": 403, "status": "PERMISSION_DENIED",
            "message": "Vertex AI API has not been used in project 123 before or it is disabled. Enable it by "
                       "visiting https://console.developers.google.com/apis/api/aiplatform.googleapis.com/overview"
                       "?project=123 then retry.",
            "details": [{"@type": INFO, "reason": "SERVICE_DISABLED", "domain": "googleapis.com",
                         "metadata": {"service": "aiplatform.googleapis.com", "consumer": "projects/123"}}]}
QUOTA = {"code": 429, "status": "RESOURCE_EXHAUSTED",
         "message": "Quota exceeded for quota metric 'Training cluster requests' and limit 'per minute' of service "
                    "'aiplatform.googleapis.com' for consumer 'project_number:123'.",
         "details": [{"@type": INFO, "reason": "RATE_LIMIT_EXCEEDED", "domain": "googleapis.com",
                      "metadata": {"quota_metric": "aiplatform.googleapis.com/model_development_cluster_requests",
                                   "service": "aiplatform.googleapis.com"}}]}
EXISTS = {"code": 409, "status": "ALREADY_EXISTS", "message": f"ModelDevelopmentCluster {RESOURCE} already exists."}
# A stockout ends the create's operation (a google.rpc.Status: the code is a number).
STOCKOUT = {"code": 8, "message": "The zone 'projects/p1/zones/us-central1-a' does not have enough resources "
                                  "available to fulfill the request. Try a different zone, or try again later. "
                                  "(ZONE_RESOURCE_POOL_EXHAUSTED)"}


class Google(BaseHTTPRequestHandler):
    """Answers a create with ``server.create_error`` (an HTTP error), or with an operation that
    reports progress, then ends in ``server.operation_error``."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.server.create_error:
            return self._send(self.server.create_error["code"], {"error": self.server.create_error})
        self._send(200, {"name": "projects/p1/locations/us-central1/operations/7", "done": False,
                         "metadata": {"progressMessage": "Creating node pool a3"}})

    def do_GET(self) -> None:
        self.server.paths.append(self.path)
        self._send(200, {"name": "projects/p1/locations/us-central1/operations/7", "done": True,
                         "metadata": {"progressMessage": "Node pool a3: waiting for capacity"},
                         "error": self.server.operation_error})

    def _send(self, code: int, data: dict) -> None:
        raw = json.dumps(data).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def google(monkeypatch):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    server = ThreadingHTTPServer(("127.0.0.1", 0), Google)
    server.create_error, server.operation_error, server.paths = None, STOCKOUT, []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def client(google) -> TrainingClusters:
    return TrainingClusters("p1", "us-central1", api_endpoint=f"http://127.0.0.1:{google.server_port}", poll_s=0.05)


def test_a_stockout_names_the_zone_the_machine_and_the_ways_round_it(google):
    lines: list[str] = []
    with pytest.raises(CloudApiError) as refused:
        client(google).create("demo", load_cluster_spec(EXAMPLE).to_vertex(), progress=lines.append)
    message = str(refused.value)
    assert refused.value.reason == "ZONE_RESOURCE_POOL_EXHAUSTED"
    assert "us-central1-a" in message and "a3-highgpu-8g" in message
    assert "RESERVATION" in message and "FLEX_START" in message and "another zone" in message
    assert "Node pool a3: waiting for capacity" in lines  # the operation's progress came through first
    assert google.paths == ["/v1/projects/p1/locations/us-central1/operations/7"]  # polled under /v1/


@pytest.mark.parametrize("error, says", [
    (PERMISSION, ["permission aiplatform.modelDevelopmentClusters.create denied in project p1",
                  "gcloud projects add-iam-policy-binding p1", "allow-listed"]),
    (DISABLED, ["API aiplatform.googleapis.com is not enabled in project p1",
                "gcloud services enable aiplatform.googleapis.com --project=p1"]),
    (QUOTA, ["quota aiplatform.googleapis.com/model_development_cluster_requests exceeded",
             "console.cloud.google.com/iam-admin/quotas?project=p1"]),
    (EXISTS, ["training cluster demo exists already", "a create that failed keeps its id", "gtc cluster delete demo"]),
], ids=["permission", "api-disabled", "quota", "already-exists"])
def test_a_refused_create_says_what_and_the_fix(google, error, says):
    google.create_error = error
    with pytest.raises(CloudApiError) as refused:
        client(google).create("demo", load_cluster_spec(EXAMPLE).to_vertex())
    for part in says:
        assert part in str(refused.value)
    assert refused.value.status == error["status"]
