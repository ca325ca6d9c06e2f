"""An sbatch job as a Vertex AI ``CustomJob`` (the ``vertex`` backend's submit). Pure.

What maps, and how:
- ``--machine-type`` (else the target's default) is every pool's machine; its GPUs come from
  the machine catalogue (``spec/machines.py``), and a script that asks more GPUs per node
  than the machine has is refused, naming the option.
- ``--replicas`` (else ``--nodes``) replicas: pool 0 has one (Vertex's primary), pool 1 the
  rest. Each replica runs the program once, as ``srun`` runs one task per node.
- The program: the one of the script's ``srun`` line (srun's own options dropped), or the
  whole script under bash (``spec/trial_job.py``); hyperparameter flags after it.
- ``--image`` (else the target's, else Vertex's prebuilt PyTorch image) is the container.
- ``--reduction-server N``: worker pool 2, N Reduction Server replicas (Vertex's image, on
  n1-highcpu-16), which NCCL's all-reduce between the replicas then goes through.
- ``--time`` is ``scheduling.timeout``; ``--requeue`` restarts the job when a worker restarts;
  ``--spot`` and ``--flex-start[=MAX_WAIT]`` are Vertex's provisioning strategies.
- The job's folder is ``base_output_directory``, so
  Vertex sets ``AIP_MODEL_DIR``, ``AIP_CHECKPOINT_DIR`` and ``AIP_TENSORBOARD_LOG_DIR``.
- The program's output goes to Cloud Logging, as always on Vertex, and to ``--output`` in the
  job's folder (``slurm-%j.out``, ``%j`` the job's id), where the job's log is read. Each
  replica but the primary writes its own file beside it.

Options with no Vertex meaning (``--array``, ``--partition``, ``--dependency``) are refused.
"""

from __future__ import annotations

import re
from typing import Any

from ..exceptions import SpecError
from ..slurm.sbatch import gpus_per_node_asked, read_sbatch_options
from . import machines
from .job import option, parse_options, sbatch_directives
from .trial_job import worker_pools_from_script

# Vertex's prebuilt PyTorch training images (cloud.google.com/vertex-ai/docs/training/pre-built-containers).
GPU_IMAGE = "us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.2-4.py310:latest"
CPU_IMAGE = "us-docker.pkg.dev/vertex-ai/training/pytorch-xla.2-4.py310:latest"
REFUSED = {"array": "Vertex AI has no job arrays; submit one job per task",
           "partition": "Vertex AI has no partitions; choose the machine with --machine-type",
           "dependency": "Vertex AI starts a job at once; submit the next job when this one has finished"}
# Vertex's Reduction Server (worker pool 2): its image and the machine Google recommends for it.
REDUCTION_SERVER_IMAGE = "us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest"
REDUCTION_SERVER_MACHINE = "n1-highcpu-16"
# Variables Vertex sets itself from base_output_directory (gs:// URIs, as a job sees them there).
VERTEX_SETS = ("AIP_MODEL_DIR", "AIP_CHECKPOINT_DIR", "AIP_TENSORBOARD_LOG_DIR")

# Runs each replica's program: paths under /gcs are where Cloud Storage FUSE mounts buckets
# on Vertex AI (GTC_GCS_MOUNT is that folder on the local endpoint's nodes); output goes to
# the container's own (Cloud Logging) and to the log file in the job's folder.
WRAPPER = r"""set -o pipefail
m="${GTC_GCS_MOUNT:-/gcs}"
export GTC_JOB_DIR="$m${GTC_JOB_DIR#/gcs}"
[ -z "${CLOUD_ML_HP_METRIC_FILE:-}" ] || export CLOUD_ML_HP_METRIC_FILE="$m${CLOUD_ML_HP_METRIC_FILE#/gcs}"
log="$m${GTC_LOG#/gcs}"
log="${log//%j/$CLOUD_ML_JOB_ID}"
[ "${GTC_POOL:-0}" = 0 ] || log="${log%.out}.workerpool$GTC_POOL-$(hostname).out"
mkdir -p "$GTC_JOB_DIR" "$(dirname "$log")"
cd "$GTC_JOB_DIR"
"$@" 2>&1 | tee -a "$log"
"""


def slurm_seconds(value: str, option_name: str = "--time") -> int:
    """sbatch's ``--time``: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS, in seconds."""
    match = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", value.strip())
    if match is None or value.strip() in ("", "UNLIMITED", "INFINITE"):
        raise SpecError(option_name, value, "a time: minutes, MM:SS, HH:MM:SS or D-HH:MM:SS")
    days, a, b, c = match.groups()
    if days is not None:  # D-HH[:MM[:SS]]
        return int(days) * 86400 + int(a) * 3600 + int(b or 0) * 60 + int(c or 0)
    if c is not None:
        return int(a) * 3600 + int(b) * 60 + int(c)
    if b is not None:
        return int(a) * 60 + int(b)
    return int(a) * 60


def machine_spec(machine_type: str | None, image: str | None = None) -> tuple[dict[str, Any], str]:
    """A worker pool's ``machine_spec`` for ``machine_type`` (its accelerators from the machine
    catalogue), and the image: ``image``, else Vertex's prebuilt PyTorch one for that machine."""
    if not machine_type:
        raise SpecError("--machine-type", None, "the machine each replica runs on (n2-standard-8, a3-highgpu-8g, "
                                                "...): pass --machine-type, or `gtc config set vertex.machine_type T`")
    machine = machines.lookup(machine_type)
    spec: dict[str, Any] = {"machine_type": machine_type}
    if machine and machine.gpu_count:
        spec.update(accelerator_type=machine.gpu_type, accelerator_count=machine.gpu_count)
    return spec, image or (GPU_IMAGE if machine and machine.gpu_count else CPU_IMAGE)


def custom_job(script: str, options: list[str], env: dict[str, str], *, cluster: str, output_uri: str,
               machine_type: str | None = None, image: str | None = None,
               script_args: list[str] | None = None) -> dict[str, Any]:
    """The ``CustomJob`` (JSON, snake_case) that runs ``script`` with ``options`` (sbatch's and
    ``--machine-type/--replicas/--image``) and ``env``; its folder is ``output_uri`` (gs://),
    and it is labelled ``gtc_cluster=<cluster>``, which is how the backend lists its jobs."""
    words = sbatch_directives(script) + list(options)
    pairs = parse_options(words)
    for name, why in REFUSED.items():
        if option(pairs, name) is not None:
            raise SpecError(f"--{name}", option(pairs, name), why)
    machine_type = option(pairs, "machine-type") or machine_type
    spec, image = machine_spec(machine_type, option(pairs, "image") or image)
    machine = machines.lookup(machine_type)
    gpus = machine.gpu_count if machine else None
    for ask in gpus_per_node_asked(read_sbatch_options(words)):
        if gpus is not None and ask.per_node > gpus:
            has = {0: "no GPUs", 1: "1 GPU"}.get(gpus, f"{gpus} GPUs")
            raise SpecError(f"--{ask.option}", ask.value, f"{machine_type} has {has}; {ask.how}: choose a "
                                                          f"--machine-type with more")
    replicas = _count(option(pairs, "replicas") or option(pairs, "nodes") or "1")
    program = worker_pools_from_script(script)["workerPoolSpecs"][0]["containerSpec"]["command"]
    log = option(pairs, "output") or "slurm-%j.out"
    job_dir = env.get("GTC_JOB_DIR", "")
    if not log.startswith("/"):
        log = f"{job_dir}/{log}"
    base = {k: v for k, v in env.items() if k not in VERTEX_SETS}
    pools = []
    for index, count in enumerate((1, replicas - 1)):
        if count < 1:
            continue
        variables = {**base, "GTC_LOG": log, "GTC_POOL": str(index)}
        pools.append({"machine_spec": spec, "replica_count": count,
                      "container_spec": {"image_uri": image,
                                         "command": ["bash", "-c", WRAPPER, "gtc-job", *program, *(script_args or [])],
                                         "env": [{"name": k, "value": v} for k, v in variables.items()]}})
    servers = option(pairs, "reduction-server")
    if servers is not None:
        if len(pools) < 2:
            raise SpecError("--reduction-server", servers, "a Reduction Server speeds up all-reduce between "
                                                           "replicas: give the job 2 or more (--replicas)")
        pools.append({"machine_spec": {"machine_type": REDUCTION_SERVER_MACHINE},
                      "replica_count": _count(servers, "--reduction-server"),
                      "container_spec": {"image_uri": REDUCTION_SERVER_IMAGE}})
    body: dict[str, Any] = {
        "display_name": option(pairs, "job-name") or "job",
        "labels": {"gtc_cluster": cluster},
        "job_spec": {"worker_pool_specs": pools, "base_output_directory": {"output_uri_prefix": output_uri}},
    }
    scheduling = _scheduling(pairs)
    if scheduling:
        body["job_spec"]["scheduling"] = scheduling
    return body


def _scheduling(pairs: list[tuple[str, str | None]]) -> dict[str, Any]:
    """``--time``, ``--requeue`` (the job restarts when a worker does), ``--spot`` and
    ``--flex-start[=MAX_WAIT]`` (Vertex's provisioning strategies) as ``scheduling``."""
    given = {k for k, _ in pairs}
    out: dict[str, Any] = {}
    if option(pairs, "time"):
        out["timeout"] = f"{slurm_seconds(option(pairs, 'time'))}s"
    if "requeue" in given and [k for k, _ in pairs if k in ("requeue", "no-requeue")][-1] == "requeue":
        out["restart_job_on_worker_restart"] = True
    if "spot" in given and "flex-start" in given:
        raise SpecError("--spot", None, "one provisioning strategy: --spot (preemptible, cheaper) or --flex-start "
                                        "(waits for the machines), not both")
    if "spot" in given:
        out["strategy"] = "SPOT"
    if "flex-start" in given:
        out["strategy"] = "FLEX_START"
        wait = option(pairs, "flex-start")
        if wait:
            out["max_wait_duration"] = f"{slurm_seconds(wait, '--flex-start')}s"
    return out


def _count(value: str | None, option_name: str = "--replicas") -> int:
    try:
        count = int((value or "").split("-")[0])  # --nodes=2-4: Vertex's pools have a fixed size, the least
    except ValueError:
        count = 0
    if count < 1:
        raise SpecError(option_name, value, "a number of machines, 1 or more")
    return count
