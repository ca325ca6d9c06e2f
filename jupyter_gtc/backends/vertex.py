"""The ``vertex`` backend: jobs sent to Vertex AI as CustomJobs, on the same contract as a
Slurm cluster's, so ``%%sbatch``, the job panel, ``job.logs()`` and ``job.metrics()`` work
unchanged.

Its "cluster" is a Vertex target (``spec/vertex_target.py``): a project, a region, a staging
bucket and the API to talk to (Google's, or ``local``: the local Vertex endpoint, which is how
it is tested). ``create`` attaches: it resolves the missing pieces (``vertex_client.resolve``),
asks the API once (credentials, project and region are right) and checks the bucket;
``delete`` detaches and leaves the jobs on Vertex AI as they are.

- ``commands`` is a ``VertexCommands``: ``SlurmCommands``' surface that services use, over
  ``JobService`` (``submit`` makes a CustomJob of the sbatch script, ``spec/vertex_job.py``;
  ``queue`` lists the target's CustomJobs by their ``gtc_cluster`` label, in Slurm's state
  names). Vertex AI has no requeue, hold or release: those are refused, saying what to do.
- ``host`` is the staging bucket (``hosts/gcs.py``): job folders are ``/gcs/BUCKET/...``, the
  path a job sees through Cloud Storage FUSE; the log, event files and model are read there.
- The official clients (google-cloud-aiplatform, google-cloud-storage) are imported when a
  target is used, never by ``import jupyter_gtc.api``.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

from ..exceptions import ActionNotSupported, CommandError, GtcError, SpecError
from ..hosts import Host
from ..hosts.gcs import GcsHost, gcs_path, gcs_uri
from ..slurm.parse import JobStatus
from ..spec.job import APPENDED_OUTPUT_ENV
from ..spec.vertex_job import custom_job
from ..spec.vertex_target import VertexTarget, parse_vertex_target
from . import vertex_client
from .base import Backend, ClusterStatus, JobLaunch, PartitionLayout, Progress, WorkDir

# Vertex's JobState names -> the states our panels show (Slurm's).
STATES = {
    "JOB_STATE_QUEUED": "PENDING", "JOB_STATE_PENDING": "PENDING", "JOB_STATE_RUNNING": "RUNNING",
    "JOB_STATE_UPDATING": "RUNNING", "JOB_STATE_CANCELLING": "COMPLETING", "JOB_STATE_SUCCEEDED": "COMPLETED",
    "JOB_STATE_PARTIALLY_SUCCEEDED": "COMPLETED", "JOB_STATE_FAILED": "FAILED", "JOB_STATE_CANCELLED": "CANCELLED",
    "JOB_STATE_PAUSED": "SUSPENDED", "JOB_STATE_EXPIRED": "FAILED",
}
_DEADLINE_EXCEEDED = 4  # google.rpc.Code of a job stopped by its scheduling.timeout
_EXIT_STATUS = re.compile(r"non-zero status of (\d+)")

_hosts: dict[tuple, GcsHost] = {}
_hosts_lock = threading.Lock()


class VertexBackend(Backend):
    name = "vertex"
    attaches = True

    def problems(self) -> list[str]:
        import importlib.util

        if importlib.util.find_spec("google.cloud.aiplatform_v1") is None:
            # jupyter_gtc is not on PyPI: the package itself, which is what the cloud extra adds.
            return ["the vertex backend needs google-cloud-aiplatform (jupyter_gtc's cloud extra): "
                    "pip install 'google-cloud-aiplatform>=2.7,<3'"]
        return []

    def parse_spec(self, data: Any, display_name: str | None = None) -> Any:
        from ..spec.vertex_cluster import is_training_cluster, parse_training_cluster

        if is_training_cluster(data):  # node pools: a training cluster, whose id Vertex's rule checks first
            return parse_training_cluster(data, display_name)
        return parse_vertex_target(data, display_name)

    def check_spec(self, spec: Any) -> None:
        if not isinstance(spec, VertexTarget):
            raise SpecError("backend", "vertex", "the vertex backend attaches a Vertex target (project, region, "
                                                 "staging_bucket, api_endpoint); creating a training cluster "
                                                 "through it is not wired yet: use "
                                                 "jupyter_gtc.vertex_clusters.client.TrainingClusters")
        vertex_client.resolve(spec, self.home)  # a piece set nowhere is refused before anything is recorded

    def min_poll_interval(self, runtime: dict[str, Any]) -> float:
        return runtime.get("poll_interval", 5.0)  # Vertex's read quota is per minute and per project

    # -- attach and detach -----------------------------------------------------------------

    def create(self, spec: VertexTarget, runtime: dict[str, Any], progress: Progress) -> None:
        runtime.update(vertex_client.resolve(spec, self.home))
        where = f"{runtime['project']} in {runtime['region']}"
        progress(f"asking Vertex AI for {where}")
        endpoint = vertex_client.local_endpoint(runtime, self.home)
        secret = endpoint.token if endpoint else None
        jobs = vertex_client.job_client(runtime, self.home, endpoint)
        _call(lambda: next(iter(jobs.list_custom_jobs(request={"parent": vertex_client.parent(runtime),
                                                               "page_size": 1})), None), f"list jobs of {where}", secret)
        bucket = runtime["staging_bucket"].removeprefix("gs://").split("/")[0]
        client = vertex_client.storage_client(runtime, self.home)
        if _call(lambda: client.lookup_bucket(bucket), f"look up gs://{bucket}") is None:
            if endpoint is None:
                raise SpecError("vertex.staging_bucket", runtime["staging_bucket"],
                                f"a bucket that exists: create it with `gcloud storage buckets create gs://{bucket} "
                                f"--project={runtime['project']} --location={runtime['region']}`")
            _call(lambda: client.create_bucket(bucket), f"create gs://{bucket}")  # the local emulator's: ours to make
        progress(f"attached: Vertex AI, {where}, job folders under {runtime['staging_bucket']}")

    def delete(self, spec: VertexTarget, runtime: dict[str, Any], progress: Progress) -> None:
        """Detach: forget the target. Its jobs run on in Vertex AI, their folders stay."""
        progress("detached; the jobs on Vertex AI and their folders are as they were")

    def scale(self, old, new, runtime: dict[str, Any], progress: Progress) -> None:
        raise GtcError("a Vertex target has no nodes to resize: each job names its machines (--machine-type, "
                       "--replicas)")

    def status(self, spec: VertexTarget, runtime: dict[str, Any]) -> ClusterStatus:
        # No call here: the sidebar reads clusters every few seconds, and the poller's warning
        # already says when Vertex AI does not answer.
        details = {k: runtime.get(k) for k in ("project", "region", "staging_bucket", "api_endpoint")}
        return ClusterStatus(True, [], details)

    def partitions(self, spec: VertexTarget, runtime: dict[str, Any]) -> list[PartitionLayout]:
        return []  # machines are chosen per job (--machine-type)

    # -- reaching it -----------------------------------------------------------------------

    def client_env(self, runtime: dict[str, Any]) -> dict[str, str]:
        return {}

    def commands(self, runtime: dict[str, Any]) -> "VertexCommands":
        return VertexCommands(runtime, self.home, self.host(runtime))

    def host(self, runtime: dict[str, Any]) -> Host:
        key = (str(self.home), runtime["project"], runtime.get("api_endpoint"))
        with _hosts_lock:
            if key not in _hosts:
                _hosts[key] = GcsHost(f"Cloud Storage of {runtime['project']}",
                                      lambda: vertex_client.storage_client(runtime, self.home))
            return _hosts[key]

    def jobs_root(self, cluster: str, runtime: dict[str, Any]) -> str:
        bucket, _, folder = runtime["staging_bucket"].removeprefix("gs://").partition("/")
        return gcs_path(f"{bucket}/{folder or 'jupyter_gtc'}/jobs/{cluster}")

    def work_dir(self, spec: VertexTarget, runtime: dict[str, Any], submit_dir: str) -> WorkDir:
        """Always its job folder, and nothing to say: a CustomJob runs in a container of its
        image, where no folder of this machine is, and its wrapper (``spec/vertex_job.py``) starts
        the program in the job's folder as the job sees it through Cloud Storage FUSE (``/gcs``),
        as on Vertex AI. (Files a program needs come in its image, or from the bucket.)"""
        return WorkDir(None)

    def job_launch(self, spec: VertexTarget, runtime: dict[str, Any], script: str, variables: dict[str, str],
                   python_env: Any) -> JobLaunch:
        """The contract's variables go into each replica's container (``spec/vertex_job.py``);
        the Python is the image's, so a Python environment of this machine cannot be given."""
        if python_env is not None and str(python_env).strip().lower() != "none":
            raise SpecError("python_env", str(python_env), "nothing, or 'none': a Vertex AI job runs the Python of "
                                                           "its image (--image)")
        # A CustomJob's log is Vertex's own: no TaskProlog of ours notes a requeue there.
        return JobLaunch(script, {k: v for k, v in variables.items() if k != APPENDED_OUTPUT_ENV}, None)


class VertexCommands:
    """What services ask of a cluster's scheduler, answered by Vertex AI's JobService for one
    target. A new one per use (the poller's tick, a submit): each makes its client, so a local
    endpoint's token is read afresh."""

    def __init__(self, runtime: dict[str, Any], home: Path, host: Host):
        self.runtime, self.home, self.host = runtime, home, host
        self.parent = vertex_client.parent(runtime)
        self._client, self._secret = None, None

    @property
    def client(self):
        if self._client is None:
            endpoint = vertex_client.local_endpoint(self.runtime, self.home)
            self._secret = endpoint.token if endpoint else None
            self._client = vertex_client.job_client(self.runtime, self.home, endpoint)
        return self._client

    def submit(self, script: Path, options: list[str], env: dict[str, str], job_dir: Path,
               work_dir: str | Path | None, script_args: list[str] | None = None) -> str:
        """Make the CustomJob of the job script in the job's folder ``job_dir``; its id. It runs
        there (``work_dir`` is for Slurm: ``VertexBackend.work_dir`` never gives one)."""
        try:
            body = custom_job(self.host.read(script).decode(), options, env, cluster=self.runtime["name"],
                              output_uri=gcs_uri(job_dir), script_args=script_args,
                              machine_type=vertex_client.job_default(self.runtime, self.home, "machine_type"),
                              image=vertex_client.job_default(self.runtime, self.home, "image"))
        except SpecError:
            self.host.remove_tree(job_dir)  # nothing half-made (services clean up after CommandError only)
            raise
        from google.cloud import aiplatform_v1

        client = self.client  # first: it reads the token that errors must not show
        created = _call(lambda: client.create_custom_job(parent=self.parent,
                                                              custom_job=aiplatform_v1.CustomJob(body)),
                        f"create a CustomJob in {self.parent}", self._secret)
        return created.name.rsplit("/", 1)[1]

    def queue(self) -> list[JobStatus]:
        """Every CustomJob of this target (its ``gtc_cluster`` label), finished ones included."""
        label = f'labels.gtc_cluster="{self.runtime["name"]}"'
        client = self.client  # first: it reads the token that errors must not show
        jobs = _call(lambda: list(client.list_custom_jobs(request={"parent": self.parent, "filter": label})),
                     f"list the CustomJobs of {self.parent}", self._secret)
        return [job_status(j) for j in jobs]

    def finished_jobs(self, offset: int = 0, unseen: list[str] | None = None) -> tuple[list[JobStatus], int]:
        return [], offset  # Vertex AI keeps finished jobs in its list: queue() has them

    def cancel(self, job_ids: list[str]) -> None:
        from google.api_core import exceptions

        client = self.client
        for job_id in job_ids:
            try:
                client.cancel_custom_job(name=f"{self.parent}/customJobs/{job_id}")
            except exceptions.FailedPrecondition:
                pass  # it has ended already: as scancel of a finished job, nothing to do
            except (exceptions.GoogleAPICallError, OSError) as e:
                raise _command_error(f"cancel CustomJob {job_id}", e, self._secret) from None

    def requeue(self, job_id: str) -> None:
        raise ActionNotSupported("vertex", "requeue", job_id, "submit it again (a job restarts on a failed worker "
                                                              "with scheduling.restart_job_on_worker_restart)")

    def hold(self, job_id: str) -> None:
        raise ActionNotSupported("vertex", "hold", job_id, "Vertex AI starts a job as soon as it has the machines")

    def release(self, job_id: str) -> None:
        raise ActionNotSupported("vertex", "release", job_id, "Vertex AI has no held jobs")

    def nodes(self) -> list:
        return []


def job_status(job: Any) -> JobStatus:
    """A CustomJob (``aiplatform_v1.CustomJob``) as Slurm would report the job."""
    state = STATES.get(job.state.name, "PENDING")
    message = job.error.message if job.error and job.error.message else ""
    exit_code = None
    if state == "COMPLETED":
        exit_code = 0
    elif state == "FAILED":
        if job.error.code == _DEADLINE_EXCEEDED:
            state = "TIMEOUT"
        found = _EXIT_STATUS.search(message)
        exit_code = int(found[1]) if found else 1
    folder = job.job_spec.base_output_directory.output_uri_prefix
    job_dir = gcs_path(folder) if folder.startswith("gs://") else ""
    job_id = job.name.rsplit("/", 1)[1]
    return JobStatus(
        job_id=job_id, state=state, exit_code=exit_code,
        reason=(message.splitlines()[0] if message else None) if state not in ("PENDING", "RUNNING") else None,
        name=job.display_name, start_time=_epoch(job.start_time),
        end_time=_epoch(job.end_time) if state in ("COMPLETED", "FAILED", "TIMEOUT", "CANCELLED") else None,
        submit_time=_epoch(job.create_time), log_path=f"{job_dir}/slurm-{job_id}.out" if job_dir else "",
        work_dir=job_dir)


def _epoch(stamp: Any) -> float | None:
    return stamp.timestamp() if stamp else None


def _call(action, what: str, secret: str | None = None):
    """``action()``, a failure becoming a ``CommandError`` that says what was asked and Google's
    answer (the poller keeps it as a warning; a submit names it). A connection's failure
    (requests names the URL) has the local endpoint's token, ``secret``, taken out: it must
    never reach a warning or a log."""
    from google.api_core import exceptions

    try:
        return action()
    except exceptions.GoogleAPICallError as e:
        raise _command_error(what, e, secret) from None
    except (OSError, ValueError) as e:  # requests' ConnectionError is an OSError
        raise _command_error(what, e, secret) from None


def _command_error(what: str, error: Any, secret: str | None = None) -> CommandError:
    said = getattr(error, "message", None) or str(error) or type(error).__name__
    if secret:
        said = said.replace(secret, "…")
    failed = CommandError(["vertex", what], getattr(error, "code", None) or 1, said)
    failed.args = (f"Vertex AI refused to {what}: {said}",)  # no command ran: Google's answer, as it is
    return failed
