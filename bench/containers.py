"""A trivial CustomJob in a container against the same job without one, on the same local
cluster through the same local Vertex endpoint (issue 26's goal: at most 1.5x, image present).

    .venv/bin/python bench/containers.py [--n 5]

Each job runs ``python3 -c pass``: once with ``image_uri`` the tests' image (run by podman),
once with no image (run on the node). Timed from the SDK's ``submit()`` until our job behind it
has finished (``Job.wait``, event-driven: the SDK's 5 s poll would hide the difference),
interleaved. Then the same step as a plain sbatch job, with and without ``srun --container``
(Slurm 22.05's OCI support, a bundle unpacked by umoci). The image is built or found first (tests/containers/image.py) and is in podman's
store before any timing.

With ``--podman-options``: where a ``podman run`` of the image's ``true`` spends its time, by
option, each against the product's own argv (``containers/argv.py``), interleaved: what the
product could still choose (runtime, log driver, events, --rm, --name/--replace, seccomp, pull
policy, cgroups), and a bare ``podman image exists``/``inspect`` (the endpoint's check per job).

Last, a 2-node torchrun (gloo, a small MLP under DistributedDataParallel, CPU) timed by its
own steps (the median step of each rank after warm-up, the slower rank's): ``srun`` on the
nodes with the kernel's venv, and with Debian's python3 (the image's interpreter, torch from
the venv on PYTHONPATH: the baseline), against ``%%sbatch --container-image`` (the image's
python3, the venv mounted read-only on PYTHONPATH), interleaved (goal: at most 1.03x).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SPEC = {
    "display_name": "benchctr",
    "node_pools": [{"id": "a3", "machine_spec": {"machine_type": "a3-highgpu-8g"},
                    "scaling_spec": {"min_node_count": 2, "max_node_count": 2}}],
    "orchestrator_spec": {"slurm_spec": {"partitions": [{"id": "a3", "node_pool_ids": ["a3"]}]}},
}


def pool(image: str | None) -> dict:
    container = {"command": ["python3", "-c", "pass"]}
    if image:
        container["image_uri"] = image
    return {"machine_spec": {"machine_type": "a3-highgpu-8g"}, "replica_count": 1, "container_spec": container}


# Each rank times its own steps (forward, backward, DDP's all-reduce of the gradients, update).
TRAIN = """import os, statistics, time
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
dist.init_process_group("gloo")
torch.manual_seed(0)
torch.set_num_threads(1)
model = DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
steps = []
for step in range(int(os.environ.get("STEPS", "60"))):
    t0 = time.perf_counter()
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    steps.append(time.perf_counter() - t0)
print(f"STEP {dist.get_rank()} {statistics.median(steps[10:]):.6f}", flush=True)
dist.destroy_process_group()
"""
TORCHRUN = """#!/bin/bash
set -euo pipefail
head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])')
export PYTHONPATH="$TORCH_SITE"
srun "${GTC_BENCH_PYTHON:-python3}" -m torch.distributed.run --nnodes=2 --nproc-per-node=1 --rdzv-backend=c10d \\
    --rdzv-endpoint="$head:$port" --rdzv-id="$SLURM_JOB_ID" train_steps.py
"""


def torchrun_step_times(image: str, n: int) -> dict[str, list[float]]:
    """The slower rank's median step time of each 2-node torchrun, bare and in the image."""
    import sysconfig

    from jupyter_gtc import api

    folder = Path(tempfile.mkdtemp(prefix="gtc-bench-torchrun-"))
    (folder / "train_steps.py").write_text(TRAIN)
    os.environ["TORCH_SITE"] = sysconfig.get_paths()["purelib"]
    venv = sys.prefix
    # The same interpreter as the image's (Debian's python3, built with PGO/LTO), on the nodes: the
    # baseline that leaves the container alone to differ (the venv's is pyenv's build, slower).
    ways = {"bare": [], "bare-debian": [], "container": [f"--container-image={image}", f"--container-mounts={venv}:{venv}:ro",
                                      "--container-env=PYTHONPATH"]}
    times: dict[str, list[float]] = {kind: [] for kind in ways}
    for i in range(n + 1):
        for kind, flags in ways.items():
            env = {"GTC_BENCH_PYTHON": "/usr/bin/python3"} if kind == "bare-debian" else {}
            job = api.submit_job("benchctr", TORCHRUN, ["--nodes=2", "--ntasks-per-node=1", f"--job-name=tr-{kind}-{i}",
                                                        *flags], submit_dir=str(folder), env=env)
            job.wait(timeout=600)
            steps = [float(line.split()[2]) for line in job.logs().splitlines() if line.startswith("STEP ")]
            if job.state != "COMPLETED" or len(steps) != 2:
                raise SystemExit(f"torchrun {kind} ended {job.state}: {job.logs()[-2000:]}")
            if i:  # the first round warms both (the bundle is unpacked at the first submit)
                times[kind].append(max(steps))
    return times


def podman_options(image: str, n: int) -> None:
    """``podman run IMAGE true``: the product's argv against each option changed alone."""
    import subprocess

    from jupyter_gtc.containers import runtime
    from jupyter_gtc.containers.argv import run_argv

    found = runtime.detect()
    engine, oci = found.engine, found.oci_runtime
    ours = run_argv(engine, image, command=["true"], oci_runtime=oci, name="gtc-bench-options")
    at = ours.index("run") + 1

    def changed(*options: str, before_run: tuple[str, ...] = ()) -> list[str]:
        return [*ours[:at - 1], *before_run, "run", *options, *ours[at:]]

    ways = {"the product's argv": ours,
            "without --name/--replace": [w for w in ours if w not in ("--name", "gtc-bench-options", "--replace")],
            "without --rm": [w for w in ours if w != "--rm"],
            "--log-driver=passthrough": changed("--log-driver=passthrough"),
            "--log-driver=none": changed("--log-driver=none"),
            "--events-backend=none": changed(before_run=("--events-backend", "none")),
            "--pull=never": changed("--pull=never"),
            "--security-opt seccomp=unconfined": changed("--security-opt", "seccomp=unconfined"),
            "--cgroups=disabled": changed("--cgroups=disabled"),
            "--cgroups=split": changed("--cgroups=split"),
            "crun": [ours[0], "--runtime", "crun", *ours[3 if oci else 1:]],
            "podman image exists (no run)": [engine.path, "image", "exists", image],
            "podman image inspect (no run)": [engine.path, "image", "inspect", "--format", "{{.Id}}", image]}
    times: dict[str, list[float]] = {way: [] for way in ways}
    failed: dict[str, str] = {}
    for i in range(n + 1):
        for way, argv in ways.items():
            if way in failed:
                continue
            t0 = time.perf_counter()
            done = subprocess.run(argv, capture_output=True, text=True)
            if done.returncode:
                failed[way] = (done.stderr.strip().splitlines() or ["?"])[-1][:90]
            elif i:
                times[way].append(time.perf_counter() - t0)
    base = statistics.median(times["the product's argv"])
    print(f"{'podman run IMAGE true, by option':44} {'median':>9} {'ratio':>7}  (n={n})")
    for way in ways:
        if way in failed:
            print(f"{way:44} {'-':>9} {'-':>7}  refused here: {failed[way]}")
        else:
            med = statistics.median(times[way])
            print(f"{way:44} {med * 1e3:7.0f}ms {med / base:7.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5)
    parser.add_argument("--skip-torchrun", action="store_true", help="the trivial jobs only")
    parser.add_argument("--podman-options", action="store_true", help="podman run's time by option, and stop")
    args = parser.parse_args()
    from tests.containers.image import trainer_image

    image = trainer_image()
    if args.podman_options:
        podman_options(image, args.n)
        return 0
    os.environ["GTC_HOME"] = tempfile.mkdtemp(prefix="gtc-bench-")
    from jupyter_gtc import api

    api.create_cluster(SPEC)
    try:
        endpoint = api.start_vertex_endpoint("benchctr")
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import aiplatform

        aiplatform.init(project="bench", location="us-central1", staging_bucket="gs://bench",
                        api_endpoint=endpoint.api_endpoint, api_transport="rest", credentials=AnonymousCredentials())
        times: dict[str, list[float]] = {"bare": [], "container": []}
        for i in range(args.n + 1):  # the first round warms both paths (podman's first run sets up its store)
            for kind, uri in (("bare", None), ("container", image)):
                name = f"{kind}-{i}"
                t0 = time.perf_counter()
                aiplatform.CustomJob(display_name=name, worker_pool_specs=[pool(uri)]).submit()
                job = api.get_job(name, "benchctr")
                job.wait(timeout=300)
                if job.state != "COMPLETED":
                    raise SystemExit(f"{name} ended {job.state}: {job.logs()[-2000:]}")
                if i:
                    times[kind].append(time.perf_counter() - t0)
        # The same trivial step as a plain job: srun on the node, and srun --container (Slurm's own
        # OCI support, the bundle run by runc/crun through oci.conf: what %%sbatch --container-image would use).
        from jupyter_gtc.containers import runtime, slurm_oci

        found = runtime.detect()
        etc = Path(os.environ["GTC_HOME"]) / "clusters" / "benchctr" / "etc"
        (etc / "oci.conf").write_text(slurm_oci.oci_conf(found.oci_runtime, rootless=os.geteuid() != 0))
        bundle = slurm_oci.bundle_for(found.engine, image, Path(os.environ["GTC_HOME"]) / "bundles")
        for i in range(args.n + 1):
            for kind, srun in (("srun", "srun"), ("srun --container", f"srun --container={bundle}")):
                t0 = time.perf_counter()
                job = api.submit_job("benchctr", f"#!/bin/bash\n{srun} python3 -c pass\n", [f"--job-name=oci-{i}"])
                job.wait(timeout=300)
                if job.state != "COMPLETED":
                    raise SystemExit(f"{kind} ended {job.state}: {job.logs()[-2000:]}")
                if i:
                    times.setdefault(kind, []).append(time.perf_counter() - t0)
        med = {kind: statistics.median(t) for kind, t in times.items()}
        print(f"{'trivial job, submit -> finished':44} {'median':>9} {'ratio':>7}  (n={args.n})")
        print(f"{'CustomJob on the node (no image)':44} {med['bare']:8.2f}s {1.0:7.2f}")
        print(f"{'CustomJob in the image, podman':44} {med['container']:8.2f}s {med['container'] / med['bare']:7.2f}"
              f"  goal <= 1.50")
        print(f"{'sbatch: srun on the node':44} {med['srun']:8.2f}s {1.0:7.2f}")
        print(f"{'sbatch: srun --container (Slurm OCI, runc)':44} {med['srun --container']:8.2f}s "
              f"{med['srun --container'] / med['srun']:7.2f}")
        if args.skip_torchrun:
            return 0
        steps = {kind: statistics.median(t) for kind, t in torchrun_step_times(image, args.n).items()}
        print(f"{'2-node torchrun, median step (ms)':44} {'median':>9} {'ratio':>7}")
        print(f"{'srun on the nodes, the venv (pyenv python)':44} {steps['bare'] * 1e3:7.2f}ms "
              f"{steps['bare'] / steps['bare-debian']:7.2f}")
        print(f"{'srun on the nodes, Debian python3 (baseline)':44} {steps['bare-debian'] * 1e3:7.2f}ms {1.0:7.2f}")
        print(f"{'%%sbatch --container-image (Slurm OCI)':44} {steps['container'] * 1e3:7.2f}ms "
              f"{steps['container'] / steps['bare-debian']:7.2f}  goal <= 1.03 (same interpreter)")
    finally:
        api.delete_cluster("benchctr")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
