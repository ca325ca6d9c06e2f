"""The one facade every front end calls: the magics, the widgets, the REST routes and the
``gtc`` command use these functions, with these names, and nothing below them.

All functions are synchronous and thread-safe. Errors are ``jupyter_gtc.exceptions``
subclasses; front ends translate them for their users.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .backends.base import Progress, no_progress
from .exceptions import AmbiguousCluster, ClusterNotFound, GtcError
from .recipes.catalogue import RECIPES, Recipe, get_recipe  # pure: no torch
from .services import recipes as _recipes
from .services.clusters import Cluster, ClusterService
from .services.jobs import ForeignJob, Job, JobService
from .services.jobs import set_plotter as register_job_plotter  # for the widgets: how job.plot() draws
from .services.operations import Operation, Operations
from .services.tuning import Study, StudySnapshot, TrialView, TuningService
from .services import vertex_local  # light: the endpoint's process and the SDK are started and imported where used
from .spec.attach import AttachSpec, parse_attach_spec
from .spec.cluster import ClusterSpec, load_cluster_spec, parse_cluster_spec, parse_spec_text
from .spec.study import TuningSpec, load_tuning_spec, parse_tuning_spec
from .state import default_home, open_store

_lock = threading.Lock()
_services: dict[Path, tuple[ClusterService, JobService]] = {}


def _services_for_home() -> tuple[ClusterService, JobService]:
    home = default_home()  # read each call so GTC_HOME set later (tests, notebooks) applies
    with _lock:
        if home not in _services:
            clusters = ClusterService(open_store(home), home)
            _services[home] = (clusters, JobService(clusters.store, clusters))
        return _services[home]


def _clusters() -> ClusterService:
    return _services_for_home()[0]


def _jobs() -> JobService:
    return _services_for_home()[1]


def _spec_or_file(spec: Any, load: Callable[[str], Any]) -> Any:
    """``spec`` as given (a model, a dict, JSON or YAML text), or read by ``load`` when it
    names a .json/.yaml/.yml file."""
    if isinstance(spec, Path) or (isinstance(spec, str) and spec.endswith((".json", ".yaml", ".yml"))
                                  and "\n" not in spec):
        return load(str(spec))
    return spec


def read_spec_file(path: str | Path) -> Any:
    """The plain data of a .json, .yaml or .yml spec file (of any kind)."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise GtcError(f"spec file {path}: it could not be read ({e.strerror})") from None
    return parse_spec_text(text, source=str(path))


def parse_spec(data: Any, backend: str = "local", display_name: str | None = None) -> ClusterSpec | AttachSpec:
    """The spec of a cluster of ``backend``, validated: a ``ClusterSpec`` to create one
    (``local``), an ``AttachSpec`` to reach one that exists (``slurm``)."""
    from .backends import get_backend

    return get_backend(backend, _clusters().home).parse_spec(data, display_name)


def create_cluster(spec: ClusterSpec | AttachSpec | dict[str, Any] | str | Path, backend: str = "local",
                   progress: Progress = no_progress) -> Cluster:
    """Create a cluster from a spec: a ``ClusterSpec``, a dict (camelCase or snake_case), JSON
    or YAML text, or a path to a .json/.yaml file. Returns when every node is idle. With
    backend ``slurm``, attach the existing cluster an ``AttachSpec`` describes."""
    return _clusters().create(_spec_or_file(spec, read_spec_file), backend, progress)


def attach_cluster(spec: AttachSpec | dict[str, Any] | str | Path, progress: Progress = no_progress) -> Cluster:
    """Attach a Slurm cluster that exists: over SSH (``ssh: {host, user}``), or the one this
    machine is a client of (no ``ssh``). Nothing on the cluster is created or changed."""
    return create_cluster(spec, "slurm", progress)


def connect_login(target: str, port: int | None = None, config_file: str | None = None) -> int:
    """Open the shared SSH connection to a login node, in this process's terminal, for a login
    that asks for a password or a second factor: ``target`` is an attached cluster's name, or
    ``[USER@]HOST`` (an ~/.ssh/config alias too) before attaching. Every command, poll and file
    read then reuses it, in every process of this user, until it is idle for 12 h. Returns ssh's
    exit status."""
    from .backends.slurm import connect

    try:
        record = _clusters().store.get_cluster(target)
    except ClusterNotFound:
        record = None
    if record is not None and "ssh" in record.runtime:
        return connect(record.runtime["ssh"])
    user, _, host = target.rpartition("@")
    spec = parse_attach_spec({"display_name": "connect", "ssh": {
        "host": host, **({"user": user} if user else {}), **({"port": port} if port else {}),
        **({"config_file": config_file} if config_file else {})}})
    return connect(spec.ssh.model_dump(exclude_none=True))


def detach_cluster(name: str, progress: Progress = no_progress) -> None:
    """Forget an attached cluster; its jobs keep running and their folders stay there (an
    endpoint's replicas excepted: they are undeployed, as nothing could reach them after)."""
    if not get_cluster(name, with_status=False).attached:
        raise GtcError(f"cluster {name} was created by jupyter_gtc; delete_cluster({name!r}) removes it")
    delete_cluster(name, progress)


def apply_cluster_spec(spec: ClusterSpec | dict[str, Any] | str, backend: str = "local",
                       progress: Progress = no_progress) -> Cluster:
    """Create the cluster, or scale an existing one of that name to the spec's pool sizes;
    any other difference raises ``SpecError`` naming the fields, and changes nothing."""
    return _clusters().apply(spec, backend, progress)


def get_cluster(name: str, with_status: bool = True) -> Cluster:
    """A cluster with its live status (nodes, states, drain reasons)."""
    return _clusters().get(name, with_status)


def list_clusters(with_status: bool = True) -> list[Cluster]:
    """Every cluster in the state store, oldest first."""
    return _clusters().list(with_status)


def scale_cluster(name: str, pool: str, nodes: int, progress: Progress = no_progress) -> Cluster:
    """Resize one compute pool to ``nodes`` nodes; jobs on nodes that stay are untouched."""
    return _clusters().scale(name, pool, nodes, progress)


def cluster_env(name: str) -> dict[str, str]:
    """Environment variables under which Slurm's own commands (sinfo, squeue, sbatch, srun)
    talk to this cluster, e.g. ``{"SLURM_CONF": ".../etc/slurm.conf"}``."""
    return _clusters().client_env(name)


def delete_cluster(name: str, progress: Progress = no_progress) -> None:
    """Cancel the cluster's jobs, stop its daemons and every job process, remove its files.
    Endpoints serving from it are undeployed first."""
    _undeploy_endpoints_on(name, progress)
    _clusters().delete(name, progress)


def _undeploy_endpoints_on(cluster: str, progress: Progress) -> None:
    """Undeploy the endpoints whose replicas run on ``cluster``, before it goes. Without this the
    registry kept saying "deployed" for ever, and an attached cluster (whose delete is a detach)
    kept running the replicas' jobs, which nothing would stop again."""
    from .state.models import ModelTables  # light: SQLite rows; serving is imported only where one is

    serving = [r.deployment["endpoint"] for r in ModelTables(_clusters().store).deployed()
               if r.deployment.get("cluster") == cluster]
    for endpoint_id in serving:
        progress(f"undeploying endpoint {endpoint_id} (its replicas run on {cluster})")
        _models().endpoints.undeploy(str(endpoint_id))


def start_create_cluster(spec: ClusterSpec | dict[str, Any] | str | Path, backend: str = "local") -> Operation:
    """``create_cluster`` without waiting: checks the spec and records the cluster (CREATING),
    then returns an ``Operation`` whose thread starts it (``.message`` follows its progress,
    ``.wait()`` returns the cluster). A bad spec or a taken name raises here, as in
    ``create_cluster``."""
    return _clusters().start_create(_spec_or_file(spec, read_spec_file), backend)


def start_scale_cluster(name: str, pool: str, nodes: int) -> Operation:
    """``scale_cluster`` without waiting: checks, marks the cluster SCALING, returns an ``Operation``."""
    return _clusters().start_scale(name, pool, nodes)


def start_delete_cluster(name: str) -> Operation:
    """``delete_cluster`` without waiting: marks the cluster DELETING, returns an ``Operation``.
    Endpoints serving from it are undeployed before it returns (their jobs waited for)."""
    _clusters().store.get_cluster(name)  # ClusterNotFound before anything is undeployed
    _undeploy_endpoints_on(name, no_progress)
    return _clusters().start_delete(name)


def cluster_operations() -> Operations:
    """The process's running and recently finished background cluster operations
    (``.get(id)``, ``.list()``, ``.subscribe(listener)``)."""
    return _clusters().operations


def cluster_health(name: str, now: bool = True) -> list[dict[str, Any]]:
    """Each node's health: Slurm's state and reason, each check's verdict (ecc, xid, speed,
    correctness, disk), the evidence of those that failed or warned, the verdict, when. ``now``
    runs the checks first; ``now=False`` shows the last run of the cluster's HealthCheckProgram."""
    return _clusters().health(name, now)


def cluster_events(name: str) -> list[dict[str, Any]]:
    """What the cluster's supervisor noticed and did, oldest first: time, node, event
    (detected -> down -> restarted, or gave up), detail. A Vertex AI training cluster's are its
    own ``clusterEvents`` (event: Vertex's type, e.g. VM_SLURM_DRAIN, VM_REPORT_AND_REPLACEMENT)."""
    return _clusters().events(name)


def report_faulty_node(cluster: str, node: str, reason: str | None = None, behavior: str | None = None,
                       progress: Progress = no_progress) -> None:
    """Vertex AI training clusters: report ``node`` faulty (``reportFaultyNodes``), with
    ``reason`` (what was seen) and ``behavior`` (Vertex's fault kind) where given, and wait until
    Vertex took the report; it then replaces the node (``cluster_events`` shows when)."""
    from .services.node_reports import report_faulty_node as report

    report(_clusters(), cluster, node, reason, behavior, progress)


def inject_fault(cluster: str, node: str, fault: str, clear: bool = False) -> None:
    """Local clusters only, for testing: make ``node`` fail as ``fault`` would (ecc, xid, slow,
    disk_full, hang: its checks see it; crash: its slurmd and jobs stop at once); ``clear``
    takes the fault away again (crash: starts the node's slurmd again)."""
    _clusters().inject_fault(cluster, node, fault, clear)


def resolve_cluster(name: str | None = None) -> str:
    """``name`` if given, else the only cluster there is; raises naming the choices otherwise."""
    if name:
        return name
    names = [c.name for c in list_clusters(with_status=False)]
    if len(names) == 1:
        return names[0]
    if not names:
        raise ClusterNotFound(None)
    raise AmbiguousCluster(names)


def submit_job(cluster: str, script: str | Path, options: list[str] | None = None, *,
               script_args: list[str] | None = None, env: dict[str, str] | None = None,
               python_env: str | Path | bool | None = None, hang_timeout: float | None = None,
               submit_dir: str | Path | None = None) -> Job:
    """Submit an sbatch script: its text, or a ``Path`` to it. ``options`` are sbatch's
    (``["--nodes=2", "--gpus-per-node=2"]``) and win over the script's ``#SBATCH`` lines. Without
    a job name in either, a script file names the job (``train.sbatch``), as sbatch does; a
    script's text makes a job named ``job``. The job gets its own folder
    ``<GTC_HOME>/jobs/<cluster>/<name>-<time>/`` with ``model/``, ``checkpoints/``, ``logs/``
    and the ``AIP_*`` variables pointing at them. ``script_args`` reach the script as ``"$@"``;
    ``env`` adds variables to the job's environment.

    ``python_env``: the Python environment (a venv or conda folder, or its ``bin/python``) put
    first on the job's PATH, with ``VIRTUAL_ENV`` for a venv, so ``python``, ``torchrun`` and the
    like in the job are that environment's; ``"none"`` (or False) leaves sbatch's PATH as it is.
    By default ``$GTC_JOB_PYTHON_ENV`` if set, else this interpreter's environment.
    ``job.python_env`` says which one a job got.

    ``hang_timeout``: seconds without a new line in its log after which the cluster's
    supervisor (``local.supervisor``) takes the job for hung and requeues it.

    Where it runs, as sbatch runs a job: in the folder it is submitted from, ``submit_dir``
    (default: this process's working directory, a notebook kernel's), so ``python train.py``
    finds the ``train.py`` beside the notebook; a ``--chdir`` (``-D``) in ``options`` or the
    script chooses instead. Where the cluster does not have that folder (an attached cluster's
    login node over SSH), it runs in its job folder, and a ``GtcWarning`` says so. Its outputs
    go to the job folder either way (``AIP_*``, its log)."""
    default_name = "job"
    if isinstance(script, Path):
        try:
            script, default_name = script.read_text(), script.name
        except OSError as e:
            raise GtcError(f"cannot read {script}: {e.strerror}") from None
    return _jobs().submit(cluster, script, options, script_args=script_args, env=env, default_name=default_name,
                          python_env=python_env, hang_timeout=hang_timeout,
                          submit_dir=_working_dir() if submit_dir is None else os.path.abspath(submit_dir))


def _working_dir() -> str:
    """This process's folder, where a job runs by default. A notebook that removed its own
    temporary folder has none: then the name the folder had ("/tmp/x (deleted)", as Linux
    keeps it), which no cluster has, so the job runs in its job folder and a warning says why."""
    try:
        return os.getcwd()
    except FileNotFoundError:
        try:
            return os.readlink("/proc/self/cwd")
        except OSError:
            raise GtcError("this process's working folder was deleted: change to one that exists "
                           "(os.chdir in a notebook), or give submit_dir") from None


def get_job(ref: str, cluster: str | None = None) -> Job:
    """A job by Slurm id or name (the newest of that name), from any earlier session too; else
    one on the cluster that jupyter_gtc did not submit, as Slurm knows it (a ``ForeignJob``)."""
    return _jobs().get(str(ref), cluster)


def list_jobs(cluster: str | None = None, foreign: bool = True) -> list[Job]:
    """The jobs of ``cluster`` (default: of every cluster), newest first: every job submitted
    through jupyter_gtc (``job.managed``), and with ``foreign`` the others on the cluster too,
    whoever submitted them (a terminal's ``sbatch``, another user): those slurmctld knows and
    finished ones its completion file recorded. Those are ``ForeignJob`` handles, never
    recorded: cancel, hold and requeue work on them; their log is where Slurm says it is."""
    return _jobs().list(cluster, foreign=foreign)


def cancel_job(ref: str, cluster: str | None = None) -> Job:
    return get_job(ref, cluster).cancel()


def requeue_job(ref: str, cluster: str | None = None) -> Job:
    return get_job(ref, cluster).requeue()


def job_tensorboard(ref: str, cluster: str | None = None):
    """A real TensorBoard on the job's log dir (started once per process, on a free port,
    stopped when this process exits or by ``.stop()``); ``.url`` is its address."""
    from .services import tensorboard

    job = get_job(ref, cluster)
    if not job.managed:
        raise GtcError(f"job {job.id} ({job.name}) was not submitted through jupyter_gtc: it has no log dir "
                       f"(AIP_TENSORBOARD_LOG_DIR) for TensorBoard")
    # A job on an attached cluster: its event files are mirrored here for TensorBoard.
    mirror = default_home() / "mirrors" / job.cluster / f"{job.id}-{job.job_dir.name}"
    return tensorboard.start(job.log_dir, host=job.host, mirror_dir=mirror)


def cluster_queue(cluster: str) -> list[Job]:
    """What ``squeue`` shows for the cluster: every job slurmctld knows (anyone's; finished
    ones for a while), one handle per job (an array as one), newest first; ``job.managed``
    tells ours from others'. From the poller's tick: no squeue of its own."""
    return _jobs().queue(cluster)


def job_poller(cluster: str):
    """The process's one poller for ``cluster`` (widgets subscribe to it)."""
    return _jobs().poller(cluster)


def doctor() -> list[tuple[str, bool | None, str]]:
    """What each backend needs here: (check, ok, how to fix) rows; ok is None for an optional
    package that is not installed (the row says what that costs)."""
    from .services.doctor import run_checks

    return run_checks(default_home())


__all__ = [
    # specs
    "ClusterSpec", "load_cluster_spec", "parse_cluster_spec", "AttachSpec", "parse_attach_spec", "parse_spec",
    "read_spec_file",
    # clusters
    "Cluster", "create_cluster", "attach_cluster", "detach_cluster", "connect_login", "apply_cluster_spec", "get_cluster", "list_clusters", "scale_cluster",
    "cluster_env", "delete_cluster", "resolve_cluster", "cluster_queue", "cluster_health", "inject_fault", "cluster_events",
    "report_faulty_node",
    "Operation", "start_create_cluster", "start_scale_cluster", "start_delete_cluster", "cluster_operations",
    # jobs
    "Job", "ForeignJob", "submit_job", "get_job", "list_jobs", "cancel_job", "requeue_job", "job_tensorboard",
    "job_poller",
    "register_job_plotter",
    # the machine
    "doctor",
]


# -- for the REST API ------------------------------------------------------------------
# (The sidebar's actions that the magics and the CLI do not have yet.)


def hold_job(ref: str, cluster: str | None = None) -> Job:
    """Keep a pending job from starting until ``release_job`` (squeue's reason becomes
    JobHeldUser, or JobHeldAdmin as root). A running job runs on; the hold applies if it is
    requeued. A finished job cannot be held (``JobStateConflict``, which says its state)."""
    return get_job(ref, cluster).hold()


def release_job(ref: str, cluster: str | None = None) -> Job:
    """Let a held job start again."""
    return get_job(ref, cluster).release()


__all__ += ["hold_job", "release_job"]


# -- tuning ----------------------------------------------------------------------------

_tuning_services: dict[Path, TuningService] = {}


def _tuning() -> TuningService:
    clusters, jobs = _services_for_home()
    with _lock:
        if clusters.home not in _tuning_services:
            _tuning_services[clusters.home] = TuningService(clusters.store, jobs, clusters.home)
        return _tuning_services[clusters.home]


def create_study(cluster: str, spec: TuningSpec | dict[str, Any] | str | Path, name: str | None = None, *,
                 submit_dir: str | Path | None = None) -> Study:
    """Start a tuning study on ``cluster``. ``spec`` is a ``TuningSpec``, a dict, JSON/YAML text or
    a .json/.yaml path, in the short form (``parameters``, ``metric``, ``max_trials``, ``job``...)
    or as a Vertex ``HyperparameterTuningJob`` (``study_spec``, ``max_trial_count``, ...).

    Each trial is a Slurm job running the spec's sbatch script with the hyperparameters as
    its arguments (``--learning_rate=0.01``: the script passes them on, ``srun python train.py
    "$@"``), ``CLOUD_ML_TRIAL_ID``, ``CLOUD_ML_HP_METRIC_FILE`` and ``AIP_*`` under
    ``<GTC_HOME>/studies/<name>/<trial_id>/``. A thread of this process drives the study;
    ``study.resume()`` continues it from another process (or after a restart). Each trial runs
    where the study was created, ``submit_dir`` (default: this process's working directory), as
    ``submit_job`` runs a job, whichever process drives it (kept as the spec's ``local.submit_dir``).

    On a Vertex target (backend ``vertex``), the study is a Vertex AI HyperparameterTuningJob
    instead, its trials on the target's machine type and image (``gtc config``), and the
    handle a ``VertexStudy`` (``services/vertex_study.py``) that Vertex AI drives. A Vertex AI
    training cluster's trials are its Slurm jobs, as a local cluster's."""
    # A cluster that is not there is named by the tuning service, after the spec and the name are
    # checked: a bad spec is refused as such whatever the cluster.
    from .backends.vertex_training import is_training_runtime

    record = next((r for r in _clusters().store.list_clusters() if r.name == cluster), None)
    # A Vertex target's study is Vertex's; a training cluster's trials are its Slurm jobs, driven here.
    if record is not None and record.backend == "vertex" and not is_training_runtime(record.runtime):
        from .backends import get_backend
        from .services.vertex_study import create_vertex_study

        parsed = _spec_or_file(spec, load_tuning_spec)
        parsed = parsed if isinstance(parsed, TuningSpec) else parse_tuning_spec(parsed)
        commands = get_backend("vertex", _clusters().home).commands(record.runtime)
        return create_vertex_study(commands, cluster, parsed, name or parsed.display_name or "study")
    return _tuning().create(cluster, _spec_or_file(spec, load_tuning_spec), name,
                            submit_dir=_working_dir() if submit_dir is None else os.path.abspath(submit_dir))


def get_study(name: str) -> Study:
    """A study by name, from any earlier session too (watch it; ``resume()`` to drive it)."""
    return _tuning().get(name)


def list_studies(cluster: str | None = None) -> list[Study]:
    """Studies, newest first."""
    return _tuning().list(cluster)


def stop_study(name: str) -> Study:
    """Stop a study: its running trials are cancelled in Slurm and recorded as pruned."""
    study = get_study(name)
    return study.stop()


def resume_study(name: str) -> Study:
    """Drive a study from this process again: finished trials are kept, running ones re-attached."""
    return _tuning().resume(name)


__all__ += ["TuningSpec", "parse_tuning_spec", "load_tuning_spec", "Study", "StudySnapshot", "TrialView",
            "create_study", "get_study", "list_studies", "stop_study", "resume_study"]


# -- recipes ---------------------------------------------------------------------------


def list_recipes() -> list[Recipe]:
    """The recipe catalogue: pretraining, continued pretraining, SFT and RL."""
    return list(RECIPES.values())


def run_recipe(name: str, cluster: str, config: str = "tiny", *, nodes: int | None = None,
               init_from: str | None = None, args: list[str] | None = None,
               options: list[str] | None = None, register: str | bool = True) -> Job:
    """Submit recipe ``name`` in size ``config`` as a multi-node ``srun torchrun`` job named
    after the recipe. A recipe that starts from another's model takes the newest finished
    one unless ``init_from`` names a folder, a job id or a recipe; ``args`` add the program's
    flags; ``options`` sbatch's, which win over the recipe's (``["--exclusive"]``).
    ``register``: once the job has COMPLETED its model is registered as a new version of the
    model named after the recipe (a string: of that model; False: not registered)."""
    if register not in (True, False):
        from .registry.rules import check_model_name

        check_model_name(register, "register")  # before the job is submitted
    job = _recipes.run_recipe(_jobs(), name, cluster, config, nodes=nodes, init_from=init_from, args=args,
                              options=options, submit_dir=_working_dir())
    if register is not False:
        _models().register_when_done(job, name if register is True else register,
                                     origin={"recipe": name, "config": config, "init_from": init_from})
    return job


def recipe_output(ref: str, cluster: str | None = None) -> Path:
    """The model folder (``from_pretrained`` loads it) of job ``ref`` or of recipe ``ref``'s
    newest finished run; the next recipe's ``--init-from``."""
    return _recipes.recipe_output(_jobs(), ref, cluster)


__all__ += ["Recipe", "get_recipe", "list_recipes", "run_recipe", "recipe_output"]


# -- Vertex AI: the local endpoint ---------------------------------------------------


VERTEX_TOKEN_VARIABLE = vertex_local.TOKEN_VARIABLE  # how an endpoint's process gets its token (never argv)



def vertex_jobs(cluster: str):
    """Vertex AI's CustomJobs served from ``cluster``'s jobs (``services/vertex.py``): create,
    get, list, cancel, delete, with the SDK's own types. Imports them (seconds): the local
    Vertex endpoint calls this, nothing at ``%load_ext``."""
    from .services.vertex import VertexJobs

    return VertexJobs(_jobs(), cluster)


def vertex_tuning_jobs(cluster: str):
    """Vertex AI's HyperparameterTuningJobs served from studies on ``cluster``
    (``services/vertex_tuning.py``); heavy as ``vertex_jobs``."""
    from .services.vertex_tuning import VertexTuningJobs

    return VertexTuningJobs(_jobs(), _tuning(), cluster)


def vertex_models():
    """Vertex AI's ModelService served from the model registry (``services/vertex_models.py``):
    upload, get, list, listVersions, mergeVersionAliases, deleteVersion, delete; heavy as
    ``vertex_jobs``."""
    from .services.vertex_models import VertexModels

    return VertexModels(_models(), gcs_root())


def vertex_endpoints(cluster: str):
    """Vertex AI's EndpointService and PredictionService over our serving on ``cluster``
    (``services/vertex_endpoints.py``): endpoints, deployModel / undeployModel, predict; heavy
    as ``vertex_jobs``."""
    from .services.vertex_endpoints import VertexEndpoints

    return VertexEndpoints(vertex_models(), vertex_jobs(cluster)._layouts, cluster, _clusters().home)


def vertex_training_clusters():
    """Vertex AI training clusters (``modelDevelopmentClusters``) served from local clusters
    (``services/vertex_clusters.py``): create, get, list, patch (scale), delete and
    reportFaultyNodes, as operations with progress; for the local Vertex endpoint."""
    from .services.vertex_clusters import VertexTrainingClusters

    return VertexTrainingClusters(_clusters())


def start_vertex_endpoint(cluster: str, port: int | None = None):
    """A local Vertex endpoint for ``cluster`` (``gtc vertex serve`` in a child of this
    process, ending with it), or the one running already; its ``api_endpoint`` is what
    ``aiplatform.init`` takes."""
    return vertex_local.start(_clusters().home, cluster, port)


def find_vertex_endpoint(port: int | None = None, cluster: str | None = None):
    """A running local Vertex endpoint of this GTC_HOME (on ``port``, for ``cluster``, or the
    only one), or None."""
    return vertex_local.find(_clusters().home, port, cluster)


def record_vertex_endpoint(cluster: str, host: str, port: int, token: str, storage_port: int = 0):
    """For the endpoint's own process, once it listens: (its ``LocalEndpoint``, the file that
    records it for its user alone)."""
    from ._process import this_process
    endpoint = vertex_local.LocalEndpoint(cluster, host, port, token, this_process(), storage_port)
    return endpoint, vertex_local.write_endpoint_file(_clusters().home, endpoint)


def start_storage_emulator(host: str = "127.0.0.1", bucket: str | None = None, token: str | None = None):
    """A Cloud Storage emulator (gcp-storage-emulator) in this process, on loopback, serving
    ``<GTC_HOME>/gcs/<bucket>/<object>`` as ``gs://bucket/object``: where the SDK's uploads
    land and the local Vertex endpoint's jobs find them; for this user, or whoever shows
    ``token`` (an ``Authorization: Bearer`` header). Returns (its server, its port)."""
    return vertex_local.start_storage(gcs_root(), host, bucket, token)


def gcs_root() -> Path:
    """The folder the local Vertex endpoint's buckets are: ``gs://b/o`` is ``gcs_root() / "b/o"``."""
    return vertex_local.gcs_root(_clusters().home)


def vertex_request_log() -> Path:
    """Where the local Vertex endpoints of this GTC_HOME log each request (no tokens)."""
    folder = _clusters().home / "vertex"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / "requests.log"


__all__ += ["vertex_jobs", "vertex_tuning_jobs", "vertex_models", "vertex_endpoints", "start_vertex_endpoint", "find_vertex_endpoint",
            "gcs_root", "VERTEX_TOKEN_VARIABLE"]


# -- Vertex AI: the vertex backend ------------------------------------------------------


def attach_vertex(spec: Any = None, progress: Progress = no_progress) -> Cluster:
    """Attach a Vertex target (``spec/vertex_target.py``: project, region, staging_bucket,
    api_endpoint; a dict, JSON or YAML, or None for every default), named ``vertex`` unless
    the spec names it. Missing pieces come from ``gtc config``, the environment and gcloud's
    configuration; one set nowhere is a ``SettingMissing`` saying how to set it. Jobs
    submitted to it run as Vertex AI CustomJobs."""
    return create_cluster({} if spec is None else spec, "vertex", progress)


def vertex_cluster(name: str | None = None, progress: Progress = no_progress) -> str:
    """The Vertex target jobs of ``--backend vertex`` go to: ``name`` (attached now if it is not
    yet, from the settings), else the one attached, else one named ``vertex`` attached now."""
    targets = [c.name for c in list_clusters(with_status=False) if c.backend == "vertex"]
    if name is not None and name in targets:
        return name
    if name is None and len(targets) == 1:
        return targets[0]
    if name is None and len(targets) > 1:
        raise AmbiguousCluster(targets, what="the Vertex target")
    return attach_vertex({"display_name": name or "vertex"}, progress).name


__all__ += ["attach_vertex", "vertex_cluster"]


# -- settings: gtc config -------------------------------------------------------------


def get_config(key: str) -> str | None:
    """The setting ``key`` (``vertex.project``, ...), or None when it is not set."""
    from .state import config

    return config.get(_clusters().home, key)


def set_config(key: str, value: str) -> None:
    """Set ``key`` to ``value``, checked first: a key that does not exist, or a value of the
    wrong shape, is a ``SpecError`` naming it and what is valid."""
    from .state import config

    config.set_value(_clusters().home, key, value)


def unset_config(key: str) -> None:
    """Forget ``key``'s setting (its default applies again); not set is fine."""
    from .state import config

    config.unset(_clusters().home, key)


def list_config() -> list[dict[str, str | None]]:
    """Every setting there is: key, value (None when not set) and what it is for."""
    from .state import config

    values = config.load(_clusters().home)
    return [{"key": k.name, "value": values.get(k.name), "help": k.help} for k in config.KEYS.values()]


__all__ += ["get_config", "set_config", "unset_config", "list_config"]


# -- models: the registry ---------------------------------------------------------------

_model_services: dict[Path, Any] = {}


def _models():
    from .services.models import ModelService  # light, but only notebooks that register need it

    clusters, jobs = _services_for_home()
    tuning = _tuning()  # before the lock: _tuning takes it too
    with _lock:
        if clusters.home not in _model_services:
            service = ModelService(clusters.store, jobs, clusters.home, tuning.snapshot)
            from .services.endpoints import EndpointService  # serving: light until a deploy

            service.endpoints = EndpointService(clusters.store, clusters, jobs, clusters.home)
            service.endpoints.plotter = _plot_endpoint
            _model_services[clusters.home] = service
        return _model_services[clusters.home]


_endpoint_plotter = None


def register_endpoint_plotter(plotter) -> None:
    """How ``ep.plot()`` draws (the widgets register it, as for jobs); kept here, so a front end
    that registers it imports no serving module."""
    global _endpoint_plotter
    _endpoint_plotter = plotter


def _plot_endpoint(endpoint):
    if _endpoint_plotter is None:
        raise GtcError("ep.plot() draws in a notebook: run `%load_ext jupyter_gtc` first")
    return _endpoint_plotter(endpoint)


def register_model(job: Job | str | None = None, model: str | None = None, *, alias: str | list[str] | None = None,
                   description: str | None = None, labels: dict[str, str] | None = None, copy: bool = False,
                   artifact_uri: str | None = None, parent: str | None = None, cluster: str | None = None):
    """Register ``job``'s model (its ``AIP_MODEL_DIR``; or ``artifact_uri``: a folder or gs://
    URI) as a new version of ``model``, numbered from 1; the first version gets the alias
    ``default``, ``alias`` moves to the new one. ``copy``: copy the folder into
    ``$GTC_HOME/models/<model>/<version>/`` (else it is referenced where it is). The lineage
    records the job, its script and options, its trial and parameters, its final metrics, its
    newest checkpoint and ``parent`` (a model it started from, ``"name@3"``). Returns a ``Model``."""
    return _models().register(job, model=model, alias=alias, description=description, labels=labels, copy=copy,
                              artifact_uri=artifact_uri, parent=parent, cluster=cluster)


def get_model(ref: str):
    """A version of a registered model: ``"name@prod"`` (an alias), ``"name@3"``, or ``"name"``
    (the version holding ``default``)."""
    return _models().get(ref)


def list_models():
    """Every registered model (``ModelRecord``: name, description, labels, versions), by name."""
    return _models().list()


def set_model_alias(ref: str, alias: str):
    """Give ``alias`` to the version ``ref`` names, moving it from the version that held it;
    ``"-alias"`` removes it (``default`` moves, and cannot be removed). Returns the ``Model``."""
    return merge_model_aliases(ref, [alias])


def merge_model_aliases(ref: str, aliases: list[str]):
    """Vertex's mergeVersionAliases: each alias applied to (moved to) the version ``ref`` names,
    each ``"-alias"`` removed from it; all or none. Returns the ``Model``."""
    from .registry.rules import ModelRef

    model = get_model(ref)
    _models().merge_aliases(ModelRef(model.name, version=model.version), list(aliases))
    return model


def delete_model(ref: str) -> None:
    """``"name@3"`` (or ``"name@alias"``) deletes that version; ``"name"`` the model and every version."""
    from .registry.rules import parse_ref

    _models().delete(parse_ref(ref))


__all__ += ["register_endpoint_plotter", "register_model", "get_model", "list_models", "set_model_alias", "merge_model_aliases", "delete_model"]


# -- serving: endpoints -----------------------------------------------------------------


def deploy_model(ref: str, cluster: str, *, min_replicas: int = 1, max_replicas: int | None = None,
                 command: list[str] | None = None, options: list[str] | None = None, wait: bool = True):
    """Deploy version ``ref`` (``"name@prod"``) as an endpoint: ``min_replicas`` Slurm jobs of
    ``cluster``, each running a server under Vertex's serving container contract (ours for causal
    LMs, or ``command``: your own), behind one address served by this process. Returns the
    ``Endpoint`` once a replica answers (``wait=False``: at once; it answers 429 until then)."""
    return get_model(ref).deploy(cluster, min_replicas=min_replicas, max_replicas=max_replicas, command=command,
                                 options=options, wait=wait)


def undeploy_model(ref: str) -> None:
    """End the endpoint of version ``ref``: its replicas' jobs are cancelled and waited for."""
    get_model(ref).undeploy()


def list_endpoints():
    """Every deployed endpoint (``Endpoint``: id, model, cluster, url, replicas)."""
    return _models().endpoints.list()


def get_endpoint(endpoint_id: str):
    return _models().endpoints.get(endpoint_id)


def predict(endpoint_id: str, instances: list):
    """The endpoint's predictions for ``instances``; ``PredictionError`` carries a refusal's status."""
    return _models().endpoints.predict(str(endpoint_id), instances)


def undeploy_endpoint(endpoint_id: str) -> None:
    _models().endpoints.undeploy(str(endpoint_id))


__all__ += ["deploy_model", "undeploy_model", "list_endpoints", "get_endpoint", "predict", "undeploy_endpoint"]
