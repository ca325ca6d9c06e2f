"""A user's own server written for Vertex AI custom containers, knowing nothing of jupyter_gtc:
it reads AIP_HTTP_PORT, AIP_HEALTH_ROUTE, AIP_PREDICT_ROUTE, AIP_STORAGE_URI, AIP_MODEL_NAME and
AIP_MODE, as Vertex documents them. Its health route answers 200 once ``ready`` exists in its
model folder; a prediction waits while ``hold`` exists there (a test's way to fill the endpoint).
Each prediction echoes what the server saw, so a test can check the contract and the env."""

import json
import os
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STORAGE = os.environ["AIP_STORAGE_URI"]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, code, data):
        body = json.dumps(data).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path != os.environ["AIP_HEALTH_ROUTE"]:
            return self.reply(404, {})
        ready = os.path.exists(os.path.join(STORAGE, "ready"))
        self.reply(200 if ready else 503, {})

    def do_POST(self):
        if self.path != os.environ["AIP_PREDICT_ROUTE"]:
            return self.reply(404, {})
        instances = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["instances"]
        while os.path.exists(os.path.join(STORAGE, "hold")):
            time.sleep(0.05)
        seen = {"model_name": os.environ["AIP_MODEL_NAME"], "mode": os.environ["AIP_MODE"],
                "endpoint": os.environ["AIP_ENDPOINT_ID"], "secret": os.environ.get("GTC_TEST_SECRET")}
        self.reply(200, {"predictions": [{"echo": i, **seen} for i in instances]})


ThreadingHTTPServer(("127.0.0.1", int(os.environ["AIP_HTTP_PORT"])), Handler).serve_forever()
