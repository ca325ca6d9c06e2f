"""A training cluster's Slurm driven through its Slurm Job API (``callSlurmRestApi``), with the
surface of ``slurm.commands.SlurmCommands`` that our services use: submit, queue,
finished_jobs, accounted, nodes, job_ids, cancel, hold, release, requeue, ping. No SSH for the
scheduler's calls; the job's folder (its script, its output) stays on the cluster, reached
through ``host``, the login node.

Each method is one call (``queue()``: one ``GET /slurm/v0.0.42/jobs/``, however many jobs: the
poller's tick), but ``cancel`` (a ``DELETE`` per job: v0.0.42's ``DELETE /jobs/`` takes filters,
not a list of ids). Paths and shapes are Slurm's OpenAPI v0.0.42 (``job_desc.py`` and
``slurm_answers.py`` cite the spec). v0.0.42 has no requeue (no path or field for it: the spec's
paths under ``/slurm/v0.0.42/`` are ping, diag, jobs, job/{id}, job/submit, job/allocate, nodes,
node/{name}, partitions, reservations, licenses, shares, reconfigure; the job update's
``v0.0.42_job_desc_msg`` has no such field, and the signal flags of ``DELETE /job/{id}`` only
``FEDERATION_REQUEUE``, a federation's), so ``requeue`` says to use ``jobs: ssh``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..containers.oci_task import expand_hostlist
from ..exceptions import ActionNotSupported, GtcError, SlurmError, SpecError
from ..hosts import Host
from ..slurm.parse import JobStatus, NodeStatus
from .client import SlurmApiError
from .job_desc import job_description
from .slurm_answers import check_errors, jobs_from_accounting, jobs_from_info, nodes_from_answer, ping_ok

API = "v0.0.42"
SLURM = f"/slurm/{API}"
SLURMDB = f"/slurmdb/{API}"


class SlurmJobApi:
    """``clusters``: a ``TrainingClusters`` (its ``call_slurm_rest_api``); ``cluster_id``: the
    training cluster; ``host``: where job folders live (the login node). ``accounting``: the
    cluster keeps accounting (slurmdbd), so jobs that left slurmctld are asked of it."""

    def __init__(self, clusters: Any, cluster_id: str, host: Host, accounting: bool = True):
        self.clusters, self.cluster_id, self.host, self.accounting = clusters, cluster_id, host, accounting
        self.jobcomp_file = None  # no completion file is read through the API: accounting says how jobs ended

    def call(self, method: str, path: str, body: dict[str, Any] | None = None,
             query: dict[str, Any] | None = None) -> dict[str, Any]:
        """One Slurm REST call; Slurm's answer. An error status raises ``SlurmApiError`` (a
        ``CommandError`` carrying Slurm's text, as a refused command's stderr)."""
        return self.clusters.call_slurm_rest_api(self.cluster_id, method, path, body=body, query=query)[1]

    def ping(self) -> bool:
        """True when slurmctld answers."""
        try:
            return ping_ok(self.call("GET", f"{SLURM}/ping/"))
        except GtcError:  # Google's refusal, Slurm's error status or errors: not up, as a failed `scontrol ping`
            return False

    def submit(self, script: Path, options: list[str], env: dict[str, str], job_dir: Path,
               work_dir: str | Path | None, script_args: list[str] | None = None) -> str:
        """As ``SlurmCommands.submit``: the script at ``script`` on ``host`` (its ``#SBATCH``
        lines read here, as sbatch would), ``options`` winning over them, ``env`` in the job's
        environment, run in ``work_dir`` (None where the options or script choose). An option
        the API cannot carry is refused before anything is sent (``job_desc.OptionRefused``).
        Returns Slurm's job id."""
        text = self.host.read(script).decode()
        job = job_description(text, options, env, None if work_dir is None else str(work_dir), str(script),
                              script_args)
        answer = self.call("POST", f"{SLURM}/job/submit", {"job": job})
        job_id = answer.get("job_id")
        if job_id:
            # A job id means the job exists, whatever else the answer lists: 24.11 lists a held or
            # waiting job's code (ESLURM_JOB_HELD, _NODES_BUSY, ...: ``nonfatal_errors`` in
            # openapi/slurmctld/jobs.c) as a warning, 22.05 as an error. Raising would let the
            # caller remove the folder of a job that runs.
            return str(job_id)
        check_errors(answer, "job submit")
        raise SlurmError(f"job submit: Slurm's answer has no job_id: {str(answer)[:300]}")

    def queue(self, reader: Any = None) -> list[JobStatus]:
        """Every job slurmctld knows, finished ones included (for MinJobAge): one call.
        (``reader``, SlurmCommands' parse cache for squeue's text, has nothing to do here.)"""
        return jobs_from_info(self.call("GET", f"{SLURM}/jobs/"))

    def finished_jobs(self, offset: int = 0, unseen: list[str] | None = None) -> tuple[list[JobStatus], int]:
        """The ``unseen`` jobs (ids ``queue()`` no longer lists) as accounting has them, in one
        call; ``offset`` is passed back as it came (no completion file here)."""
        return (self.accounted(unseen) if self.accounting and unseen else []), offset

    def accounted(self, job_ids: list[str]) -> list[JobStatus]:
        """``job_ids`` (and each one's array tasks) as the accounting database has them: one
        ``GET /slurmdb/v0.0.42/jobs/`` filtered by ``step`` (sacct's ``-j``: the job condition's
        step list), its answer filtered here too."""
        if not job_ids:
            return []
        wanted = set(job_ids)
        found = jobs_from_accounting(self.call("GET", f"{SLURMDB}/jobs/", query={"step": list(job_ids)}))
        return [j for j in found if j.job_id in wanted or j.parent_id in wanted]

    def nodes(self) -> list[NodeStatus]:
        return nodes_from_answer(self.call("GET", f"{SLURM}/nodes/"))

    def job_ids(self, nodes: list[str] | None = None, states: list[str] | None = None) -> list[str]:
        """Ids of jobs not yet finished, optionally only those on ``nodes`` or in ``states``:
        one ``queue()``."""
        wanted = set(nodes or ())
        ids = []
        for job in self.queue():
            if job.finished or (states and job.state not in states):
                continue
            if wanted and not wanted & set(expand_hostlist(job.nodes) if job.nodes else ()):
                continue
            ids.append(job.job_id)
        return ids

    def cancel(self, job_ids: list[str]) -> None:
        """``DELETE /slurm/v0.0.42/job/{id}`` for each (SIGKILL, as scancel's default)."""
        for job_id in job_ids:
            self.call("DELETE", f"{SLURM}/job/{_job_ref(job_id)}")

    def hold(self, job_id: str) -> None:
        """Keep a pending job from starting: the update ``{"hold": true}`` (priority 0, parsers.c
        ``PARSE_FUNC(HOLD)``), as ``scontrol hold``."""
        self._update(job_id, {"hold": True})

    def release(self, job_id: str) -> None:
        self._update(job_id, {"hold": False})

    def requeue(self, job_id: str) -> None:
        raise ActionNotSupported("vertex", "requeue", job_id,
                                 "the Slurm Job API (v0.0.42) has no requeue; set `jobs: ssh` for this cluster to "
                                 "requeue through the login node (scontrol requeue), or cancel it and submit it again")

    def _update(self, job_id: str, change: dict[str, Any]) -> None:
        """``POST /slurm/v0.0.42/job/{id}``; a refusal of one job (``results[].error_code``) is
        raised as Slurm's refusal, its text where the services read a state refusal."""
        path = f"{SLURM}/job/{_job_ref(job_id)}"
        answer = self.call("POST", path, change)
        check_errors(answer, f"update of job {job_id}")
        refused = [r for r in answer.get("results") or [] if isinstance(r, dict) and r.get("error_code")]
        if refused:
            text = "; ".join(str(r.get("error") or r.get("why") or r.get("error_code")) for r in refused)
            raise SlurmApiError("HTTP_METHOD_POST", path, 200, text, self.cluster_id)


def _job_ref(job_id: str) -> str:
    """A job id as the path takes it: ``42`` or an array task ``41_3``; anything else refused
    (it would name another path)."""
    head, _, task = str(job_id).partition("_")
    if not head.isdigit() or (task and not task.isdigit()):
        raise SpecError("job_id", job_id, "a Slurm job id (42) or array task (41_3)")
    return str(job_id)
