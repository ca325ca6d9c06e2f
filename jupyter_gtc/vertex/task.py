"""One replica of a Vertex AI CustomJob, run by srun on each node of the job's Slurm
allocation: it finds which worker pool this node belongs to, sets the environment Vertex
gives that replica, and becomes the pool's program.

Nodes are handed out in pool order, as Vertex numbers replicas: node 0 is workerpool0's one
replica, the next ``replica_count`` nodes are workerpool1's, and so on. ``CLUSTER_SPEC`` and
``TF_CONFIG`` name every replica at ``host:2222``, the port Vertex gives them.

Everything comes in the environment (no shell ever sees the user's command or arguments):
``GTC_VERTEX_POOLS`` the pools as JSON (``[{"replicas", "argv", "env"}, ...]``, ``null`` for
an empty placeholder pool), ``GTC_VERTEX_HOSTS`` the allocation's host names in Slurm's
order, comma separated (the batch script expands ``SLURM_JOB_NODELIST`` once), and
``SLURM_NODEID``. A ``python_package_spec`` pool lists ``packages``: installed first, for
this node, into the job's folder. A pool with a ``container`` runs in its image instead
(``containers/argv.py``): the job folder and the local buckets (at ``/gcs``, as Cloud
Storage FUSE mounts them on Vertex AI) mounted, the host's network, the task's GPUs, and the
Vertex environment passed in by name.
"""

from __future__ import annotations

import json
import os
import sys

from .._process import replace_with, run, run_forwarding

PORT = 2222
# CLUSTER_SPEC's pool names and TF_CONFIG's task types, by pool index (Vertex's documentation).
TF_TYPES = ("chief", "worker", "ps", "evaluator")


def replica_of(pools: list[dict | None], node: int) -> tuple[int, int]:
    """(pool index, replica index in it) of the ``node``-th node of the allocation."""
    first = 0
    for index, pool in enumerate(pools):
        count = pool["replicas"] if pool else 0
        if node < first + count:
            return index, node - first
        first += count
    raise ValueError(f"node {node} is past the {first} replicas the pools ask for")


def cluster_env(pools: list[dict | None], hosts: list[str], node: int, job: dict) -> dict[str, str]:
    """CLUSTER_SPEC and TF_CONFIG for the replica on ``node``, as Vertex sets them, and for a
    job of several replicas PyTorch's MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK."""
    cluster: dict[str, list[str]] = {}
    tf_cluster: dict[str, list[str]] = {}
    first = 0
    for index, pool in enumerate(pools):
        if not pool:
            continue
        addresses = [f"{h}:{PORT}" for h in hosts[first:first + pool["replicas"]]]
        cluster[f"workerpool{index}"] = addresses
        tf_cluster[TF_TYPES[index]] = addresses
        first += pool["replicas"]
    index, replica = replica_of(pools, node)
    task = {"type": f"workerpool{index}", "index": replica}
    torch = {}
    if first > 1:  # PyTorch's env:// rendezvous, as Vertex's PyTorch containers set it: a process a replica
        torch = {"MASTER_ADDR": hosts[0], "MASTER_PORT": os.environ.get("GTC_VERTEX_MASTER_PORT", "23456"),
                 "WORLD_SIZE": str(first), "RANK": str(node), "LOCAL_RANK": "0"}
    if job.get("trial"):
        task["trial"] = job["trial"]
    return {
        "CLUSTER_SPEC": json.dumps({"cluster": cluster, "environment": "cloud", "task": task, "job": job}),
        "TF_CONFIG": json.dumps({"cluster": tf_cluster, "task": {"type": TF_TYPES[index], "index": replica},
                                 "environment": "cloud", "job": job}),
        **torch,
    }


def install(packages: list[str], node: int) -> str:
    """Install a python_package_spec's source packages for this node (a folder of the job's
    own, put first on PYTHONPATH): without their requirements, which the job's Python
    environment provides (nothing is downloaded on the nodes)."""
    target = os.path.join(os.environ.get("GTC_JOB_DIR", "."), "python", f"node-{node}")
    run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--disable-pip-version-check", "--target", target, *packages], timeout=600)
    return target


# What a replica's container gets of the task's environment (by name; never a token, never the
# node's PATH or HOME, which are the image's own): Vertex's contract, PyTorch's rendezvous, Slurm's ids.
CONTAINER_PREFIXES = ("AIP_", "CLOUD_ML_", "SLURM_")
CONTAINER_NAMES = ("CLUSTER_SPEC", "TF_CONFIG", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK",
                   "CUDA_VISIBLE_DEVICES", "GTC_JOB_DIR", "GTC_CLUSTER")


def container_argv(pool: dict, env: dict[str, str], node: int) -> list[str]:
    """The argv that runs ``pool``'s replica in its image (``pool["container"]``)."""
    from ..containers.argv import GCS_MOUNT, Mount, gpu_options, run_argv
    from ..containers.runtime import Found

    spec = pool["container"]
    mounts = []
    if env.get("GTC_JOB_DIR") and os.path.isdir(env["GTC_JOB_DIR"]):
        mounts.append(Mount(env["GTC_JOB_DIR"], env["GTC_JOB_DIR"]))
    if env.get("GTC_GCS_MOUNT") and os.path.isdir(env["GTC_GCS_MOUNT"]):
        mounts.append(Mount(env["GTC_GCS_MOUNT"], GCS_MOUNT))
    names = [n for n in env if n.startswith(CONTAINER_PREFIXES) or n in CONTAINER_NAMES or n in pool["env"]]
    oci = spec.get("oci_runtime")
    return run_argv(Found(spec["engine_name"], spec["engine"], ""), spec["image"], command=spec["command"],
                    args=spec["args"], env_names=names, mounts=mounts,
                    gpus=gpu_options(wanted=bool(env.get("CUDA_VISIBLE_DEVICES"))),
                    oci_runtime=Found(os.path.basename(oci), oci, "") if oci else None,
                    name=container_name(env, node))


def container_name(env: dict[str, str], node: int) -> str:
    """Unique among running jobs: the cluster's name, Slurm's job id, the node's index."""
    return f"gtc-{env.get('GTC_CLUSTER', 'cluster')}-{env.get('SLURM_JOB_ID', 'job')}-{node}"


def run_in_container(pool: dict, env: dict[str, str], node: int) -> int:
    """Run the replica's container to its end; its exit status. The container lives under the
    runtime's monitor (conmon), outside the task's processes that Slurm signals and kills, so
    a cancel (SIGTERM, then SIGKILL after KillWait) stops it here, and it is removed whatever
    happens to the runtime's client."""
    engine, name = pool["container"]["engine"], container_name(env, node)

    signalled = []

    def stop(signum: int) -> None:  # TERM to its PID 1, KILL 2 s later: within Slurm's KillWait (10 s)
        signalled.append(signum)
        run([engine, "stop", "--time", "2", name], check=False, timeout=30)

    status = run_forwarding(container_argv(pool, env, node), env, stop)
    if signalled or status >= 125:  # else `run --rm` removed it (podman's own failures: 125 and up)
        run([engine, "rm", "--force", "--ignore", name], check=False, timeout=60)
    return status


def main() -> None:
    pools = json.loads(os.environ["GTC_VERTEX_POOLS"])
    hosts = os.environ["GTC_VERTEX_HOSTS"].split(",")
    node = int(os.environ["SLURM_NODEID"])
    job = json.loads(os.environ.get("GTC_VERTEX_JOB", "{}"))
    index, replica = replica_of(pools, node)
    pool = pools[index]
    env = {**os.environ, **cluster_env(pools, hosts, node, job), **pool["env"]}
    if pool.get("packages"):
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [install(pool["packages"], node), env.get("PYTHONPATH")]))
    if pool.get("note") and replica == 0:
        print(pool["note"], file=sys.stderr, flush=True)
    sys.stdout.flush()
    if pool.get("container"):
        sys.exit(run_in_container(pool, env, node))
    replace_with(pool["argv"], env)


if __name__ == "__main__":
    main()
