"""REST handlers for jobs, under ``{base_url}gtc/api/jobs``.

    GET  jobs?cluster=NAME                      {"jobs": [job_json, ...]}   newest first
    GET  jobs/<cluster>/<id>                    job_json
    POST jobs/<cluster>/<id>/cancel             job_json   (also requeue, hold, release)
    GET  jobs/<cluster>/<id>/log?offset=&limit= {"text", "offset", "next_offset", "size", "finished"}
    GET  jobs/<cluster>/<id>/metrics?since=N    {"scalars": [Scalar, ...], "next": M, "finished"}

``job_json`` is ``Job.to_json()`` and ``failure`` (why a failed job failed, one line from its
log, read once per process): with ``reason`` (why it is pending: Resources,
JobHeldUser, ...), ``finished``, and ``managed`` (false for a job that others submitted, a
terminal's sbatch: the list shows every job of the cluster, and acts on every one; such a
job's log is where Slurm says, ``log_path``, and it has no metrics). A job is named by its
Slurm id or its name, as everywhere else.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from typing import Any

from jupyter_server.auth.decorator import authorized
from tornado import web

from .. import api
from ..exceptions import GtcError
from .base import EXECUTE, GtcHandler

LOG_LIMIT = 256 * 1024        # bytes per log read, unless the client asks for fewer
MAX_LOG_LIMIT = 4 * 1024 * 1024
MAX_SCALARS = 50_000          # per metrics answer; the client asks again from ``next``
ACTIONS = {"cancel": api.cancel_job, "requeue": api.requeue_job, "hold": api.hold_job, "release": api.release_job}


def job_json(job: api.Job, reads: list[int] | None = None) -> dict[str, Any]:
    """``Job.to_json()`` and ``failure``: why it failed, one line (``Job.failure()``), read
    from its log once per process and kept (a finished job's log no longer changes); ``reads``,
    where given, is how many logs this answer may still read (a list of one count)."""
    data = job.to_json()
    data["failure"] = _failure(job, reads) if data["finished"] and data["state"] != "COMPLETED" else None
    return data


def jobs_json(cluster: str | None) -> list[dict[str, Any]]:
    reads = [NEW_FAILURES_PER_LIST]  # newest first: a long history's old failures follow on later answers
    return [job_json(job, reads) for job in api.list_jobs(cluster)]


NEW_FAILURES_PER_LIST = 20  # logs one listing reads (each at most its head and tail)
FAILURES_KEPT = 4096
_failures: OrderedDict[tuple, str | None] = OrderedDict()
_failures_lock = threading.Lock()


def _failure(job: api.Job, reads: list[int] | None) -> str | None:
    key = (job.cluster, job.id, job.state, job.exit_code, job.ended_at, str(job.log_path))
    with _failures_lock:
        if key in _failures:
            _failures.move_to_end(key)
            return _failures[key]
    if reads is not None:
        if reads[0] <= 0:
            return None
        reads[0] -= 1
    try:
        found = job.failure()
    except GtcError:  # its host cannot be reached now: the next answer tries again
        return None
    with _failures_lock:
        _failures[key] = found
        while len(_failures) > FAILURES_KEPT:
            _failures.popitem(last=False)
    return found


class JobsHandler(GtcHandler):
    @web.authenticated
    @authorized
    async def get(self):
        jobs = await self.call(jobs_json, self.get_query_argument("cluster", None))
        self.write_json({"jobs": jobs})


class JobHandler(GtcHandler):
    @web.authenticated
    @authorized
    async def get(self, cluster: str, ref: str):
        self.write_json(await self.call(lambda: job_json(api.get_job(ref, cluster))))


class JobActionHandler(GtcHandler):
    @web.authenticated
    @authorized
    async def post(self, cluster: str, ref: str, action: str):
        if action == "requeue":  # its stored script runs again on the nodes, as its user
            await self.require(EXECUTE, "a requeue runs the job's script again")
        self.write_json(await self.call(lambda: job_json(ACTIONS[action](ref, cluster))))


class JobLogHandler(GtcHandler):
    @web.authenticated
    @authorized
    async def get(self, cluster: str, ref: str):
        offset = self.int_argument("offset", None, minimum=0)
        limit = min(self.int_argument("limit", LOG_LIMIT, minimum=1), MAX_LOG_LIMIT)

        def read() -> dict[str, Any]:
            job = api.get_job(ref, cluster)
            finished = job.finished  # before reading: a finished job's log is complete once read
            return {**job.log_range(offset, limit), "finished": finished}

        self.write_json(await self.call(read))


class JobMetricsHandler(GtcHandler):
    @web.authenticated
    @authorized
    async def get(self, cluster: str, ref: str):
        since = self.int_argument("since", 0, minimum=0)

        def read() -> dict[str, Any]:
            job = api.get_job(ref, cluster)
            finished = job.finished  # before reading, as for the log
            feed = job.metrics_feed  # the process's one reader of this job
            feed.refresh(until=since + MAX_SCALARS)  # a big log dir: read this answer's worth, not all
            scalars = feed.all()[since:since + MAX_SCALARS]
            return {"scalars": [scalar_json(s) for s in scalars], "next": since + len(scalars), "finished": finished}

        self.write_json(await self.call(read))


def scalar_json(scalar) -> dict[str, Any]:
    """A ``Scalar`` as JSON; NaN and infinities (a diverged loss) become null: JSON has no
    such numbers, and the browser's ``JSON.parse`` refuses Python's ``NaN``."""
    out = scalar._asdict()
    if not math.isfinite(out["value"]):
        out["value"] = None
    return out


def handlers(prefix: str) -> list[tuple]:
    job = f"{prefix}/jobs/(?P<cluster>[^/]+)/(?P<ref>[^/]+)"
    return [
        (f"{prefix}/jobs", JobsHandler),
        (job, JobHandler),
        (f"{job}/(?P<action>{'|'.join(ACTIONS)})", JobActionHandler),
        (f"{job}/log", JobLogHandler),
        (f"{job}/metrics", JobMetricsHandler),
    ]
