"""A tuning trial's job both ways: a Vertex ``CustomJobSpec`` (``worker_pool_specs``) as the
sbatch script that runs it on a Slurm cluster, and an sbatch script as worker pools for
``HyperparameterTuningJob.trial_job_spec``. Pure functions."""

from __future__ import annotations

import re
import shlex
from typing import Any

from pydantic.alias_generators import to_camel

from ..exceptions import SpecError
from ..slurm.srun import split_srun
from .job import option, parse_options, sbatch_directives

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # with fullmatch: `$` would let "A\n" through


def _get(data: dict[str, Any], snake: str, default: Any = None) -> Any:
    return data.get(snake, data.get(to_camel(snake), default))


def script_from_worker_pools(job_spec: dict[str, Any]) -> str:
    """An sbatch script that runs a Vertex ``CustomJobSpec`` here: one node per replica of every
    pool, pool 0's GPUs per node, its container's ``command + args`` (or ``python -m module``)
    under ``srun``, with the hyperparameter flags after them as Vertex appends them. The image
    itself is not pulled: its code must be on the cluster's PATH/PYTHONPATH."""
    pools = _get(job_spec, "worker_pool_specs")
    where = "trial_job_spec.worker_pool_specs"
    if not isinstance(pools, list) or not pools or not all(isinstance(p, dict) for p in pools):
        raise SpecError(where, pools, "a list of worker pool specs (pool 0 first)")
    first = pools[0]
    nodes = sum(int(_get(p, "replica_count", 1) or 0) for p in pools) or 1
    gpus = int(_get(_get(first, "machine_spec", {}) or {}, "accelerator_count", 0) or 0)
    container, package = _get(first, "container_spec"), _get(first, "python_package_spec")
    if isinstance(container, dict) and (_get(container, "command") or _get(container, "args")):
        argv = [*(_get(container, "command") or []), *(_get(container, "args") or [])]
        env, env_field = _get(container, "env") or [], f"{where}[0].container_spec.env"
    elif isinstance(package, dict) and _get(package, "python_module"):
        argv = ["python3", "-m", _get(package, "python_module"), *(_get(package, "args") or [])]
        env, env_field = _get(package, "env") or [], f"{where}[0].python_package_spec.env"
    else:
        raise SpecError(f"{where}[0]", first, "a container_spec with command/args, or a python_package_spec "
                        "with python_module")
    lines = ["#!/bin/bash", f"#SBATCH --nodes={nodes}"]
    if gpus:
        lines.append(f"#SBATCH --gpus-per-node={gpus}")
    for i, e in enumerate(env):
        name = _get(e, "name") if isinstance(e, dict) else None
        if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
            raise SpecError(f"{env_field}[{i}].name", name, "an environment variable name: letters, digits "
                            "and _, not starting with a digit")
        lines.append(f"export {name}={shlex.quote(str(_get(e, 'value', '')))}")
    lines.append("srun " + shlex.join(str(a) for a in argv) + ' "$@"')
    return "\n".join(lines) + "\n"


def worker_pools_from_script(script: str, machine_spec: dict[str, Any] | None = None,
                             image_uri: str | None = None) -> dict[str, Any]:
    """A Vertex ``CustomJobSpec`` for a trial written as an sbatch script: ``--nodes`` replicas
    (pool 0 one, pool 1 the rest), each running the program of the script's ``srun`` line (srun's
    options and their values dropped: ``srun -N 1 --gpus 2 python train.py "$@"`` runs
    ``python train.py``) or, for any other script, ``bash -c BODY``; Vertex appends the
    hyperparameter flags."""
    pairs = parse_options(sbatch_directives(script))
    given = option(pairs, "nodes") or option(pairs, "N") or "1"
    try:
        nodes = int(given.split("-")[0])  # --nodes=2-4: Vertex's pools have a fixed size, the least
    except ValueError:
        raise SpecError("local.script", f"--nodes={given}", "a node count, e.g. #SBATCH --nodes=2") from None
    body = [line for line in script.splitlines() if line.strip() and not line.strip().startswith("#")]
    command: list[str] = []
    if len(body) == 1:
        try:
            words = shlex.split(body[0], comments=True)
        except ValueError:  # not shell words (an unclosed quote): Vertex gets the script as it is
            words = []
        if words[:1] == ["srun"]:
            command = [w for w in split_srun(words[1:])[1] if w not in ("$@", "$*")]
    if not command:
        command = ["bash", "-c", "\n".join(body), "trial"]
    container: dict[str, Any] = {"command": command}
    if image_uri:
        container = {"imageUri": image_uri, **container}
    pool: dict[str, Any] = {"machineSpec": dict(machine_spec or {}), "replicaCount": 1, "containerSpec": container}
    pools = [pool]
    if nodes > 1:
        pools.append({**pool, "replicaCount": nodes - 1})
    return {"workerPoolSpecs": pools}
