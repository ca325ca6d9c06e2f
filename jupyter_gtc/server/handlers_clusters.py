"""REST handlers for clusters, under ``{base_url}gtc/api/clusters``.

    GET    clusters                  {"clusters": [Cluster.to_json(), ...]}   (with nodes)
    POST   clusters  {"spec": ...}   201 Cluster.to_json()   (spec: an object, or JSON/YAML text)
    GET    clusters/<name>           Cluster.to_json()
    POST   clusters/<name>/scale     {"pool": "gpu", "nodes": 4} -> Cluster.to_json()
    DELETE clusters/<name>           204
"""

from __future__ import annotations

from tornado import web

from .. import api
from .base import GtcHandler, bad_request


class ClustersHandler(GtcHandler):
    @web.authenticated
    async def get(self):
        clusters = await self.call(api.list_clusters)
        self.write_json({"clusters": [c.to_json() for c in clusters]})

    @web.authenticated
    async def post(self):
        body = self.json_body()
        if "spec" not in body:
            raise bad_request('send {"spec": <a cluster spec object, or its JSON or YAML text>}')
        # Parsed here, not by create_cluster: text that looks like a file name must never be read as one.
        spec = await self.call(api.parse_cluster_spec, body["spec"])
        cluster = await self.call(api.create_cluster, spec)
        self.write_json(cluster.to_json(), status=201)


class ClusterHandler(GtcHandler):
    @web.authenticated
    async def get(self, name: str):
        cluster = await self.call(api.get_cluster, name)
        self.write_json(cluster.to_json())

    @web.authenticated
    async def delete(self, name: str):
        await self.call(api.delete_cluster, name)
        self.set_status(204)
        self.finish()


class ClusterScaleHandler(GtcHandler):
    @web.authenticated
    async def post(self, name: str):
        body = self.json_body()
        pool, nodes = body.get("pool"), body.get("nodes")
        if not isinstance(pool, str) or not isinstance(nodes, int) or isinstance(nodes, bool):
            raise bad_request('send {"pool": "<pool id>", "nodes": <a whole number>}')
        cluster = await self.call(api.scale_cluster, name, pool, nodes)
        self.write_json(cluster.to_json())


def handlers(prefix: str) -> list[tuple]:
    return [
        (f"{prefix}/clusters", ClustersHandler),
        (f"{prefix}/clusters/(?P<name>[^/]+)", ClusterHandler),
        (f"{prefix}/clusters/(?P<name>[^/]+)/scale", ClusterScaleHandler),
    ]
