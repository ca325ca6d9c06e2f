"""A trivial CustomJob in a container against the same job without one, on the same local
cluster through the same local Vertex endpoint (issue 26's goal: at most 1.5x, image present).

    .venv/bin/python bench/containers.py [--n 5]

Each job runs ``python3 -c pass``: once with ``image_uri`` the tests' image (run by podman),
once with no image (run on the node). Timed from the SDK's ``submit()`` until our job behind it
has finished (``Job.wait``, event-driven: the SDK's 5 s poll would hide the difference),
interleaved. Then the same step as a plain sbatch job, with and without ``srun --container``
(Slurm 22.05's OCI support, a bundle unpacked by umoci). The image is built or found first (tests/containers/image.py) and is in podman's
store before any timing.
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
                    "scaling_spec": {"min_node_count": 1, "max_node_count": 1}}],
    "orchestrator_spec": {"slurm_spec": {"partitions": [{"id": "a3", "node_pool_ids": ["a3"]}]}},
}


def pool(image: str | None) -> dict:
    container = {"command": ["python3", "-c", "pass"]}
    if image:
        container["image_uri"] = image
    return {"machine_spec": {"machine_type": "a3-highgpu-8g"}, "replica_count": 1, "container_spec": container}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5)
    args = parser.parse_args()
    from tests.containers.image import trainer_image

    image = trainer_image()
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
    finally:
        api.delete_cluster("benchctr")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
