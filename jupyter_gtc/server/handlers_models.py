"""REST handlers for the model registry, under ``{base_url}gtc/api/models`` (the sidebar's
Models section to come). ``REF`` is ``NAME``, ``NAME@VERSION`` or ``NAME@ALIAS``, its ``@``
sent as is or percent-encoded (``%40``, as Vertex's own routes send it).

    GET    models                   {"models": [model_json, ...]}  by name; versions without lineage
    GET    models/REF               the version REF names: model_json with every version's lineage
                                    and the model's history ("events")
    POST   models                   {"job", "model", "cluster"?, "alias"?, "description"?, "labels"?,
                                    "copy"?, "parent"?}: a finished job's model registered; 201, model_json
    POST   models/REF/aliases       {"aliases": ["prod", "-old"]}: applied to (moved to) or removed from
                                    REF's version, all or none (Vertex's mergeVersionAliases); model_json
    DELETE models/REF               NAME@VERSION: that version; NAME: the model and every version
"""

from __future__ import annotations

from typing import Any

from jupyter_server.auth.decorator import authorized
from tornado import web

from .. import api
from .base import GtcHandler, bad_request
from .handlers_studies import _finite  # a diverged run's NaN final loss is null: JSON has no NaN

_REGISTER_FIELDS = {"job", "model", "cluster", "alias", "description", "labels", "copy", "parent"}


def models_json() -> list[dict[str, Any]]:
    return [{"name": m.name, "description": m.description, "labels": m.labels, "created_at": m.created_at,
             "versions": [{"version": v.version, "aliases": v.aliases, "created_at": v.created_at,
                           "artifact_uri": v.artifact_uri, "job": (v.lineage.get("job") or {}).get("id"),
                           "deployed": v.deployment is not None} for v in m.versions]}
            for m in api.list_models()]


class ModelsHandler(GtcHandler):
    @web.authenticated
    @authorized
    async def get(self):
        self.write_json({"models": await self.call(models_json)})

    @web.authenticated
    @authorized
    async def post(self):
        body = self.json_body()
        unknown = set(body) - _REGISTER_FIELDS
        if unknown:
            raise bad_request(f"unknown field(s) {sorted(unknown)}; a registration takes {sorted(_REGISTER_FIELDS)}")
        if "job" not in body or "model" not in body:
            raise bad_request("a registration needs 'job' (a Slurm job id or name) and 'model' (the model's name)")
        fields = {k: v for k, v in body.items() if k not in ("job", "model")}
        model = await self.call(lambda: api.register_model(str(body["job"]), body["model"], **fields).to_json())
        self.write_json(_finite(model), status=201)


class ModelHandler(GtcHandler):
    @web.authenticated
    @authorized
    async def get(self, ref: str):
        self.write_json(_finite(await self.call(lambda: api.get_model(ref).to_json())))

    @web.authenticated
    @authorized
    async def delete(self, ref: str):
        await self.call(api.delete_model, ref)
        self.write_json({"deleted": ref})


class ModelAliasesHandler(GtcHandler):
    @web.authenticated
    @authorized
    async def post(self, ref: str):
        aliases = self.json_body().get("aliases")

        def merge() -> dict[str, Any]:
            model = api.get_model(ref)  # first: an unknown model is a 404 whatever the body
            if not isinstance(aliases, list) or not aliases:
                raise bad_request("the body is {\"aliases\": [\"prod\", \"-old\"]}: aliases to apply, '-' to remove")
            return _finite(api.merge_model_aliases(f"{model.name}@{model.version}", aliases).to_json())

        self.write_json(await self.call(merge))


def handlers(prefix: str) -> list[tuple]:
    model = f"{prefix}/models/(?P<ref>[^/]+)"
    return [
        (f"{prefix}/models", ModelsHandler),
        (model, ModelHandler),
        (f"{model}/aliases", ModelAliasesHandler),
    ]
