"""The local Vertex endpoint's cost: a trivial CustomJob through the official SDK against
the same job through ``api.submit_job``, and many clients at once.

    .venv/bin/python bench/vertex_local.py [--n 5] [--concurrent 20]

1. ``CustomJob.run()`` to return, against ``api.submit_job(...).wait()`` of the same one-node
   job (the baseline, measured in this run, interleaved). The SDK polls every 5 s (fixed in
   ``aiplatform.jobs._JOB_WAIT_TIME``), which sets the floor of run(): our own part is what
   the endpoint spent per call, from its request log.
2. ``submit()`` from ``--concurrent`` threads at once: the time until all are created, and the
   endpoint's per-create time (each runs one sbatch).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

SPEC = {
    "display_name": "benchvx",
    "node_pools": [{"id": "a3", "machine_spec": {"machine_type": "a3-highgpu-8g"},
                    "scaling_spec": {"min_node_count": 2, "max_node_count": 2}}],
    "orchestrator_spec": {"slurm_spec": {"partitions": [{"id": "a3", "node_pool_ids": ["a3"]}]}},
}
POOL = {"machine_spec": {"machine_type": "a3-highgpu-8g"}, "replica_count": 1,
        "container_spec": {"image_uri": "python:3.11", "command": ["true"]}}


def calls_since(log, start: int) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()[start:]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5)
    parser.add_argument("--concurrent", type=int, default=20)
    args = parser.parse_args()
    os.environ["GTC_HOME"] = tempfile.mkdtemp(prefix="gtc-bench-")
    from jupyter_gtc import api

    api.create_cluster(SPEC)
    try:
        endpoint = api.start_vertex_endpoint("benchvx")
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import aiplatform

        aiplatform.init(project="bench", location="us-central1", staging_bucket="gs://bench",
                        api_endpoint=endpoint.api_endpoint, api_transport="rest", credentials=AnonymousCredentials())
        log = api.vertex_request_log()
        log.touch()
        sdk, ours = [], []
        start = len(log.read_text().splitlines())
        for i in range(args.n):
            t0 = time.perf_counter()
            aiplatform.CustomJob(display_name=f"sdk-{i}", worker_pool_specs=[POOL]).run()
            t1 = time.perf_counter()
            api.submit_job("benchvx", "#!/bin/bash\nsrun true\n", [f"--job-name=ours-{i}"]).wait(timeout=120)
            t2 = time.perf_counter()
            sdk.append(t1 - t0)
            ours.append(t2 - t1)
        calls = calls_since(log, start)
        by_kind: dict[str, list[float]] = {}
        for c in calls:
            by_kind.setdefault(f"{c['method']} {'create' if c['method'] == 'POST' else 'get'}", []).append(c["ms"])

        start = len(log.read_text().splitlines())
        jobs = [aiplatform.CustomJob(display_name=f"many-{i}", worker_pool_specs=[POOL]) for i in range(args.concurrent)]
        t0 = time.perf_counter()
        with ThreadPoolExecutor(args.concurrent) as pool:
            list(pool.map(lambda j: j.submit(), jobs))
        many = time.perf_counter() - t0
        creates = [c["ms"] for c in calls_since(log, start) if c["method"] == "POST"]
        for job in jobs:
            job.wait_for_completion()

        sdk_med, ours_med = statistics.median(sdk), statistics.median(ours)
        print(f"{'':44} {'median':>9} {'ratio':>7}")
        print(f"{'api.submit_job + wait (baseline)':44} {ours_med:8.2f}s {1.0:7.2f}")
        print(f"{'CustomJob.run() through the endpoint':44} {sdk_med:8.2f}s {sdk_med / ours_med:7.2f}")
        for kind, ms in sorted(by_kind.items()):
            print(f"  endpoint time per {kind:28} {statistics.median(ms):7.1f} ms  (n={len(ms)}, max {max(ms):.1f})")
        print(f"{args.concurrent} concurrent submit(): all created in {many:.2f} s; endpoint per create median "
              f"{statistics.median(creates):.0f} ms, max {max(creates):.0f} ms; the SDK's poll every 5 s sets run()'s floor")
    finally:
        api.delete_cluster("benchvx")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
