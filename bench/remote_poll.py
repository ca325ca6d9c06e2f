"""Remote polling cost: what the job poller asks of a cluster over SSH with 1, 100 and
1,000 watched jobs (held, so they stay in the queue). A real local cluster stands in for
the remote one, reached through a real sshd (tests/hosts/sshd.py; as root): the poller's
squeue and completion-file reads go over the SSH host's one connection, as on a login node.

    .venv/bin/python bench/remote_poll.py [--window 20] [--sizes 1 100 1000]

Then 100 followed logs (open job panels) that each get a new line every 0.5 s: a poll reads
them all in one round trip (``LogFollower``s registered with ``poller.follow``). Prints round
trips and bytes per tick and per minute; the baseline is the 1-job case of the
same run (a poller that batches costs the same round trips whatever the number of jobs;
bytes grow with squeue's answer). Last, with the most jobs, the bytes of one poll as ticks
ask now (``squeue -O`` with only the fields a view needs) against the ``squeue --json`` they
asked before, over the same connection in the same run.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.hosts.sshd import start_sshd  # noqa: E402  (the test server, reused as is)

from jupyter_gtc.hosts.ssh import SSHHost  # noqa: E402

SPEC = {
    "display_name": "benchssh",
    "node_pools": [{"id": "a3", "machine_spec": {"machine_type": "a3-highgpu-8g"},
                    "scaling_spec": {"min_node_count": 1, "max_node_count": 1}}],
    "orchestrator_spec": {"slurm_spec": {"partitions": [{"id": "a3", "node_pool_ids": ["a3"]}]}},
}


class CountedSSHHost(SSHHost):
    """The SSH host, counting its round trips (one request and answer each) and bytes."""

    requests = 0
    bytes = 0

    def _op(self, op, path, arg=None, data=b""):
        status, payload = super()._op(op, path, arg, data)
        self.requests += 1
        self.bytes += len(data) + len(payload)
        return status, payload

    def _pipelined_reads(self, requests, owner=None):  # read_many: one round trip per batch
        answers = super()._pipelined_reads(requests, owner)
        self.requests += 1
        self.bytes += sum(len(payload) for _, payload in answers or [])
        return answers


def follow_logs(poller, host, folder: Path, count: int, window: float) -> tuple[float, float]:
    """``count`` logs, each getting a new line every 0.5 s, followed as open job panels follow
    theirs (read to the end at every tick); round trips and KB per tick over ``window`` s."""
    import threading

    from jupyter_gtc.services.logs import LogFollower

    folder.mkdir(parents=True, exist_ok=True)
    logs = [folder / f"slurm-{i}.out" for i in range(count)]
    followers = [LogFollower(path, host=host) for path in logs]
    stops = [poller.follow(f) for f in followers]
    stops.append(poller.subscribe(lambda changed: [("".join(iter(f.read_new, ""))) for f in followers]))
    done = threading.Event()

    def write() -> None:
        step = 0
        while not done.wait(0.5):
            step += 1
            for i, path in enumerate(logs):
                with open(path, "a") as f:
                    f.write(f"job {i} step {step}\n")

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        time.sleep(1)
        ticks, requests, sent = poller.ticks, host.requests, host.bytes
        time.sleep(window)
        n = max(poller.ticks - ticks, 1)
        return (host.requests - requests) / n, (host.bytes - sent) / n / 1024
    finally:
        done.set()
        writer.join()
        for stop in stops:
            stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=float, default=20.0, help="seconds measured per size")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 100, 1000])
    args = parser.parse_args()
    if os.getuid() != 0:
        sys.exit("run as root: the test sshd needs /run/sshd")
    home = os.environ["GTC_HOME"] = tempfile.mkdtemp(prefix="gtc-bench-")
    from jupyter_gtc import api
    from jupyter_gtc.backends import get_backend
    from jupyter_gtc.services.poller import ClusterPoller
    from jupyter_gtc.state import open_store

    server = start_sshd(Path(home) / "sshd")
    host = CountedSSHHost(server.alias, config_file=server.config, control_dir=Path(home) / "ctl")
    rows, submitted = [], 0
    try:
        api.create_cluster(SPEC)
        store = open_store()
        record = store.get_cluster("benchssh")
        commands = get_backend("local", Path(home)).commands(record.runtime)
        commands.host = host  # squeue and the completion file, over SSH
        poller = ClusterPoller("benchssh", lambda: commands, store, host=host)
        for size in sorted(args.sizes):
            while submitted < size:
                job = api.submit_job("benchssh", "true", ["--hold", f"--job-name=held-{submitted}"])
                poller.watch(job.id)
                submitted += 1
            poller.tick()  # settle: every job seen once
            ticks, requests, sent, t0 = poller.ticks, host.requests, host.bytes, time.perf_counter()
            time.sleep(args.window)
            elapsed = time.perf_counter() - t0
            n = max(poller.ticks - ticks, 1)
            rows.append((size, (host.requests - requests) / n, (host.bytes - sent) / n, n * 60 / elapsed,
                         (host.requests - requests) * 60 / elapsed))
        polls = {}
        for label, poll in (("squeue --json (before)", commands.queue_json), ("squeue -O (now)", commands.queue)):
            sent = host.bytes
            for _ in range(5):
                poll()
            polls[label] = (host.bytes - sent) / 5 / 1024
        commands.jobcomp_file = None  # as the slurm backend polls an attached cluster: squeue alone
        followed = follow_logs(poller, host, Path(home) / "logs", 100, args.window)
    finally:
        logging.getLogger("jupyter_gtc").setLevel(logging.ERROR)  # the poller's last ticks find the cluster gone
        if "benchssh" in [c.name for c in api.list_clusters(with_status=False)]:
            api.delete_cluster("benchssh")
        host.close()
        server.stop()
        shutil.rmtree(home, ignore_errors=True)

    base = rows[0]
    print(f"poller over SSH, {args.window:.0f} s windows (idle jobs: the poller backs off to its max interval)")
    print(f"{'watched':>8} {'trips/tick':>10} {'x 1 job':>8} {'KB/tick':>8} {'ticks/min':>9} {'trips/min':>9}")
    for size, trips, nbytes, ticks_min, trips_min in rows:
        print(f"{size:>8} {trips:>10.1f} {trips / base[1]:>8.2f} {nbytes / 1024:>8.1f} {ticks_min:>9.1f} "
              f"{trips_min:>9.1f}")
    print(f"\none squeue of {rows[-1][0]} jobs over SSH, KB (mean of 5):")
    base_kb = polls["squeue --json (before)"]
    for label, kb in polls.items():
        print(f"  {label:<24} {kb:>8.1f} KB  {base_kb / max(kb, 1e-9):>6.1f}x fewer than --json")
    print(f"\n{rows[-1][0]} watched jobs and 100 followed logs (open panels), each log a new line every 0.5 s,")
    print("polled as an attached cluster is (squeue; no completion file of ours there):")
    print(f"  {followed[0]:.1f} round trips per tick (squeue, then one read of all 100 logs), "
          f"{followed[1]:.1f} KB per tick")
    return 0


if __name__ == "__main__":
    sys.exit(main())
