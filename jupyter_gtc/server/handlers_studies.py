"""REST handlers for tuning studies, under ``{base_url}gtc/api/studies``.

    GET  studies?cluster=NAME                 {"studies": [study_json, ...]}   newest first
    GET  studies/<name>                       study_json plus "spec" and every trial's "curve"
    POST studies/<name>/stop                  study_json   running trials cancelled, recorded as pruned
    POST studies/<name>/resume                study_json   this server's process drives it from now on
    POST studies/<name>/trials/<id>/stop      study_json   one running trial (id as in ``trials``: "1", ...)

``study_json`` is ``Study.to_json()`` without the spec and the trials' curves, which a list
does not show and which grow with every report. A value that is NaN or infinite (a diverged
trial) is null: JSON has no such numbers.
"""

from __future__ import annotations

import math
from typing import Any

from jupyter_server.auth.decorator import authorized
from tornado import web

from .. import api
from ..services.tuning.study import FINISHED_STUDY_STATES
from .base import EXECUTE, GtcHandler


def study_json(study: api.Study, whole: bool = False) -> dict[str, Any]:
    data = study.to_json()
    if not whole:
        data.pop("spec")
        for trial in (*data["trials"], *([data["best"]] if data["best"] else [])):
            trial.pop("curve")
    return _finite(data)


def studies_json(cluster: str | None, finished: dict[str, dict] | None = None) -> list[dict[str, Any]]:
    """``cluster``'s studies, newest first. ``finished``: summaries from an earlier call, by name,
    which a finished study never changes; it is reused and updated, so a long history of
    finished studies costs one row read each, not a read of all their trials."""
    out = []
    for study in api.list_studies(cluster):
        record = study.record
        known = finished.get(study.name) if finished is not None else None
        if known is None or record.state not in FINISHED_STUDY_STATES or known["state"] != record.state:
            known = study_json(study)
            if finished is not None and known["state"] in FINISHED_STUDY_STATES:
                finished[study.name] = known
        out.append(known)
    return out


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


class StudiesHandler(GtcHandler):
    @web.authenticated
    @authorized
    async def get(self):
        self.write_json({"studies": await self.call(studies_json, self.get_query_argument("cluster", None))})


class StudyHandler(GtcHandler):
    @web.authenticated
    @authorized
    async def get(self, name: str):
        self.write_json(await self.call(lambda: study_json(api.get_study(name), whole=True)))


class StudyActionHandler(GtcHandler):
    @web.authenticated
    @authorized
    async def post(self, name: str, action: str):
        if action == "resume":  # it submits trials: the study's stored script runs on the nodes
            await self.require(EXECUTE, "resuming a study runs its trials' script")

        def act() -> dict[str, Any]:
            study = api.get_study(name)
            study.stop() if action == "stop" else study.resume()
            return study_json(study)

        self.write_json(await self.call(act))


class TrialStopHandler(GtcHandler):
    @web.authenticated
    @authorized
    async def post(self, name: str, trial: str):
        self.write_json(await self.call(lambda: study_json(api.get_study(name).stop_trial(trial))))


def handlers(prefix: str) -> list[tuple]:
    study = f"{prefix}/studies/(?P<name>[^/]+)"
    return [
        (f"{prefix}/studies", StudiesHandler),
        (study, StudyHandler),
        (f"{study}/(?P<action>stop|resume)", StudyActionHandler),
        (f"{study}/trials/(?P<trial>[0-9]+)/stop", TrialStopHandler),
    ]
