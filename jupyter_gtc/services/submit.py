"""The submit path: a script and sbatch's options become a Slurm job and its row.

``submit_job`` checks what sbatch would refuse late (the cluster not RUNNING, a partition it
lacks, more GPUs per node than its nodes have), makes the job's folder (``model/``,
``checkpoints/``, ``logs/``) on the cluster's host, writes ``job.sbatch`` as the backend
launches it (the job contract's variables), runs sbatch with our options (the output file in
the folder, appended to by a requeued attempt) and records the job.

Where the job runs (its ``--chdir``): the user's own ``--chdir``/``-D`` where given; else the
folder it was submitted from (``submit_dir``: a kernel's or ``gtc``'s working directory), as
sbatch runs a job, where the backend places it there (``Backend.work_dir``); else its job
folder, with a ``GtcWarning`` saying why and how to choose. Its outputs go to the job folder
either way: the ``AIP_*`` variables and ``--output`` are absolute paths in it. ``JobService.submit``
(services/jobs.py) calls it and hands back the ``Job`` handle; this module knows no handles.
"""

from __future__ import annotations

import os
import pwd
import re
import time
import warnings
from collections.abc import Callable
from pathlib import Path

from ..backends.base import Backend, JobLaunch, PartitionLayout, WorkDir
from ..containers import pyxis
from ..exceptions import ClusterBusy, CommandError, GtcWarning, JobSubmitError, SpecError
from ..hosts import Host
from ..slurm.commands import SlurmCommands
from ..slurm.sbatch import count_problem, explain_refusal, gpus_per_node_asked, read_sbatch_options
from ..spec.job import APPENDED_OUTPUT_ENV, HANG_COMMENT, option, parse_options, safe_name, sbatch_directives
from ..state import ClusterRecord, JobRecord, Store
from .clusters import RUNNING

# The row's option naming the job's Python environment, as the front ends' option names it.
PYTHON_ENV_OPTION = "--python-env"


def submit_job(store: Store, backend: Backend, record: ClusterRecord, host: Host,
               commands: Callable[[], SlurmCommands], script: str, options: list[str] | None = None, *,
               script_args: list[str] | None = None, env: dict[str, str] | None = None,
               job_dir: Path | None = None, default_name: str = "job",
               python_env: str | os.PathLike | bool | None = None, hang_timeout: float | None = None,
               submit_dir: str | os.PathLike | None = None) -> JobRecord:
    """Submit ``script`` to the cluster of ``record`` through ``backend`` and record it; returns
    its row (``JobService.submit`` says what each argument does). ``host`` is where its folder
    goes; ``commands`` gives the cluster's Slurm commands."""
    cluster = record.name
    if record.state != RUNNING:
        raise ClusterBusy(cluster, f"cluster {cluster} is {record.state}; jobs can be submitted when it is "
                                   f"RUNNING", record.state)
    options = list(options or [])
    words = sbatch_directives(script) + options
    pairs = parse_options(words)
    sbatch_pairs = read_sbatch_options(words)
    if (problem := count_problem(sbatch_pairs)) is not None:  # before sbatch: slurmctld would record it
        raise SpecError(*problem)
    spec = backend.parse_spec(record.spec)
    _check_partitions(cluster, backend.partitions(spec, record.runtime), option(pairs, "partition"), sbatch_pairs)
    own_chdir = option(sbatch_pairs, "chdir") is not None  # the user's --chdir/-D (options or #SBATCH) chooses
    place = WorkDir(None) if own_chdir or submit_dir is None else \
        backend.work_dir(spec, record.runtime, _absolute("submit_dir", submit_dir))
    name = option(pairs, "job-name") or default_name
    array = option(pairs, "array")
    if hang_timeout is not None:
        if isinstance(hang_timeout, bool) or not isinstance(hang_timeout, (int, float)) or hang_timeout <= 0:
            raise SpecError("hang_timeout", hang_timeout, "seconds without a new log line, more than 0")
        if option(pairs, "comment") is not None:
            raise SpecError("hang_timeout", hang_timeout, "the job's own --comment leaves no room for it; "
                                                          "drop one of the two")
    # A requeued job keeps its earlier attempts' output (Slurm would truncate it) unless it
    # asks otherwise; then, and only then, each later attempt starts with ATTEMPT_NOTE (the
    # cluster's TaskProlog, or the script's), which APPENDED_OUTPUT_ENV asks for.
    open_mode = option(pairs, "open-mode")
    # pyxis's --container-* flags (options or #SBATCH lines): checked before anything is made.
    container = pyxis.request(sbatch_directives(script), options, place.path or (str(submit_dir) if submit_dir else None))
    job_dir = _new_job_dir(host, backend.jobs_root(cluster, record.runtime), name, job_dir)
    variables = {**_contract_env(cluster, job_dir), **(env or {})}
    if open_mode in (None, "append"):
        variables[APPENDED_OUTPUT_ENV] = "1"
    script = script if script.startswith("#!") else "#!/bin/bash\n" + script
    try:
        launch = backend.job_launch(spec, record.runtime, script, variables, python_env)
        sbatch_options = options
        if container is not None:  # the backend says how its steps run in the image (backends/base.py)
            plan = backend.job_container(spec, record.runtime, container, launch, job_dir, place.path or str(job_dir))
            launch = plan.launch
            if not plan.pass_through:  # sbatch without pyxis refuses the flags: they were ours to run
                launch = JobLaunch(pyxis.strip_script(launch.script), launch.env, launch.python_env)
                sbatch_options = pyxis.split(options)[1]
    except BaseException:
        host.remove_tree(job_dir)
        raise
    host.write(job_dir / "job.sbatch", launch.script.encode())
    extra = [] if option(pairs, "job-name") else [f"--job-name={name}"]
    if option(pairs, "output") is None:
        extra.append(f"--output={job_dir}/slurm-{'%A_%a' if array else '%j'}.out")
    if hang_timeout is not None:
        extra.append(f"--comment={HANG_COMMENT}{hang_timeout:g}")  # where the supervisor reads it
    if open_mode is None:
        extra.append("--open-mode=append")
    try:
        slurm_id = commands().submit(job_dir / "job.sbatch", [*extra, *sbatch_options], launch.env, job_dir,
                                     None if own_chdir else (place.path or str(job_dir)), script_args=script_args)
    except CommandError as e:
        host.remove_tree(job_dir)  # nothing half-recorded
        raise JobSubmitError(explain_refusal(e.stderr.strip()) or str(e), argv=e.argv) from None
    if place.missing:
        warnings.warn(GtcWarning(
            f"job {slurm_id} runs in its job folder {job_dir}: the folder it was submitted from, {submit_dir}, "
            f"{place.missing}; to run it elsewhere, give --chdir=FOLDER with a folder on the cluster"), stacklevel=2)
    # The row keeps the environment beside sbatch's options, as the front ends' option names it,
    # and where we ran it (the user's own --chdir is among the options, or in the script).
    recorded = [*options, *([] if own_chdir else [f"--chdir={place.path or job_dir}"]),
                f"{PYTHON_ENV_OPTION}={launch.python_env or 'none'}"]
    job = JobRecord(cluster, slurm_id, name, "PENDING", str(job_dir), recorded, user=_current_user())
    store.add_job(job)
    return job


def trials_submit_dir(backend: Backend, record: ClusterRecord, study: str, submit_dir: str | None) -> str | None:
    """Where the trials of ``study``, created from ``submit_dir``, are submitted from: that
    folder where the cluster of ``record`` has it; else None (each trial in its job folder), said
    once here with a ``GtcWarning``, not at every trial."""
    if submit_dir is None:
        return None
    place = backend.work_dir(backend.parse_spec(record.spec), record.runtime, _absolute("submit_dir", submit_dir))
    if place.path is None and place.missing:
        warnings.warn(GtcWarning(
            f"the trials of study {study} run in their job folders: the folder it was created from, {submit_dir}, "
            f"{place.missing}; to run them elsewhere, give local.submit_dir with a folder on the cluster"),
            stacklevel=2)
    return place.path


def _check_partitions(cluster: str, layouts: list[PartitionLayout], partition: str | None,
                      pairs: list[tuple[str, str | None]]) -> None:
    """Refuse a job for a partition the cluster lacks, or that asks more GPUs per node than
    any node of its partitions has, before sbatch does with "Requested node configuration is
    not available". (Without ``--partition`` the job goes to the default.) A node type the
    machine catalogue does not know (a remote cluster's own) is Slurm's to judge."""
    names = [p.name for p in layouts]
    if partition is not None and not set(partition.split(",")) <= set(names):
        raise SpecError("partition", partition, f"partitions of {cluster}: {', '.join(names)}")
    asks = gpus_per_node_asked(pairs)
    chosen = [p for p in layouts if p.name in partition.split(",")] if partition else \
        [p for p in layouts if p.default][:1]
    nodes = [(g, t, p.name) for p in chosen for g, t in zip(p.node_gpus, p.node_types)]
    if asks and nodes and all(t for _, t, _ in nodes):
        gpus, machine, part = max(nodes)
        ask = max(asks, key=lambda a: a.per_node)
        if ask.per_node > gpus:
            has = {0: "no GPUs", 1: "1 GPU"}.get(gpus, f"{gpus} GPUs")
            raise SpecError(f"--{ask.option}", ask.value, f"partition {part} has {machine} nodes with {has}; {ask.how}")
    _check_node_count(cluster, chosen, dict(pairs).get("nodes"))


def _check_node_count(cluster: str, chosen: list[PartitionLayout], nodes: str | None) -> None:
    """Refuse ``--nodes`` more than the largest chosen partition has: Slurm 22.05 takes such a
    job and leaves it PENDING (PartitionConfig) for ever, as plain sbatch would."""
    least = re.match(r"\s*(\d+)(?:-\d+)?\s*$", nodes or "")
    if not least or not chosen:
        return
    largest = max(chosen, key=lambda p: len(p.nodes))
    if int(least.group(1)) > len(largest.nodes):
        raise SpecError("--nodes", nodes, f"at most {len(largest.nodes)}: partition {largest.name} of {cluster} has "
                                          f"{len(largest.nodes)} node(s) (`gtc cluster scale {cluster} --pool POOL "
                                          "--nodes N` adds nodes)")


def _absolute(field: str, folder: str | os.PathLike) -> str:
    """``folder`` as a path on the cluster's host: it must be absolute (a relative one would be
    the host's, not the submitter's, working directory's)."""
    text = os.fspath(folder)
    if not isinstance(text, str) or not text.startswith("/"):
        raise SpecError(field, str(folder), "an absolute folder (os.path.abspath of a relative one)")
    return text


def _current_user() -> str | None:
    """This process's user: the one sbatch submits as (the poller then reads Slurm's own word)."""
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:  # a uid without a passwd entry (some containers)
        return None


def _new_job_dir(host: Host, root: str, name: str, chosen: Path | None = None) -> Path:
    """The job's folder under ``root`` on ``host`` (``chosen``, new or empty, where given), with
    its ``model/``, ``checkpoints/`` and ``logs/``. Each is the user's alone (0700) from its
    creation: a job's script, output and checkpoints are its user's, and the job runs as that
    user (the cluster's, on a local cluster)."""
    if chosen is not None:
        host.make_dirs(chosen, mode=PRIVATE)
        for sub in ("model", "checkpoints", "logs"):
            host.make_dirs(chosen / sub, mode=PRIVATE)
        return chosen
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = Path(root)
    host.make_dirs(base, mode=PRIVATE)
    for n in range(1000):
        job_dir = base / (f"{safe_name(name)}-{stamp}" + (f"-{n}" if n else ""))
        try:
            host.make_dirs(job_dir, exist_ok=False, mode=PRIVATE)
            break
        except FileExistsError:
            continue
    for sub in ("model", "checkpoints", "logs"):
        host.make_dirs(job_dir / sub, mode=PRIVATE)
    return job_dir


PRIVATE = 0o700  # a job's folders: whoever else may read them could read its checkpoints and output


def _contract_env(cluster: str, job_dir: Path) -> dict[str, str]:
    """The Vertex AI job contract (README.md, "Jobs"). CLOUD_ML_JOB_ID and the per-task parts of
    CLUSTER_SPEC are set inside each task by the cluster's TaskProlog, where it has ours."""
    return {
        "AIP_MODEL_DIR": f"{job_dir}/model/",
        "AIP_CHECKPOINT_DIR": f"{job_dir}/checkpoints/",
        "AIP_TENSORBOARD_LOG_DIR": f"{job_dir}/logs/",
        "CLOUD_ML_HP_METRIC_FILE": f"{job_dir}/hypertune.metrics",
        "GTC_CLUSTER": cluster,
        "GTC_JOB_DIR": str(job_dir),
    }
