"""A Vertex AI training cluster's scheduler, reached three ways, on one and the same local Slurm
cluster: through its Slurm Job API (``callSlurmRestApi`` of the local Vertex endpoint:
``vertex_clusters/slurm_api.SlurmJobApi``), over SSH to its login node (the ``slurm`` backend's
host: ``jobs: ssh``), and raw ``sbatch``/``squeue`` on this machine (the baseline, measured in the
same run). Then the poller's cost through the API: Vertex calls per minute while 1 job is watched,
and while 100 are (goal: one list call per poll tick, whatever the number of jobs).

    .venv/bin/python bench/vertex_clusters.py [--jobs 20] [--window 30]

The training cluster is made with ``--backend vertex`` from examples/clusters/local-a3.yaml on a
local endpoint serving from a second GTC_HOME; its login node is a real sshd on this machine
(tests/hosts/sshd.py; as root), whose shell reaches the endpoint's cluster. Jobs are held, so
none runs; every one is cancelled at the end. The three ways are interleaved (one of each in
turn) so a busy moment of the machine costs each. A way that is not there yet (the endpoint's
route, the client) is said, and the others still run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.conftest import small_gpu_spec  # noqa: E402  (the tests' small host cluster)
from tests.hosts.sshd import start_sshd  # noqa: E402  (the test server, reused as is)

NAME = "benchvx"
JOB = "#!/bin/bash\ntrue\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20, help="submits (and status reads) of each way")
    parser.add_argument("--window", type=float, default=30.0, help="seconds each watch is counted over")
    args = parser.parse_args()
    if os.getuid() != 0:
        sys.exit("run as root: the test sshd needs /run/sshd")
    for proxy in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"):
        os.environ[proxy] = "http://127.0.0.1:9"  # nothing leaves the machine
    os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"
    os.environ["GTC_VERTEX_POLL_S"] = "0.5"
    own, other = Path(tempfile.mkdtemp(prefix="gtc-bench-")), Path(tempfile.mkdtemp(prefix="gtc-bench-vx-"))
    from jupyter_gtc import api
    from jupyter_gtc.state import config

    server = start_sshd(own / "sshd")
    ssh_config = own / "ssh_config"
    ssh_config.write_text(server.config.read_text().replace(f"Host {server.alias}\n", "Host *-login-0\n"))
    results: dict[str, list[float]] = {}
    watch: list[tuple[str, float, int, int]] = []
    try:
        os.environ["GTC_HOME"] = str(other)
        host = api.create_cluster(small_gpu_spec("benchhost", nodes=1))
        served = api.start_vertex_endpoint(host.name)
        os.environ["GTC_HOME"] = str(own)
        config.set_value(own, "vertex.api_endpoint", served.api_endpoint)
        config.set_value(own, "vertex.ssh_config", str(ssh_config))
        conf = other / "clusters" / NAME / "etc" / "slurm.conf"
        spec = _spec(conf, own / "remote-jobs")
        print(f"creating training cluster {NAME} (2 nodes, --backend vertex) ...", flush=True)
        api.create_cluster(spec, backend="vertex")
        ways = _ways(own, conf)
        script = own / "bench.sbatch"
        script.write_text(JOB)
        job_dir = own / "bench-jobs"
        job_dir.mkdir()
        for label in ways:  # a first call each: connections opened, as in a session
            _timed(ways, label, lambda c: c.queue())
        for i in range(args.jobs):
            for label in ways:
                took = _timed(ways, label, lambda c: c.submit(script, ["--hold", f"--job-name=bench-{i}"], {},
                                                              job_dir, str(job_dir)))
                if took is not None:
                    results.setdefault(f"submit: {label}", []).append(took)
        began = time.time()
        _post_alone(ways, script, job_dir, args.jobs, results)
        served = _served_ms(other / "vertex" / "requests.log", began, time.time())
        if served:  # the endpoint's own time for those POSTs: the rest is the client and the wire
            results["submit: Slurm Job API, its POST as the endpoint timed it"] = served
        for _ in range(args.jobs):
            for label in ways:
                took = _timed(ways, label, lambda c: c.queue())
                if took is not None:
                    results.setdefault(f"status (all jobs, one call): {label}", []).append(took)
        if ways.get("Slurm Job API") is not None:
            watch = _watch(api, other / "vertex" / "requests.log", args.window)
        else:
            print("calls per minute: skipped (no Slurm Job API here yet)")
    finally:
        _clean_up(api, config, own, other, server)

    _print(results, watch, args)
    return 0


def _spec(conf: Path, jobs_root: Path) -> dict:
    import yaml

    import jupyter_gtc

    example = Path(jupyter_gtc.__file__).parent / "examples" / "clusters" / "local-a3.yaml"
    spec = yaml.safe_load(example.read_text()) | {"display_name": NAME}
    # The login node's shell reaches the endpoint's cluster through its slurm.conf, jobs under
    # jobs_root, with this interpreter (tests/vertex_clusters/test_training_cluster_jobs.py's way).
    spec["login"] = {"jobs": "api", "slurm_conf": str(conf), "jobs_root": str(jobs_root),
                     "python": f"{sys.prefix}/bin/python", "poll_interval": 1}
    return spec


def _ways(own: Path, conf: Path) -> dict:
    """The three ``SlurmCommands``-shaped clients of the same Slurm cluster."""
    from jupyter_gtc import api
    from jupyter_gtc.backends.vertex_training import VertexTrainingBackend
    from jupyter_gtc.slurm.commands import SlurmCommands

    runtime = api.get_cluster(NAME).runtime
    backend = VertexTrainingBackend(own)
    ways: dict = {"raw sbatch/squeue (baseline)": SlurmCommands({"SLURM_CONF": str(conf)})}
    ways["over SSH to the login node"] = backend.commands(runtime | {"jobs": "ssh"})
    try:
        ways["Slurm Job API"] = backend.commands(runtime | {"jobs": "api"})
    except Exception as e:  # noqa: BLE001 - the client not there yet
        print(f"Slurm Job API: not available ({type(e).__name__}: {str(e)[:200]})")
        ways["Slurm Job API"] = None
    return ways


def _timed(ways: dict, label: str, call) -> float | None:
    """Seconds ``call(way)`` took; None, and the way dropped saying why, where it failed (a way
    not there yet is said, and the others go on)."""
    commands = ways[label]
    if commands is None:
        return None
    t0 = time.perf_counter()
    try:
        call(commands)
    except Exception as e:  # noqa: BLE001
        print(f"{label}: failed, left out ({type(e).__name__}: {str(e)[:300]})", flush=True)
        ways[label] = None
        return None
    return time.perf_counter() - t0


def _post_alone(ways: dict, script: Path, job_dir: Path, jobs: int, results: dict) -> None:
    """The Slurm Job API's submit without its read of the script through the login node: the
    POST alone, to say where its time goes."""
    commands = ways.get("Slurm Job API")
    if commands is None:
        return
    try:
        from jupyter_gtc.vertex_clusters.job_desc import job_description

        job = job_description(JOB, ["--hold", "--job-name=bench-post"], {}, str(job_dir), str(script), None)
    except Exception as e:  # noqa: BLE001 - the client's insides may change: the row is left out
        print(f"the POST alone: left out ({type(e).__name__}: {e})")
        return
    for _ in range(jobs):
        t0 = time.perf_counter()
        commands.call("POST", "/slurm/v0.0.42/job/submit", {"job": job})
        results.setdefault("submit: Slurm Job API, its POST alone (no script read)", []).append(
            time.perf_counter() - t0)


def _served_ms(log: Path, began: float, ended: float) -> list[float]:
    """Seconds the endpoint took over each ``callSlurmRestApi`` between ``began`` and ``ended``
    (its ``requests.log``)."""
    out = []
    for line in log.read_text().splitlines():
        entry = json.loads(line)
        if began <= entry["time"] <= ended and entry["path"].endswith(":callSlurmRestApi"):
            out.append(entry["ms"] / 1e3)
    return out


def _watch(api, log: Path, window: float) -> list[tuple[str, float, int, int]]:
    """Vertex calls during ``window`` s while 1 job, then 100, are watched by the poller."""
    out = []
    jobs = [api.submit_job(NAME, JOB, ["--hold", "--job-name=watched-0"], python_env=None)]
    for count in (1, 100):
        while len(jobs) < count:
            jobs.append(api.submit_job(NAME, JOB, ["--hold", f"--job-name=watched-{len(jobs)}"], python_env=None))
        poller = jobs[0]._poller
        time.sleep(2 * poller.max_interval)  # the submits' own ticks done: the poller at its pace
        ticks, began = poller.ticks, time.time()
        time.sleep(window)
        ended = time.time()
        calls = slurm_calls = 0
        for line in log.read_text().splitlines():
            entry = json.loads(line)
            if began <= entry["time"] < ended and f"/modelDevelopmentClusters/{NAME}" in entry["path"]:
                calls += 1
                slurm_calls += entry["path"].endswith(":callSlurmRestApi")
        out.append((f"{count} watched", calls * 60 / (ended - began), slurm_calls, poller.ticks - ticks))
    return out


def _clean_up(api, config, own: Path, other: Path, server) -> None:
    os.environ["GTC_HOME"] = str(own)
    try:
        if NAME in [c.name for c in api.list_clusters(with_status=False)]:
            api.delete_cluster(NAME)  # Vertex's delete: the endpoint's cluster, and every job on it, go
    finally:
        for key in ("vertex.api_endpoint", "vertex.ssh_config"):
            config.unset(own, key)
        os.environ["GTC_HOME"] = str(other)
        for cluster in api.list_clusters(with_status=False):  # the endpoint's clusters, its host last
            api.delete_cluster(cluster.name)
        os.environ["GTC_HOME"] = str(own)
        server.stop()
        shutil.rmtree(own, ignore_errors=True)
        shutil.rmtree(other, ignore_errors=True)


def _print(results: dict[str, list[float]], watch: list, args) -> None:
    print(f"\nscheduler calls on one 2-node cluster, {args.jobs} of each, interleaved (held jobs)")
    print(f"{'call: way':<62} {'median ms':>9} {'p90 ms':>7} {'x raw':>6}")
    for kind in ("submit", "status"):
        rows = {k: v for k, v in results.items() if k.startswith(kind)}
        base = next((statistics.median(v) for k, v in rows.items() if "baseline" in k), None)
        for label, times in rows.items():
            median, p90 = statistics.median(times), sorted(times)[int(0.9 * (len(times) - 1))]
            ratio = f"{median / base:>6.2f}" if base else "     -"
            print(f"{label:<62} {median * 1e3:>9.1f} {p90 * 1e3:>7.1f} {ratio}")
    if watch:
        print(f"\nthe poller through the Slurm Job API, {args.window:g} s each")
        print(f"{'jobs':<14} {'Vertex calls/min':>16} {'Slurm API calls':>15} {'ticks':>6} {'calls/tick':>10}")
        for label, per_minute, slurm_calls, ticks in watch:
            per_tick = f"{slurm_calls / ticks:>10.2f}" if ticks else "         -"
            print(f"{label:<14} {per_minute:>16.1f} {slurm_calls:>15} {ticks:>6} {per_tick}")
        if len(watch) == 2 and watch[0][1]:
            print(f"100 watched / 1 watched: {watch[1][1] / watch[0][1]:.2f}x the calls (goal: 1.0, one list per tick)")


if __name__ == "__main__":
    sys.exit(main())
