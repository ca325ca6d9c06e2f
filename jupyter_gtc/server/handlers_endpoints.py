"""REST handlers for serving, under ``{base_url}gtc/api`` (the sidebar's Models section to come).
An endpoint deployed here is served by the Jupyter server's process, as long as it runs.

    GET    endpoints                 {"endpoints": [endpoint_json, ...]}
    GET    endpoints/ID              endpoint_json: model, cluster, url, replicas (health, load), and
                                     "traffic": the last minute's requests/s, p50/p95 s, errors
    POST   endpoints/ID/predict      {"instances": [...]} -> {"predictions": [...]}; a refusal keeps the
                                     endpoint's status (400 with the reason, 429 not ready or full)
    DELETE endpoints/ID              undeployed: its replicas' jobs ended; {"undeployed": ID}
    POST   models/REF/deploy         {"cluster", "min_replicas"?, "max_replicas"?, "command"?, "options"?}:
                                     202 at once, endpoint_json with its replicas starting (not yet
                                     healthy): a REST thread never waits for a model to load. A thread
                                     of the server waits as deploy() does and undeploys it where no
                                     replica answers (why: the server's log); needs "execute" too
"""

from __future__ import annotations

import time
from pathlib import Path

from jupyter_server.auth.decorator import authorized
from tornado import web

from .. import api
from ..serving.traffic import read_tail, summarize
from .base import EXECUTE, GtcHandler, bad_request

_DEPLOY_FIELDS = {"cluster", "min_replicas", "max_replicas", "command", "options"}


def endpoint_json(endpoint) -> dict:
    """``Endpoint.to_json()`` and its recent traffic (``serving/traffic.py``), for the sidebar."""
    data = endpoint.to_json()
    data["traffic"] = summarize(read_tail(Path(endpoint.deployment["folder"]) / "requests.jsonl"), time.time())
    return data


class EndpointsHandler(GtcHandler):
    @web.authenticated
    @authorized
    async def get(self):
        self.write_json({"endpoints": await self.call(lambda: [endpoint_json(e) for e in api.list_endpoints()])})


class EndpointHandler(GtcHandler):
    @web.authenticated
    @authorized
    async def get(self, endpoint: str):
        self.write_json(await self.call(lambda: endpoint_json(api.get_endpoint(endpoint))))

    @web.authenticated
    @authorized
    async def delete(self, endpoint: str):
        await self.call(api.undeploy_endpoint, endpoint)
        self.write_json({"undeployed": endpoint})


class PredictHandler(GtcHandler):
    @web.authenticated
    @authorized
    async def post(self, endpoint: str):
        instances = self.json_body().get("instances")
        if not isinstance(instances, list) or not instances:
            raise bad_request("the body is {\"instances\": [...]}: a non-empty list")
        self.write_json({"predictions": await self.call(api.predict, endpoint, instances)})


class DeployHandler(GtcHandler):
    @web.authenticated
    @authorized
    async def post(self, ref: str):
        # Its replicas run a program on the nodes (ours on the model's files, or the body's
        # command), as a requeue runs a script again: "write" is not enough.
        await self.require(EXECUTE, "a deploy runs a server in Slurm jobs of the cluster")
        body = self.json_body()

        def deploy() -> dict:
            model = api.get_model(ref)  # first: an unknown model is a 404 whatever the body
            unknown = set(body) - _DEPLOY_FIELDS
            if unknown:
                raise bad_request(f"unknown field(s) {sorted(unknown)}; a deploy takes {sorted(_DEPLOY_FIELDS)}")
            if "cluster" not in body:
                raise bad_request("a deploy needs 'cluster': where its replicas run")
            fields = {k: v for k, v in body.items() if k != "cluster"}
            return model.deploy(body["cluster"], **fields, wait=False, settle=True).to_json()

        self.write_json(await self.call(deploy), status=202)


def handlers(prefix: str) -> list[tuple]:
    endpoint = f"{prefix}/endpoints/(?P<endpoint>[0-9]+)"
    return [
        (f"{prefix}/endpoints", EndpointsHandler),
        (endpoint, EndpointHandler),
        (f"{endpoint}/predict", PredictHandler),
        (f"{prefix}/models/(?P<ref>[^/]+)/deploy", DeployHandler),
    ]
