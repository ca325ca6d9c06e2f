"""REST handlers for clusters, under ``{base_url}gtc/api/clusters``, and their operations.

    GET    clusters                  {"clusters": [Cluster.to_json(), ...]}   (with nodes)
    POST   clusters  {"spec": ...}   202 Operation.to_json()   (spec: an object, or JSON/YAML text)
    GET    clusters/<name>           Cluster.to_json()
    POST   clusters/<name>/scale     {"pool": "gpu", "nodes": 4} -> 202 Operation.to_json()
    DELETE clusters/<name>           202 Operation.to_json()
    GET    clusters/<name>/events    {"events": [{time, node, event, detail}, ...]}   oldest first;
                                     ?since=<time>: only those after it (the sidebar polls so)
    GET    operations                {"operations": [Operation.to_json(), ...]}   running and recent, oldest first
    GET    operations/<id>           Operation.to_json()

Creating, scaling and deleting take from seconds to minutes, so they answer once the
request is checked and the cluster claimed (a bad spec, an unknown pool or a busy cluster
is still a 4xx at once), and go on in the background: the change feed sends each step as an
``operation`` event ({state: RUNNING, message: "starting slurmd 2/3"}) and then how it
ended (DONE with ``result``, the cluster; or FAILED with ``error``, {kind, message}).

Reads need the Authorizer's "read", the rest "write" (``base.py``); a create or a scale whose
spec carries scripts that run as root on the nodes needs "execute" as well (``scripts_in``).
"""

from __future__ import annotations

import math

from jupyter_server.auth.decorator import authorized
from tornado import web

from .. import api
from .base import EXECUTE, GtcHandler, bad_request


def scripts_in(spec: api.ClusterSpec) -> list[str]:
    """The fields of ``spec`` that hold scripts run as root on the nodes: Slurm's prolog and
    epilog around every job, and each pool's startup script as its nodes start."""
    fields = [f"orchestrator_spec.slurm_spec.{name}" for name in ("prolog_bash_scripts", "epilog_bash_scripts")
              if getattr(spec.slurm, name)]
    fields += [f"node_pools[{pool.id}].startup_script" for pool in spec.node_pools if pool.startup_script]
    return fields


def _runs_as_root(scripts: list[str]) -> str:
    return f"{', '.join(scripts)} run as root on the nodes"


def _stored_spec(name: str) -> api.ClusterSpec | api.AttachSpec | None:
    """The spec a cluster was created with (None if there is no such cluster: the api says so)."""
    return next((c.spec for c in api.list_clusters(with_status=False) if c.name == name), None)


class ClustersHandler(GtcHandler):
    @web.authenticated
    @authorized
    async def get(self):
        clusters = await self.call(api.list_clusters)
        self.write_json({"clusters": [c.to_json() for c in clusters]})

    @web.authenticated
    @authorized
    async def post(self):
        body = self.json_body()
        if "spec" not in body:
            raise bad_request('send {"spec": <a cluster spec object, or its JSON or YAML text>}')
        # Parsed here, not by create_cluster: text that looks like a file name must never be read as one.
        spec = await self.call(api.parse_cluster_spec, body["spec"])
        if scripts := scripts_in(spec):
            await self.require(EXECUTE, _runs_as_root(scripts))  # before anything is claimed
        self.write_operation(await self.call(api.start_create_cluster, spec))


class ClusterHandler(GtcHandler):
    @web.authenticated
    @authorized
    async def get(self, name: str):
        cluster = await self.call(api.get_cluster, name)
        self.write_json(cluster.to_json())

    @web.authenticated
    @authorized
    async def delete(self, name: str):
        self.write_operation(await self.call(api.start_delete_cluster, name))


class ClusterScaleHandler(GtcHandler):
    @web.authenticated
    @authorized
    async def post(self, name: str):
        body = self.json_body()
        pool, nodes = body.get("pool"), body.get("nodes")
        if not isinstance(pool, str) or not isinstance(nodes, int) or isinstance(nodes, bool):
            raise bad_request('send {"pool": "<pool id>", "nodes": <a whole number>}')
        # A scale applies the stored spec again, scripts included: the local backend rewrites
        # the prolog and epilog and reconfigures every node, and the new nodes run them (and
        # their pool's startup script) as root. So a scale carries the scripts whenever the
        # cluster's spec has any, whichever pool it resizes and even downwards: which way it
        # goes is known only against a node count that another scale may change meanwhile.
        spec = await self.call(_stored_spec, name)
        if isinstance(spec, api.ClusterSpec) and (scripts := scripts_in(spec)):
            await self.require(EXECUTE, _runs_as_root(scripts))
        self.write_operation(await self.call(api.start_scale_cluster, name, pool, nodes))


class ClusterEventsHandler(GtcHandler):
    """The remediation history of a cluster's nodes (``api.cluster_events``): what its
    supervisor noticed and did. ``since`` is the ``time`` of the newest event the caller has,
    so a poll that finds nothing new answers an empty list."""

    @web.authenticated
    @authorized
    async def get(self, name: str):
        raw = self.get_query_argument("since", None)
        try:
            since = float(raw) if raw is not None else None
        except ValueError:
            raise bad_request(f"since: {raw!r} is not a time (seconds since the epoch)") from None
        if since is not None and not math.isfinite(since):
            raise bad_request(f"since: {raw!r} is not a time (seconds since the epoch)")
        events = await self.call(api.cluster_events, name)
        if since is not None:
            events = [e for e in events if e["time"] > since]
        self.write_json({"events": events})


class OperationsHandler(GtcHandler):
    @web.authenticated
    @authorized
    async def get(self):
        operations = await self.call(lambda: [op.to_json() for op in api.cluster_operations().list()])
        self.write_json({"operations": operations})


class OperationHandler(GtcHandler):
    @web.authenticated
    @authorized
    async def get(self, op_id: str):
        self.write_json(await self.call(lambda: api.cluster_operations().get(op_id).to_json()))


def handlers(prefix: str) -> list[tuple]:
    return [
        (f"{prefix}/clusters", ClustersHandler),
        (f"{prefix}/clusters/(?P<name>[^/]+)", ClusterHandler),
        (f"{prefix}/clusters/(?P<name>[^/]+)/scale", ClusterScaleHandler),
        (f"{prefix}/clusters/(?P<name>[^/]+)/events", ClusterEventsHandler),
        (f"{prefix}/operations", OperationsHandler),
        (f"{prefix}/operations/(?P<op_id>[^/]+)", OperationHandler),
    ]
