"""What serving costs: the tiny Llama deployed on a local cluster (one replica, our LM server)
against the same generation in this process (``serving/lm_server.Engine``: the same batching
loop, the same prompts, the same client threads), measured in one run. The gap is our
overhead: the front (guard, choice of replica, record), the proxy hop and HTTP both ways.
Also the seconds from ``deploy()`` to the first answered request.

Issue 27's goals: p50 latency <= 1.15x in-process, throughput >= 0.85x, deploy to first answer
under 10 s for the tiny model on a local cluster.

    .venv/bin/python bench/serving.py [--requests 60] [--max-tokens 16] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PROMPTS = ["The try statement", "A function definition", "The", "Exceptions are", "A class", "The import"]


def measure(call, requests: int, threads: int) -> dict:
    """``call(prompt)`` ``requests`` times from ``threads`` threads: p50, p95 (s) and requests/s."""
    latencies: list[float] = []

    def one(i: int) -> None:
        start = time.perf_counter()
        call(PROMPTS[i % len(PROMPTS)])
        latencies.append(time.perf_counter() - start)

    for i in range(threads):  # warm: the first generate call of a process pays for setup
        one(i)
    latencies.clear()
    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, range(requests)))
    wall = time.perf_counter() - start
    ordered = sorted(latencies)
    return {"p50": statistics.median(ordered), "p95": ordered[int(0.95 * (len(ordered) - 1))],
            "rps": requests / wall}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    home = tempfile.mkdtemp(prefix="gtc-bench-serving-")
    os.environ["GTC_HOME"] = home
    from jupyter_gtc import api
    from jupyter_gtc.serving.contract import Instance
    from jupyter_gtc.serving.lm_server import Engine
    from tests.conftest import small_gpu_spec
    from tests.serving.tiny_model import save_tiny_llama

    folder = save_tiny_llama(Path(home) / "tiny")
    api.create_cluster(small_gpu_spec("bench", nodes=1, machine="n2-standard-8"))
    try:
        api.register_model(artifact_uri=str(folder), model="llama-tiny", alias="prod")
        engine = Engine(str(folder))
        engine.start()
        engine.ready.wait()
        start = time.perf_counter()
        ep = api.get_model("llama-tiny@prod").deploy(cluster="bench")
        ep.predict([{"prompt": PROMPTS[0], "max_tokens": 1}])
        first = time.perf_counter() - start
        instances = lambda p: [{"prompt": p, "max_tokens": args.max_tokens}]  # noqa: E731
        paths = {"in-process": lambda p: engine.submit([Instance(p, args.max_tokens)]).result(),
                 "deployed": lambda p: ep.predict(instances(p))}
        # Rounds alternate the two paths, so a machine whose load changes (a shared one) weighs on both;
        # each figure is the median over the rounds.
        found: dict = {}
        for _ in range(args.rounds):
            for threads in (1, 4):
                for name, call in paths.items():
                    found.setdefault((name, threads), []).append(measure(call, args.requests, threads))
        rows = [(name, threads, {k: statistics.median(r[k] for r in runs) for k in ("p50", "p95", "rps")})
                for (name, threads), runs in sorted(found.items(), key=lambda item: (item[0][0] != "in-process",
                                                                                      item[0][1]))]
        ep.undeploy()
    finally:
        api.delete_cluster("bench")
        shutil.rmtree(home, ignore_errors=True)
    base = {t: r for name, t, r in rows if name == "in-process"}
    print(f"\n{args.requests} requests of 1 prompt, {args.max_tokens} new tokens each, medians of {args.rounds} "
          f"alternating rounds; tiny Llama on CPU, OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}, "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs\n")
    print("| path | client threads | p50 ms | p95 ms | requests/s | p50 x in-process | req/s x in-process |")
    print("|---|---|---|---|---|---|---|")
    for name, threads, r in rows:
        b = base[threads]
        print(f"| {name} | {threads} | {r['p50'] * 1000:.1f} | {r['p95'] * 1000:.1f} | {r['rps']:.1f} | "
              f"{r['p50'] / b['p50']:.2f} | {r['rps'] / b['rps']:.2f} |")
    print(f"\ndeploy() to the first answered request: {first:.1f} s (goal: under 10 s)")


if __name__ == "__main__":
    main()
