"""Vertex AI's Slurm Job API (``:callSlurmRestApi``) for the training clusters the local Vertex
endpoint serves (``services/vertex_clusters.py``): a request of Slurm's REST API v0.0.42 in
Google's envelope, ``{method: HTTP_METHOD_GET|POST|DELETE, path, body}``, translated to v0.0.38
(``slurm/rest_v42.py``), sent to the cluster's own slurmrestd with a JWT of the endpoint's user
(``backends/slurm_rest.py``: jobs run as that user, as Vertex runs them as the caller's account),
and its answer translated back: ``{status: <Slurm's HTTP status>, body: "<Slurm's JSON, as text>"}``.

One slurmrestd per cluster, started at the cluster's first call: its config is the cluster's,
and a cluster's delete stops it with the cluster's other daemons. The endpoint's stop stops all
it started (``close``).
"""

from __future__ import annotations

import json
import os
import pwd
import threading
import urllib.parse
from typing import Any

from ..backends import get_backend, slurm_rest
from ..exceptions import ClusterBusy, GtcError, InvalidArgument, SpecError
from ..slurm import rest_v42
from .clusters import ClusterService

METHODS = {"HTTP_METHOD_GET": "GET", "HTTP_METHOD_POST": "POST", "HTTP_METHOD_DELETE": "DELETE"}


class SlurmJobApi:
    def __init__(self, clusters: ClusterService):
        self.clusters = clusters
        self._daemons: dict[str, slurm_rest.SlurmRestd] = {}
        self._lock = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}

    def call(self, cluster, request: dict[str, Any]) -> dict[str, Any]:
        """``cluster``: the training cluster's record (RUNNING, checked by the caller)."""
        for key in request:
            if key not in ("method", "path", "body"):
                raise SpecError(key, request[key], "a callSlurmRestApi request has method, path and body only")
        method = METHODS.get(request.get("method"))
        if method is None:
            raise SpecError("method", request.get("method"), "HTTP_METHOD_GET, HTTP_METHOD_POST or HTTP_METHOD_DELETE")
        path = request.get("path")
        if not isinstance(path, str) or not path.startswith("/"):
            raise SpecError("path", path, "Slurm's REST path, e.g. /slurm/v0.0.42/job/submit")
        body = request.get("body")
        if isinstance(body, str) and body.strip():  # a body given as JSON text
            try:
                body = json.loads(body)
            except ValueError as e:
                raise InvalidArgument(f"body: not JSON: {e}") from None
        if body in ("", None):
            body = None
        elif not isinstance(body, dict):
            raise SpecError("body", body, "a JSON object (Slurm's request body)")
        url = urllib.parse.urlsplit(path)
        query = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
        try:
            kind, method38, path38, query38, body38 = rest_v42.request_38(method, url.path, query, body)
        except KeyError:
            return _answer(404, rest_v42.error_body(
                f"{method} {url.path} is not a path the local Slurm Job API serves (v0.0.42: job/submit, jobs/, "
                f"job/ID, nodes/, partitions/, ping/, slurmdb job/ID and jobs/)", "callSlurmRestApi",
                rest_v42.ESLURM_REST_UNKNOWN_URL, "Unable to find requested URL"))
        except rest_v42.Refused as e:
            return _answer(e.status, e.body())
        daemon = self._daemon(cluster)
        if kind in ("db_job", "db_jobs") and not daemon.accounting:
            return _answer(404, rest_v42.error_body(
                f"cluster {cluster.name} keeps no accounting (orchestrator_spec.slurm_spec.accounting.enabled is "
                f"false): /slurmdb/ has nothing to answer; ask /slurm/v0.0.42/job/ID while Slurm remembers the job",
                "callSlurmRestApi", rest_v42.ESLURM_REST_UNKNOWN_URL, "Unable to find requested URL"))
        users = query38.pop("users", None) if kind == "db_jobs" else None  # v0.0.38 has no such query
        target = path38 + (f"?{urllib.parse.urlencode(query38)}" if query38 else "")
        kept = None
        if kind == "submit" and body38 and "argv" in body38:  # slurmrestd 22.05 mishandles argv (rest_v42's table)
            try:
                slurm_rest.forget_finished(daemon.root, daemon.commands.job_ids())
            except GtcError:
                pass  # slurmctld busy: the next submit with arguments clears them
            kept = slurm_rest.keep_script(daemon.root, body38["script"])
            body38 = rest_v42.wrap_argv(body38, str(kept))
        status, raw = daemon.request(method38, target, body38)  # no answer: the job may exist, its script stays
        status, answer = rest_v42.answer_42(kind, status, raw)
        if kept is not None and not answer.get("job_id"):
            kept.unlink(missing_ok=True)  # refused: no job will run it
        elif kept is not None:
            slurm_rest.note_job(kept, answer["job_id"])
        if users is not None:
            rest_v42.only_users(answer, users)
        if kind in ("db_job", "db_jobs") and answer.get("jobs"):
            rest_v42.correct_db_exit_codes(answer, _sacct_exit_codes(daemon.commands, answer["jobs"]))
        return _answer(status, answer)

    def _daemon(self, cluster) -> slurm_rest.SlurmRestd:
        if not cluster.runtime.get("jwt_key"):
            missing = slurm_rest.missing_packages()
            raise ClusterBusy(cluster.name, f"cluster {cluster.name} was made without Slurm's REST API (JWT): "
                              + (f"this machine lacks {', '.join(missing)} (apt-get install -y {' '.join(missing)}, "
                                 f"then delete the cluster and create it again)" if missing else
                                 "the local endpoint's Slurm Job API serves the training clusters it created "
                                 "(local.slurm_rest_api: true); create it again through the endpoint"))
        with self._lock:
            lock = self._locks.setdefault(cluster.name, threading.Lock())
        with lock:  # one start at a time per cluster
            daemon = self._daemons.get(cluster.name)
            if daemon is None:
                backend = get_backend(cluster.backend, self.clusters.home)
                commands = backend.commands(cluster.runtime)
                root = backend._cluster_dir(cluster.runtime)  # noqa: SLF001 - where the backend keeps it
                daemon = slurm_rest.SlurmRestd(root, commands, _user(), dict(os.environ),
                                               accounting=bool(cluster.runtime.get("accounting")))
                self._daemons[cluster.name] = daemon
            daemon.ensure()
        return daemon

    def stop(self, name: str) -> None:
        daemon = self._daemons.pop(name, None)
        if daemon is not None:
            daemon.stop()

    def close(self) -> None:
        for name in list(self._daemons):
            self.stop(name)


def _sacct_exit_codes(commands, jobs: list[dict[str, Any]]) -> dict[str, tuple[str, str]]:
    """``{"ID" or "ID.STEP": (ExitCode, DerivedExitCode)}`` of ``jobs`` from one sacct: Slurm
    22.05's REST answer says SUCCESS for every normal exit (slurm/rest_v42.py's table)."""
    ids = sorted({str(j.get("job_id")) for j in jobs if str(j.get("job_id", "")).isdigit()})[:1000]
    if not ids:
        return {}
    result = commands.run(["sacct", "-n", "-P", "-D", "-o", "JobID,ExitCode,DerivedExitCode", "-j", ",".join(ids)],
                          check=False)
    found = {}
    for line in result.stdout.splitlines() if result.returncode == 0 else []:
        parts = line.split("|")
        if len(parts) == 3:
            found[parts[0]] = (parts[1], parts[2])
    return found


def _answer(status: int, body: dict[str, Any]) -> dict[str, Any]:
    return {"status": status, "body": json.dumps(body)}


def _user() -> str:
    """Whom jobs run as: the endpoint's user (Vertex runs them as the caller's Linux account)."""
    return pwd.getpwuid(os.geteuid()).pw_name

