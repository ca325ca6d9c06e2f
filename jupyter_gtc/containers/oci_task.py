"""One task of a ``srun --container=BUNDLE`` step, run by slurmstepd through ``oci.conf``'s
``RunTimeRun`` (``python -m jupyter_gtc.containers.oci_task %n %t RUNTIME... -b %b``), which
then becomes the OCI runtime itself (exec: Slurm signals and waits for the container).

Why it is there: Slurm 22.05 writes one ``config.json`` per step and node (in its spool
folder, ``%b``) with the environment of the step's first task, so every container saw
``SLURM_PROCID=0`` and the first node's ``SLURMD_NODENAME``: two ranks of a torchrun both
thought they were rank 0. This gives each task its own copy with its own node, local and
global task ids, computed from the step's node list and tasks per node as Slurm lays tasks
out (block, or cyclic over nodes); the image's own variables win over the job's (its PATH, its
PYTHONPATH), except those the job named in ``--container-env``, as pyxis does; and the local
buckets (``GTC_GCS_MOUNT``) are mounted at ``/gcs``, as Cloud Storage FUSE mounts them.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

IMAGE_ENV = "org.jupyter-gtc.image-env"          # the image's own ENV (config annotations)
CONTAINER_ENV = "org.jupyter-gtc.container-env"  # --container-env's names
GCS_TARGET = "/gcs"


def expand_hostlist(text: str) -> list[str]:
    """Slurm's host list: ``gpu-[0-1,3],login-0`` -> gpu-0, gpu-1, gpu-3, login-0 (zero
    padding kept: ``n[08-10]``)."""
    hosts: list[str] = []
    for match in re.finditer(r"([^,\[]+)(?:\[([^\]]+)\])?([^,]*)", text):
        prefix, ranges, suffix = match.groups()
        if not ranges:
            hosts.append(prefix + suffix)
            continue
        for part in ranges.split(","):
            low, _, high = part.partition("-")
            for n in range(int(low), int(high or low) + 1):
                hosts.append(f"{prefix}{str(n).zfill(len(low))}{suffix}")
    return hosts


def expand_counts(text: str) -> list[int]:
    """Slurm's tasks per node: ``2(x3),1`` -> [2, 2, 2, 1]."""
    counts: list[int] = []
    for part in filter(None, text.split(",")):
        match = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if not match:
            raise ValueError(f"tasks per node {text!r}")
        counts += [int(match.group(1))] * int(match.group(2) or 1)
    return counts


def global_ids(counts: list[int], distribution: str) -> list[list[int]]:
    """Each node's global task ids: block (a node's tasks numbered together, Slurm's default)
    or cyclic (one task per node in turn)."""
    ids: list[list[int]] = [[] for _ in counts]
    if distribution.split(":")[0] == "cyclic":
        gtid = 0
        while gtid < sum(counts):
            for node, count in enumerate(counts):
                if len(ids[node]) < count:
                    ids[node].append(gtid)
                    gtid += 1
        return ids
    start = 0
    for node, count in enumerate(counts):
        ids[node] = list(range(start, start + count))
        start += count
    return ids


def task_env(env: list[str], node: str, local: int, image_env: list[str], keep: list[str]) -> list[str]:
    """The task's environment: the job's (after the image's own entries, which slurmstepd puts
    first), its own ids, then the image's variables over it except ``keep``'s."""
    job_part = env[len(image_env):] if env[:len(image_env)] == image_env else env
    job = dict(item.split("=", 1) for item in job_part if "=" in item)
    if job.get("SLURM_STEP_NODELIST") and job.get("SLURM_STEP_TASKS_PER_NODE"):
        nodes = expand_hostlist(job["SLURM_STEP_NODELIST"])
        counts = expand_counts(job["SLURM_STEP_TASKS_PER_NODE"])
        if node in nodes and len(counts) == len(nodes):
            node_id = nodes.index(node)
            gtids = global_ids(counts, job.get("SLURM_DISTRIBUTION", "block"))[node_id]
            if local < len(gtids):
                job.update(SLURM_NODEID=str(node_id), SLURM_PROCID=str(gtids[local]),
                           SLURM_GTIDS=",".join(map(str, gtids)))
    job.update(SLURMD_NODENAME=node, SLURM_LOCALID=str(local))
    if "SLURM_TOPOLOGY_ADDR" in job:
        job["SLURM_TOPOLOGY_ADDR"] = node
    image = dict(item.split("=", 1) for item in image_env if "=" in item)
    job.update({name: value for name, value in image.items() if name not in keep})
    return [f"{name}={value}" for name, value in job.items()]


def task_config(config: dict, node: str, local: int) -> dict:
    annotations = config.get("annotations") or {}
    image_env = json.loads(annotations.get(IMAGE_ENV, "[]"))
    keep = json.loads(annotations.get(CONTAINER_ENV, "[]"))
    root = config.get("root") or {}
    if root.get("path"):  # the job's bundle links the image's cached root; runc takes no link
        root["path"] = os.path.realpath(root["path"])
    process = config["process"]
    process["env"] = task_env(process.get("env", []), node, local, image_env, keep)
    gcs = dict(e.split("=", 1) for e in process["env"] if "=" in e).get("GTC_GCS_MOUNT")
    if gcs and os.path.isdir(gcs) and not any(m.get("destination") == GCS_TARGET for m in config.get("mounts", [])):
        config.setdefault("mounts", []).append({"destination": GCS_TARGET, "type": "bind", "source": gcs,
                                                "options": ["rbind", "rw"]})
    return config


def task_bundle(spool: Path, config: dict, node: str, local: int) -> Path:
    """Where the task's own ``config.json`` goes: under its job's folder (not in Slurm's spool
    folder, which slurmstepd removes with ``rmdir`` once it has taken its own files out), else
    beside the spool folder."""
    env = dict(e.split("=", 1) for e in config["process"]["env"] if "=" in e)
    job_dir = env.get("GTC_JOB_DIR")
    name = f"{node}.{env.get('SLURM_STEP_ID', env.get('SLURM_STEPID', 's'))}.{local}"
    if job_dir and os.path.isdir(job_dir):
        return Path(job_dir) / "container" / "tasks" / name
    return spool.parent / f"{spool.name.rstrip('/')}.task-{local}"


def main(argv: list[str]) -> None:
    from .._process import replace_with

    node, local, runtime_argv = argv[0], int(argv[1]), list(argv[2:])
    where = runtime_argv.index("-b") + 1
    spool = Path(runtime_argv[where])
    config = task_config(json.loads((spool / "config.json").read_text()), node, local)
    own = task_bundle(spool, config, node, local)
    own.mkdir(mode=0o700, parents=True, exist_ok=True)
    (own / "config.json").write_text(json.dumps(config))
    runtime_argv[where] = str(own)
    replace_with(runtime_argv, os.environ)


if __name__ == "__main__":
    main(sys.argv[1:])
